#include "runtime/slot_arbiter.h"

#include <exception>
#include <memory>
#include <utility>

#include "runtime/log.h"
#include "runtime/shared_slots.h"

namespace devlet {

namespace {
constexpr Log log{"slots"};
}

void SlotArbiter::allocate(Request request, std::function<void(Decision)> done) {
    loopThread_.check();
    SharedSlotGate* gate = inventory_.sharedSlotGate();
    const std::vector<std::string> shared =
        gate ? inventory_.sharedSlotsIn(request.resource, request.containers) : std::vector<std::string>{};
    if (shared.empty()) {
        done(inventory_.allocateContainers(request.resource, request.containers));
        return;
    }
    // Slots of devices several nodes see: the cluster agrees first (the slot Leases).
    std::vector<std::string> newlyTaken;
    for (const std::string& id : shared) {
        if (!inventory_.slotHeld(id)) newlyTaken.push_back(id);
    }
    auto pending = std::make_shared<Request>(std::move(request));
    gate->take(shared, lifetime_.guard([this, gate, pending, newlyTaken = std::move(newlyTaken),
                                        done = std::move(done)](Outcome taken) {
        // Slots taken for a request that is not granted go back at once, so that no Lease
        // outlives its reason; one a container here holds meanwhile is kept.
        auto giveBack = [&] {
            for (const std::string& id : newlyTaken) {
                if (!inventory_.slotHeld(id)) gate->release(id);
            }
        };
        if (pending->stillWanted && !pending->stillWanted()) {
            if (taken) giveBack();
            return;
        }
        if (!taken) {
            log.debug() << "slots for " << pending->resource << " refused by the cluster: " << taken.error();
            done(AllocationRefused{taken.error()});
            return;
        }
        Decision decision = AllocationRefused{};
        try {
            decision = inventory_.allocateContainers(pending->resource, pending->containers);
        } catch (const std::exception& e) {  // out of memory: refused, and nothing kept
            decision = AllocationRefused{e.what()};
        }
        if (std::holds_alternative<AllocationRefused>(decision)) giveBack();
        done(std::move(decision));
    }));
}

}  // namespace devlet
