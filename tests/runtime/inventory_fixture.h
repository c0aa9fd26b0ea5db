#pragma once
// The inventory and its slot arbiter on their own: a recording observer stands in for the
// plugins, a hand-driven clock for time, and either no store or a real SQLite store in a
// temporary directory. Names follow Akri's test vectors ("foo0" shared -> 8120fe).

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "runtime/inventory.h"
#include "runtime/naming.h"
#include "runtime/slot_arbiter.h"
#include "runtime/store.h"
#include "tests/support/decide_now.h"
#include "tests/support/temp_dir.h"

namespace devlet::test {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr char kNode[] = "node-a";
constexpr char kDomain[] = "akri.sh";

// Config "echo" with devices "foo0" and "foo1" (shared): Akri's test vectors.
constexpr char kCl[] = "akri.sh/echo";
constexpr char kFoo0[] = "echo-8120fe";
constexpr char kFoo1[] = "echo-a19705";
constexpr char kFoo0Il[] = "akri.sh/echo-8120fe";
constexpr char kFoo1Il[] = "akri.sh/echo-a19705";

// Keeps what the plugins would be told: the latest state of every offered
// resource and every resource withdrawn since.
class RecordingObserver : public InventoryObserver {
public:
    void resourceChanged(ResourceState state) override {
        withdrawn.erase(state.resource);
        latest[state.resource] = state;
        ++changes;
        ++changesOf[state.resource];
    }
    // Applies the changed slots to the list it has, as the plugin host does.
    bool slotsChanged(const ResourceState& changes) override {
        auto it = latest.find(changes.resource);
        if (!keepsLists || it == latest.end()) return false;
        std::vector<DeviceState> devices = it->second.devices;
        for (const DeviceState& change : changes.devices) {
            auto device = std::find_if(devices.begin(), devices.end(),
                                       [&](const DeviceState& d) { return d.id == change.id; });
            if (device == devices.end()) return false;
            *device = change;
        }
        it->second.devices = std::move(devices);
        ++this->changes;
        ++changesOf[changes.resource];
        ++slotChangesOf[changes.resource];
        return true;
    }
    void resourceWithdrawn(const std::string& resource) override {
        latest.erase(resource);
        withdrawn.insert(resource);
    }

    bool keepsLists = true;  // false: an observer that takes full lists only
    std::map<std::string, ResourceState> latest;
    std::set<std::string> withdrawn;
    int changes = 0;
    std::map<std::string, int> changesOf;
    std::map<std::string, int> slotChangesOf;  // of changesOf, those of changed slots only
};

inline Configuration echoConfiguration(const std::string& name, int capacity) {
    Configuration configuration;
    configuration.name = name;
    configuration.handler = "debugEcho";
    configuration.discoveryDetails = "descriptions: [foo0, foo1]\nshared: true\n";
    configuration.capacity = capacity;
    configuration.sourceFile = "/etc/devlet/conf.d/" + name + ".yaml";
    configuration.sourceLine = 1;
    return configuration;
}

// What a kubelet says whose device checkpoint agrees with PodResources.
inline KubeletEvidence kubeletSays(std::vector<PodDevice> held) {
    return KubeletEvidence{held, held, {}};
}

inline Instance echoDevice(const std::string& description) {
    Instance instance;
    instance.id = description;
    instance.shared = true;
    instance.properties["DEBUG_ECHO_DESCRIPTION"] = description;
    return instance;
}

class InventoryFixture : public ::testing::Test {
protected:
    void TearDown() override {
        // Whatever a test did, the lists the observer holds (full lists and the slot
        // changes applied to them) are what the inventory offers.
        if (inventory_ && !inventory_->publicationPending()) {
            for (const ResourceState& offered : inventory_->resources()) {
                auto it = observer_.latest.find(offered.resource);
                ASSERT_NE(it, observer_.latest.end()) << offered.resource;
                EXPECT_EQ(it->second.devices, offered.devices) << offered.resource;
            }
        }
        arbiter_.reset();
        inventory_.reset();
        store_.reset();
        root_.reset();
    }

    Inventory::Clock manualClock() {
        return {[this] { return steadyNow_; }, [this] { return wallMs_; }};
    }

    void advance(std::chrono::milliseconds by) {
        steadyNow_ += by;
        wallMs_ += by.count();
    }

