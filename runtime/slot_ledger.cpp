#include "runtime/slot_ledger.h"

#include <charconv>

#include "runtime/log.h"
#include "runtime/naming.h"
#include "runtime/store.h"

namespace devlet {

namespace {
constexpr Log log{"slots"};

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

SlotLedger::SlotLedger(Store* store, const Clock& clock) : store_(store), clock_(clock) {}

void SlotLedger::holderChanged(const Slot& slot, const std::string& before) {
    for (Listener* listener : listeners_) listener->holderChanged(slot, before);
}

void SlotLedger::event(const std::string& level, const std::string& subject, const std::string& message) {
    for (Listener* listener : listeners_) listener->event(level, subject, message);
}

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
    loopThread_.check();
    auto i = held_.find(instance);
    if (i == held_.end()) return nullptr;
    auto k = i->second.find(index);
    return k == i->second.end() ? nullptr : &k->second.slot;
}

bool SlotLedger::anyHeld(const std::string& instance) const {
    loopThread_.check();
    return held_.count(instance) > 0;
}

int SlotLedger::highestHeld(const std::string& instance) const {
    loopThread_.check();
    auto i = held_.find(instance);
    return i == held_.end() || i->second.empty() ? -1 : i->second.rbegin()->first;
}

std::size_t SlotLedger::heldBy(const std::string& instance) const {
    loopThread_.check();
    auto i = held_.find(instance);
    return i == held_.end() ? 0 : i->second.size();
}

std::size_t SlotLedger::size() const {
    loopThread_.check();
    std::size_t held = 0;
    for (const auto& [instance, slots] : held_) held += slots.size();
    return held;
}

std::vector<Slot> SlotLedger::heldFor(const std::string& configuration) const {
    loopThread_.check();
    std::vector<Slot> result;
    for (const auto& [instance, slots] : held_) {
        for (const auto& [index, held] : slots) {
            if (held.slot.configuration == configuration) result.push_back(held.slot);
        }
    }
    return result;
}

std::string SlotLedger::instanceDeviceId(const std::string& instance) const {
    loopThread_.check();
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
            return Outcome::failure(Refusal::HeldThroughOther,
                                    "slot " + slot.deviceId + " is already held through " +
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
        holderChanged(slot, before);
    }
    return Outcome::ok();
}

void SlotLedger::confirm(const std::string& instance, int index) {
    loopThread_.check();
    if (Held* held = find(instance, index)) held->lastConfirmed = clock_.steady();
}

bool SlotLedger::release(const std::string& instance, int index, bool placed) {
    loopThread_.check();
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
        event("info", instance,
              "slot " + slot.deviceId + " of removed configuration " + slot.configuration +
                  " released: no container holds it any more");
        return true;
    }
    Slot freed = slot;
    freed.holderResource.clear();
    freed.sinceMs = 0;
    freed.pod.clear();
    freed.podNamespace.clear();
    holderChanged(freed, slot.holderResource);
    const std::string who = slot.pod.empty() ? slot.holderResource : slot.podNamespace + "/" + slot.pod;
    event("info", instance,
          "slot " + slot.deviceId + " released (" + who + "): no container holds it any more");
    return true;
}

void SlotLedger::namePod(const std::string& instance, int index, const std::string& pod,
                         const std::string& podNamespace) {
    loopThread_.check();
    Held* held = find(instance, index);
    if (!held || (held->slot.pod == pod && held->slot.podNamespace == podNamespace)) return;
    held->slot.pod = pod;
    held->slot.podNamespace = podNamespace;
    ++revision_;
    if (store_) (void)store_->setSlotPod(held->slot.deviceId, pod, podNamespace);
    log.info() << "slot " << held->slot.deviceId << " is used by pod " << podNamespace << "/" << pod;
}

std::vector<SlotLedger::Entry> SlotLedger::entries() const {
    loopThread_.check();
    std::vector<Entry> result;
    for (const auto& [instance, slots] : held_) {
        for (const auto& [index, held] : slots) result.push_back({held.slot, held.lastConfirmed});
    }
    return result;
}

}  // namespace devlet
