// Configurations change under a running devlet: edits, broken files, removals.

#include <filesystem>
#include <fstream>

#include <signal.h>

#include "tests/integration/fixture.h"

namespace devlet::test {
namespace {

constexpr const char* kCl = "akri.sh/cams";
constexpr const char* kFoo0 = "akri.sh/cams-8120fe";

class ConfigurationReloadTest : public DaemonTest {
protected:
    void SetUp() override {
        DaemonTest::SetUp();
        writeFile(daemon_->confDir() / "cams.yaml", echoConfiguration("cams", 2));
        ASSERT_TRUE(kubelet_->start());
        daemon_->start();
        ASSERT_TRUE(waitForDevices(kCl, 4));
    }
};

TEST_F(ConfigurationReloadTest, CapacityEditTakesEffectWithoutRestart) {
    writeFile(daemon_->confDir() / "cams.yaml", echoConfiguration("cams", 3));
    EXPECT_TRUE(waitForDevices(kCl, 6));
    EXPECT_TRUE(waitForDevices(kFoo0, 3));
}

TEST_F(ConfigurationReloadTest, BrokenFileIsReportedAndLastGoodKeepsRunning) {
    writeFile(daemon_->confDir() / "cams.yaml", echoConfiguration("cams", 2) + "  capasity: 3\n");
    EXPECT_TRUE(daemon_->waitForLog("cams.yaml:", 10s));
    EXPECT_TRUE(daemon_->waitForLog("last good version keeps running", 10s));
    EXPECT_EQ(health(kCl).size(), 4u);
    EXPECT_FALSE(kubelet_->endpoint(kCl).empty());
}

TEST_F(ConfigurationReloadTest, HostileFilesAreRejectedWithoutHarm) {
    const std::map<std::string, std::string> files = {
        {"bad-yaml.yaml", "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: x\n"},
        {"zero.yaml", echoConfiguration("zero", 0)},
        {"negative.yaml", echoConfiguration("negative", -1)},
        {"bad-name.yaml", echoConfiguration("Not_A_Valid/Name", 1)},
        {"duplicate.yaml", echoConfiguration("cams", 1)},
    };
    for (const auto& [name, text] : files) writeFile(daemon_->confDir() / name, text);
    for (const auto& [name, text] : files) EXPECT_TRUE(daemon_->waitForLog(name + ":", 10s)) << name;
    EXPECT_TRUE(daemon_->waitForLog("is already defined at", 10s));
    EXPECT_EQ(health(kCl).size(), 4u);
    EXPECT_EQ(kubelet_->devices("akri.sh/zero").size(), 0u);
    EXPECT_EQ(kubelet_->devices("akri.sh/negative").size(), 0u);
}

TEST_F(ConfigurationReloadTest, NewcomerClaimingARunningResourceIsTheOneRefused) {
    // "a-other.yaml" sorts before "cams.yaml": file order must not unseat what runs.
    writeFile(daemon_->confDir() / "a-other.yaml",
              echoConfiguration("other", 1, "", "  devlet:\n    configurationResource: akri.sh/cams\n"));
    EXPECT_TRUE(daemon_->waitForLog(
        "configuration \"other\" cannot be offered: resource \"akri.sh/cams\" is already offered by "
        "configuration \"cams\"",
        10s));
    EXPECT_EQ(health(kCl).size(), 4u);
    EXPECT_TRUE(health(kCl).count("cams-8120fe-1"));
}

TEST_F(ConfigurationReloadTest, RemovingTheFileWithdrawsItsDevices) {
    std::filesystem::remove(daemon_->confDir() / "cams.yaml");
    EXPECT_TRUE(kubelet_->waitFor(
        [&] { return kubelet_->endpoint(kCl).empty() && kubelet_->endpoint(kFoo0).empty(); }, 10s));
    EXPECT_TRUE(daemon_->waitForLog("configuration cams removed", 10s));
}

TEST_F(ConfigurationReloadTest, FileRemovedAndRestoredNeverGivesAHeldSlotTwice) {
    auto held = kubelet_->allocate("default", "pod-a", "main", kCl, 1);
    ASSERT_TRUE(held.ok) << held.error;
    const std::string slot = held.deviceIds.at(0);
    const std::string instanceResource = "akri.sh/" + slot.substr(0, slot.rfind('-'));
    const std::string text = readFile(daemon_->confDir() / "cams.yaml");

    std::filesystem::remove(daemon_->confDir() / "cams.yaml");
    ASSERT_TRUE(daemon_->waitForLog("held slot(s) stay held until their pods are gone", 10s));
    ASSERT_TRUE(kubelet_->waitFor([&] { return kubelet_->endpoint(instanceResource).empty(); }, 10s));
    writeFile(daemon_->confDir() / "cams.yaml", text);
    ASSERT_TRUE(kubelet_->waitFor([&] { return kubelet_->registrations(instanceResource) == 2; }, 10s));
    ASSERT_TRUE(waitForHealth(instanceResource, slot, "Unhealthy"));

    auto twice = kubelet_->allocateIds("default", "pod-b", "main", instanceResource, {slot});
    EXPECT_FALSE(twice.ok);
    EXPECT_NE(twice.error.find(kCl), std::string::npos) << twice.error;
}

TEST_F(ConfigurationReloadTest, SighupReloads) {
    // Written in place (no rename event is needed for SIGHUP to see it).
    {
        std::ofstream out(daemon_->confDir() / "more.yaml");
        out << echoConfiguration("more", 1);
    }
    ::kill(daemon_->pid(), SIGHUP);
    EXPECT_TRUE(waitForDevices("akri.sh/more", 2));
}

}  // namespace
}  // namespace devlet::test
