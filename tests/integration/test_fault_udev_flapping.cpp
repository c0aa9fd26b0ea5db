// A webcam whose video node is unplugged and plugged in bursts, through the real daemon on
// a umockdev testbed, while a pod holds one of its slots and others try to take the rest.
// The holder survives every flap, a gone device is never allocated, and when the bursts end
// the kubelet sees exactly what is held. Runs under umockdev-wrapper; skips (77) without it.
// DEVLET_FAULTS=long runs hundreds of bursts.

#include <gtest/gtest.h>

#include "tests/probes/usb/umockdev_main.h"

#if DEVLET_HAVE_UMOCKDEV

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <umockdev.h>

#include "tests/integration/fault_support.h"
#include "tests/integration/fixture.h"
#include "tests/probes/usb/webcam_testbed.h"

namespace devlet::test {
namespace {

constexpr const char* kCl = "akri.sh/webcams";
constexpr const char* kVideo0 =
    "/devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.2/1-1.2:1.0/video4linux/video0";
constexpr const char* kVideo1 =
    "/devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.2/1-1.2:1.0/video4linux/video1";

// Both video nodes of the webcam, two slots each, offered Unhealthy while gone.
constexpr const char* kConfiguration = R"(apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: webcams
spec:
  discoveryHandler:
    name: udev
    discoveryDetails: |
      udevRules:
        - 'SUBSYSTEM=="video4linux"'
  capacity: 2
  devlet:
    removalGracePeriodSeconds: 3600
)";

class UdevFlappingTest : public DaemonTest {
protected:
    void SetUp() override {
        testbed_ = umockdev_testbed_new();
        ASSERT_TRUE(testbed_);
        add(webcamHostTestbed());
        add(webcamDeviceTestbed());
        DaemonTest::SetUp();
        writeFile(daemon_->confDir() / "webcams.yaml", kConfiguration);
        ASSERT_TRUE(kubelet_->start());
        daemon_->start();
    }
    void TearDown() override {
        DaemonTest::TearDown();
        if (testbed_) g_object_unref(testbed_);
    }
    void add(const std::string& description) {
        GError* error = nullptr;
        ASSERT_TRUE(umockdev_testbed_add_from_string(testbed_, description.c_str(), &error))
            << (error ? error->message : "unknown error");
    }
    void remove(const std::string& devpath) {
        umockdev_testbed_uevent(testbed_, ("/sys" + devpath).c_str(), "remove");
        umockdev_testbed_remove_device(testbed_, ("/sys" + devpath).c_str());
    }
    // The video0 node alone, to plug it again and again.
    static std::string video0() {
        const std::string device = webcamDeviceTestbed();
        return device.substr(device.find(std::string("P: ") + kVideo0 + "\n"));
    }
    std::vector<std::string> instanceResources() const {
        std::vector<std::string> found;
        for (const std::string& resource : kubelet_->resources()) {
            if (resource.starts_with(std::string(kCl) + "-")) found.push_back(resource);
        }
        return found;
    }
    static std::string slot(const std::string& resource, int index) {
        return resource.substr(resource.find('/') + 1) + "-" + std::to_string(index);
    }
    bool slotHealth(const std::string& resource, const std::string& id, const std::string& health) {
        return kubelet_->waitFor(
            [&] {
                auto devices = kubelet_->devices(resource);
                auto it = devices.find(id);
                return it != devices.end() && it->second.health == health;
            },
            20s);
    }

