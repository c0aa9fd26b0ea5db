// The live files of held devices: an inventory over a real SQLite store and a real state
// directory in a temporary directory, a hand-driven clock, and Boost.JSON reading the
// files as a container would. Names follow Akri's test vectors ("foo0" shared -> 8120fe).

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <boost/json.hpp>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "runtime/inventory.h"
#include "runtime/live_info.h"
#include "runtime/store.h"
#include "tests/support/decide_now.h"
#include "tests/support/temp_dir.h"

namespace devlet {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
namespace json = boost::json;

constexpr char kNode[] = "node-a";
constexpr char kDomain[] = "akri.sh";
constexpr char kCl[] = "akri.sh/echo";
constexpr char kFoo0Slot[] = "echo-8120fe-0";
constexpr char kFoo1Slot[] = "echo-a19705-0";

class NullObserver : public InventoryObserver {
public:
    void resourceChanged(ResourceState) override {}
    void resourceWithdrawn(const std::string&) override {}
};

Configuration echoConfiguration() {
    Configuration configuration;
    configuration.name = "echo";
    configuration.handler = "debugEcho";
    configuration.discoveryDetails = "descriptions: [foo0, foo1]\nshared: true\n";
    configuration.capacity = 2;
    configuration.sourceFile = "/etc/devlet/conf.d/echo.yaml";
    configuration.sourceLine = 1;
    return configuration;
}

Instance echoDevice(const std::string& description, const std::string& address = "10.0.0.1") {
    Instance instance;
    instance.id = description;
    instance.shared = true;
    instance.properties["DEBUG_ECHO_DESCRIPTION"] = description;
    instance.properties["ADDRESS"] = address;
    return instance;
}

json::object readDocument(const fs::path& path) {
    const std::string text = test::readFile(path);
    boost::system::error_code ec;
    json::value value = json::parse(text, ec);
    EXPECT_FALSE(ec) << path << ": " << ec.message() << " in \"" << text << "\"";
    return ec || !value.is_object() ? json::object{} : value.get_object();
}

std::uint64_t generationOf(const json::object& document) {
    const json::value* g = document.if_contains("generation");
    return g && g->is_number() ? g->to_number<std::uint64_t>() : 0;
}

// The device entry of a slot, or an empty object.
json::object deviceOf(const json::object& document, const std::string& slot) {
    if (const json::value* devices = document.if_contains("devices"); devices && devices->is_array()) {
        for (const json::value& d : devices->get_array()) {
            if (d.is_object() && d.get_object().if_contains("slot") &&
                d.get_object().at("slot") == json::value(slot))
                return d.get_object();
        }
    }
    return {};
}

std::string property(const json::object& device, const std::string& name) {
    const json::value* properties = device.if_contains("properties");
    if (!properties || !properties->is_object()) return "<none>";
    const json::value* value = properties->get_object().if_contains(name);
    return value && value->is_string() ? std::string(value->get_string()) : "<none>";
}

std::string health(const json::object& device) {
    const json::value* h = device.if_contains("health");
    return h && h->is_string() ? std::string(h->get_string()) : "<none>";
}

mode_t modeOf(const fs::path& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

class LiveInfoTest : public ::testing::Test {
protected:
    void SetUp() override {
        // As the daemon's unit sets it: nothing it creates is readable by others unless
        // it says so.
        previousUmask_ = ::umask(077);
        open();
        inventory_->applyConfigurations({echoConfiguration()}, {{"echo", 0ms}});
        inventory_->reportSnapshot("echo", {echoDevice("foo0"), echoDevice("foo1")});
    }
    void TearDown() override {
        arbiter_.reset();
        inventory_.reset();
        store_.reset();
        ::umask(previousUmask_);
    }

    fs::path stateDir() const { return root_.path() / "state"; }
    fs::path allocationDir(const std::string& allocation) const { return stateDir() / "pods" / allocation; }
    fs::path fileOf(const std::string& allocation) const {
        return allocationDir(allocation) / "devices.json";
    }

    // A daemon starting over the state directory.
    void open() {
        Outcome why = Outcome::ok();
        store_ = Store::open(stateDir().string(), StoreOptions{}, why);
        ASSERT_NE(store_, nullptr) << why.error();
        Inventory::Clock clock{[this] { return steadyNow_; }, [this] { return wallMs_; }};
        arbiter_.reset();  // it decides for the inventory it was made with: gone before it
        inventory_ = std::make_unique<Inventory>(kNode, kDomain, store_.get(), observer_, clock);
        arbiter_ = std::make_unique<SlotArbiter>(*inventory_);
        inventory_->setLiveInfoDirectory(stateDir().string());
    }

    void restart() {
        arbiter_.reset();
        inventory_.reset();
        store_.reset();
        open();
        inventory_->applyConfigurations({echoConfiguration()}, {{"echo", 0ms}});
        inventory_->restoreSlots();
    }

    ContainerGrant allocateOk(const std::vector<std::string>& ids) {
        auto result = test::allocateNow(*arbiter_, kCl, ids);
        if (auto* refused = std::get_if<AllocationRefused>(&result)) {
            ADD_FAILURE() << "allocate refused: " << refused->message;
            return {};
        }
        return std::get<ContainerGrant>(result);
    }

    // The kubelet no longer lists any device, for longer than the grace period.
    void releaseAll() {
        steadyNow_ += 10s;
        arbiter_->reconcile(KubeletEvidence{std::vector<PodDevice>{}, std::vector<PodDevice>{}, {}}, 5s);
    }

    mode_t previousUmask_ = 0;
    test::TempDir root_;
    std::chrono::steady_clock::time_point steadyNow_{std::chrono::hours(1000)};
    std::int64_t wallMs_ = 1'700'000'000'000;
    NullObserver observer_;
    std::unique_ptr<Store> store_;
    std::unique_ptr<Inventory> inventory_;
    std::unique_ptr<SlotArbiter> arbiter_;  // made after inventory_, gone before it
};

TEST_F(LiveInfoTest, AllocationMountsReadOnlyDirectoryWithItsPathInEnvironment) {
    const ContainerGrant grant = allocateOk({kFoo0Slot, kFoo1Slot});
    ASSERT_EQ(grant.mounts.size(), 1u);
    EXPECT_EQ(grant.mounts[0].hostPath, allocationDir(kFoo0Slot).string());
    EXPECT_EQ(grant.mounts[0].containerPath, "/run/devlet/info");
    EXPECT_TRUE(grant.mounts[0].readOnly);
    EXPECT_EQ(grant.envs.at("DEVLET_INFO_FILE"), "/run/devlet/info/devices.json");
    auto live = inventory_->liveFile(kFoo1Slot);
    ASSERT_TRUE(live);
    EXPECT_EQ(live->path, fileOf(kFoo0Slot).string());
    EXPECT_EQ(live->generation, 1u);
    EXPECT_EQ(live->staleReason, "");
    // What the status page and `devlet instances --json` show of each held slot.
    const std::vector<ConfigurationView> view = inventory_->view();
    ASSERT_EQ(view.size(), 1u);
    std::map<std::string, std::string> shown;
    for (const InstanceView& i : view[0].instances)
        for (const auto& [slot, file] : i.liveFiles) shown[slot] = file.path;
    EXPECT_EQ(shown, (std::map<std::string, std::string>{{kFoo0Slot, fileOf(kFoo0Slot).string()},
                                                         {kFoo1Slot, fileOf(kFoo0Slot).string()}}));
}

TEST_F(LiveInfoTest, AllocationWritesGenerationOneWithEveryProperty) {
    allocateOk({kFoo0Slot, kFoo1Slot});
    const json::object document = readDocument(fileOf(kFoo0Slot));
    EXPECT_EQ(document.at("schemaVersion"), json::value(1));
    EXPECT_EQ(generationOf(document), 1u);
    EXPECT_EQ(document.at("allocation"), json::value(kFoo0Slot));
    ASSERT_EQ(document.at("devices").as_array().size(), 2u);
    const json::object foo0 = deviceOf(document, kFoo0Slot);
    EXPECT_EQ(foo0.at("instance"), json::value("echo-8120fe"));
    EXPECT_EQ(foo0.at("resource"), json::value(kCl));
    EXPECT_EQ(health(foo0), "present");
    // The environment's names: KEY and KEY_<HASH>.
    EXPECT_EQ(property(foo0, "DEBUG_ECHO_DESCRIPTION"), "foo0");
    EXPECT_EQ(property(foo0, "DEBUG_ECHO_DESCRIPTION_8120FE"), "foo0");
    EXPECT_EQ(property(deviceOf(document, kFoo1Slot), "DEBUG_ECHO_DESCRIPTION_A19705"), "foo1");
}

TEST_F(LiveInfoTest, ContainerCanReadButNotWrite) {
    allocateOk({kFoo0Slot});
    EXPECT_EQ(modeOf(stateDir() / "pods"), 0755u);
    EXPECT_EQ(modeOf(allocationDir(kFoo0Slot)), 0755u);
    EXPECT_EQ(modeOf(fileOf(kFoo0Slot)), 0644u);
    // Only the document: the temporary file is renamed over it.
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(allocationDir(kFoo0Slot)))
        names.push_back(entry.path().filename().string());
    EXPECT_EQ(names, (std::vector<std::string>{"devices.json"}));
}

TEST_F(LiveInfoTest, PropertyChangeRewritesWithNextGeneration) {
    allocateOk({kFoo0Slot});
    inventory_->reportSnapshot("echo", {echoDevice("foo0", "10.0.0.2"), echoDevice("foo1")});
    json::object document = readDocument(fileOf(kFoo0Slot));
    EXPECT_EQ(generationOf(document), 2u);
    EXPECT_EQ(property(deviceOf(document, kFoo0Slot), "ADDRESS"), "10.0.0.2");
    EXPECT_EQ(property(deviceOf(document, kFoo0Slot), "ADDRESS_8120FE"), "10.0.0.2");

    // Nothing about the held device changed: the file stays as it is.
    inventory_->reportSnapshot("echo", {echoDevice("foo0", "10.0.0.2"), echoDevice("foo1", "10.0.0.9")});
    EXPECT_EQ(generationOf(readDocument(fileOf(kFoo0Slot))), 2u);
}

TEST_F(LiveInfoTest, BrokerPropertyChangeAndRemovedConfigurationRewrite) {
    allocateOk({kFoo0Slot});
    Configuration configuration = echoConfiguration();
    configuration.brokerProperties["RESOLUTION"] = "1080p";
    inventory_->applyConfigurations({configuration}, {{"echo", 0ms}});
    json::object document = readDocument(fileOf(kFoo0Slot));
    EXPECT_EQ(generationOf(document), 2u);
    EXPECT_EQ(property(deviceOf(document, kFoo0Slot), "RESOLUTION_8120FE"), "1080p");

    // Held until its pod is gone, but no longer offered: shown gone, without properties.
    inventory_->applyConfigurations({}, {});
    document = readDocument(fileOf(kFoo0Slot));
    EXPECT_EQ(generationOf(document), 3u);
    EXPECT_EQ(health(deviceOf(document, kFoo0Slot)), "gone");
    EXPECT_EQ(property(deviceOf(document, kFoo0Slot), "RESOLUTION_8120FE"), "<none>");
}

TEST_F(LiveInfoTest, GoneDeviceIsShownGoneAndBackPresent) {
    allocateOk({kFoo0Slot, kFoo1Slot});
    inventory_->reportSnapshot("echo", {echoDevice("foo1")});
    json::object document = readDocument(fileOf(kFoo0Slot));
    EXPECT_EQ(generationOf(document), 2u);
    EXPECT_EQ(health(deviceOf(document, kFoo0Slot)), "gone");
    EXPECT_EQ(health(deviceOf(document, kFoo1Slot)), "present");

    inventory_->reportSnapshot("echo", {echoDevice("foo0"), echoDevice("foo1")});
    document = readDocument(fileOf(kFoo0Slot));
    EXPECT_EQ(generationOf(document), 3u);
    EXPECT_EQ(health(deviceOf(document, kFoo0Slot)), "present");
}

TEST_F(LiveInfoTest, ReleaseRemovesDirectory) {
    allocateOk({kFoo0Slot});
    ASSERT_TRUE(fs::exists(fileOf(kFoo0Slot)));
    releaseAll();
    EXPECT_FALSE(fs::exists(allocationDir(kFoo0Slot)));
    EXPECT_FALSE(inventory_->liveFile(kFoo0Slot));
}

TEST_F(LiveInfoTest, RestartRebuildsFilesFromStore) {
    allocateOk({kFoo0Slot, kFoo1Slot});
    restart();
    // Before any probe reports: the held devices are not seen yet.
    json::object document = readDocument(fileOf(kFoo0Slot));
    EXPECT_EQ(generationOf(document), 2u);
    EXPECT_EQ(document.at("devices").as_array().size(), 2u);
    EXPECT_EQ(health(deviceOf(document, kFoo1Slot)), "gone");

    inventory_->reportSnapshot("echo", {echoDevice("foo0", "10.0.0.3"), echoDevice("foo1")});
    document = readDocument(fileOf(kFoo0Slot));
    EXPECT_EQ(generationOf(document), 3u);
    EXPECT_EQ(health(deviceOf(document, kFoo1Slot)), "present");
    EXPECT_EQ(property(deviceOf(document, kFoo0Slot), "ADDRESS_8120FE"), "10.0.0.3");
}

TEST_F(LiveInfoTest, RestartRebuildsLostFileAndRemovesDirectoriesOfFreeSlots) {
    allocateOk({kFoo0Slot});
    fs::remove(fileOf(kFoo0Slot));
    fs::create_directories(allocationDir("echo-a19705-1"));  // a slot nobody holds
    restart();
    // The directory's name is its first slot: the container's mount keeps its content.
    const json::object document = readDocument(fileOf(kFoo0Slot));
    EXPECT_EQ(document.at("devices").as_array().size(), 1u);
    EXPECT_EQ(deviceOf(document, kFoo0Slot).at("instance"), json::value("echo-8120fe"));
    EXPECT_FALSE(fs::exists(allocationDir("echo-a19705-1")));
}

TEST_F(LiveInfoTest, FailedRewriteKeepsLastContentAndSaysWhy) {
    allocateOk({kFoo0Slot});
    // The temporary file's name taken by a directory: the next write cannot be made.
    fs::create_directory(allocationDir(kFoo0Slot) / ".devices.json.tmp");
    inventory_->reportSnapshot("echo", {echoDevice("foo0", "10.0.0.2"), echoDevice("foo1")});
    json::object document = readDocument(fileOf(kFoo0Slot));
    EXPECT_EQ(generationOf(document), 1u);
    EXPECT_EQ(property(deviceOf(document, kFoo0Slot), "ADDRESS"), "10.0.0.1");
    auto live = inventory_->liveFile(kFoo0Slot);
    ASSERT_TRUE(live);
    EXPECT_NE(live->staleReason.find(".devices.json.tmp"), std::string::npos) << live->staleReason;

    fs::remove(allocationDir(kFoo0Slot) / ".devices.json.tmp");
    inventory_->reportSnapshot("echo", {echoDevice("foo0", "10.0.0.4"), echoDevice("foo1")});
    document = readDocument(fileOf(kFoo0Slot));
    EXPECT_EQ(generationOf(document), 2u);
    EXPECT_EQ(property(deviceOf(document, kFoo0Slot), "ADDRESS"), "10.0.0.4");
    EXPECT_EQ(inventory_->liveFile(kFoo0Slot)->staleReason, "");
}

// One report that changes two containers' devices writes both files with one flush; a
// file that cannot be written keeps its content without holding back the other.
TEST_F(LiveInfoTest, OneReportRewritesEveryContainerItChanges) {
    allocateOk({kFoo0Slot});
    allocateOk({kFoo1Slot});
    fs::create_directory(allocationDir(kFoo1Slot) / ".devices.json.tmp");
    inventory_->reportSnapshot("echo", {echoDevice("foo0", "10.0.0.2"), echoDevice("foo1", "10.0.0.3")});
    json::object first = readDocument(fileOf(kFoo0Slot));
    json::object second = readDocument(fileOf(kFoo1Slot));
    EXPECT_EQ(generationOf(first), 2u);
    EXPECT_EQ(property(deviceOf(first, kFoo0Slot), "ADDRESS"), "10.0.0.2");
    EXPECT_EQ(generationOf(second), 1u);
    EXPECT_EQ(property(deviceOf(second, kFoo1Slot), "ADDRESS"), "10.0.0.1");
    EXPECT_NE(inventory_->liveFile(kFoo1Slot)->staleReason, "");
    EXPECT_FALSE(fs::exists(allocationDir(kFoo0Slot) / ".devices.json.tmp"));

    fs::remove(allocationDir(kFoo1Slot) / ".devices.json.tmp");
    inventory_->reportSnapshot("echo", {echoDevice("foo0", "10.0.0.4"), echoDevice("foo1", "10.0.0.5")});
    EXPECT_EQ(generationOf(readDocument(fileOf(kFoo0Slot))), 3u);
    second = readDocument(fileOf(kFoo1Slot));
    EXPECT_EQ(generationOf(second), 2u);
    EXPECT_EQ(property(deviceOf(second, kFoo1Slot), "ADDRESS"), "10.0.0.5");
    EXPECT_EQ(inventory_->liveFile(kFoo1Slot)->staleReason, "");
}

TEST_F(LiveInfoTest, ReaderNeverSeesPartialDocument) {
    allocateOk({kFoo0Slot, kFoo1Slot});
    constexpr int kRewrites = 200;
    std::atomic<bool> done{false};
    std::atomic<int> reads{0};
    std::atomic<int> partial{0};
    std::atomic<int> backwards{0};
    std::thread reader([&] {
        std::uint64_t last = 0;
        while (!done.load()) {
            const std::string text = test::readFile(fileOf(kFoo0Slot));
            boost::system::error_code ec;
            json::value value = json::parse(text, ec);
            const json::value* devices =
                value.is_object() ? value.get_object().if_contains("devices") : nullptr;
            if (ec || !devices || !devices->is_array() || devices->get_array().size() != 2) {
                ++partial;
                continue;
            }
            const std::uint64_t generation = generationOf(value.get_object());
            if (generation < last) ++backwards;
            last = generation;
            ++reads;
        }
    });
    for (int k = 0; k < kRewrites; ++k) {
        // A property long enough that a torn write would show.
        inventory_->reportSnapshot("echo",
                                   {echoDevice("foo0", std::string(static_cast<std::size_t>(k % 7) * 1000,
                                                                   static_cast<char>('a' + k % 26))),
                                    echoDevice("foo1")});
    }
    done = true;
    reader.join();
    EXPECT_EQ(partial.load(), 0);
    EXPECT_EQ(backwards.load(), 0);
    EXPECT_GT(reads.load(), 0);
    EXPECT_EQ(generationOf(readDocument(fileOf(kFoo0Slot))), 1u + kRewrites);
}

TEST(LiveInfoWithoutStateDirectory, AllocationHasNoMount) {
    NullObserver observer;
    Inventory inventory(kNode, kDomain, nullptr, observer);
    SlotArbiter arbiter(inventory);
    inventory.applyConfigurations({echoConfiguration()}, {{"echo", 0ms}});
    inventory.reportSnapshot("echo", {echoDevice("foo0")});
    auto result = test::allocateNow(arbiter, kCl, {kFoo0Slot});
    ASSERT_TRUE(std::holds_alternative<ContainerGrant>(result));
    EXPECT_TRUE(std::get<ContainerGrant>(result).mounts.empty());
    EXPECT_FALSE(std::get<ContainerGrant>(result).envs.count("DEVLET_INFO_FILE"));
}

}  // namespace
}  // namespace devlet
