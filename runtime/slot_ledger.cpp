#include "runtime/slot_ledger.h"

#include <charconv>

#include "runtime/log.h"
#include "runtime/naming.h"
#include "runtime/store.h"

namespace devlet {

namespace {
constexpr Log log{"slots"};

std::string describeHolder(const PodDevice& device) {
    if (!device.pod.empty()) return "pod " + device.podNamespace + "/" + device.pod;
    if (!device.podUid.empty()) return "pod uid " + device.podUid;
    return "a container";
}
}  // namespace

std::pair<std::string, int> splitSlotId(const std::string& id) {
    const auto dash = id.rfind('-');
    if (dash == std::string::npos || dash + 1 >= id.size()) return {id, -1};
    int index = -1;
    const char* begin = id.data() + dash + 1;
    const char* end = id.data() + id.size();
    auto [ptr, ec] = std::from_chars(begin, end, index);
    if (ec != std::errc() || ptr != end || index < 0) return {id, -1};
    return {id.substr(0, dash), index};
}

SlotLedger::SlotLedger(Store* store, const Clock& clock, Listener& listener)
    : store_(store), clock_(clock), listener_(listener) {}

void SlotLedger::restore() {
    loopThread_.check();
    if (!store_) return;
    std::map<std::string, std::string> deviceIds;
    for (const StoredInstance& instance : store_->instances()) deviceIds[instance.name] = instance.id;
    const auto now = clock_.steady();
    std::vector<std::string> invalid;
    for (Slot& slot : store_->slots()) {
        if (slot.index < 0) {
            invalid.push_back(slot.deviceId);
            continue;
        }
        auto known = deviceIds.find(slot.instance);
        std::string deviceId = known == deviceIds.end() ? std::string() : known->second;
        // A restart is no evidence the pod went away: give it a full grace period.
        place(Held{std::move(slot), std::move(deviceId), now});
    }
    ++revision_;
    if (!invalid.empty() && store_->releaseSlots(invalid))
        log.warning() << "dropped " << invalid.size()
                      << " slot record(s) with an invalid index from the state store";
}

void SlotLedger::place(Held held) {
    const std::string instance = held.slot.instance;
    const int index = held.slot.index;
    held_[instance][index] = std::move(held);
}

SlotLedger::Held* SlotLedger::find(const std::string& instance, int index) {
    auto i = held_.find(instance);
    if (i == held_.end()) return nullptr;
    auto k = i->second.find(index);
    return k == i->second.end() ? nullptr : &k->second;
}

const Slot* SlotLedger::holder(const std::string& instance, int index) const {
    auto i = held_.find(instance);
    if (i == held_.end()) return nullptr;
    auto k = i->second.find(index);
    return k == i->second.end() ? nullptr : &k->second.slot;
}

bool SlotLedger::anyHeld(const std::string& instance) const {
    return held_.count(instance) > 0;
}

int SlotLedger::highestHeld(const std::string& instance) const {
    auto i = held_.find(instance);
    return i == held_.end() || i->second.empty() ? -1 : i->second.rbegin()->first;
}

std::size_t SlotLedger::heldBy(const std::string& instance) const {
    auto i = held_.find(instance);
    return i == held_.end() ? 0 : i->second.size();
}

std::size_t SlotLedger::size() const {
    std::size_t held = 0;
    for (const auto& [instance, slots] : held_) held += slots.size();
    return held;
}

std::vector<Slot> SlotLedger::heldFor(const std::string& configuration) const {
    std::vector<Slot> result;
    for (const auto& [instance, slots] : held_) {
        for (const auto& [index, held] : slots) {
            if (held.slot.configuration == configuration) result.push_back(held.slot);
        }
    }
    return result;
}

std::string SlotLedger::instanceDeviceId(const std::string& instance) const {
    auto i = held_.find(instance);
    return i == held_.end() || i->second.empty() ? std::string() : i->second.begin()->second.instanceDeviceId;
}

Outcome SlotLedger::hold(const std::vector<Slot>& slots, const std::string& instanceDeviceId) {
    loopThread_.check();
    if (slots.empty()) return Outcome::ok();
    // Never a second holder: a slot held through one resource is not held through another
    // until it is released (the store refuses it too).
    for (const Slot& slot : slots) {
        if (const Held* existing = find(slot.instance, slot.index);
            existing && existing->slot.holderResource != slot.holderResource)
            return Outcome::failure("slot " + slot.deviceId + " is already held through " +
                                    existing->slot.holderResource + "; one slot is never given twice");
    }
    // The holders are durable (one transaction, synced) before anyone hears "yes": a crash
    // or a power loss after this point can never lead to a slot given twice.
    if (store_) {
        if (auto outcome = store_->holdSlots(slots); !outcome) return outcome;
    }
    const auto now = clock_.steady();
    for (const Slot& slot : slots) {
        std::string before;
        std::string deviceId = instanceDeviceId;
        if (Held* existing = find(slot.instance, slot.index)) {
            before = existing->slot.holderResource;
            if (deviceId.empty()) deviceId = existing->instanceDeviceId;
        }
        place(Held{slot, std::move(deviceId), now});
        ++revision_;
        log.debug() << "slot " << slot.deviceId << " held through " << slot.holderResource;
        listener_.holderChanged(slot, before);
    }
    return Outcome::ok();
}

void SlotLedger::confirm(const std::string& instance, int index) {
    loopThread_.check();
    if (Held* held = find(instance, index)) held->lastConfirmed = clock_.steady();
}

bool SlotLedger::release(const std::string& instance, int index, bool placed) {
    auto i = held_.find(instance);
    if (i == held_.end()) return false;
    auto k = i->second.find(index);
    if (k == i->second.end()) return false;
    const Slot slot = k->second.slot;
    if (store_) {
        if (auto outcome = store_->releaseSlots({slot.deviceId}); !outcome) {
            // Keep it held: better a slot unused a while longer than given twice.
            log.warning() << "slot " << slot.deviceId << " stays held: " << outcome.error();
            return false;
        }
    }
    i->second.erase(k);
    if (i->second.empty()) held_.erase(i);
    ++revision_;
    if (!placed) {
        // Its configuration is gone: the instance's row goes with its last held slot.
        if (store_ && !anyHeld(instance)) (void)store_->removeInstance(instance);
        listener_.event("info", instance,
                        "slot " + slot.deviceId + " of removed configuration " + slot.configuration +
                            " released: no container holds it any more");
        return true;
    }
    Slot freed = slot;
    freed.holderResource.clear();
    freed.sinceMs = 0;
    freed.pod.clear();
    freed.podNamespace.clear();
    listener_.holderChanged(freed, slot.holderResource);
    const std::string who = slot.pod.empty() ? slot.holderResource : slot.podNamespace + "/" + slot.pod;
    listener_.event("info", instance,
                    "slot " + slot.deviceId + " released (" + who + "): no container holds it any more");
    return true;
}

bool SlotLedger::reconcile(const KubeletEvidence& evidence, std::chrono::milliseconds grace,
                           const Locate& locate, const Placed& placed) {
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
    if (evidence.pods) adopt(*evidence.pods, "PodResources", locate);
    if (evidence.checkpoint) adopt(*evidence.checkpoint, "the kubelet's device checkpoint", locate);
    reportedConflicts_.swap(conflictsNow_);

    std::map<std::pair<std::string, std::string>, const PodDevice*> named;
    if (evidence.pods) {
        for (const PodDevice& device : *evidence.pods) named[{device.resource, device.deviceId}] = &device;
    }
    const auto now = clock_.steady();
    bool lags = false;
    std::vector<std::pair<std::string, int>> releasing;
    for (auto& [instance, slots] : held_) {
        for (auto& [index, held] : slots) {
            Slot& slot = held.slot;
            auto found = named.find({slot.holderResource, slot.deviceId});
            if (found == named.end()) {
                if (releasable(held, grace, lags)) releasing.emplace_back(instance, index);
                continue;
            }
            held.lastConfirmed = now;
            const PodDevice& pod = *found->second;
            if (slot.pod == pod.pod && slot.podNamespace == pod.podNamespace) continue;
            slot.pod = pod.pod;
            slot.podNamespace = pod.podNamespace;
            ++revision_;
            if (store_) (void)store_->setSlotPod(slot.deviceId, pod.pod, pod.podNamespace);
            log.info() << "slot " << slot.deviceId << " is used by pod " << pod.podNamespace << "/"
                       << pod.pod;
        }
    }
    for (const auto& [instance, index] : releasing) {
        const Slot* slot = holder(instance, index);
        if (slot) release(instance, index, placed(*slot));
    }
    return lags;
}

bool SlotLedger::releasable(const Held& held, std::chrono::milliseconds grace, bool& lags) const {
    if (!evidenceTrusted_ || clock_.steady() - held.lastConfirmed < grace) return false;
    if (checkpointHeld_.count({held.slot.holderResource, held.slot.deviceId})) {
        lags = true;
        return false;
    }
    return true;
}

void SlotLedger::adopt(const std::vector<PodDevice>& reported, const std::string& source,
                       const Locate& locate) {
    for (const PodDevice& device : reported) {
        std::optional<Place> place = locate(device.resource, device.deviceId);
        if (!place) continue;
        const Slot* recorded = holder(place->instance, place->index);
        if (recorded && recorded->holderResource == device.resource) continue;
        const std::string who = describeHolder(device);
        if (recorded) {
            // Two holders through two resources: the kubelet's word and devlet's record
            // disagree. devlet keeps its record (both stay Unhealthy to everyone else); a
            // person has to look.
            const std::string conflict = "slot " + device.deviceId + " is held by " + who + " through " +
                                         device.resource + " according to " + source +
                                         ", but devlet records it held through " + recorded->holderResource +
                                         "; both resources keep it from any other pod";
            if (!reportedConflicts_.count(conflict)) listener_.event("error", place->instance, conflict);
            conflictsNow_.insert(conflict);
            continue;
        }
        Slot slot{device.deviceId, place->instance, place->configuration, place->index,
                  device.resource, clock_.wallMs(), device.pod,           device.podNamespace};
        if (auto outcome = hold({slot}, place->instanceDeviceId); !outcome) {
            log.warning() << outcome.error();
            continue;
        }
        listener_.event("warning", place->instance,
                        "slot " + device.deviceId + " is held by " + who + " through " + device.resource +
                            " according to " + source + " but was not recorded; adopted");
    }
}

void SlotLedger::adoptKnownHolders(const std::string& instance, const Locate& locate) {
    loopThread_.check();
    std::vector<PodDevice> reported;
    for (auto [it, end] = lastHolders_.equal_range(instance); it != end; ++it) reported.push_back(it->second);
    if (reported.empty()) return;
    conflictsNow_.clear();
    adopt(reported, "the kubelet", locate);
    reportedConflicts_.insert(conflictsNow_.begin(), conflictsNow_.end());
}

}  // namespace devlet