    UMockdevTestbed* testbed_ = nullptr;
};

TEST_F(UdevFlappingTest, HeldWebcamFlappingInBurstsKeepsItsHolderAndIsNeverGivenWhileGone) {
    const int bursts = faultRounds(30, 500);
    const std::uint32_t seed = faultSeed();
    std::mt19937 random(seed);
    // video0 is found first; video1 is added next and serves as the marker.
    std::vector<std::string> instances;
    ASSERT_TRUE(kubelet_->waitFor([&] { return (instances = instanceResources()).size() == 1; }, 20s))
        << daemon_->log();
    const std::string camera = instances.front();
    add(kWebcamVideo1Testbed);
    ASSERT_TRUE(kubelet_->waitFor([&] { return (instances = instanceResources()).size() == 2; }, 20s));
    const std::string marker = instances.front() == camera ? instances.back() : instances.front();
    const std::vector<std::string> resources = {kCl, camera, marker};
    ASSERT_TRUE(kubelet_->waitFor([&] { return allRegistered(*kubelet_, resources); }, 20s));

    auto held = kubelet_->allocateIds("default", "holder", "main", camera, {slot(camera, 0)});
    ASSERT_TRUE(held.ok) << held.error;
    ASSERT_EQ(waitForAgreement(*kubelet_, resources, Agreement::Exact, 20s), std::vector<std::string>{});

    // umockdev queues at most net.unix.max_dgram_qlen (10) uevents ahead of the daemon:
    // each burst is at most 8 events on video0, then a plug or unplug of the marker whose
    // state at the kubelet shows the daemon has seen them all.
    const std::string node = video0();
    bool markerPlugged = true;
    int refusedWhileGone = 0;
    for (int burst = 0; burst < bursts; ++burst) {
        SCOPED_TRACE("burst " + std::to_string(burst) + ", seed " + std::to_string(seed));
        const int events = std::uniform_int_distribution<int>(1, 8)(random);
        for (int i = 0; i < events; ++i) {
            if (i % 2 == 0) {
                remove(kVideo0);
            } else {
                add(node);
            }
        }
        const bool cameraPlugged = events % 2 == 0;
        if (markerPlugged) {
            remove(kVideo1);
        } else {
            add(kWebcamVideo1Testbed);
        }
        markerPlugged = !markerPlugged;
        ASSERT_TRUE(slotHealth(marker, slot(marker, 0), markerPlugged ? "Healthy" : "Unhealthy"))
            << daemon_->log();

        if (cameraPlugged) {
            // Back: still held by the same pod, through the same resource.
            const std::set<std::string> markerGone =
                markerPlugged ? std::set<std::string>{}
                              : std::set<std::string>{slot(marker, 0), slot(marker, 1)};
            ASSERT_EQ(waitForAgreement(*kubelet_, {kCl, camera}, Agreement::Exact, 20s, markerGone),
                      std::vector<std::string>{})
                << daemon_->log();
        } else {
            // Gone: its free slot is refused, even asked for directly.
            auto gone = kubelet_->allocateIds("default", "pod-" + std::to_string(burst), "main", kCl,
                                              {slot(camera, 1)});
            ASSERT_FALSE(gone.ok) << "a gone device was allocated";
            ++refusedWhileGone;
            add(node);  // and back, for the next burst
            ASSERT_TRUE(slotHealth(camera, slot(camera, 1), "Healthy")) << daemon_->log();
        }
        ASSERT_EQ(givenTwice(*kubelet_), std::vector<std::string>{});
    }
    if (!markerPlugged) add(kWebcamVideo1Testbed);
    ASSERT_TRUE(kubelet_->waitFor([&] { return allRegistered(*kubelet_, resources); }, 20s));
    EXPECT_EQ(waitForAgreement(*kubelet_, resources, Agreement::Exact, 30s), std::vector<std::string>{});
    EXPECT_EQ(kubelet_->registrations(camera), 1) << "offered all along, never registered again";
    kubelet_->removePod("default", "holder");
    EXPECT_EQ(waitForAgreement(*kubelet_, resources, Agreement::Exact, 30s), std::vector<std::string>{});
    std::printf("%d bursts; a gone webcam refused %d time(s)\n", bursts, refusedWhileGone);
}

}  // namespace
}  // namespace devlet::test

#endif

int main(int argc, char** argv) {
    return devlet::test::runUnderUmockdev(argc, argv);
}
