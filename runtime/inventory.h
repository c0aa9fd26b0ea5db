#pragma once
// The node's inventory: configurations, the instances probes report for them and
// every instance's capacity slots, with the rule that one slot is held through at
// most one resource. Owns no OS handles; lives on the loop thread. Changes reach
// the plugins through InventoryObserver, durable state goes to the Store.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "runtime/configuration.h"
#include "runtime/discovery.h"
#include "runtime/histogram.h"
#include "runtime/instance.h"

namespace devlet {

class Store;

// One device id as a resource lists it to the kubelet.
struct DeviceState {
    std::string id;
    bool healthy = false;
    std::optional<int> numaNode;
    bool operator==(const DeviceState&) const = default;
};

// What one kubelet resource (instance- or configuration-level) offers now.
struct ResourceState {
    std::string resource;  // "<domain>/<instance>" or "<domain>/<configuration>"
    std::string configuration;
    std::string instance;  // empty for the configuration-level resource
    std::vector<DeviceState> devices;
    bool operator==(const ResourceState&) const = default;
};

class InventoryObserver {
public:
    virtual ~InventoryObserver() = default;
    // A resource appeared or its device list changed (full list; the observer may keep it:
    // a configuration-level list can hold thousands of slots).
    virtual void resourceChanged(ResourceState state) = 0;
    // Only the health of some slots of a configuration-level resource changed (slots
    // taken or freed): `changes` holds just those. An observer that keeps the full list
    // applies them and returns true; false, and the full list follows in resourceChanged.
    virtual bool slotsChanged(const ResourceState& changes) {
        (void)changes;
        return false;
    }
    // A resource is no longer offered.
    virtual void resourceWithdrawn(const std::string& resource) = 0;
};

// What the container gets for an allocation.
struct ContainerGrant {
    std::map<std::string, std::string> envs;
    std::vector<DeviceNode> devices;
    std::vector<Mount> mounts;
};

struct AllocationRefused {
    std::string message;
};

// A device the kubelet's PodResources API reports as held by a container.
struct PodDevice {
    std::string resource;
    std::string deviceId;
    std::string pod;
    std::string podNamespace;
};

struct SlotView {
    std::string id;
    int index = 0;
    std::string holderResource;  // empty = free
    std::int64_t sinceMs = 0;
    std::string pod;
    std::string podNamespace;
};

struct InstanceView {
    std::string name;
    std::string configuration;
    Instance device;
    bool present = false;  // the probe sees it now
    bool offered = false;  // its resource is registered (present, or gone within grace)
    std::int64_t firstSeenMs = 0;
    std::int64_t lastSeenMs = 0;
    std::vector<SlotView> slots;
};

// What the configuration's probe said about itself: its passes, its errors and how fast
// its changes reached the plugins.
struct DiscoveryView {
    ScanReport lastScan;           // the latest pass's report (empty until a probe reports one)
    std::int64_t lastScanMs = 0;   // when it arrived (wall clock); 0 = never
    std::uint64_t scans = 0;       // passes reported since the configuration was loaded
    std::uint64_t errors = 0;      // error reports since then (a failed pass, a new problem)
    std::string lastError;         // the latest error, also after discovery recovered
    std::int64_t lastErrorMs = 0;  // when it was reported; 0 = never
    DurationHistogram scanDurations;
    // From a probe's report reaching the inventory to the changed resources being handed
    // to the InventoryObserver (the device plugins send them on at once).
    DurationHistogram publishLatency;
};

struct ConfigurationView {
    Configuration configuration;
    std::string resource;  // configuration-level resource
    std::string probeError;
    std::vector<InstanceView> instances;
    DiscoveryView discovery;
};

class Inventory {
public:
    // Time sources; tests drive them by hand.
    struct Clock {
        std::function<std::chrono::steady_clock::time_point()> steady;
        std::function<std::int64_t()> wallMs;
        static Clock system();
    };

    Inventory(std::string nodeName, std::string resourceDomain, Store* store, InventoryObserver& observer);
    Inventory(std::string nodeName, std::string resourceDomain, Store* store, InventoryObserver& observer,
              Clock clock);

