#pragma once
// The node's inventory: configurations, the instances probes report for them and how many
// capacity slots each has, turned into device lists for the plugins (InventoryObserver)
// whenever something changes. Who may hold a slot is the slot arbiter's to decide
// (runtime/slot_arbiter.h); the slot ledger records it; the inventory reads the record.
// Owns no OS handles; lives on the loop thread (checked in builds with assertions).
// Durable state goes to the Store.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "runtime/configuration.h"
#include "runtime/discovery.h"
#include "runtime/grants.h"
#include "runtime/histogram.h"
#include "runtime/instance.h"
#include "runtime/live_files.h"
#include "runtime/live_info.h"
#include "runtime/slot.h"
#include "runtime/slot_ledger.h"
#include "runtime/thread_bound.h"

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

// A slot where the inventory has it: what the arbiter weighs.
struct SlotFacts {
    std::string id;  // "<instance>-<k>"
    std::string configuration;
    std::string instance;
    std::string instanceDeviceId;  // the handler's id of the device
    int index = 0;
    bool present = false;  // its device is seen now
    bool shared = false;   // a device several nodes may see
};

// What a resource offers: a configuration's slots, or one instance's.
struct ResourceFacts {
    std::string configuration;
    std::string instance;  // empty for the configuration-level resource
    int capacity = 0;
    bool uniqueDevices = false;
};

// What the inventory asks the slot arbiter while it lists slots (the arbiter answers).
class SlotPolicy {
public:
    virtual ~SlotPolicy() = default;
    // Why a free slot may not be offered on this node now (cluster mode); nullptr: it may.
    virtual const std::string* withheld(const std::string& slotId, bool shared) const = 0;
    // Whether shared slots are held through the cluster (cluster mode).
    virtual bool clusterMode() const = 0;
    // A device the inventory did not know is offered: the kubelet may have reported its
    // slots held already.
    virtual void instanceFound(const std::string& instance) = 0;
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

class Inventory : private SlotLedger::Listener {
public:
    using Clock = devlet::Clock;

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

    // --- what the slot arbiter asks and tells ----------------------------------------
    // The record of holders (the arbiter changes it; everyone may read it).
    const SlotLedger& ledger() const { return ledger_; }
    SlotLedger& ledger() { return ledger_; }
    void setSlotPolicy(SlotPolicy* policy) {
        loopThread_.beforeLoop();  // wiring
        policy_ = policy;
    }
    const Clock& clock() const { return clock_; }
    // Who offers a resource; nullopt when devlet does not.
    std::optional<ResourceFacts> offeredBy(const std::string& resource) const;
    // The slot a device id names, within its instance's slots; nullopt when there is none.
    std::optional<SlotFacts> slot(const std::string& slotId) const;
    // Whether a held slot's instance is offered by its configuration now. A slot whose
    // configuration went away stays held until its pod is gone: one that comes back must
    // not hand it out a second time.
    bool placed(const Slot& slot) const;
    // Whether the slot's instance is known to its configuration and shared.
    bool sharedInstance(const Slot& slot) const;
    // What each container of a granted request gets (its slots are held already): device
    // nodes, mounts, Akri's environment, and its live file.
    std::vector<ContainerGrant> grants(const std::string& resource,
                                       const std::vector<std::vector<std::string>>& containers);
    // An Allocate answered: counted by the configuration that offers the resource.
    void countDecision(const std::string& resource, bool granted);
    // Holders changed on the kubelet's word: slots above a lowered capacity and withdrawn
    // instances go once freed.
    void holdsSettled();
    // Whether free slots may be offered changed (cluster mode): for these slots, or
    // (`allShared`) every slot of a shared device. Republished.
    void offersChanged(const std::set<std::string>& slotIds, bool allShared = false);
    // Something a person should read: logged and kept with the events.
    void event(const std::string& level, const std::string& subject, const std::string& message) override;

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
    void setHandlers(const HandlerRegistry& handlers) {
        loopThread_.beforeLoop();  // wiring
        handlers_ = &handlers;
    }
    // Keeps a live file for every container it grants devices to, under
    // `<stateDir>/pods/<allocation>/` (docs/live-info.md), mounted into the container.
    // Call before restoreSlots(), which rebuilds the files of the slots still held.
    void setLiveInfoDirectory(const std::string& stateDir);
    // Held slots whose hold cluster mode cannot confirm now, and why: shown on the status
    // page and in the holders' live files until the next call leaves them out.
    void setUnconfirmedHolds(std::map<std::string, std::string> slotReasons);

