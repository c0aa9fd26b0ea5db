// The inventory's device lists and views: how its configurations, instances and the slot
// ledger's holders become the lists the plugins send the kubelet (Healthy, Unhealthy, and
// only what changed where a list is thousands of slots long), published at once or in one
// batch per turn of the loop, and the view the status page shows.

#include <algorithm>

#include "runtime/inventory.h"
#include "runtime/naming.h"

namespace devlet {

void Inventory::holderChanged(const Slot& slot, const std::string& before) {
    loopThread_.check();
    auto cit = configurations_.find(slot.configuration);
    if (cit == configurations_.end() || !cit->second.instances.count(slot.instance)) return;
    const ConfigurationState& c = cit->second;
    const std::string& after = slot.holderResource;
    // A slot is Healthy in the resource that holds it and Unhealthy in the other, so a
    // new holder usually changes one list: the configuration-level one can be thousands
    // of slots long, and is then not rebuilt for nothing, nor for one slot.
    for (const std::string& resource : {c.resource, instanceResource(slot.instance)}) {
        auto healthyIn = [&](const std::string& holder) { return holder.empty() || holder == resource; };
        if (healthyIn(before) != healthyIn(after)) {
            if (resource == c.resource)
                slotChanges_[resource].emplace(slot.instance, slot.index);
            else
                changed_.insert(resource);
            ++marks_;
        }
    }
}

void Inventory::offersChanged(const std::set<std::string>& slotIds, bool allShared) {
    loopThread_.check();
    Edit edit(*this);  // the reasons are shown
    for (const auto& [name, c] : configurations_) {
        if (!allShared) break;
        for (const auto& [instanceName, i] : c.instances) {
            if (!i.device.shared) continue;
            for (int k = 0; k < i.slotCount; ++k) slotChanges_[c.resource].emplace(i.name, k);
            changed_.insert(instanceResource(i.name));
            ++marks_;
        }
    }
    for (const std::string& id : slotIds) {
        auto [instance, index] = splitSlotId(id);
        for (const auto& [name, c] : configurations_) {
            if (!c.instances.count(instance)) continue;
            slotChanges_[c.resource].emplace(instance, index);
            changed_.insert(instanceResource(instance));
            ++marks_;
        }
    }
    publish();
}

void Inventory::setUnconfirmedHolds(std::map<std::string, std::string> slotReasons) {
    loopThread_.check();
    if (slotReasons == unconfirmed_) return;
    Edit edit(*this);
    std::set<std::string> touched;
    for (const auto& [id, why] : unconfirmed_) {
        auto now = slotReasons.find(id);
        if (now == slotReasons.end() || now->second != why) touched.insert(id);
    }
    for (const auto& [id, why] : slotReasons) {
        if (!unconfirmed_.count(id)) touched.insert(id);
    }
    unconfirmed_ = std::move(slotReasons);
    ++marks_;
    // The holders' live files say it, so that a consumer can stop using the device.
    for (const std::string& id : touched) {
        if (liveFiles_) liveFiles_->slotChanged(id);
    }
    publish();
}

void Inventory::markChanged(const ConfigurationState& c, const InstanceState* instance) {
    ++marks_;
    changed_.insert(c.resource);
    if (instance) changed_.insert(instanceResource(instance->name));
}

bool Inventory::slotHealthy(const ConfigurationState& c, const InstanceState& i, int index,
                            const std::string& resource) const {
    if (!i.present || index >= c.configuration.capacity) return false;
    const Slot* slot = ledger_.holder(i.name, index);
    if (!slot) return !policy_ || !policy_->withheld(slotId(i.name, index), i.device.shared);
    return slot->holderResource == resource;
}

ResourceState Inventory::buildResource(const ConfigurationState& c, const InstanceState* instance) const {
    ResourceState state;
    state.configuration = c.configuration.name;
    auto add = [&](const InstanceState& i, const std::string& resource) {
        loopThread_.check();  // a lambda of its own to the analysis
        for (int k = 0; k < i.slotCount; ++k) {
            state.devices.push_back({slotId(i.name, k), slotHealthy(c, i, k, resource), i.device.numaNode});
        }
    };
    if (instance) {
        state.resource = instanceResource(instance->name);
        state.instance = instance->name;
        add(*instance, state.resource);
    } else {
        state.resource = c.resource;
        // Instances usually have `capacity` slots; walking them twice to count exactly
        // costs more than an estimate (thousands of slots, sent on every change).
        state.devices.reserve(c.instances.size() *
                              static_cast<std::size_t>(std::max(c.configuration.capacity, 0)));
        for (const auto& [name, i] : c.instances) {
            if (i.offered) {
                add(i, state.resource);
                continue;
            }
            // Withdrawn, but a pod still holds a slot through this resource: listed Unhealthy
            // until it is released. The kubelet reports a device it no longer lists as Healthy
            // in the pod's allocatedResourcesStatus; listed, it says Unhealthy.
            for (int k = 0; k < i.slotCount; ++k) {
                const Slot* slot = ledger_.holder(i.name, k);
                if (slot && slot->holderResource == state.resource)
                    state.devices.push_back({slotId(i.name, k), false, i.device.numaNode});
            }
        }
    }
    return state;
}

void Inventory::publish() {
    // The live files are written after the plugins have the lists: a rewrite per
    // container must not delay what the kubelet learns.
    if (!scheduler_) {
        publishNow();
        if (liveFiles_) liveFiles_->writeChanged();
        return;
    }
    if ((changed_.empty() && slotChanges_.empty() && !(liveFiles_ && liveFiles_->pending())) ||
        publishScheduled_)
        return;
    publishScheduled_ = true;
    scheduler_([this] {
        loopThread_.check();
        publishScheduled_ = false;
        Edit edit(*this);  // the publication latency is shown
        publishNow();
        if (liveFiles_) liveFiles_->writeChanged();
    });
}

void Inventory::publishNow() {
    std::vector<std::pair<std::string, std::chrono::steady_clock::time_point>> reports;
    reports.swap(unpublishedReports_);
    if (changed_.empty() && slotChanges_.empty()) return;
    std::set<std::string> changed;
    changed.swap(changed_);
    std::map<std::string, std::set<std::pair<std::string, int>>> slotChanges;
    slotChanges.swap(slotChanges_);
    for (const auto& [resource, slots] : slotChanges) {
        if (!changed.count(resource) && !publishSlots(resource, slots)) changed.insert(resource);
    }
    for (const std::string& resource : changed) {
        auto [config, instance] = resolve(resource);
        const bool offered = config && (!instance || instance->offered);
        if (!offered) {
            if (published_.erase(resource)) observer_.resourceWithdrawn(resource);
            continue;
        }
        published_.insert(resource);
        observer_.resourceChanged(buildResource(*config, instance));
    }
    if (reports.empty()) return;
    // Every changed list is with the plugins now, the configuration-level one of thousands
    // of slots included: that is when the kubelet's ListAndWatch streams get them.
    const auto handedOver = clock_.steady();
    for (const auto& [configuration, arrived] : reports) {
        auto cit = configurations_.find(configuration);
        if (cit != configurations_.end()) cit->second.discovery.publishLatency.observe(handedOver - arrived);
    }
}

bool Inventory::publishSlots(const std::string& resource,
                             const std::set<std::pair<std::string, int>>& slots) {
    if (!published_.count(resource)) return false;
    auto [config, instance] = resolve(resource);
    if (!config || instance) return false;
    ResourceState changes;
    changes.resource = resource;
    changes.configuration = config->configuration.name;
    for (const auto& [name, index] : slots) {
        auto it = config->instances.find(name);
        // Not in the list the observer has: only the full list can say so.
        if (it == config->instances.end() || !it->second.offered || index >= it->second.slotCount)
            return false;
        const InstanceState& i = it->second;
        changes.devices.push_back(
            {slotId(name, index), slotHealthy(*config, i, index, resource), i.device.numaNode});
    }
    return observer_.slotsChanged(changes);
}

std::vector<ResourceState> Inventory::resources() const {
    loopThread_.check();
    std::vector<ResourceState> result;
    for (const auto& [name, c] : configurations_) {
        result.push_back(buildResource(c, nullptr));
        for (const auto& [instanceName, instance] : c.instances) {
            if (instance.offered) result.push_back(buildResource(c, &instance));
        }
    }
    return result;
}

std::vector<ConfigurationView> Inventory::view() const {
    loopThread_.check();
    std::vector<ConfigurationView> result;
    for (const auto& [name, c] : configurations_) {
        ConfigurationView v{c.configuration, c.resource, c.probeError, {}, c.discovery};
        for (const auto& [instanceName, i] : c.instances) {
            InstanceView iv{i.name,
                            i.configuration,
                            i.device,
                            i.present,
                            i.offered,
                            i.firstSeenMs,
                            i.lastSeenMs,
                            {},
                            {},
                            {},
                            {}};
            for (int k = 0; k < i.slotCount; ++k) {
                const Slot* held = ledger_.holder(i.name, k);
                iv.slots.push_back(held ? *held
                                        : Slot{slotId(i.name, k), i.name, i.configuration, k, "", 0, "", ""});
                if (!held) {
                    const std::string& id = iv.slots.back().deviceId;
                    if (const std::string* why = policy_ ? policy_->withheld(id, i.device.shared) : nullptr)
                        iv.heldElsewhere.emplace(id, *why);
                    continue;
                }
                if (auto why = unconfirmed_.find(held->deviceId); why != unconfirmed_.end())
                    iv.unconfirmed.insert(*why);
                if (auto live = liveFile(held->deviceId))
                    iv.liveFiles.emplace(held->deviceId, std::move(*live));
            }
            v.instances.push_back(std::move(iv));
        }
        result.push_back(std::move(v));
    }
    return result;
}

std::size_t Inventory::slotsHeld() const {
    loopThread_.check();
    std::size_t held = 0;
    for (const auto& [name, c] : configurations_) {
        for (const auto& [instanceName, i] : c.instances) {
            held += ledger_.heldBy(instanceName);
        }
    }
    return held;
}

Inventory::Offered Inventory::offered() const {
    loopThread_.check();
    Offered offered;
    for (const auto& [name, c] : configurations_) {
        for (const auto& [instanceName, i] : c.instances) {
            if (!i.offered) continue;
            ++offered.instances;
            offered.slots += static_cast<std::size_t>(std::min(i.slotCount, c.configuration.capacity));
        }
    }
    return offered;
}

}  // namespace devlet