    std::unique_ptr<Inventory> makeInventory(Store* store, RecordingObserver& observer) {
        return std::make_unique<Inventory>(kNode, kDomain, store, observer, manualClock());
    }

    // An inventory without a store, observed by observer_.
    Inventory& inventory() {
        if (!inventory_) inventory_ = makeInventory(store_.get(), observer_);
        return *inventory_;
    }

    // The arbiter that decides for inventory().
    SlotArbiter& arbiter() {
        if (!arbiter_) arbiter_ = std::make_unique<SlotArbiter>(inventory());
        return *arbiter_;
    }

    // Stops the node as a restart would: the arbiter and the inventory go, the store stays.
    void stopNode() {
        arbiter_.reset();
        inventory_.reset();
    }

    fs::path stateDir() {
        if (!root_) root_.emplace();
        return root_->path() / "state";
    }

    std::unique_ptr<Store> openStore(StoreOptions options = {}) {
        Outcome why = Outcome::ok();
        auto store = Store::open(stateDir().string(), options, why);
        EXPECT_NE(store, nullptr) << why.error();
        return store;
    }

    // Uses a real store for inventory() from here on.
    Store& useStore(StoreOptions options = {}) {
        store_ = openStore(options);
        return *store_;
    }

    // One configuration "echo" with foo0 and foo1 reported.
    void setUpEcho(int capacity, std::chrono::milliseconds grace = 0ms) {
        configurations_ = {echoConfiguration("echo", capacity)};
        graces_ = {{"echo", grace}};
        inventory().applyConfigurations(configurations_, graces_);
        inventory().reportSnapshot("echo", {echoDevice("foo0"), echoDevice("foo1")});
    }

    void setCapacity(int capacity) {
        configurations_[0].capacity = capacity;
        inventory().applyConfigurations(configurations_, graces_);
    }

    // id -> healthy, as last published for resource.
    std::map<std::string, bool> health(const std::string& resource) const {
        std::map<std::string, bool> result;
        auto it = observer_.latest.find(resource);
        if (it == observer_.latest.end()) return result;
        for (const DeviceState& device : it->second.devices) result[device.id] = device.healthy;
        return result;
    }

    std::vector<std::string> healthyIds(const std::string& resource) const {
        std::vector<std::string> ids;
        for (const auto& [id, healthy] : health(resource)) {
            if (healthy) ids.push_back(id);
        }
        return ids;
    }

    std::optional<Slot> slotView(const std::string& id) const {
        for (const ConfigurationView& c : inventory_->view()) {
            for (const InstanceView& i : c.instances) {
                for (const Slot& s : i.slots) {
                    if (s.deviceId == id) return s;
                }
            }
        }
        return std::nullopt;
    }

    std::string holder(const std::string& id) const {
        auto view = slotView(id);
        return view ? view->holderResource : "<no such slot>";
    }

    ContainerGrant allocateOk(const std::string& resource, const std::vector<std::string>& ids) {
        auto result = allocateNow(arbiter(), resource, ids);
        if (auto* refused = std::get_if<AllocationRefused>(&result)) {
            ADD_FAILURE() << "allocate refused: " << refused->message;
            return {};
        }
        return std::get<ContainerGrant>(result);
    }

    std::string refusal(const std::string& resource, const std::vector<std::string>& ids) {
        return refused(resource, ids).message;
    }

    AllocationRefused refused(const std::string& resource, const std::vector<std::string>& ids) {
        auto result = allocateNow(arbiter(), resource, ids);
        if (auto* refused = std::get_if<AllocationRefused>(&result)) return *refused;
        ADD_FAILURE() << "allocate of " << resource << " was accepted";
        return {};
    }

    std::chrono::steady_clock::time_point steadyNow_{std::chrono::hours(1000)};
    std::int64_t wallMs_ = 1'700'000'000'000;
    RecordingObserver observer_;
    std::unique_ptr<Store> store_;
    std::unique_ptr<Inventory> inventory_;
    std::unique_ptr<SlotArbiter> arbiter_;  // made after inventory_, gone before it
    std::vector<Configuration> configurations_;
    std::map<std::string, std::chrono::milliseconds> graces_;
    std::optional<test::TempDir> root_;  // made on first use: most tests need no store
};

}  // namespace devlet::test
