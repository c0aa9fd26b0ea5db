// Slot semantics through the real gRPC API: the kubelet simulator allocates from
// the instance- and configuration-level resources of a running devlet.

#include <set>
#include <thread>

#include "tests/integration/fixture.h"

namespace devlet::test {
namespace {

constexpr const char* kCl = "akri.sh/cams";
constexpr const char* kFoo0 = "akri.sh/cams-8120fe";
constexpr const char* kFoo1 = "akri.sh/cams-a19705";

class KubeletPluginsTest : public DaemonTest {
protected:
    void SetUp() override {
        DaemonTest::SetUp();
        writeFile(daemon_->confDir() / "cams.yaml", echoConfiguration("cams", 2));
        ASSERT_TRUE(kubelet_->start());
        daemon_->start();
        ASSERT_TRUE(waitForDevices(kCl, 4));
        ASSERT_TRUE(waitForDevices(kFoo0, 2));
        ASSERT_TRUE(waitForDevices(kFoo1, 2));
    }
    static std::string instanceOf(const std::string& slot) { return slot.substr(0, slot.rfind('-')); }
};

TEST_F(KubeletPluginsTest, ConfigurationResourceOffersEverySlotOfEveryInstance) {
    const auto cl = health(kCl);
    EXPECT_EQ(cl.size(), 4u);
    for (const auto& id : {"cams-8120fe-0", "cams-8120fe-1", "cams-a19705-0", "cams-a19705-1"}) {
        EXPECT_EQ(cl.at(id), "Healthy") << id;
    }
    EXPECT_TRUE(kubelet_->options(kCl).get_preferred_allocation_available());
}

TEST_F(KubeletPluginsTest, ThreePodsEachGetOneUnitFirstTwoOnDifferentInstances) {
    std::vector<std::string> slots;
    for (const auto& pod : {"pod-a", "pod-b", "pod-c"}) {
        auto result = kubelet_->allocate("default", pod, "main", kCl, 1);
        ASSERT_TRUE(result.ok) << pod << ": " << result.error;
        ASSERT_EQ(result.deviceIds.size(), 1u);
        slots.push_back(result.deviceIds[0]);
        // The unit becomes Unhealthy in its instance's own resource.
        const std::string il = std::string("akri.sh/") + instanceOf(slots.back());
        EXPECT_TRUE(waitForHealth(il, slots.back(), "Unhealthy")) << slots.back();
    }
    EXPECT_NE(instanceOf(slots[0]), instanceOf(slots[1]));
    EXPECT_EQ(std::set<std::string>(slots.begin(), slots.end()).size(), 3u);
}

TEST_F(KubeletPluginsTest, AllocateReturnsPropertiesBothWaysAndInstanceList) {
    auto result = kubelet_->allocate("default", "pod-a", "main", kFoo0, 1);
    ASSERT_TRUE(result.ok) << result.error;
    const auto& envs = result.response.envs();
    EXPECT_EQ(envs.at("DEBUG_ECHO_DESCRIPTION"), "foo0");
    EXPECT_EQ(envs.at("DEBUG_ECHO_DESCRIPTION_8120FE"), "foo0");
    EXPECT_EQ(envs.at("DEVLET_INSTANCES"), "cams-8120fe");
}

TEST_F(KubeletPluginsTest, CrossResourceAllocationRefusedWithClearMessage) {
    auto viaCl = kubelet_->allocateIds("default", "pod-a", "main", kCl, {"cams-8120fe-0"});
    ASSERT_TRUE(viaCl.ok) << viaCl.error;
    auto viaIl = kubelet_->allocateIds("default", "pod-b", "main", kFoo0, {"cams-8120fe-0"});
    EXPECT_FALSE(viaIl.ok);
    EXPECT_NE(viaIl.error.find("already held through akri.sh/cams"), std::string::npos) << viaIl.error;
}

TEST_F(KubeletPluginsTest, SameResourceReofferAccepted) {
    auto first = kubelet_->allocateIds("default", "pod-a", "main", kFoo0, {"cams-8120fe-1"});
    ASSERT_TRUE(first.ok) << first.error;
    // A container restart or a re-admission: the kubelet offers the same slot again.
    auto again = kubelet_->allocateIds("default", "pod-a", "main", kFoo0, {"cams-8120fe-1"});
    EXPECT_TRUE(again.ok) << again.error;
}

TEST_F(KubeletPluginsTest, InitAndMainContainerShareOneConfigurationUnit) {
    auto init = kubelet_->allocate("default", "pod-a", "init", kCl, 1);
    ASSERT_TRUE(init.ok) << init.error;
    // The kubelet hands the init container's devices to the main container (Akri #843).
    auto main = kubelet_->allocate("default", "pod-a", "main", kCl, 1, init.deviceIds);
    ASSERT_TRUE(main.ok) << main.error;
    EXPECT_EQ(main.deviceIds, init.deviceIds);
}

TEST_F(KubeletPluginsTest, SlotComesBackAfterItsPodDisappears) {
    auto result = kubelet_->allocate("default", "pod-a", "main", kCl, 1);
    ASSERT_TRUE(result.ok) << result.error;
    const std::string slot = result.deviceIds[0];
    const std::string il = std::string("akri.sh/") + instanceOf(slot);
    ASSERT_TRUE(waitForHealth(il, slot, "Unhealthy"));
    ASSERT_TRUE(daemon_->waitForLog("slot " + slot + " is used by pod default/pod-a", 10s));
    kubelet_->removePod("default", "pod-a");
    EXPECT_TRUE(waitForHealth(il, slot, "Healthy"));
    EXPECT_TRUE(daemon_->waitForLog("released (default/pod-a)", 5s));
}

TEST_F(KubeletPluginsTest, HeldSlotStaysHeldWhilePodResourcesFails) {
    auto result = kubelet_->allocateIds("default", "pod-a", "main", kFoo0, {"cams-8120fe-0"});
    ASSERT_TRUE(result.ok) << result.error;
    ASSERT_TRUE(waitForHealth(kCl, "cams-8120fe-0", "Unhealthy"));
    kubelet_->setPodResourcesAvailable(false);
    kubelet_->removePod("default", "pod-a");
    // Several reconcile periods pass; an unanswered List never frees a slot.
    ASSERT_TRUE(daemon_->waitForLog("PodResources List", 5s));
    std::this_thread::sleep_for(1s);  // twice the release grace
    auto viaCl = kubelet_->allocateIds("default", "pod-b", "main", kCl, {"cams-8120fe-0"});
    EXPECT_FALSE(viaCl.ok);
}

}  // namespace
}  // namespace devlet::test
