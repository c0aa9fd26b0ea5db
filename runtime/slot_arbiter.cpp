#include "runtime/slot_arbiter.h"

#include <algorithm>
#include <exception>
#include <memory>
#include <utility>

#include "runtime/log.h"
#include "runtime/naming.h"
#include "runtime/shared_slots.h"

namespace devlet {

namespace {
constexpr Log log{"slots"};

std::string describeHolder(const PodDevice& device) {
    if (!device.pod.empty()) return "pod " + device.podNamespace + "/" + device.pod;
    if (!device.podUid.empty()) return "pod uid " + device.podUid;
    return "a container";
}

AllocationRefused refuse(Refusal code, std::string slot, std::string message) {
    // What may clear by itself: the cluster's answer, the store's disk.
    const bool passing = code == Refusal::ClusterUnavailable || code == Refusal::HeldElsewhere ||
                         code == Refusal::ClusterRefused || code == Refusal::NotRecorded;
    return AllocationRefused{code, std::move(slot), std::move(message),
                             passing ? Fault::Passing : Fault::Lasting};
}

class RefusalCategory : public std::error_category {
public:
    const char* name() const noexcept override { return "devlet.slots"; }
    std::string message(int value) const override { return refusalName(static_cast<Refusal>(value - 1)); }
};
}  // namespace

const std::error_category& refusalCategory() {
    static const RefusalCategory category;
    return category;
}

const char* refusalName(Refusal refusal) {
    switch (refusal) {
        case Refusal::NotOffered:
            return "not-offered";
        case Refusal::EmptyRequest:
            return "empty-request";
        case Refusal::NotPartOf:
            return "not-part-of";
        case Refusal::DeviceGone:
            return "device-gone";
        case Refusal::AboveCapacity:
            return "above-capacity";
        case Refusal::TwiceInRequest:
            return "twice-in-request";
        case Refusal::HeldThroughOther:
            return "held-through-other";
        case Refusal::NotDistinct:
            return "not-distinct";
        case Refusal::ClusterUnavailable:
            return "cluster-unavailable";
        case Refusal::HeldElsewhere:
            return "held-elsewhere";
        case Refusal::ClusterRefused:
            return "cluster-refused";
        case Refusal::NotRecorded:
            return "not-recorded";
        case Refusal::Failed:
            return "failed";
    }
    return "failed";
}

SlotArbiter::SlotArbiter(Inventory& inventory) : inventory_(inventory), ledger_(inventory.ledger()) {
    inventory_.setSlotPolicy(this);
    ledger_.addListener(*this);
}

SlotArbiter::~SlotArbiter() {
    inventory_.setSlotPolicy(nullptr);
    ledger_.removeListener(*this);
}

// ---------------------------------------------------------------------------
// Requests

void SlotArbiter::allocate(Request request, std::function<void(Decision)> done) {
    loopThread_.check();
    const std::vector<std::string> shared = gate_ ? sharedSlotsIn(request) : std::vector<std::string>{};
    if (shared.empty()) {
        done(decide(request));
        return;
    }
    // Slots of devices several nodes see: the cluster agrees first (the slot Leases).
    std::vector<std::string> newlyTaken;
    for (const std::string& id : shared) {
        if (!slotHeld(id)) newlyTaken.push_back(id);
    }
    auto pending = std::make_shared<Request>(std::move(request));
    SharedSlotGate* gate = gate_;
    gate->take(shared, lifetime_.guard([this, gate, pending, newlyTaken = std::move(newlyTaken),
                                        done = std::move(done)](const Outcome& taken) {
        // Slots taken for a request that is not granted go back at once, so that no Lease
        // outlives its reason; one a container here holds meanwhile is kept.
        auto giveBack = [&] {
            for (const std::string& id : newlyTaken) {
                if (!slotHeld(id)) gate->release(id);
            }
        };
        if (pending->stillWanted && !pending->stillWanted()) {
            if (taken) giveBack();
            return;
        }
        if (!taken) {
            log.debug() << "slots for " << pending->resource << " refused by the cluster: " << taken.error();
            done(refuse(Refusal::ClusterRefused, {}, taken.error()));  // its code says why
            return;
        }
        loopThread_.check();  // the cluster's answer arrives on the loop
        Decision decision = refuse(Refusal::Failed, {}, "not decided");
        try {
            decision = decide(*pending);
        } catch (const std::exception& e) {  // out of memory: refused, and nothing kept
            decision = refuse(Refusal::Failed, {}, e.what());
        }
        if (std::holds_alternative<AllocationRefused>(decision)) giveBack();
        done(std::move(decision));
    }));
}

SlotArbiter::Decision SlotArbiter::decide(const Request& request) {
    const std::string& resource = request.resource;
    Decision decision = [&]() -> Decision {
        loopThread_.check();  // a lambda of its own to the analysis
        std::optional<ResourceFacts> offered = inventory_.offeredBy(resource);
        if (!offered) return refuse(Refusal::NotOffered, {}, "devlet does not offer " + resource);
        if (request.containers.empty())
            return refuse(Refusal::EmptyRequest, {}, "no container in the request for " + resource);
        // Every container is checked before anything is written: a refusal holds nothing.
        std::vector<std::vector<Asked>> requested;
        std::set<std::string> taken;
        for (const std::vector<std::string>& deviceIds : request.containers) {
            Checked checked = checkContainer(resource, *offered, deviceIds, taken);
            if (auto* refused = std::get_if<AllocationRefused>(&checked)) return std::move(*refused);
            requested.push_back(std::move(std::get<std::vector<Asked>>(checked)));
        }
        const std::int64_t nowMs = inventory_.clock().wallMs();
        std::vector<Slot> records;
        for (const std::vector<Asked>& container : requested) {
            for (const Asked& asked : container) {
                if (asked.heldAlready) {
                    ledger_.confirm(asked.slot.instance, asked.slot.index);  // same-resource re-offer
                    continue;
                }
                records.push_back(Slot{asked.slot.id, asked.slot.instance, asked.slot.configuration,
                                       asked.slot.index, resource, nowMs, "", ""});
            }
        }
        if (auto outcome = ledger_.hold(records); !outcome) {
            inventory_.event("error", resource, "allocation refused: " + outcome.error());
            return refuse(Refusal::NotRecorded, {},
                          "cannot record the allocation, so it is refused rather than handed out "
                          "unrecorded: " +
                              outcome.error());
        }
        return inventory_.grants(resource, request.containers);
    }();
    inventory_.countDecision(resource, std::holds_alternative<std::vector<ContainerGrant>>(decision));
    return decision;
}

SlotArbiter::Checked SlotArbiter::checkContainer(const std::string& resource, const ResourceFacts& offered,
                                                 const std::vector<std::string>& deviceIds,
                                                 std::set<std::string>& taken) const {
    if (deviceIds.empty())
        return refuse(Refusal::EmptyRequest, {}, "no device ids in the request for " + resource);
    std::vector<Asked> asked;
    std::set<std::string> unique;
    std::map<std::string, int> perInstance;
    for (const std::string& id : deviceIds) {
        if (!unique.insert(id).second) continue;
        if (!taken.insert(id).second) {
            return refuse(Refusal::TwiceInRequest, id,
                          "slot " + id +
                              " is requested for two containers in one request; one slot is never "
                              "given twice");
        }
        std::optional<SlotFacts> slot = inventory_.slot(id);
        if (!slot || slot->configuration != offered.configuration ||
            (!offered.instance.empty() && slot->instance != offered.instance)) {
            std::string why = "device " + id + " is not part of ";
            why += resource;
            return refuse(Refusal::NotPartOf, id, std::move(why));
        }
        if (!slot->present) {
            return refuse(Refusal::DeviceGone, id,
                          "device " + id + " is gone (" + slot->instanceDeviceId +
                              " is no longer seen); it cannot be allocated");
        }
        if (slot->index >= offered.capacity) {
            return refuse(Refusal::AboveCapacity, id,
                          "slot " + id + " is above the configuration's capacity of " +
                              std::to_string(offered.capacity));
        }
        const Slot* holder = ledger_.holder(slot->instance, slot->index);
        if (!holder) {
            if (slot->shared && !clusterUnavailable_.empty())
                return refuse(Refusal::ClusterUnavailable, id,
                              "slot " + id + " cannot be given on this node: " + clusterUnavailable_);
            if (auto elsewhere = heldElsewhere_.find(id); elsewhere != heldElsewhere_.end())
                return refuse(Refusal::HeldElsewhere, id,
                              "slot " + id + " cannot be given on this node: " + elsewhere->second);
        } else if (holder->holderResource != resource) {
            std::string why = "slot " + id + " is already held through " + holder->holderResource;
            if (!holder->pod.empty()) why += " by pod " + holder->podNamespace + "/" + holder->pod;
            why += "; one slot is never given twice";
            return refuse(Refusal::HeldThroughOther, id, std::move(why));
        }
        if (++perInstance[slot->instance] > 1 && offered.instance.empty() && offered.uniqueDevices) {
            return refuse(Refusal::NotDistinct, id,
                          "configuration " + offered.configuration +
                              " requires distinct devices, but the request holds two slots of " +
                              slot->instance);
        }
        const bool heldAlready = holder != nullptr;
        asked.push_back({std::move(*slot), heldAlready});
    }
    return asked;
}

std::vector<std::string> SlotArbiter::sharedSlotsIn(const Request& request) const {
    std::vector<std::string> shared;
    std::optional<ResourceFacts> offered = inventory_.offeredBy(request.resource);
    if (!offered) return shared;
    for (const std::vector<std::string>& ids : request.containers) {
        for (const std::string& id : ids) {
            std::optional<SlotFacts> slot = inventory_.slot(id);
            if (slot && slot->configuration == offered->configuration && slot->shared &&
                std::find(shared.begin(), shared.end(), id) == shared.end())
                shared.push_back(id);
        }
    }
    return shared;
}

// ---------------------------------------------------------------------------
// The kubelet's word

SlotArbiter::Reconciled SlotArbiter::reconcile(const KubeletEvidence& evidence,
                                               std::chrono::milliseconds grace) {
    loopThread_.check();
    podsHeld_.clear();
    checkpointHeld_.clear();
    lastHolders_.clear();
    if (evidence.pods) {
        for (const PodDevice& device : *evidence.pods) {
            podsHeld_.emplace(device.resource, device.deviceId);
            lastHolders_.emplace(splitSlotId(device.deviceId).first, device);
        }
    }
    if (evidence.checkpoint) {
        for (const PodDevice& device : *evidence.checkpoint) {
            checkpointHeld_.emplace(device.resource, device.deviceId);
            lastHolders_.emplace(splitSlotId(device.deviceId).first, device);
        }
    }
    // Absence counts only from a kubelet that can know (see KubeletEvidence).
    evidenceTrusted_ =
        evidence.pods && evidence.checkpointError.empty() && (evidence.checkpoint || !evidence.pods->empty());

    // The kubelet knows best: a slot it reports held that devlet thinks free (state lost,
    // or held before devlet started) is adopted rather than offered again. A conflict is
    // said when it appears, not on every poll while it lasts.
    conflictsNow_.clear();
    if (evidence.pods) adopt(*evidence.pods, "PodResources");
    if (evidence.checkpoint) adopt(*evidence.checkpoint, "the kubelet's device checkpoint");
    reportedConflicts_.swap(conflictsNow_);

    std::map<std::pair<std::string, std::string>, const PodDevice*> named;
    if (evidence.pods) {
        for (const PodDevice& device : *evidence.pods) named[{device.resource, device.deviceId}] = &device;
    }
    bool lags = false;
    std::vector<Slot> releasing;
    for (const SlotLedger::Entry& held : ledger_.entries()) {
        const Slot& slot = held.slot;
        auto found = named.find({slot.holderResource, slot.deviceId});
        if (found == named.end()) {
            if (releasable(held, grace, lags)) releasing.push_back(slot);
            continue;
        }
        ledger_.confirm(slot.instance, slot.index);
        ledger_.namePod(slot.instance, slot.index, found->second->pod, found->second->podNamespace);
    }
    for (const Slot& slot : releasing) ledger_.release(slot.instance, slot.index, inventory_.placed(slot));
    inventory_.holdsSettled();
    return {lags};
}

bool SlotArbiter::releasable(const SlotLedger::Entry& held, std::chrono::milliseconds grace,
                             bool& lags) const {
    if (!evidenceTrusted_ || inventory_.clock().steady() - held.lastConfirmed < grace) return false;
    if (checkpointHeld_.count({held.slot.holderResource, held.slot.deviceId})) {
        lags = true;
        return false;
    }
    return true;
}

void SlotArbiter::adopt(const std::vector<PodDevice>& reported, const std::string& source) {
    for (const PodDevice& device : reported) {
        // Only a slot of a resource devlet offers, named through that resource.
        std::optional<SlotFacts> slot = inventory_.slot(device.deviceId);
        std::optional<ResourceFacts> offered = inventory_.offeredBy(device.resource);
        if (!slot || !offered || offered->configuration != slot->configuration ||
            (!offered->instance.empty() && offered->instance != slot->instance))
            continue;
        const Slot* recorded = ledger_.holder(slot->instance, slot->index);
        if (recorded && recorded->holderResource == device.resource) continue;
        const std::string who = describeHolder(device);
        if (recorded) {
            // Two holders through two resources: the kubelet's word and devlet's record
            // disagree. devlet keeps its record (both stay Unhealthy to everyone else); a
            // person has to look.
            std::string conflict = "slot " + device.deviceId + " is held by " + who;
            conflict += " through " + device.resource + " according to " + source;
            conflict += ", but devlet records it held through " + recorded->holderResource +
                        "; both resources keep it from any other pod";
            if (!reportedConflicts_.count(conflict)) inventory_.event("error", slot->instance, conflict);
            conflictsNow_.insert(conflict);
            continue;
        }
        Slot held{device.deviceId, slot->instance,     slot->configuration,
                  slot->index,     device.resource,    inventory_.clock().wallMs(),
                  device.pod,      device.podNamespace};
        if (auto outcome = ledger_.hold({held}, slot->instanceDeviceId); !outcome) {
            log.warning() << outcome.error();
            continue;
        }
        std::string adopted = "slot " + device.deviceId + " is held by " + who;
        adopted +=
            " through " + device.resource + " according to " + source + " but was not recorded; adopted";
        inventory_.event("warning", slot->instance, adopted);
    }
}

void SlotArbiter::instanceFound(const std::string& instance) {
    loopThread_.check();
    std::vector<PodDevice> reported;
    for (auto [it, end] = lastHolders_.equal_range(instance); it != end; ++it) reported.push_back(it->second);
    if (reported.empty()) return;
    conflictsNow_.clear();
    adopt(reported, "the kubelet");
    reportedConflicts_.insert(conflictsNow_.begin(), conflictsNow_.end());
}

// ---------------------------------------------------------------------------
// Cluster mode

const std::string* SlotArbiter::withheld(const std::string& slotId, bool shared) const {
    loopThread_.check();
    if (shared && !clusterUnavailable_.empty()) return &clusterUnavailable_;
    if (heldElsewhere_.empty()) return nullptr;
    auto elsewhere = heldElsewhere_.find(slotId);
    return elsewhere == heldElsewhere_.end() ? nullptr : &elsewhere->second;
}

void SlotArbiter::setClusterUnavailable(std::string why) {
    loopThread_.check();
    if (why == clusterUnavailable_) return;
    const bool offeredBefore = clusterUnavailable_.empty();
    clusterUnavailable_ = std::move(why);
    // Only the reason changed: shown, but no list changes.
    inventory_.offersChanged({}, offeredBefore != clusterUnavailable_.empty());
}

void SlotArbiter::setHeldElsewhere(std::map<std::string, std::string> slotReasons) {
    loopThread_.check();
    if (slotReasons == heldElsewhere_) return;
    std::set<std::string> touched;
    for (const auto& [id, why] : heldElsewhere_) {
        if (!slotReasons.count(id)) touched.insert(id);
    }
    for (const auto& [id, why] : slotReasons) {
        if (!heldElsewhere_.count(id)) touched.insert(id);
    }
    heldElsewhere_ = std::move(slotReasons);
    inventory_.offersChanged(touched);
}

bool SlotArbiter::slotHeld(const std::string& slotId) const {
    loopThread_.check();
    auto [instance, index] = splitSlotId(slotId);
    return index >= 0 && ledger_.holder(instance, index) != nullptr;
}

std::vector<std::string> SlotArbiter::heldSharedSlots() const {
    loopThread_.check();
    std::vector<std::string> held;
    for (const SlotLedger::Entry& entry : ledger_.entries()) {
        if (inventory_.sharedInstance(entry.slot)) held.push_back(entry.slot.deviceId);
    }
    return held;
}

void SlotArbiter::holderChanged(const Slot& slot, const std::string& before) {
    // Freed here: another node may have it. A slot whose device went away with its
    // configuration keeps its Lease until the Lease lapses.
    loopThread_.check();
    if (gate_ && !slot.held() && !before.empty() && inventory_.sharedInstance(slot))
        gate_->release(slot.deviceId);
}

}  // namespace devlet
