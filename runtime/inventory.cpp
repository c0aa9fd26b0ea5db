#include "runtime/inventory.h"

#include <algorithm>

#include "runtime/log.h"
#include "runtime/naming.h"
#include "runtime/store.h"

namespace devlet {

namespace {
constexpr Log log{"inventory"};

std::string upper(std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    return s;
}

}  // namespace

Inventory::Inventory(std::string nodeName, std::string resourceDomain, Store* store,
                     InventoryObserver& observer)
    : Inventory(std::move(nodeName), std::move(resourceDomain), store, observer, Clock::system()) {}

Inventory::Inventory(std::string nodeName, std::string resourceDomain, Store* store,
                     InventoryObserver& observer, Clock clock)
    : nodeName_(std::move(nodeName)),
      domain_(std::move(resourceDomain)),
      store_(store),
      observer_(observer),
      clock_(std::move(clock)),
      ledger_(store, clock_, *this) {}

std::string Inventory::instanceResource(const std::string& instance) const {
    return domain_ + "/" + instance;
}

// ---------------------------------------------------------------------------
// Configurations

void Inventory::applyConfigurations(const std::vector<Configuration>& configurations,
                                    const std::map<std::string, std::chrono::milliseconds>& removalGrace) {
    loopThread_.check();
    Edit edit(*this);
    std::set<std::string> wanted;
    for (const Configuration& configuration : configurations) {
        wanted.insert(configuration.name);
        const std::string resource = configurationLevelResource(configuration, domain_);
        auto grace = removalGrace.find(configuration.name);
        auto [it, added] = configurations_.try_emplace(configuration.name);
        ConfigurationState& c = it->second;
        const bool capacityChanged = !added && c.configuration.capacity != configuration.capacity;
        if (!added && c.resource != resource) {
            // Another configuration earlier in this list may have taken the old name.
            if (auto owner = owners_.find(c.resource); owner != owners_.end() &&
                                                       owner->second.configuration == configuration.name &&
                                                       owner->second.instance.empty())
                owners_.erase(owner);
            changed_.insert(c.resource);  // withdrawn by publish() unless re-owned
        }
        if (!added && c.configuration.brokerProperties != configuration.brokerProperties) {
            // Broker properties are among the properties a held device's file shows.
            for (const auto& [name, instance] : c.instances) liveInstanceChanged(name);
        }
        c.configuration = configuration;
        c.resource = resource;
        c.removalGrace = grace == removalGrace.end() ? std::chrono::milliseconds(0) : grace->second;
        if (auto owner = owners_.find(resource); owner != owners_.end() && !owner->second.instance.empty() &&
                                                 owner->second.configuration != configuration.name) {
            // The daemon refuses such a configuration before it gets here; if one slips
            // through, the instance keeps its resource and this configuration offers none.
            event("error", configuration.name,
                  "configuration " + configuration.name + " cannot offer " + resource +
                      ": it is the resource of instance " + owner->second.instance + " of configuration " +
                      owner->second.configuration);
        } else {
            owners_[resource] = ResourceOwner{configuration.name, {}};
        }
        changed_.insert(resource);
        if (added) {
            placeHeldSlots(c);
            event("info", configuration.name,
                  "configuration " + configuration.name + " (" + configuration.handler + ", capacity " +
                      std::to_string(configuration.capacity) + ") loaded from " + configuration.sourceFile);
        }
        if (capacityChanged) {
            for (auto& [name, instance] : c.instances) {
                resizeSlots(c, instance);
                markChanged(c, &instance);
            }
        }
        if (store_) {
            StoredConfiguration stored;
            stored.name = configuration.name;
            stored.handler = configuration.handler;
            stored.source = configuration.sourceFile + ":" + std::to_string(configuration.sourceLine);
            stored.capacity = configuration.capacity;
            stored.firstSeenMs = stored.lastSeenMs = clock_.wallMs();
            if (auto outcome = store_->saveConfiguration(stored); !outcome) log.warning() << outcome.error();
        }
    }
    std::vector<std::string> removed;
    for (const auto& [name, c] : configurations_) {
        if (!wanted.count(name)) removed.push_back(name);
    }
    // A renamed resource may now be free for a configuration refused it before.
    for (const std::string& name : removed) removeConfiguration(name);
    publish();
}

void Inventory::removeConfiguration(const std::string& name) {
    auto it = configurations_.find(name);
    if (it == configurations_.end()) return;
    ConfigurationState& c = it->second;
    // Its held slots stay held, in the ledger and in the store, until their pods are gone:
    // a configuration that comes back must not hand them out a second time.
    std::size_t retained = 0;
    for (auto& [instanceName, instance] : c.instances) {
        changed_.insert(instanceResource(instanceName));
        liveInstanceChanged(instanceName);  // its held slots are shown gone
        const std::size_t held = ledger_.heldBy(instanceName);
        retained += held;
        // A held instance keeps its row: its device id is needed if the configuration returns.
        if (store_ && held == 0) (void)store_->removeInstance(instanceName);
    }
    if (store_) (void)store_->deactivateConfiguration(name, clock_.wallMs());
    changed_.insert(c.resource);
    forgetInstanceRecords(c);
    // A renamed configuration that kept its resource already owns it again.
    if (auto owner = owners_.find(c.resource);
        owner != owners_.end() && owner->second.configuration == name && owner->second.instance.empty())
        owners_.erase(owner);
    event("info", name,
          "configuration " + name + " removed; its " + std::to_string(c.instances.size()) +
              " instance(s) are withdrawn" +
              (retained == 0
                   ? std::string()
                   : " (" + std::to_string(retained) + " held slot(s) stay held until their pods are gone)"));
    configurations_.erase(it);
}

void Inventory::placeHeldSlots(ConfigurationState& c) {
    for (const Slot& slot : ledger_.heldFor(c.configuration.name)) {
        // An instance whose resource is another configuration's now is not placed: its
        // holds stay in the ledger.
        InstanceState* record = instanceRecord(c, slot.instance);
        if (!record) continue;
        if (record->device.id.empty()) record->device.id = ledger_.instanceDeviceId(slot.instance);
        resizeSlots(c, *record);
        markChanged(c, record);
    }
}

void Inventory::restoreSlots() {
    loopThread_.check();
    if (!store_) return;
    Edit edit(*this);
    ledger_.restore();
    std::map<std::string, StoredInstance> known;
    for (StoredInstance& instance : store_->instances()) known[instance.name] = std::move(instance);
    std::size_t restored = 0;
    for (auto& [name, c] : configurations_) {
        placeHeldSlots(c);
        for (auto& [instanceName, instance] : c.instances) {
            const std::size_t held = ledger_.heldBy(instanceName);
            if (held == 0) continue;
            restored += held;
            if (auto k = known.find(instanceName); k != known.end()) {
                if (instance.firstSeenMs == 0) instance.firstSeenMs = k->second.firstSeenMs;
                if (instance.lastSeenMs == 0) instance.lastSeenMs = k->second.lastSeenMs;
            }
        }
    }
    rebuildLive();
    const std::size_t retained = ledger_.size() - restored;
    if (restored) log.info() << "restored " << restored << " held slot(s) from the state store";
    if (retained)
        log.info()
            << retained
            << " held slot(s) belong to configurations that are gone; they stay held until their pods are";
    publish();
}

void Inventory::resizeSlots(ConfigurationState& c, InstanceState& instance) {
    // Slots above a lowered capacity stay while held (reported Unhealthy) and go when freed.
    const int size = std::max(c.configuration.capacity, ledger_.highestHeld(instance.name) + 1);
    if (size == instance.slotCount) return;
    instance.slotCount = size;
    markChanged(c, &instance);
}

// ---------------------------------------------------------------------------
// Discovery

void Inventory::reportSnapshot(const std::string& configuration, std::vector<Instance> instances) {
    loopThread_.check();
    auto cit = configurations_.find(configuration);
    if (cit == configurations_.end()) return;
    ConfigurationState& c = cit->second;
    Edit edit(*this);  // lastSeen moves even when nothing else does
    const auto arrived = clock_.steady();
    const std::uint64_t marksBefore = marks_;
    const std::int64_t nowMs = clock_.wallMs();
    std::set<std::string> seen;
    for (Instance& device : instances) {
        const std::string name =
            instanceName(c.configuration.name, instanceHash(device.id, nodeName_, device.shared));
        if (!seen.insert(name).second) {
            log.warning() << configuration << ": two devices report the id \"" << device.id
                          << "\"; offering the first only";
            continue;
        }
        const bool known = c.instances.count(name) > 0;
        InstanceState* record = instanceRecord(c, name);
        if (!record) continue;
        InstanceState& instance = *record;
        if (!known || instance.device.id.empty()) {
            if (!instance.firstSeenMs) instance.firstSeenMs = nowMs;
        }
        const bool wasOffered = instance.offered;
        const bool wasPresent = instance.present;
        const bool topologyChanged = instance.device.numaNode != device.numaNode;
        if (!(instance.device == device)) {
            instance.device = std::move(device);
            liveInstanceChanged(name);
        }
        if (!wasPresent) liveInstanceChanged(name);
        instance.present = true;
        instance.offered = true;
        instance.lastSeenMs = nowMs;
        if (!wasPresent) {
            resizeSlots(c, instance);
            if (!known) ledger_.adoptKnownHolders(name, locator());
            markChanged(c, &instance);
            saveInstance(instance);
            event("info", name,
                  std::string(wasOffered ? "back: " : "found: ") + "\"" + instance.device.id +
                      "\" offered as " + instanceResource(name));
        } else if (topologyChanged) {
            markChanged(c, &instance);
        }
    }
    const auto now = clock_.steady();
    for (auto& [name, instance] : c.instances) {
        if (!instance.present || seen.count(name)) continue;
        instance.present = false;
        instance.goneSince = now;
        liveInstanceChanged(name);
        markChanged(c, &instance);
        saveInstance(instance);
        event("info", name, "gone: \"" + instance.device.id + "\"; its slots are Unhealthy");
    }
    // Recorded before anything publishes: without a scheduler expireGone() publishes now.
    if (marks_ != marksBefore) unpublishedReports_.emplace_back(configuration, arrived);
    expireGone();
    publish();
}

void Inventory::reportProbeError(const std::string& configuration, const std::string& message) {
    loopThread_.check();
    auto cit = configurations_.find(configuration);
    if (cit == configurations_.end()) return;
    Edit edit(*this);
    if (!message.empty()) {
        DiscoveryView& d = cit->second.discovery;
        ++d.errors;
        d.lastError = message;
        d.lastErrorMs = clock_.wallMs();
    }
    if (cit->second.probeError == message) return;
    cit->second.probeError = message;
    if (message.empty()) {
        event("info", configuration, "discovery recovered");
    } else {
        event("warning", configuration, "discovery failing: " + message);
    }
}

void Inventory::reportScan(const std::string& configuration, ScanReport scan) {
    loopThread_.check();
    auto cit = configurations_.find(configuration);
    if (cit == configurations_.end()) return;
    Edit edit(*this);
    DiscoveryView& d = cit->second.discovery;
    ++d.scans;
    d.lastScanMs = clock_.wallMs();
    d.scanDurations.observe(scan.duration);
    d.lastScan = std::move(scan);
}

std::optional<std::chrono::steady_clock::time_point> Inventory::expireGone() {
    loopThread_.check();
    const auto now = clock_.steady();
    std::optional<std::chrono::steady_clock::time_point> next;
    for (auto& [configName, c] : configurations_) {
        std::vector<std::string> drop;
        for (auto& [name, instance] : c.instances) {
            if (instance.present || !instance.offered) continue;
            const auto deadline = instance.goneSince + c.removalGrace;
            if (deadline > now) {
                if (!next || deadline < *next) next = deadline;
                continue;
            }
            instance.offered = false;
            markChanged(c, &instance);
            log.info() << name << " withdrawn: gone longer than its grace period";
            if (!ledger_.anyHeld(name)) drop.push_back(name);
        }
        for (const std::string& name : drop) dropInstance(c, name);
    }
    publish();
    return next;
}

void Inventory::dropInstance(ConfigurationState& c, const std::string& name) {
    ++marks_;
    changed_.insert(instanceResource(name));
    changed_.insert(c.resource);
    c.instances.erase(name);
    owners_.erase(instanceResource(name));
    instanceOwners_.erase(name);
    if (store_) (void)store_->removeInstance(name);
}

// ---------------------------------------------------------------------------
// Allocation

std::pair<const Inventory::ConfigurationState*, const Inventory::InstanceState*> Inventory::resolve(
    const std::string& resource) const {
    auto owner = owners_.find(resource);
    if (owner == owners_.end()) return {nullptr, nullptr};
    auto c = configurations_.find(owner->second.configuration);
    if (c == configurations_.end()) return {nullptr, nullptr};
    if (owner->second.instance.empty()) return {&c->second, nullptr};
    auto i = c->second.instances.find(owner->second.instance);
    if (i == c->second.instances.end()) return {nullptr, nullptr};
    return {&c->second, &i->second};
}

bool Inventory::isConfigurationLevel(const std::string& resource) const {
    loopThread_.check();
    auto owner = owners_.find(resource);
    return owner != owners_.end() && owner->second.instance.empty();
}

Inventory::SlotRef Inventory::findSlot(const std::string& deviceId) {
    auto [instanceName, index] = splitSlotId(deviceId);
    if (index < 0) return {};
    auto owner = instanceOwners_.find(instanceName);
    if (owner == instanceOwners_.end()) return {};
    auto c = configurations_.find(owner->second);
    if (c == configurations_.end()) return {};
    auto i = c->second.instances.find(instanceName);
    if (i == c->second.instances.end() || index >= i->second.slotCount) return {};
    return {&c->second, &i->second, index};
}

Inventory::InstanceState* Inventory::instanceRecord(ConfigurationState& c, const std::string& name) {
    if (auto it = c.instances.find(name); it != c.instances.end()) return &it->second;
    const std::string resource = instanceResource(name);
    if (auto owner = owners_.find(resource); owner != owners_.end()) {
        const std::string clash = "instance " + name + " of configuration " + c.configuration.name +
                                  " is not offered: its resource " + resource +
                                  " is offered by configuration " + owner->second.configuration;
        if (reportedClashes_.insert(clash).second) event("error", name, clash);
        return nullptr;
    }
    InstanceState& instance = c.instances[name];
    instance.name = name;
    instance.configuration = c.configuration.name;
    owners_[resource] = ResourceOwner{c.configuration.name, name};
    instanceOwners_[name] = c.configuration.name;
    return &instance;
}

void Inventory::forgetInstanceRecords(const ConfigurationState& c) {
    for (const auto& [name, instance] : c.instances) {
        owners_.erase(instanceResource(name));
        instanceOwners_.erase(name);
    }
}

std::variant<ContainerGrant, AllocationRefused> Inventory::allocate(
    const std::string& resource, const std::vector<std::string>& deviceIds) {
    auto result = allocateContainers(resource, {deviceIds});
    if (auto* refused = std::get_if<AllocationRefused>(&result)) return std::move(*refused);
    return std::move(std::get<std::vector<ContainerGrant>>(result).front());
}

std::variant<std::vector<ContainerGrant>, AllocationRefused> Inventory::allocateContainers(
    const std::string& resource, const std::vector<std::vector<std::string>>& containers) {
    loopThread_.check();
    Edit edit(*this);  // the counts change either way
    auto result = grant(resource, containers);
    const ConfigurationState* config = resolve(resource).first;
    AllocationCounts& counts = allocationCounts_[config ? config->configuration.name : std::string()];
    ++(std::holds_alternative<AllocationRefused>(result) ? counts.refused : counts.granted);
    return result;
}

std::variant<std::vector<Inventory::SlotRef>, AllocationRefused> Inventory::checkRequest(
    const std::string& resource, const std::vector<std::string>& deviceIds, std::set<std::string>& taken) {
    auto [config, onlyInstance] = resolve(resource);
    if (deviceIds.empty()) return AllocationRefused{"no device ids in the request for " + resource};
    std::vector<SlotRef> refs;
    std::set<std::string> unique;
    std::map<const InstanceState*, int> perInstance;
    for (const std::string& id : deviceIds) {
        if (!unique.insert(id).second) continue;
        if (!taken.insert(id).second) {
            return AllocationRefused{"slot " + id +
                                     " is requested for two containers in one request; one slot is never "
                                     "given twice"};
        }
        SlotRef ref = findSlot(id);
        if (!ref.instance || ref.configuration != config || (onlyInstance && ref.instance != onlyInstance)) {
            return AllocationRefused{"device " + id + " is not part of " + resource};
        }
        if (!ref.instance->present) {
            return AllocationRefused{"device " + id + " is gone (" + ref.instance->device.id +
                                     " is no longer seen); it cannot be allocated"};
        }
        if (ref.index >= config->configuration.capacity) {
            return AllocationRefused{"slot " + id + " is above the configuration's capacity of " +
                                     std::to_string(config->configuration.capacity)};
        }
        const Slot* slot = ledger_.holder(ref.instance->name, ref.index);
        if (!slot && ref.instance->device.shared && !clusterUnavailable_.empty())
            return AllocationRefused{"slot " + id + " cannot be given on this node: " + clusterUnavailable_};
        if (auto elsewhere = heldElsewhere_.find(id); !slot && elsewhere != heldElsewhere_.end())
            return AllocationRefused{"slot " + id + " cannot be given on this node: " + elsewhere->second};
        if (slot && slot->holderResource != resource) {
            std::string holder = slot->holderResource;
            if (!slot->pod.empty()) holder += " by pod " + slot->podNamespace + "/" + slot->pod;
            return AllocationRefused{"slot " + id + " is already held through " + holder +
                                     "; one slot is never given twice"};
        }
        if (++perInstance[ref.instance] > 1 && !onlyInstance && config->configuration.uniqueDevices) {
            return AllocationRefused{"configuration " + config->configuration.name +
                                     " requires distinct devices, but the request holds two slots of " +
                                     ref.instance->name};
        }
        refs.push_back(ref);
    }
    return refs;
}

std::variant<std::vector<ContainerGrant>, AllocationRefused> Inventory::grant(
    const std::string& resource, const std::vector<std::vector<std::string>>& containers) {
    auto [config, onlyInstance] = resolve(resource);
    if (!config) return AllocationRefused{"devlet does not offer " + resource};
    if (containers.empty()) return AllocationRefused{"no container in the request for " + resource};
    // Every container is checked before anything is written: a refusal holds nothing.
    std::vector<std::vector<SlotRef>> requested;
    std::set<std::string> taken;
    for (const std::vector<std::string>& deviceIds : containers) {
        auto checked = checkRequest(resource, deviceIds, taken);
        if (auto* refused = std::get_if<AllocationRefused>(&checked)) return std::move(*refused);
        requested.push_back(std::move(std::get<std::vector<SlotRef>>(checked)));
    }

    const std::int64_t nowMs = clock_.wallMs();
    std::vector<Slot> records;
    for (const std::vector<SlotRef>& refs : requested) {
        for (const SlotRef& ref : refs) {
            const Slot* slot = ledger_.holder(ref.instance->name, ref.index);
            if (slot && slot->holderResource == resource) {
                ledger_.confirm(ref.instance->name, ref.index);  // same-resource re-offer
                continue;
            }
            records.push_back(Slot{slotId(ref.instance->name, ref.index), ref.instance->name,
                                   ref.configuration->configuration.name, ref.index, resource, nowMs, "",
                                   ""});
        }
    }
    if (auto outcome = ledger_.hold(records); !outcome) {
        event("error", resource, "allocation refused: " + outcome.error());
        return AllocationRefused{
            "cannot record the allocation, so it is refused rather than handed out "
            "unrecorded: " +
            outcome.error()};
    }
    std::vector<ContainerGrant> grants;
    for (const std::vector<SlotRef>& refs : requested) {
        std::vector<const InstanceState*> granted;
        for (const SlotRef& ref : refs) {
            if (std::find(granted.begin(), granted.end(), ref.instance) == granted.end())
                granted.push_back(ref.instance);
        }
        grants.push_back(grantFor(*config, granted));
        if (!liveInfo_) continue;
        std::vector<std::string> ids;
        for (const SlotRef& ref : refs) ids.push_back(slotId(ref.instance->name, ref.index));
        const std::string allocation = ids.front();
        // A slot given again (the kubelet allocating anew for the same resource) is
        // described by its new container's file only.
        if (auto previous = liveSlots_.find(allocation); previous != liveSlots_.end()) {
            for (const std::string& id : previous->second) liveAllocationOf_.erase(id);
            previous->second.clear();
        }
        for (const std::string& id : ids) {
            if (auto other = liveAllocationOf_.find(id); other != liveAllocationOf_.end()) liveSlotGone(id);
            liveAllocationOf_[id] = allocation;
        }
        liveSlots_[allocation] = ids;
        liveChanged_.erase(allocation);
        // Without its directory the container could not start: the mount is offered only
        // once the file is written.
        if (writeLive(allocation)) {
            grants.back().envs[LiveInfoWriter::kEnvironmentVariable] = LiveInfoWriter::kContainerFile;
            grants.back().mounts.push_back(
                Mount{liveInfo_->directory(allocation).string(), LiveInfoWriter::kContainerDirectory, true});
        }
    }
    publish();
    return grants;
}

ContainerGrant Inventory::grantFor(const ConfigurationState& c,
                                   const std::vector<const InstanceState*>& instances) const {
    ContainerGrant grant;
    std::string names;
    std::set<std::string> devicePaths;
    std::set<std::string> mountPaths;
    for (const InstanceState* instance : instances) {
        // The first device keeps the plain names; every device has its KEY_<HASH> names.
        for (const auto& [key, value] : deviceEnvironment(c, *instance)) grant.envs.try_emplace(key, value);
        for (const DeviceNode& node : instance->device.nodes) {
            DeviceNode spec = node;
            if (spec.containerPath.empty()) spec.containerPath = spec.hostPath;
            if (devicePaths.insert(spec.containerPath).second) grant.devices.push_back(spec);
        }
        for (const Mount& mount : instance->device.mounts) {
            if (mountPaths.insert(mount.containerPath).second) grant.mounts.push_back(mount);
        }
        names += (names.empty() ? "" : ",") + instance->name;
    }
    grant.envs["DEVLET_INSTANCES"] = names;
    return grant;
}

int Inventory::freeSlots(const ConfigurationState& c, const InstanceState& i) const {
    if (!i.present) return 0;
    int free = 0;
    for (int k = 0; k < std::min(c.configuration.capacity, i.slotCount); ++k) {
        if (!ledger_.holder(i.name, k)) ++free;
    }
    return free;
}

std::vector<std::string> Inventory::preferredAllocation(const std::string& resource,
                                                        const std::vector<std::string>& available,
                                                        const std::vector<std::string>& mustInclude,
                                                        int size) const {
    loopThread_.check();
    std::vector<std::string> result;
    std::set<std::string> chosen;
    for (const std::string& id : mustInclude) {
        if (chosen.insert(id).second) result.push_back(id);
    }
    auto [config, onlyInstance] = resolve(resource);
    if (!config || onlyInstance) {
        for (const std::string& id : available) {
            if (static_cast<int>(result.size()) >= size) break;
            if (chosen.insert(id).second) result.push_back(id);
        }
        return result;
    }
    const DiscoveryHandler* handler = handlers_ ? handlers_->find(config->configuration.handler) : nullptr;
    if (SlotPreference preference = handler ? handler->slotPreference() : SlotPreference{}) {
        std::vector<SlotCandidate> candidates;
        for (const std::string& id : available) {
            auto [instance, index] = splitSlotId(id);
            auto found = config->instances.find(instance);
            if (found == config->instances.end()) continue;
            candidates.push_back({id, instance, index, &found->second.device});
        }
        return preference(config->configuration, candidates, mustInclude, size);
    }
    // Per instance: slots picked so far and slots still free.
    struct Candidate {
        std::string id;
        std::string instance;
        int index;
    };
    std::map<std::string, int> picked;
    std::map<std::string, int> free;
    for (const std::string& id : result) picked[splitSlotId(id).first]++;
    std::vector<Candidate> candidates;
    for (const std::string& id : available) {
        if (chosen.count(id)) continue;
        auto [instance, index] = splitSlotId(id);
        auto it = config->instances.find(instance);
        if (it == config->instances.end()) continue;
        candidates.push_back({id, instance, index});
        free.try_emplace(instance, freeSlots(*config, it->second));
    }
    const bool pack = config->configuration.allocationPolicy == AllocationPolicy::Pack;
    const bool unique = config->configuration.uniqueDevices;
    while (static_cast<int>(result.size()) < size) {
        // Unique devices: a device already in this request offers no further slot.
        if (unique) {
            std::erase_if(candidates, [&](const Candidate& c) { return picked[c.instance] > 0; });
        }
        if (candidates.empty()) break;
        auto better = [&](const Candidate& a, const Candidate& b) {
            const int pa = picked[a.instance], pb = picked[b.instance];
            const int fa = free[a.instance] - pa, fb = free[b.instance] - pb;
            if (pack) {
                // Fill one device first: the one already used, then the fullest.
                if ((pa > 0) != (pb > 0)) return pa > 0;
                if (fa != fb) return fa < fb;
            } else {
                // Distinct devices first, then the device with the most free slots.
                if (pa != pb) return pa < pb;
                if (fa != fb) return fa > fb;
            }
            if (a.instance != b.instance) return a.instance < b.instance;
            return a.index < b.index;
        };
        auto best = std::min_element(candidates.begin(), candidates.end(), better);
        picked[best->instance]++;
        result.push_back(best->id);
        candidates.erase(best);
    }
    return result;
}

Inventory::Reconciled Inventory::reconcile(const KubeletEvidence& evidence, std::chrono::milliseconds grace) {
    loopThread_.check();
    const bool lags =
        ledger_.reconcile(evidence, grace, locator(), [this](const Slot& slot) { return placed(slot); });
    for (auto& [configName, c] : configurations_) {
        std::vector<std::string> emptied;
        for (auto& [name, instance] : c.instances) {
            resizeSlots(c, instance);
            if (!instance.offered && !ledger_.anyHeld(name)) emptied.push_back(name);
        }
        for (const std::string& name : emptied) dropInstance(c, name);
    }
    publish();
    return {lags};
}

SlotLedger::Locate Inventory::locator() {
    return
        [this](const std::string& resource, const std::string& deviceId) -> std::optional<SlotLedger::Place> {
            SlotRef ref = findSlot(deviceId);
            if (!ref.instance) return std::nullopt;
            auto [config, onlyInstance] = resolve(resource);
            if (config != ref.configuration || (onlyInstance && onlyInstance != ref.instance))
                return std::nullopt;
            return SlotLedger::Place{config->configuration.name, ref.instance->name, ref.instance->device.id,
                                     ref.index};
        };
}

bool Inventory::placed(const Slot& slot) const {
    auto c = configurations_.find(slot.configuration);
    return c != configurations_.end() && c->second.instances.count(slot.instance) > 0;
}

// ---------------------------------------------------------------------------
// Publishing

void Inventory::holderChanged(const Slot& slot, const std::string& before) {
    if (!slot.held()) liveSlotGone(slot.deviceId);
    auto cit = configurations_.find(slot.configuration);
    if (cit == configurations_.end() || !cit->second.instances.count(slot.instance)) return;
    const ConfigurationState& c = cit->second;
    // Freed here: another node may have it. A slot whose device went away with its
    // configuration keeps its Lease until the Lease lapses.
    if (gate_ && !slot.held() && !before.empty() && c.instances.at(slot.instance).device.shared)
        gate_->release(slot.deviceId);
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

std::vector<std::string> Inventory::sharedSlotsIn(
    const std::string& resource, const std::vector<std::vector<std::string>>& containers) const {
    loopThread_.check();
    std::vector<std::string> shared;
    const ConfigurationState* config = resolve(resource).first;
    if (!config) return shared;
    for (const std::vector<std::string>& ids : containers) {
        for (const std::string& id : ids) {
            auto [instance, index] = splitSlotId(id);
            auto i = config->instances.find(instance);
            if (index >= 0 && i != config->instances.end() && i->second.device.shared &&
                std::find(shared.begin(), shared.end(), id) == shared.end())
                shared.push_back(id);
        }
    }
    return shared;
}

bool Inventory::slotHeld(const std::string& slotId) const {
    auto [instance, index] = splitSlotId(slotId);
    return index >= 0 && ledger_.holder(instance, index) != nullptr;
}

std::vector<std::string> Inventory::heldSharedSlots() const {
    loopThread_.check();
    std::vector<std::string> held;
    for (const auto& [name, c] : configurations_) {
        for (const auto& [instanceName, i] : c.instances) {
            if (!i.device.shared) continue;
            for (int k = 0; k < i.slotCount; ++k) {
                if (ledger_.holder(i.name, k)) held.push_back(slotId(i.name, k));
            }
        }
    }
    return held;
}

void Inventory::setClusterUnavailable(std::string why) {
    loopThread_.check();
    if (why == clusterUnavailable_) return;
    Edit edit(*this);
    const bool offeredBefore = clusterUnavailable_.empty();
    clusterUnavailable_ = std::move(why);
    if (offeredBefore == clusterUnavailable_.empty()) return;  // only the reason changed
    for (const auto& [name, c] : configurations_) {
        for (const auto& [instanceName, i] : c.instances) {
            if (!i.device.shared) continue;
            for (int k = 0; k < i.slotCount; ++k) slotChanges_[c.resource].emplace(i.name, k);
            changed_.insert(instanceResource(i.name));
            ++marks_;
        }
    }
    publish();
}

void Inventory::setHeldElsewhere(std::map<std::string, std::string> slotReasons) {
    loopThread_.check();
    if (slotReasons == heldElsewhere_) return;
    Edit edit(*this);
    std::set<std::string> touched;
    for (const auto& [id, why] : heldElsewhere_) {
        if (!slotReasons.count(id)) touched.insert(id);
    }
    for (const auto& [id, why] : slotReasons) {
        auto before = heldElsewhere_.find(id);
        if (before == heldElsewhere_.end()) touched.insert(id);
    }
    heldElsewhere_ = std::move(slotReasons);
    for (const std::string& id : touched) {
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
        if (auto it = liveAllocationOf_.find(id); it != liveAllocationOf_.end())
            liveChanged_.insert(it->second);
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
    if (!slot && i.device.shared && !clusterUnavailable_.empty()) return false;
    if (!slot) return heldElsewhere_.empty() || !heldElsewhere_.count(slotId(i.name, index));
    return slot->holderResource == resource;
}

ResourceState Inventory::buildResource(const ConfigurationState& c, const InstanceState* instance) const {
    ResourceState state;
    state.configuration = c.configuration.name;
    auto add = [&](const InstanceState& i, const std::string& resource) {
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
        writeChangedLive();
        return;
    }
    if ((changed_.empty() && slotChanges_.empty() && liveChanged_.empty()) || publishScheduled_) return;
    publishScheduled_ = true;
    scheduler_([this] {
        publishScheduled_ = false;
        Edit edit(*this);  // the publication latency is shown
        publishNow();
        writeChangedLive();
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
                    if (i.device.shared && !clusterUnavailable_.empty())
                        iv.heldElsewhere.emplace(iv.slots.back().deviceId, clusterUnavailable_);
                    else if (auto elsewhere = heldElsewhere_.find(iv.slots.back().deviceId);
                             elsewhere != heldElsewhere_.end())
                        iv.heldElsewhere.insert(*elsewhere);
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

// ---------------------------------------------------------------------------
// Live files

void Inventory::setLiveInfoDirectory(const std::string& stateDir) {
    loopThread_.check();
    liveInfo_ = std::make_unique<LiveInfoWriter>(stateDir);
}

std::map<std::string, std::string> Inventory::deviceEnvironment(const ConfigurationState& c,
                                                                const InstanceState& instance) const {
    const std::string hash = upper(instance.name.substr(instance.name.rfind('-') + 1));
    // A broker property wins over a device property of the same name, in both KEY and
    // KEY_<HASH>, as in Akri: its agent appends the Configuration's brokerProperties
    // after the device's own properties (agent/src/device_manager/in_memory.rs `get`,
    // and discovery_handler_registry.rs `device_to_instance` for the Instance), and
    // `cdi_device_to_car` (plugin_manager/device_plugin_instance_controller.rs) turns
    // that list into the env map, where the later entry stays.
    std::map<std::string, std::string> properties = c.configuration.brokerProperties;
    properties.insert(instance.device.properties.begin(), instance.device.properties.end());
    std::map<std::string, std::string> environment;
    for (const auto& [key, value] : properties) {
        environment.try_emplace(key,
                                value);  // a property named like another's KEY_<HASH> does not replace it
        environment[key + "_" + hash] = value;
    }
    return environment;
}

LiveDevice Inventory::liveDevice(const Slot& slot) const {
    LiveDevice device{
        slot.deviceId, slot.instance, slot.configuration, slot.holderResource, false, {}, {}, false, {}};
    // A slot whose configuration went away is still held: shown gone, without properties.
    auto c = configurations_.find(slot.configuration);
    if (c == configurations_.end()) return device;
    auto i = c->second.instances.find(slot.instance);
    if (i == c->second.instances.end()) return device;
    device.present = i->second.present;
    if (i->second.device.shared && gate_) {  // cluster mode
        auto why = unconfirmed_.find(slot.deviceId);
        device.clusterHeld = true;
        if (why != unconfirmed_.end()) device.clusterUnconfirmed = why->second;
    }
    device.properties = deviceEnvironment(c->second, i->second);
    for (DeviceNode node : i->second.device.nodes) {
        if (node.containerPath.empty()) node.containerPath = node.hostPath;
        device.nodes.push_back(std::move(node));
    }
    return device;
}

void Inventory::liveInstanceChanged(const std::string& instance) {
    if (!liveInfo_) return;
    const std::string prefix = instance + "-";
    for (auto it = liveAllocationOf_.lower_bound(prefix);
         it != liveAllocationOf_.end() && it->first.starts_with(prefix); ++it) {
        if (splitSlotId(it->first).first == instance) liveChanged_.insert(it->second);
    }
}

void Inventory::liveSlotGone(const std::string& slotId) {
    auto it = liveAllocationOf_.find(slotId);
    if (it == liveAllocationOf_.end()) return;
    const std::string allocation = it->second;
    liveAllocationOf_.erase(it);
    std::vector<std::string>& slots = liveSlots_[allocation];
    std::erase(slots, slotId);
    if (!slots.empty()) {
        liveChanged_.insert(allocation);
        return;
    }
    liveSlots_.erase(allocation);
    liveChanged_.erase(allocation);
    if (auto outcome = liveInfo_->remove(allocation); !outcome) log.warning() << outcome.error();
}

std::vector<LiveDevice> Inventory::liveDevices(const std::string& allocation) {
    std::vector<LiveDevice> devices;
    for (const std::string& id : liveSlots_[allocation]) {
        auto [instance, index] = splitSlotId(id);
        if (const Slot* slot = ledger_.holder(instance, index)) devices.push_back(liveDevice(*slot));
    }
    return devices;
}

bool Inventory::liveWritten(const std::string& allocation, const std::string& staleBefore,
                            const Outcome& outcome) {
    if (!outcome) {
        if (outcome.error() != staleBefore)
            event("warning", allocation,
                  "the live file of " + allocation + " keeps its last content: " + outcome.error());
        return false;
    }
    if (!staleBefore.empty())
        event("info", allocation, "the live file of " + allocation + " is current again");
    return true;
}

bool Inventory::writeLive(const std::string& allocation) {
    const std::string staleBefore = liveInfo_->staleReason(allocation);
    return liveWritten(allocation, staleBefore, liveInfo_->write(allocation, liveDevices(allocation)));
}

void Inventory::writeChangedLive() {
    if (!liveInfo_ || liveChanged_.empty()) return;
    std::set<std::string> changed;
    changed.swap(liveChanged_);
    std::vector<LiveInfoWriter::Document> documents;
    std::vector<std::string> staleBefore;
    for (const std::string& allocation : changed) {
        if (!liveSlots_.count(allocation)) continue;
        staleBefore.push_back(liveInfo_->staleReason(allocation));
        documents.emplace_back(allocation, liveDevices(allocation));
    }
    // One that failed is tried again with the next change.
    const std::vector<Outcome> outcomes = liveInfo_->writeAll(documents);
    for (std::size_t i = 0; i < documents.size(); ++i)
        (void)liveWritten(documents[i].first, staleBefore[i], outcomes[i]);
}

void Inventory::rebuildLive() {
    if (!liveInfo_) return;
    for (auto& [allocation, found] : liveInfo_->existing()) {
        // A directory whose file was lost still names its first slot.
        std::vector<std::string> listed =
            found.slots.empty() ? std::vector<std::string>{allocation} : found.slots;
        std::vector<std::string> held;
        for (const std::string& id : listed) {
            auto [instance, index] = splitSlotId(id);
            if (index >= 0 && ledger_.holder(instance, index) && !liveAllocationOf_.count(id))
                held.push_back(id);
        }
        if (held.empty()) {
            if (auto outcome = liveInfo_->remove(allocation); !outcome) log.warning() << outcome.error();
            continue;
        }
        for (const std::string& id : held) liveAllocationOf_[id] = allocation;
        liveSlots_[allocation] = std::move(held);
        liveChanged_.insert(allocation);
    }
}

std::optional<LiveFileView> Inventory::liveFile(const std::string& slotId) const {
    loopThread_.check();
    auto it = liveAllocationOf_.find(slotId);
    if (!liveInfo_ || it == liveAllocationOf_.end()) return std::nullopt;
    return LiveFileView{(liveInfo_->directory(it->second) / "devices.json").string(),
                        liveInfo_->generation(it->second), liveInfo_->staleReason(it->second)};
}

void Inventory::saveInstance(const InstanceState& instance) {
    if (!store_) return;
    StoredInstance stored{instance.name,       instance.configuration,
                          instance.device.id,  instance.firstSeenMs,
                          instance.lastSeenMs, instance.present ? "present" : "gone"};
    if (auto outcome = store_->saveInstance(stored); !outcome) log.warning() << outcome.error();
}

void Inventory::event(const std::string& level, const std::string& subject, const std::string& message) {
    ++events_;
    if (level == "error") {
        log.error() << message;
    } else if (level == "warning") {
        log.warning() << message;
    } else {
        log.info() << message;
    }
    if (store_) (void)store_->addEvent(level, subject, message, clock_.wallMs());
}

}  // namespace devlet