    // --- reading ----------------------------------------------------------------
    // Changes whenever anything view() or the events show may have changed: the status
    // server keeps what it rendered while the revision stays the same. It follows from
    // the changes themselves: a changed resource, a new event, a new holder or pod name in
    // the ledger, and the reports and allocations that always change what is shown (Edit).
    std::uint64_t revision() const {
        loopThread_.check();
        return edits_ + marks_ + events_ + ledger_.revision();
    }
    // Changes are gathered and not yet with the observer (a scheduled publication is due).
    bool publicationPending() const {
        loopThread_.check();
        return publishScheduled_;
    }
    std::vector<ResourceState> resources() const;
    std::vector<ConfigurationView> view() const;
    // The instance-level resource name of an instance ("<domain>/<instance>").
    std::string instanceResource(const std::string& instance) const;
    bool isConfigurationLevel(const std::string& resource) const;
    std::size_t slotsHeld() const;
    // The live file that describes a held slot; nullopt when none does.
    std::optional<LiveFileView> liveFile(const std::string& slotId) const;
    // Offered instances and their slots within capacity: the daemon's status line,
    // counted on every change, so without copying the view.
    struct Offered {
        std::size_t instances = 0;
        std::size_t slots = 0;
    };
    Offered offered() const;

private:
    struct InstanceState {
        std::string name;
        std::string configuration;
        Instance device;
        bool present = false;
        bool offered = false;
        std::chrono::steady_clock::time_point goneSince{};
        std::int64_t firstSeenMs = 0;
        std::int64_t lastSeenMs = 0;
        // Slots 0..slotCount-1: the capacity, or more while slots above a lowered
        // capacity are still held.
        int slotCount = 0;
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

    // Who offers a resource: a configuration (instance empty) or one of its instances.
    struct ResourceOwner {
        std::string configuration;
        std::string instance;
    };

    // Opened by the public members whose every call changes what is shown (a probe's
    // report, an allocation's counts, new configurations); the revision moves when it closes.
    class Edit {
    public:
        explicit Edit(Inventory& inventory) : inventory_(inventory) {}
        ~Edit() { ++inventory_.edits_; }
        Edit(const Edit&) = delete;
        Edit& operator=(const Edit&) = delete;

    private:
        Inventory& inventory_;
    };

    // SlotLedger::Listener
    void holderChanged(const Slot& slot, const std::string& before) override;

