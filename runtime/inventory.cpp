#include "runtime/inventory.h"

#include <algorithm>

#include "runtime/grants.h"
#include "runtime/log.h"
#include "runtime/naming.h"
#include "runtime/preferred_allocation.h"
#include "runtime/store.h"

namespace devlet {

namespace {
constexpr Log log{"inventory"};

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
      ledger_(store, clock_) {
    ledger_.addListener(*this);
}

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
            for (const auto& [name, instance] : c.instances) liveChanged(name);
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
        liveChanged(instanceName);  // its held slots are shown gone
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
    if (liveFiles_) {
        liveFiles_->rebuild([this](const std::string& id) {
            auto [instance, index] = splitSlotId(id);
            return index >= 0 && ledger_.holder(instance, index) != nullptr;
        });
    }
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
            liveChanged(name);
        }
        if (!wasPresent) liveChanged(name);
        instance.present = true;
        instance.offered = true;
        instance.lastSeenMs = nowMs;
        if (!wasPresent) {
            resizeSlots(c, instance);
            if (!known && policy_) policy_->instanceFound(name);
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
        liveChanged(name);
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

std::optional<ResourceFacts> Inventory::offeredBy(const std::string& resource) const {
    loopThread_.check();
    auto [config, instance] = resolve(resource);
    if (!config) return std::nullopt;
    return ResourceFacts{config->configuration.name, instance ? instance->name : std::string(),
                         config->configuration.capacity, config->configuration.uniqueDevices};
}

std::optional<SlotFacts> Inventory::slot(const std::string& slotId) const {
    loopThread_.check();
    auto [instanceName, index] = splitSlotId(slotId);
    if (index < 0) return std::nullopt;
    auto owner = instanceOwners_.find(instanceName);
    if (owner == instanceOwners_.end()) return std::nullopt;
    auto c = configurations_.find(owner->second);
    if (c == configurations_.end()) return std::nullopt;
    auto i = c->second.instances.find(instanceName);
    if (i == c->second.instances.end() || index >= i->second.slotCount) return std::nullopt;
    const InstanceState& instance = i->second;
    return SlotFacts{slotId, c->first,         instanceName,          instance.device.id,
                     index,  instance.present, instance.device.shared};
}

void Inventory::countDecision(const std::string& resource, bool granted) {
    loopThread_.check();
    Edit edit(*this);  // the counts are shown
    const ConfigurationState* config = resolve(resource).first;
    AllocationCounts& counts = allocationCounts_[config ? config->configuration.name : std::string()];
    ++(granted ? counts.granted : counts.refused);
}

std::vector<ContainerGrant> Inventory::grants(const std::string& resource,
                                              const std::vector<std::vector<std::string>>& containers) {
    loopThread_.check();
    const ConfigurationState* config = resolve(resource).first;
    std::vector<ContainerGrant> grants;
    if (!config) return grants;
    for (const std::vector<std::string>& requested : containers) {
        std::vector<GrantedDevice> granted;
        std::vector<std::string> ids;
        for (const std::string& id : requested) {
            SlotRef ref = findSlot(id);
            if (!ref.instance || std::find(ids.begin(), ids.end(), id) != ids.end()) continue;
            ids.push_back(id);
            if (std::none_of(granted.begin(), granted.end(),
                             [&](const GrantedDevice& g) { return g.device == &ref.instance->device; }))
                granted.push_back({&ref.instance->name, &ref.instance->device});
        }
        grants.push_back(grantFor(config->configuration, granted));
        if (!liveFiles_) continue;
        if (std::optional<LiveFiles::Granted> live = liveFiles_->granted(ids)) {
            grants.back().envs[live->variable] = live->file;
            grants.back().mounts.push_back(std::move(live->mount));
        }
    }
    publish();
    return grants;
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
    std::vector<PreferenceCandidate> candidates;
    for (const std::string& id : available) {
        auto [instance, index] = splitSlotId(id);
        auto it = config->instances.find(instance);
        if (it == config->instances.end()) continue;
        candidates.push_back({id, instance, index, freeSlots(*config, it->second)});
    }
    return spreadOrPack(std::move(candidates), mustInclude, size, config->configuration.allocationPolicy,
                        config->configuration.uniqueDevices);
}

void Inventory::holdsSettled() {
    loopThread_.check();
    for (auto& [configName, c] : configurations_) {
        std::vector<std::string> emptied;
        for (auto& [name, instance] : c.instances) {
            resizeSlots(c, instance);
            if (!instance.offered && !ledger_.anyHeld(name)) emptied.push_back(name);
        }
        for (const std::string& name : emptied) dropInstance(c, name);
    }
    publish();
}

bool Inventory::placed(const Slot& slot) const {
    loopThread_.check();
    auto c = configurations_.find(slot.configuration);
    return c != configurations_.end() && c->second.instances.count(slot.instance) > 0;
}

bool Inventory::sharedInstance(const Slot& slot) const {
    loopThread_.check();
    auto c = configurations_.find(slot.configuration);
    if (c == configurations_.end()) return false;
    auto i = c->second.instances.find(slot.instance);
    return i != c->second.instances.end() && i->second.device.shared;
}

// ---------------------------------------------------------------------------
// Live files

void Inventory::setLiveInfoDirectory(const std::string& stateDir) {
    loopThread_.check();
    liveFiles_ = std::make_unique<LiveFiles>(
        stateDir,
        [this](const std::string& slotId) -> std::optional<LiveDevice> {
            loopThread_.check();
            auto [instance, index] = splitSlotId(slotId);
            const Slot* slot = ledger_.holder(instance, index);
            if (!slot) return std::nullopt;
            return liveDevice(*slot);
        },
        [this](const std::string& level, const std::string& subject, const std::string& message) {
            event(level, subject, message);
        });
    ledger_.addListener(*liveFiles_);
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
    if (i->second.device.shared && policy_ && policy_->clusterMode()) {
        auto why = unconfirmed_.find(slot.deviceId);
        device.clusterHeld = true;
        if (why != unconfirmed_.end()) device.clusterUnconfirmed = why->second;
    }
    device.properties = deviceEnvironment(c->second.configuration, slot.instance, i->second.device);
    device.nodes = containerNodes(i->second.device);
    return device;
}

void Inventory::liveChanged(const std::string& instance) {
    if (liveFiles_) liveFiles_->instanceChanged(instance);
}

std::optional<LiveFileView> Inventory::liveFile(const std::string& slotId) const {
    loopThread_.check();
    return liveFiles_ ? liveFiles_->file(slotId) : std::nullopt;
}

void Inventory::saveInstance(const InstanceState& instance) {
    if (!store_) return;
    StoredInstance stored{instance.name,       instance.configuration,
                          instance.device.id,  instance.firstSeenMs,
                          instance.lastSeenMs, instance.present ? "present" : "gone"};
    if (auto outcome = store_->saveInstance(stored); !outcome) log.warning() << outcome.error();
}

void Inventory::event(const std::string& level, const std::string& subject, const std::string& message) {
    loopThread_.check();
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
