#pragma once
// Who may hold a slot: every rule in one place, whoever asks. A request (the kubelet's
// Allocate through a device plugin today, a DRA claim's preparation next) is checked
// against the local rules (the slot exists, is offered and within capacity, its device is
// present, distinct devices where the configuration wants them, one slot once per
// request, never through two resources), then, for slots of devices several nodes see in
// cluster mode, against the cluster (SharedSlotGate: the slot Leases), a step it awaits
// before anything is held and gives back when the request is then refused. What the
// kubelet says (PodResources, its device checkpoint) is weighed here too: a slot it
// reports held is adopted, and a slot is released only on positive evidence that no
// container holds it (docs/guarantees.md).
//
// The arbiter is the only writer of holds: it decides, the slot ledger records (and
// refuses a second holder again, as the store does). Callers only translate: they parse
// their request, ask here and serialise the answer. Decisions are typed (Refusal) with
// the sentence a person reads. Loop thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "runtime/error.h"
#include "runtime/inventory.h"
#include "runtime/kubelet_evidence.h"
#include "runtime/lifetime.h"
#include "runtime/slot_ledger.h"
#include "runtime/thread_bound.h"

namespace devlet {

class SharedSlotGate;

// A refusal is an Error (runtime/error.h): its code a Refusal (runtime/slot.h), its subject
// the slot it is about (empty when about the request), its message what the kubelet is told.
using AllocationRefused = Error;

class SlotArbiter : private SlotPolicy, private SlotLedger::Listener {
public:
    using Decision = std::variant<std::vector<ContainerGrant>, AllocationRefused>;

    struct Request {
        std::string resource;  // the resource asked through ("akri.sh/cams" or "akri.sh/cams-8120fe")
        std::vector<std::vector<std::string>> containers;  // each container's slot ids
        // Asked again after an awaited step: false when nobody waits for the answer any more
        // (the kubelet's call went away); the slots taken for it are then given back.
        std::function<bool()> stillWanted;
    };

    explicit SlotArbiter(Inventory& inventory);
    ~SlotArbiter() override;
    SlotArbiter(const SlotArbiter&) = delete;
    SlotArbiter& operator=(const SlotArbiter&) = delete;

    // --- requests ---------------------------------------------------------------
    // Decides the request as one: every container's slots are given, or none. `done` runs
    // once with the grants or the refusal: before allocate() returns when no step is
    // awaited, later on the loop otherwise; not at all when the request is no longer wanted
    // or the arbiter is gone by then.
    void allocate(Request request, std::function<void(Decision)> done);

    // --- the kubelet's word -----------------------------------------------------------
    // Adopts a slot the kubelet reports held that devlet does not record, names pods, and
    // frees a slot only on positive evidence that no container has held it for `grace`.
    struct Reconciled {
        // A slot PodResources has not listed for `grace` is still in the kubelet's
        // checkpoint: the kubelet writes it anew with its next device-list update.
        bool checkpointLags = false;
    };
    Reconciled reconcile(const KubeletEvidence& evidence, std::chrono::milliseconds grace);

    // --- cluster mode -----------------------------------------------------------------
    // Told when a slot of a shared device is freed, and asked before one is given
    // (borrowed; null: shared slots are counted on this node alone).
    void setSharedSlotGate(SharedSlotGate* gate) {
        loopThread_.check();
        gate_ = gate;
    }
    // While cluster mode cannot tell who holds what (the API unreachable, not yet listed),
    // `why`: every free slot of a shared device is then Unhealthy and refused with it.
    // Empty: shared slots are offered again (but those setHeldElsewhere names).
    void setClusterUnavailable(std::string why);
    const std::string& clusterUnavailable() const {
        loopThread_.check();
        return clusterUnavailable_;
    }
    // Free slots this node may not offer, and why: listed Unhealthy and refused until
    // the next call leaves them out. Slots this node holds are never affected.
    void setHeldElsewhere(std::map<std::string, std::string> slotReasons);
    // Whether a container on this node holds the slot.
    bool slotHeld(const std::string& slotId) const;
    // The slots of shared devices this node holds.
    std::vector<std::string> heldSharedSlots() const;

private:
    // A slot a request names, checked.
    struct Asked {
        SlotFacts slot;
        bool heldAlready = false;  // held through the same resource: given again
    };
    using Checked = std::variant<std::vector<Asked>, AllocationRefused>;

    // The local rules for one container's slots; `taken` collects the request's slots so
    // far (one slot is never in two containers of a request).
    Checked checkContainer(const std::string& resource, const ResourceFacts& offered,
                           const std::vector<std::string>& deviceIds, std::set<std::string>& taken) const
        REQUIRES(loopThread_);
    // Checks every container, holds every slot (durable first) and builds the grants; or
    // refuses, holding nothing.
    Decision decide(const Request& request) REQUIRES(loopThread_);
    std::vector<std::string> sharedSlotsIn(const Request& request) const REQUIRES(loopThread_);

    // The kubelet's word: takes what it reports held that devlet does not record; a slot
    // held through another resource than devlet's record says is a conflict, said once.
    void adopt(const std::vector<PodDevice>& reported, const std::string& source) REQUIRES(loopThread_);
    bool releasable(const SlotLedger::Entry& held, std::chrono::milliseconds grace, bool& lags) const
        REQUIRES(loopThread_);

    // SlotPolicy: what the inventory asks while it lists slots.
    const std::string* withheld(const std::string& slotId, bool shared) const override;
    bool clusterMode() const override {
        loopThread_.check();
        return gate_ != nullptr;
    }
    void instanceFound(const std::string& instance) override;
    // SlotLedger::Listener: a freed shared slot goes back to the cluster.
    void holderChanged(const Slot& slot, const std::string& before) override;

    Inventory& inventory_;
    SlotLedger& ledger_;
    ThreadBound loopThread_;
    SharedSlotGate* gate_ GUARDED_BY(loopThread_) = nullptr;  // null: not in cluster mode
    // Why no free shared slot is offered; empty: they are.
    std::string clusterUnavailable_ GUARDED_BY(loopThread_);
    std::map<std::string, std::string> heldElsewhere_ GUARDED_BY(loopThread_);  // slot id -> why not here
    // The latest evidence, by (resource, device id): what PodResources listed, what the
    // checkpoint listed, and whether absence from them counts (evidenceTrusted_).
    std::set<std::pair<std::string, std::string>> podsHeld_ GUARDED_BY(loopThread_);
    std::set<std::pair<std::string, std::string>> checkpointHeld_ GUARDED_BY(loopThread_);
    std::multimap<std::string, PodDevice> lastHolders_ GUARDED_BY(loopThread_);  // both sources, by instance
    bool evidenceTrusted_ GUARDED_BY(loopThread_) = false;
    // Conflicts between the kubelet's word and devlet's record, said once while they last.
    std::set<std::string> reportedConflicts_ GUARDED_BY(loopThread_);
    std::set<std::string> conflictsNow_ GUARDED_BY(loopThread_);  // seen by the adoption under way
    Lifetime lifetime_;  // the cluster's answers arrive after the request
};

}  // namespace devlet