    // --- configurations ---------------------------------------------------------
    // Adds, updates and removes configurations to match `configurations`.
    // `removalGrace` maps a configuration to its effective grace period.
    void applyConfigurations(const std::vector<Configuration>& configurations,
                             const std::map<std::string, std::chrono::milliseconds>& removalGrace);
    // Restores held slots from the store after a restart (call after applyConfigurations).
    void restoreSlots();

    // --- discovery --------------------------------------------------------------
    void reportSnapshot(const std::string& configuration, std::vector<Instance> instances);
    void reportProbeError(const std::string& configuration, const std::string& message);
    void reportScan(const std::string& configuration, ScanReport scan);
    // Withdraws instances whose grace period ran out; returns when to call again.
    std::optional<std::chrono::steady_clock::time_point> expireGone();

    // --- allocation (called for the kubelet) ------------------------------------
    std::variant<ContainerGrant, AllocationRefused> allocate(const std::string& resource,
                                                             const std::vector<std::string>& deviceIds);
    // Allocate calls answered since start, by configuration ("" for resources devlet does
    // not offer): the status server's counters.
    struct AllocationCounts {
        std::uint64_t granted = 0;
        std::uint64_t refused = 0;
    };
    const std::map<std::string, AllocationCounts>& allocationCounts() const { return allocationCounts_; }
    std::vector<std::string> preferredAllocation(const std::string& resource,
                                                 const std::vector<std::string>& available,
                                                 const std::vector<std::string>& mustInclude, int size) const;
    // Reconciles held slots with what the kubelet says pods hold; frees slots no
    // pod has held for `grace`.
    void reconcilePods(const std::vector<PodDevice>& held, std::chrono::milliseconds grace);

    // --- publishing ---------------------------------------------------------------
    // By default every change reaches the observer before the call that made it returns.
    // With a scheduler, changes are gathered and published once, in work the scheduler
    // runs later (the daemon posts it to the loop): Allocate then answers without first
    // rebuilding a configuration-level list of thousands of slots, and a burst of changes
    // is published once. A slot's holder is decided and stored before either way.
    using Scheduler = std::function<void(std::function<void()>)>;
    void setPublishScheduler(Scheduler scheduler) { scheduler_ = std::move(scheduler); }
    // The handlers whose slot preferences pick configuration-level slots (borrowed; they
    // outlive the inventory). Without them every configuration uses spread or pack.
    void setHandlers(const HandlerRegistry& handlers) { handlers_ = &handlers; }

    // --- reading ----------------------------------------------------------------
    // Changes whenever anything view() or the events show may have changed: the status
    // server keeps what it rendered while the revision stays the same.
    std::uint64_t revision() const { return revision_; }
    // Changes are gathered and not yet with the observer (a scheduled publication is due).
    bool publicationPending() const { return publishScheduled_; }
    std::vector<ResourceState> resources() const;
    std::vector<ConfigurationView> view() const;
    // The instance-level resource name of an instance ("<domain>/<instance>").
    std::string instanceResource(const std::string& instance) const;
    bool isConfigurationLevel(const std::string& resource) const;
    std::size_t slotsHeld() const;
    // Offered instances and their slots within capacity: the daemon's status line,
    // counted on every change, so without copying the view.
    struct Offered {
        std::size_t instances = 0;
        std::size_t slots = 0;
    };
    Offered offered() const;

private:
    struct Slot {
        std::string holderResource;
        std::int64_t sinceMs = 0;
        std::string pod;
        std::string podNamespace;
        std::chrono::steady_clock::time_point lastConfirmed{};
    };
    struct InstanceState {
        std::string name;
        std::string configuration;
        Instance device;
        bool present = false;
        bool offered = false;
        std::chrono::steady_clock::time_point goneSince{};
        std::int64_t firstSeenMs = 0;
        std::int64_t lastSeenMs = 0;
        std::vector<Slot> slots;
    };
    struct ConfigurationState {
        Configuration configuration;
        std::string resource;
        std::chrono::milliseconds removalGrace{0};
        std::string probeError;
        std::map<std::string, InstanceState> instances;  // by instance name
        DiscoveryView discovery;
    };
    struct SlotRef {
        ConfigurationState* configuration = nullptr;
        InstanceState* instance = nullptr;
        int index = -1;
    };