    SlotRef findSlot(const std::string& deviceId) REQUIRES(loopThread_);
    // The instance's record, made if new; nullptr when its resource is another
    // configuration's (the clash is an event, once).
    InstanceState* instanceRecord(ConfigurationState& c, const std::string& name) REQUIRES(loopThread_);
    void forgetInstanceRecords(const ConfigurationState& c) REQUIRES(loopThread_);
    // The configuration (and, for an instance-level resource, the instance) behind a resource.
    std::pair<const ConfigurationState*, const InstanceState*> resolve(const std::string& resource) const
        REQUIRES(loopThread_);
    bool slotHealthy(const ConfigurationState& c, const InstanceState& i, int index,
                     const std::string& resource) const REQUIRES(loopThread_);
    ResourceState buildResource(const ConfigurationState& c, const InstanceState* instance) const
        REQUIRES(loopThread_);
    void resizeSlots(ConfigurationState& c, InstanceState& instance) REQUIRES(loopThread_);
    void dropInstance(ConfigurationState& c, const std::string& name) REQUIRES(loopThread_);
    void removeConfiguration(const std::string& name) REQUIRES(loopThread_);
    void saveInstance(const InstanceState& instance) REQUIRES(loopThread_);
    void markChanged(const ConfigurationState& c, const InstanceState* instance) REQUIRES(loopThread_);
    // Gives the held slots of a configuration that was away (removed, or not loaded at a
    // restart) back to its instances.
    void placeHeldSlots(ConfigurationState& c) REQUIRES(loopThread_);
    void publish() REQUIRES(loopThread_);  // now, or scheduled (see setPublishScheduler)
    // Hands the observer just the slots of a configuration-level resource that changed;
    // false if it needs the full list instead.
    bool publishSlots(const std::string& resource, const std::set<std::pair<std::string, int>>& slots)
        REQUIRES(loopThread_);
    void publishNow() REQUIRES(loopThread_);
    int freeSlots(const ConfigurationState& c, const InstanceState& i) const REQUIRES(loopThread_);

    // Live files (see setLiveInfoDirectory): what a held slot's file says.
    LiveDevice liveDevice(const Slot& slot) const REQUIRES(loopThread_);
    // The files that describe an instance's slots are rewritten at the next publish().
    void liveChanged(const std::string& instance) REQUIRES(loopThread_);

    std::string nodeName_;
    std::string domain_;
    Store* store_;
    InventoryObserver& observer_;
    Clock clock_;
    SlotLedger ledger_;

    ThreadBound loopThread_;  // every public member is called on the loop thread
    std::map<std::string, ConfigurationState> configurations_ GUARDED_BY(loopThread_);
    std::map<std::string, ResourceOwner> owners_ GUARDED_BY(loopThread_);  // every offered resource's owner
    std::map<std::string, std::string> instanceOwners_ GUARDED_BY(loopThread_);  // instance -> configuration
    std::set<std::string> reportedClashes_
        GUARDED_BY(loopThread_);  // instances refused their resource, said once each
    std::set<std::string> changed_ GUARDED_BY(loopThread_);  // resources to re-publish
    // Slots (instance, index) whose holder changed, by configuration-level resource: sent
    // as changes unless the resource is in changed_ too.
    std::map<std::string, std::set<std::pair<std::string, int>>> slotChanges_ GUARDED_BY(loopThread_);
    std::set<std::string> published_ GUARDED_BY(loopThread_);  // resources the observer knows
    Scheduler scheduler_;
    // Probe reports whose changes are not handed to the observer yet: configuration and
    // when the report arrived (the start of the event-to-ListAndWatch latency).
    std::vector<std::pair<std::string, std::chrono::steady_clock::time_point>> unpublishedReports_
        GUARDED_BY(loopThread_);
    std::uint64_t marks_ GUARDED_BY(loopThread_) =
        0;  // resources marked changed so far (tells whether a report changed any)
    std::uint64_t events_ GUARDED_BY(loopThread_) = 0;  // events said so far
    std::uint64_t edits_ GUARDED_BY(loopThread_) = 0;   // Edits closed so far
    std::map<std::string, AllocationCounts> allocationCounts_ GUARDED_BY(loopThread_);
    const HandlerRegistry* handlers_ GUARDED_BY(loopThread_) = nullptr;
    SlotPolicy* policy_ GUARDED_BY(loopThread_) = nullptr;  // the arbiter; null: every free slot is offered
    std::map<std::string, std::string> unconfirmed_
        GUARDED_BY(loopThread_);            // held slot id -> why its hold is not confirmed
    std::unique_ptr<LiveFiles> liveFiles_;  // null: no live files
    bool publishScheduled_ GUARDED_BY(loopThread_) = false;
};

}  // namespace devlet
