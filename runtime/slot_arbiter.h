#pragma once
// Where every request for slots is decided, whoever asks: the kubelet's Allocate through
// a device plugin today, a DRA claim's preparation next. The local rules (the inventory's
// check of the request: the slot exists, is offered and within capacity, the device is
// present, one slot once per request) and "never twice" (the slot ledger refuses a second
// holder, the store refuses it again) decide first; for slots of shared devices in cluster
// mode the cluster's agreement (SharedSlotGate: the slot Leases) is a step the arbiter
// awaits before anything is held, and gives back when the request is then refused. Callers
// only translate: they parse their request, ask here and serialise the answer.
// Loop thread.

#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "runtime/inventory.h"
#include "runtime/lifetime.h"
#include "runtime/thread_bound.h"

namespace devlet {

class SlotArbiter {
public:
    using Decision = std::variant<std::vector<ContainerGrant>, AllocationRefused>;

    struct Request {
        std::string resource;  // the resource asked through ("akri.sh/cams" or "akri.sh/cams-8120fe")
        std::vector<std::vector<std::string>> containers;  // each container's slot ids
        // Asked again after an awaited step: false when nobody waits for the answer any more
        // (the kubelet's call went away); the slots taken for it are then given back.
        std::function<bool()> stillWanted;
    };

    explicit SlotArbiter(Inventory& inventory) : inventory_(inventory) {}
    SlotArbiter(const SlotArbiter&) = delete;
    SlotArbiter& operator=(const SlotArbiter&) = delete;

    // Decides the request as one: every container's slots are given, or none. `done` runs
    // once with the grants or the refusal: before allocate() returns when no step is
    // awaited, later on the loop otherwise; not at all when the request is no longer wanted
    // or the arbiter is gone by then.
    void allocate(Request request, std::function<void(Decision)> done);

private:
    Inventory& inventory_;
    Lifetime lifetime_;  // the cluster's answers arrive after the request
    ThreadBound loopThread_;
};

}  // namespace devlet
