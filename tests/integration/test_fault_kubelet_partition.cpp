// A kubelet that restarts while the node cannot reach its API server: its pod manager is
// empty until the API answers, so PodResources lists no pod while the containers keep
// running with their devices. The kubelet's device checkpoint still lists them; devlet
// must release nothing until the kubelet knows its pods again (docs/guarantees.md).

#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "tests/integration/fixture.h"

namespace devlet::test {
namespace {

constexpr const char* kCl = "akri.sh/cams";
constexpr const char* kFoo0 = "akri.sh/cams-8120fe";
constexpr const char* kFoo1 = "akri.sh/cams-a19705";

// Every slot the kubelet saw Healthy in a resource other than the one its pod holds it
// through, from any ListAndWatch message: one is a slot offered twice.
class DoubleOfferWatch {
public:
    // Slots and the resource that holds each: (resource, slot) listed Healthy elsewhere counts.
    void hold(const std::string& slot, const std::string& holder) {
        std::lock_guard lock(mutex_);
        holders_[slot] = holder;
    }
    void release(const std::string& slot) {
        std::lock_guard lock(mutex_);
        holders_.erase(slot);
    }
    void observe(const std::string& resource, const v1beta1::ListAndWatchResponse& response) {
        std::lock_guard lock(mutex_);
        for (const auto& device : response.devices()) {
            auto holder = holders_.find(device.id());
            if (holder != holders_.end() && holder->second != resource && device.health() == "Healthy")
                offeredTwice_.insert(device.id() + " in " + resource);
        }
    }
    std::set<std::string> offeredTwice() const {
        std::lock_guard lock(mutex_);
        return offeredTwice_;
    }

private:
    mutable std::mutex mutex_;
    std::map<std::string, std::string> holders_;
    std::set<std::string> offeredTwice_;
};

class KubeletPartitionTest : public DaemonTest {
protected:
    void SetUp() override {
        DaemonTest::SetUp();
        writeFile(daemon_->confDir() / "cams.yaml", echoConfiguration("cams", 2));
        // Shared with the simulator's gRPC threads; the simulator goes first in TearDown.
        watch_ = std::make_shared<DoubleOfferWatch>();
        kubelet_->onListAndWatch(
            [watch = watch_](const std::string& resource, const v1beta1::ListAndWatchResponse& response) {
                watch->observe(resource, response);
            });
    }
    void TearDown() override {
        kubelet_.reset();
        DaemonTest::TearDown();
    }

    bool allRegisteredAgain(int times) {
        return camsOffered() && kubelet_->registrations(kCl) == times &&
               kubelet_->registrations(kFoo0) == times && kubelet_->registrations(kFoo1) == times;
    }
    // One pod through each resource: cams-8120fe-0 through the configuration's resource,
    // cams-a19705-0 through its own device's, both recorded by PodResources.
    void holdThroughBothResources() {
        auto viaCl = kubelet_->allocateIds("default", "pod-a", "main", kCl, {"cams-8120fe-0"});
        ASSERT_TRUE(viaCl.ok) << viaCl.error;
        watch_->hold("cams-8120fe-0", kCl);
        auto viaIl = kubelet_->allocateIds("default", "pod-b", "main", kFoo1, {"cams-a19705-0"});
        ASSERT_TRUE(viaIl.ok) << viaIl.error;
        watch_->hold("cams-a19705-0", kFoo1);
        ASSERT_TRUE(daemon_->waitForLog("slot cams-8120fe-0 is used by pod default/pod-a", 10s));
        ASSERT_TRUE(daemon_->waitForLog("slot cams-a19705-0 is used by pod default/pod-b", 10s));
    }
    // Neither held slot can be had through the other resource; both lists say so.
    void expectBothStillHeld() {
        EXPECT_EQ(health(kFoo0).at("cams-8120fe-0"), "Unhealthy");
        EXPECT_EQ(health(kCl).at("cams-a19705-0"), "Unhealthy");
        EXPECT_FALSE(kubelet_->allocateIds("default", "pod-c", "main", kFoo0, {"cams-8120fe-0"}).ok);
        EXPECT_FALSE(kubelet_->allocateIds("default", "pod-d", "main", kCl, {"cams-a19705-0"}).ok);
    }
    // Waits out many release grace periods (0.5 s) and PodResources polls (0.2 s) with
    // the partition in force. Not a timing assertion: a wait long enough for a wrong
    // release to happen, checked afterwards.
    void letEveryGracePass() { std::this_thread::sleep_for(3s); }

