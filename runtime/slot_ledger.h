#pragma once
// Who holds which capacity slot, through which resource. It refuses a second holder itself
// ("never twice"; the store refuses it again) and is the only writer of holds; requests
// for slots are decided by the slot arbiter and reach it through the inventory. Every hold
// and release is written to the store before it counts, and every change of holder is
// handed to the ledger's listener. It also weighs what the
// kubelet says (PodResources, its device checkpoint): a slot is adopted when the kubelet
// reports it held, and released only on positive evidence (docs/guarantees.md).
// It knows nothing of configurations or discovery: the inventory says where a slot is.
// Lives on the loop thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/clock.h"
#include "runtime/outcome.h"
#include "runtime/slot.h"
#include "runtime/thread_bound.h"

namespace devlet {

class Store;

// A device the kubelet reports as held by a container: PodResources names its pod, the
// kubelet's device checkpoint only the pod's uid.
struct PodDevice {
    std::string resource;
    std::string deviceId;
    std::string pod;
    std::string podNamespace;
    std::string podUid;
};

// What the kubelet says, at one moment, about which devices containers hold. A slot is
// released only on positive evidence that no container uses it (docs/guarantees.md):
// - PodResources answered, and does not list it, for the release grace period;
// - the kubelet's device checkpoint does not list it either: a kubelet drops a pod's
//   devices from it only once it knows all its pods (its sources are ready), so a kubelet
//   that restarted without its API server keeps listing what running containers hold;
// - a kubelet that writes no checkpoint counts only while PodResources lists some device:
//   an empty answer is what a kubelet that has not learned its pods yet gives.
struct KubeletEvidence {
    // PodResources List; nullopt when it did not answer.
    std::optional<std::vector<PodDevice>> pods;
    // The devices the kubelet's checkpoint records as allocated; nullopt when it has none.
    std::optional<std::vector<PodDevice>> checkpoint;
    // The checkpoint exists but could not be read: nothing is released while it lasts.
    std::string checkpointError;
};

class SlotLedger {
public:
    class Listener {
    public:
        virtual ~Listener() = default;
        // A slot's holder changed ("" = free): the resources that list it change.
        virtual void holderChanged(const Slot& slot, const std::string& before) = 0;
        // Something a person should read: logged and kept with the events.
        virtual void event(const std::string& level, const std::string& subject,
                           const std::string& message) = 0;
    };

    // Where a slot reported by the kubelet would be: the inventory answers for slots of
    // resources it offers; nullopt for anything else.
    struct Place {
        std::string configuration;
        std::string instance;
        std::string instanceDeviceId;  // the handler's id of the device
        int index = 0;
    };
    using Locate =
        std::function<std::optional<Place>(const std::string& resource, const std::string& deviceId)>;
    // Whether a held slot's instance is offered by its configuration now. A slot whose
    // configuration went away stays held until its pod is gone: one that comes back must
    // not hand it out a second time.
    using Placed = std::function<bool(const Slot& slot)>;

    SlotLedger(Store* store, const Clock& clock, Listener& listener);

    // The held slots recorded in the store, each given a full grace period (a restart is
    // no evidence its pod went away), and the handler's device id of each instance.
    void restore();

    // --- reading ----------------------------------------------------------------
    const Slot* holder(const std::string& instance, int index) const;
    bool anyHeld(const std::string& instance) const;
    // The highest held index of the instance; -1 when none is held.
    int highestHeld(const std::string& instance) const;
    std::size_t heldBy(const std::string& instance) const;
    std::size_t size() const;
    // Every held slot of a configuration's instances, by instance name.
    std::vector<Slot> heldFor(const std::string& configuration) const;
    // The handler's id of a held instance's device, for when its configuration returns.
    std::string instanceDeviceId(const std::string& instance) const;
    // Changes whenever a holder or a pod name changes.
    std::uint64_t revision() const { return revision_; }

    // --- changing ----------------------------------------------------------------
    // Holds the slots through their `holderResource`: durable first (one synced
    // transaction), then in memory. Nothing is held when one of them is held through
    // another resource already, or when the store refuses.
    Outcome hold(const std::vector<Slot>& slots, const std::string& instanceDeviceId = {});
    // The holder was just confirmed (an Allocate for the slot it holds).
    void confirm(const std::string& instance, int index);

    // Weighs the kubelet's word: adopts what it reports held that devlet does not record,
    // names pods, and releases a slot only on positive evidence that no container has held
    // it for `grace`. Returns whether only the kubelet's checkpoint keeps some slot held
    // (it writes it anew with its next device-list update).
    bool reconcile(const KubeletEvidence& evidence, std::chrono::milliseconds grace, const Locate& locate,
                   const Placed& placed);
    // What the latest evidence says about an instance discovered after the kubelet
    // reported its holder.
    void adoptKnownHolders(const std::string& instance, const Locate& locate);

private:
    struct Held {
        Slot slot;
        std::string instanceDeviceId;
        // The last evidence that a container uses it: its allocation, or PodResources
        // listing it. The release grace counts from here.
        std::chrono::steady_clock::time_point lastConfirmed{};
    };
    Held* find(const std::string& instance, int index);
    void place(Held held);
    // Takes the slots the kubelet reports held that devlet does not record; reports a slot
    // held through another resource than devlet's record says as a conflict.
    void adopt(const std::vector<PodDevice>& held, const std::string& source, const Locate& locate);
    // Whether the evidence allows releasing the slot; sets `lags` when only the checkpoint
    // still lists it.
    bool releasable(const Held& held, std::chrono::milliseconds grace, bool& lags) const;
    // Frees a slot, store first; false (still held) when the store refuses.
    bool release(const std::string& instance, int index, bool placed);

    Store* store_;
    const Clock& clock_;
    Listener& listener_;
    std::map<std::string, std::map<int, Held>> held_;  // by instance, then index
    // The latest evidence, by (resource, device id): what PodResources listed, what the
    // checkpoint listed, and whether absence from them counts (evidenceTrusted_).
    std::set<std::pair<std::string, std::string>> podsHeld_;
    std::set<std::pair<std::string, std::string>> checkpointHeld_;
    std::multimap<std::string, PodDevice> lastHolders_;  // both sources, by instance
    bool evidenceTrusted_ = false;
    // Conflicts between the kubelet's word and devlet's record, said once while they last.
    std::set<std::string> reportedConflicts_;
    std::set<std::string> conflictsNow_;  // seen by the adoption under way
    std::uint64_t revision_ = 0;
    ThreadBound loopThread_;  // every public member is called on the loop thread
};

// "<instance>-<k>" -> ("<instance>", k); k = -1 when the id has no slot suffix.
std::pair<std::string, int> splitSlotId(const std::string& id);

}  // namespace devlet