    SlotRef findSlot(const std::string& deviceId);
    // The configuration (and, for an instance-level resource, the instance) behind a resource.
    std::pair<const ConfigurationState*, const InstanceState*> resolve(const std::string& resource) const;
    bool slotHealthy(const ConfigurationState& c, const InstanceState& i, int index,
                     const std::string& resource) const;
    ResourceState buildResource(const ConfigurationState& c, const InstanceState* instance) const;
    ContainerGrant grantFor(const ConfigurationState& c,
                            const std::vector<const InstanceState*>& instances) const;
    void resizeSlots(ConfigurationState& c, InstanceState& instance);
    void releaseSlot(ConfigurationState& c, InstanceState& instance, int index, const std::string& why);
    void dropInstance(ConfigurationState& c, const std::string& name);
    void removeConfiguration(const std::string& name);
    void saveInstance(const InstanceState& instance);
    void event(const std::string& level, const std::string& subject, const std::string& message);
    void markChanged(const ConfigurationState& c, const InstanceState* instance);
    // Marks the resources in which a slot's health differs between two holders.
    void markHolderChanged(const ConfigurationState& c, const InstanceState& instance, int index,
                           const std::string& before, const std::string& after);
    std::variant<ContainerGrant, AllocationRefused> grant(const std::string& resource,
                                                          const std::vector<std::string>& deviceIds);
    void publish();  // now, or scheduled (see setPublishScheduler)
    // Hands the observer just the slots of a configuration-level resource that changed;
    // false if it needs the full list instead.
    bool publishSlots(const std::string& resource, const std::set<std::pair<std::string, int>>& slots);
    void publishNow();
    int freeSlots(const ConfigurationState& c, const InstanceState& i) const;

    std::string nodeName_;
    std::string domain_;
    Store* store_;
    InventoryObserver& observer_;
    Clock clock_;
    // A slot still held when its configuration went away (removed, or missing after a
    // restart). It stays held, here and in the store, until PodResources shows its pod
    // gone: a configuration that comes back must not hand it out a second time.
    struct RetainedSlot {
        std::string configuration;
        std::string instance;
        std::string deviceId;  // the instance's device id, for when it comes back
        int index = 0;
        Slot slot;
    };
    void retainHeldSlots(ConfigurationState& c);
    void adoptRetainedSlots(ConfigurationState& c);
    void reconcileRetained(const std::set<std::pair<std::string, std::string>>& held,
                           std::chrono::milliseconds grace);
    // Puts a held slot into its instance, creating the instance record if needed.
    void placeHeldSlot(ConfigurationState& c, const std::string& instance, const std::string& deviceId,
                       int index, const Slot& slot);

    std::map<std::string, ConfigurationState> configurations_;
    std::map<std::string, RetainedSlot> retained_;       // by slot id
    std::map<std::string, std::string> resourceOwners_;  // CL resource -> configuration
    std::set<std::string> changed_;                      // resources to re-publish
    // Slots (instance, index) whose holder changed, by configuration-level resource: sent
    // as changes unless the resource is in changed_ too.
    std::map<std::string, std::set<std::pair<std::string, int>>> slotChanges_;
    std::set<std::string> published_;  // resources the observer knows
    Scheduler scheduler_;
    // Probe reports whose changes are not handed to the observer yet: configuration and
    // when the report arrived (the start of the event-to-ListAndWatch latency).
    std::vector<std::pair<std::string, std::chrono::steady_clock::time_point>> unpublishedReports_;
    std::uint64_t marks_ = 0;  // resources marked changed so far (tells whether a report changed any)
    std::uint64_t revision_ = 0;
    std::map<std::string, AllocationCounts> allocationCounts_;
    const HandlerRegistry* handlers_ = nullptr;
    bool publishScheduled_ = false;
};

}  // namespace devlet