    std::shared_ptr<DoubleOfferWatch> watch_;
};

TEST_F(KubeletPartitionTest, PartitionedKubeletRestartReleasesNothingAndLosesNothing) {
    ASSERT_TRUE(kubelet_->start());
    daemon_->start();
    ASSERT_TRUE(kubelet_->waitFor([&] { return camsOffered(); }, 10s));
    holdThroughBothResources();

    ASSERT_TRUE(kubelet_->restart(std::chrono::hours(1)));  // the API server is out of reach
    ASSERT_TRUE(kubelet_->waitFor([&] { return allRegisteredAgain(2); }, 10s));
    letEveryGracePass();
    EXPECT_FALSE(daemon_->log().find("released") != std::string::npos) << "a slot was released";
    expectBothStillHeld();

    kubelet_->learnPods();  // the API server answers: the pods are back
    std::this_thread::sleep_for(1s);
    expectBothStillHeld();
    EXPECT_EQ(watch_->offeredTwice(), std::set<std::string>{});
    EXPECT_EQ(daemon_->log().find("released"), std::string::npos);

    // A pod that really ended is released: once PodResources no longer lists it and the
    // kubelet's checkpoint has caught up.
    kubelet_->removePod("default", "pod-a");
    watch_->release("cams-8120fe-0");
    EXPECT_TRUE(waitForHealth(kFoo0, "cams-8120fe-0", "Healthy"));
    EXPECT_EQ(health(kCl).at("cams-a19705-0"), "Unhealthy");
}

TEST_F(KubeletPartitionTest, WithoutACheckpointAnEmptyPodListReleasesNothing) {
    kubelet_->setWritesCheckpoint(false);
    ASSERT_TRUE(kubelet_->start());
    daemon_->start();
    ASSERT_TRUE(kubelet_->waitFor([&] { return camsOffered(); }, 10s));
    holdThroughBothResources();

    ASSERT_TRUE(kubelet_->restart(std::chrono::hours(1)));
    ASSERT_TRUE(kubelet_->waitFor([&] { return allRegisteredAgain(2); }, 10s));
    letEveryGracePass();
    expectBothStillHeld();
    kubelet_->learnPods();
    std::this_thread::sleep_for(1s);
    expectBothStillHeld();
    EXPECT_EQ(watch_->offeredTwice(), std::set<std::string>{});
    EXPECT_EQ(daemon_->log().find("released"), std::string::npos);
}

TEST_F(KubeletPartitionTest, HoldsTheCheckpointListsAreAdoptedBeforeAnyPluginRegisters) {
    ASSERT_TRUE(kubelet_->start());
    daemon_->start();
    ASSERT_TRUE(kubelet_->waitFor([&] { return camsOffered(); }, 10s));
    holdThroughBothResources();

    // devlet loses its state (moved away by hand) and the kubelet restarts partitioned:
    // only the kubelet's checkpoint knows who holds what.
    daemon_->stop();
    std::filesystem::remove_all(daemon_->stateDir());
    std::filesystem::create_directories(daemon_->stateDir());
    ASSERT_TRUE(kubelet_->restart(std::chrono::hours(1)));
    daemon_->start();
    ASSERT_TRUE(kubelet_->waitFor([&] { return allRegisteredAgain(2); }, 10s));
    ASSERT_TRUE(daemon_->waitForLog(
        "according to the kubelet's device checkpoint but was not recorded; adopted", 10s));
    letEveryGracePass();
    expectBothStillHeld();
    EXPECT_EQ(watch_->offeredTwice(), std::set<std::string>{}) << "a first list offered a held slot";
}

TEST_F(KubeletPartitionTest, CheckpointThatDisagreesWithDevletIsAConflictEvent) {
    kubelet_->setWritesCheckpoint(false);
    ASSERT_TRUE(kubelet_->start());
    daemon_->start();
    ASSERT_TRUE(kubelet_->waitFor([&] { return camsOffered(); }, 10s));
    auto viaCl = kubelet_->allocateIds("default", "pod-a", "main", kCl, {"cams-8120fe-1"});
    ASSERT_TRUE(viaCl.ok) << viaCl.error;
    // A checkpoint that says the device's own resource holds it.
    writeFile(
        kubelet_->checkpointFile(),
        R"({"Data":{"PodDeviceEntries":[{"PodUID":"0b1c2d3e-0000-4000-8000-000000000001",)"
        R"("ContainerName":"main","ResourceName":"akri.sh/cams-8120fe",)"
        R"("DeviceIDs":{"-1":["cams-8120fe-1"]},"AllocResp":""}],"RegisteredDevices":{}},"Checksum":1})");
    EXPECT_TRUE(
        daemon_->waitForLog("slot cams-8120fe-1 is held by pod uid 0b1c2d3e-0000-4000-8000-000000000001 "
                            "through akri.sh/cams-8120fe according to the kubelet's device checkpoint, "
                            "but devlet records it held through akri.sh/cams",
                            10s));
    const std::string log = daemon_->log();
    EXPECT_EQ(log.find("but devlet records it held"), log.rfind("but devlet records it held"))
        << "said once, not on every poll";
    EXPECT_EQ(health(kFoo0).at("cams-8120fe-1"), "Unhealthy");
}

TEST_F(KubeletPartitionTest, UnreadableCheckpointReleasesNothing) {
    kubelet_->setWritesCheckpoint(false);
    ASSERT_TRUE(kubelet_->start());
    daemon_->start();
    ASSERT_TRUE(kubelet_->waitFor([&] { return camsOffered(); }, 10s));
    holdThroughBothResources();
    writeFile(kubelet_->checkpointFile(), R"({"Data":{"PodDeviceEntries":[{"ResourceName":)");  // cut short
    ASSERT_TRUE(daemon_->waitForLog("the kubelet's device checkpoint cannot be read", 10s));
    kubelet_->removePod("default", "pod-a");
    letEveryGracePass();
    expectBothStillHeld();

    std::filesystem::remove(kubelet_->checkpointFile());  // no checkpoint: PodResources decides
    EXPECT_TRUE(daemon_->waitForLog("the kubelet's device checkpoint can be read again", 10s));
    EXPECT_TRUE(waitForHealth(kFoo0, "cams-8120fe-0", "Healthy"));
}

}  // namespace
}  // namespace devlet::test
