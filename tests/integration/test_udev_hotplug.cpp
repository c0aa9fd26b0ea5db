// The udev handler end to end: the real daemon, forked after a umockdev testbed exists,
// reads the testbed's sysfs and udev database and its netlink uevents, and offers a
// Logitech C920 webcam, or an FTDI USB-serial adapter, to the kubelet simulator over the
// real device-plugin API. The tests plug, unplug, replug, re-enumerate, unbind and bind
// the devices through the testbed API. Runs under umockdev-wrapper; skips (77) where
// umockdev is not available.

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

#include "tests/probes/usb/umockdev_main.h"

#if DEVLET_HAVE_UMOCKDEV

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <umockdev.h>

#include "tests/integration/fixture.h"
#include "tests/probes/usb/serial_adapter_testbed.h"
#include "tests/probes/usb/webcam_testbed.h"
#include "tests/status/status_test_support.h"

namespace devlet::test {
namespace {

constexpr const char* kResource = "akri.sh/webcams";
constexpr const char* kVideo0 =
    "/devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.2/1-1.2:1.0/video4linux/video0";
constexpr const char* kVideo1 =
    "/devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.2/1-1.2:1.0/video4linux/video1";
constexpr const char* kInterface = "/devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.2/1-1.2:1.0";

// The video node alone, for unplugging and plugging it again and again.
std::string video0Testbed() {
    const std::string device = webcamDeviceTestbed();
    return device.substr(device.find(std::string("P: ") + kVideo0 + "\n"));
}

std::string udevConfiguration(const std::string& rule, const std::string& extraDetails = "",
                              const std::string& devlet = "", const std::string& name = "webcams") {
    return "apiVersion: akri.sh/v0\n"
           "kind: Configuration\n"
           "metadata:\n"
           "  name: " +
           name +
           "\n"
           "spec:\n"
           "  discoveryHandler:\n"
           "    name: udev\n"
           "    discoveryDetails: |\n"
           "      udevRules:\n"
           "        - '" +
           rule + "'\n" + extraDetails + "  capacity: 1\n" + (devlet.empty() ? "" : "  devlet:\n" + devlet);
}

// One health per ListAndWatch message of a resource, in arrival order.
class HealthLog {
public:
    void observe(const std::string& resource, const v1beta1::ListAndWatchResponse& response) {
        std::string healths;
        for (const auto& device : response.devices())
            healths += (healths.empty() ? "" : ",") + device.health();
        std::lock_guard lock(mutex_);
        messages_[resource].push_back(healths.empty() ? "none" : healths);
    }
    std::vector<std::string> messages(const std::string& resource) const {
        std::lock_guard lock(mutex_);
        auto it = messages_.find(resource);
        return it == messages_.end() ? std::vector<std::string>{} : it->second;
    }

private:
    mutable std::mutex mutex_;
    std::map<std::string, std::vector<std::string>> messages_;
};

// The daemon with one udev configuration (`name`, resource akri.sh/<name>) on a testbed
// that starts with `host` (a controller and its hubs).
class UdevTestbedDaemonTest : public DaemonTest {
protected:
    UdevTestbedDaemonTest(std::string host, std::string name)
        : host_(std::move(host)), name_(std::move(name)), resource_("akri.sh/" + name_) {}

    void SetUp() override {
        testbed_ = umockdev_testbed_new();
        ASSERT_TRUE(testbed_);
        // The testbed is in UMOCKDEV_DIR now; the daemon forked later inherits it.
        ASSERT_NE(std::getenv("UMOCKDEV_DIR"), nullptr);
        add(host_);
        DaemonTest::SetUp();
        kubelet_->onListAndWatch(
            [log = log_](const std::string& resource, const v1beta1::ListAndWatchResponse& response) {
                log->observe(resource, response);
            });
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
    // Unplugged: a remove uevent, then the device and everything below it leave sysfs,
    // deepest first (umockdev drops a device's /sys/bus link only for the device it removes).
    void remove(const std::string& devpath) {
        uevent(devpath, "remove");
        std::vector<std::string> devices = {devpath};
        const std::filesystem::path top = sysfs(devpath);
        for (auto it = std::filesystem::recursive_directory_iterator(top); it != decltype(it)(); ++it) {
            if (it->is_symlink()) {
                it.disable_recursion_pending();
            } else if (it->is_directory() && std::filesystem::is_symlink(it->path() / "subsystem")) {
                devices.push_back(devpath + "/" + std::filesystem::relative(it->path(), top).string());
            }
        }
        std::sort(devices.begin(), devices.end(),
                  [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
        for (const std::string& device : devices) {
            umockdev_testbed_remove_device(testbed_, ("/sys" + device).c_str());
        }
    }
    void uevent(const std::string& devpath, const char* action) {
        umockdev_testbed_uevent(testbed_, ("/sys" + devpath).c_str(), action);
    }
    std::filesystem::path sysfs(const std::string& devpath) const {
        return testbedSysDir(testbed_) + devpath;
    }

    void start(const std::string& configuration) {
        writeFile(daemon_->confDir() / (name_ + ".yaml"), configuration);
        ASSERT_TRUE(kubelet_->start());
        daemon_->start();
        ASSERT_TRUE(daemon_->waitForLog("udev device", 20s)) << daemon_->log();
    }

    // The instance-level resource of the one webcam instance, once it is registered.
    std::string instanceResource() {
        std::string found;
        kubelet_->waitFor(
            [&] {
                for (const std::string& resource : kubelet_->resources()) {
                    if (resource.starts_with(resource_ + "-")) found = resource;
                }
                return !found.empty();
            },
            20s);
        return found;
    }
    static std::string slotOf(const std::string& resource) {
        return resource.substr(resource.find('/') + 1) + "-0";
    }
    std::vector<std::string> instanceResources() const {
        std::vector<std::string> found;
        for (const std::string& resource : kubelet_->resources()) {
            if (resource.starts_with(resource_ + "-")) found.push_back(resource);
        }
        return found;
    }
    bool waitForWithdrawn(const std::string& instance, std::chrono::milliseconds timeout = 30s) {
        return kubelet_->waitFor(
            [&] { return kubelet_->endpoint(instance).empty() && kubelet_->devices(resource_).empty(); },
            timeout);
    }

    std::string host_;
    std::string name_;
    std::string resource_;
    UMockdevTestbed* testbed_ = nullptr;
    std::shared_ptr<HealthLog> log_ = std::make_shared<HealthLog>();
};

class UdevHotplugTest : public UdevTestbedDaemonTest {
protected:
    UdevHotplugTest() : UdevTestbedDaemonTest(webcamHostTestbed(), "webcams") {}
};

TEST_F(UdevHotplugTest, PluggedWebcamIsOfferedWithItsNodeAndProperties) {
    start(udevConfiguration(R"(SUBSYSTEM=="video4linux", ENV{ID_V4L_CAPABILITIES}==":capture:")"));
    ASSERT_TRUE(kubelet_->waitFor([&] { return kubelet_->endpoint(kResource) != ""; }, 20s));
    EXPECT_TRUE(kubelet_->devices(kResource).empty());
    // The hubs and the controller are there, and no rule matches them: counted, not listed.
    const unsigned short port = statusPortFromLog(daemon_->log());
    ASSERT_NE(port, 0) << daemon_->log();
    const std::string probes = httpGet(port, "/api/v1/probes").body;
    EXPECT_NE(probes.find("devices are not offered: no rule in udevRules matches them"), std::string::npos)
        << probes;
    EXPECT_NE(probes.find("\"lastScan\":\"20"), std::string::npos) << probes;

    add(webcamDeviceTestbed());
    const std::string instance = instanceResource();
    ASSERT_FALSE(instance.empty()) << daemon_->log();
    ASSERT_TRUE(waitForHealth(instance, slotOf(instance), "Healthy"));
    ASSERT_TRUE(waitForHealth(kResource, slotOf(instance), "Healthy"));

    auto result = kubelet_->allocate("default", "pod-a", "main", instance, 1);
    ASSERT_TRUE(result.ok) << result.error;
    ASSERT_EQ(result.response.devices_size(), 1);
    EXPECT_EQ(result.response.devices(0).host_path(), "/dev/video0");
    EXPECT_EQ(result.response.devices(0).container_path(), "/dev/video0");
    EXPECT_EQ(result.response.devices(0).permissions(), "rwm");
    const auto& envs = result.response.envs();
    EXPECT_EQ(envs.at("UDEV_DEVNODE"), "/dev/video0");
    EXPECT_EQ(envs.at("UDEV_DEVPATH"), kVideo0);
    EXPECT_EQ(envs.at("USB_VENDOR_ID"), "046d");
    EXPECT_EQ(envs.at("USB_SERIAL"), "73BD39DF");
}

TEST_F(UdevHotplugTest, UnplugIsUnhealthyAtOnceThenWithdrawnAfterTheDefaultGrace) {
    add(webcamDeviceTestbed());
    start(udevConfiguration(R"(SUBSYSTEM=="video4linux")"));
    const std::string instance = instanceResource();
    ASSERT_FALSE(instance.empty()) << daemon_->log();
    ASSERT_TRUE(waitForHealth(instance, slotOf(instance), "Healthy"));

    remove(webcamUsbDevpath());
    ASSERT_TRUE(waitForWithdrawn(instance)) << daemon_->log();
    EXPECT_TRUE(daemon_->waitForLog("withdrawn: gone longer than its grace period", 10s));
    // The slot went Unhealthy in a message of its own before the plugin was withdrawn.
    const std::vector<std::string> messages = log_->messages(instance);
    ASSERT_GE(messages.size(), 2u);
    EXPECT_EQ(messages.front(), "Healthy");
    EXPECT_EQ(messages.back(), "Unhealthy");
    const std::vector<std::string> configurationLevel = log_->messages(kResource);
    ASSERT_FALSE(configurationLevel.empty());
    EXPECT_EQ(configurationLevel.back(), "none");
    EXPECT_NE(std::find(configurationLevel.begin(), configurationLevel.end(), "Unhealthy"),
              configurationLevel.end());
}

TEST_F(UdevHotplugTest, ReplugWithinTheGraceRestoresTheSameInstance) {
    add(webcamDeviceTestbed());
    start(udevConfiguration(R"(SUBSYSTEM=="video4linux")", "", "    removalGracePeriodSeconds: 3600\n"));
    const std::string instance = instanceResource();
    ASSERT_FALSE(instance.empty()) << daemon_->log();
    ASSERT_TRUE(waitForHealth(instance, slotOf(instance), "Healthy"));

    remove(webcamUsbDevpath());
    ASSERT_TRUE(waitForHealth(instance, slotOf(instance), "Unhealthy"));
    ASSERT_TRUE(waitForHealth(kResource, slotOf(instance), "Unhealthy"));

    add(webcamDeviceTestbed());
    ASSERT_TRUE(waitForHealth(instance, slotOf(instance), "Healthy"));
    ASSERT_TRUE(waitForHealth(kResource, slotOf(instance), "Healthy"));
    EXPECT_EQ(kubelet_->registrations(instance), 1);
    EXPECT_EQ(instanceResources(), std::vector<std::string>{instance});
    auto result = kubelet_->allocate("default", "pod-a", "main", instance, 1);
    ASSERT_TRUE(result.ok) << result.error;
    EXPECT_EQ(result.response.devices(0).host_path(), "/dev/video0");
}

TEST_F(UdevHotplugTest, ReenumeratedOnAnotherPortKeepsItsNameAndAllocatesTheNewNode) {
    add(webcamDeviceTestbed("1-1.2", 3));
    start(udevConfiguration(R"(SUBSYSTEM=="usb", ENV{DEVTYPE}=="usb_device", ATTR{idVendor}=="046d")",
                            "      stableIdentity: usb\n", "    removalGracePeriodSeconds: 3600\n"));
    const std::string instance = instanceResource();
    ASSERT_FALSE(instance.empty()) << daemon_->log();
    ASSERT_TRUE(waitForHealth(instance, slotOf(instance), "Healthy"));
    auto before = kubelet_->allocate("default", "pod-a", "main", instance, 1);
    ASSERT_TRUE(before.ok) << before.error;
    EXPECT_EQ(before.response.devices(0).host_path(), "/dev/bus/usb/001/003");
    EXPECT_EQ(before.response.envs().at("UDEV_DEVPATH"), webcamUsbDevpath("1-1.2"));
    kubelet_->removePod("default", "pod-a");
    ASSERT_TRUE(waitForHealth(instance, slotOf(instance), "Healthy"));

    // The camera resets and comes back with a new device number, on another port.
    remove(webcamUsbDevpath("1-1.2"));
    ASSERT_TRUE(waitForHealth(instance, slotOf(instance), "Unhealthy"));
    add(webcamDeviceTestbed("1-1.3", 4));
    // Healthy again only with the snapshot that holds the new node.
    ASSERT_TRUE(waitForHealth(instance, slotOf(instance), "Healthy")) << daemon_->log();
    EXPECT_EQ(instanceResources(), std::vector<std::string>{instance});
    EXPECT_EQ(kubelet_->registrations(instance), 1);

    auto after = kubelet_->allocate("default", "pod-b", "main", instance, 1);
    ASSERT_TRUE(after.ok) << after.error;
    ASSERT_EQ(after.response.devices_size(), 1);
    EXPECT_EQ(after.response.devices(0).host_path(), "/dev/bus/usb/001/004");
    EXPECT_EQ(after.response.envs().at("UDEV_DEVNODE"), "/dev/bus/usb/001/004");
    EXPECT_EQ(after.response.envs().at("UDEV_DEVPATH"), webcamUsbDevpath("1-1.3"));
    EXPECT_EQ(after.response.envs().at("USB_PORT_PATH"), "1-1.3");
}

TEST_F(UdevHotplugTest, UnbindAndBindOfTheDriverWithdrawAndRestoreTheInterface) {
    add(webcamDeviceTestbed());
    start(udevConfiguration(R"(SUBSYSTEM=="usb", ENV{DEVTYPE}=="usb_interface", DRIVER=="uvcvideo")", "",
                            "    removalGracePeriodSeconds: 3600\n"));
    const std::string instance = instanceResource();
    ASSERT_FALSE(instance.empty()) << daemon_->log();
    ASSERT_TRUE(waitForHealth(instance, slotOf(instance), "Healthy"));

    // uvcvideo lets go of the interface: the driver link goes, then the unbind uevent.
    const std::filesystem::path interface = sysfs(kInterface);
    const std::filesystem::path driverTarget = std::filesystem::read_symlink(interface / "driver");
    const std::string bound = readFile(interface / "uevent");
    std::filesystem::remove(interface / "driver");
    std::string unbound = bound;
    if (auto at = unbound.find("DRIVER=uvcvideo\n"); at != std::string::npos) unbound.erase(at, 16);
    writeFile(interface / "uevent", unbound);
    uevent(kInterface, "unbind");
    ASSERT_TRUE(waitForHealth(instance, slotOf(instance), "Unhealthy")) << daemon_->log();

    std::filesystem::create_symlink(driverTarget, interface / "driver");
    writeFile(interface / "uevent", bound);
    uevent(kInterface, "bind");
    ASSERT_TRUE(waitForHealth(instance, slotOf(instance), "Healthy")) << daemon_->log();
    EXPECT_EQ(kubelet_->registrations(instance), 1);
}

TEST_F(UdevHotplugTest, StormOfAThousandEventsEndsInTheRightState) {
    add(webcamDeviceTestbed());
    start(udevConfiguration(R"(SUBSYSTEM=="video4linux")", "", "    removalGracePeriodSeconds: 3600\n"));
    const std::string instance = instanceResource();
    ASSERT_FALSE(instance.empty()) << daemon_->log();
    ASSERT_TRUE(waitForHealth(instance, slotOf(instance), "Healthy"));
    // A second node is the marker: its state at the kubelet shows how far the daemon got.
    add(kWebcamVideo1Testbed);
    std::string marker;
    ASSERT_TRUE(kubelet_->waitFor(
        [&] {
            for (const std::string& resource : instanceResources()) {
                if (resource != instance) marker = resource;
            }
            return !marker.empty();
        },
        20s));
    ASSERT_TRUE(waitForHealth(marker, slotOf(marker), "Healthy"));

    // umockdev hands each uevent to a unix datagram socket that queues at most
    // net.unix.max_dgram_qlen messages (10 by default) and aborts a sender that gets
    // further ahead of the daemon than that. So the storm goes in bursts of 8 events on
    // video0 (4 unplugs, 4 plugs), each followed by a plug or unplug of the marker.
    const std::string video0 = video0Testbed();
    bool markerPlugged = true;
    for (int burst = 0; burst < 125; ++burst) {
        for (int i = 0; i < 4; ++i) {
            remove(kVideo0);
            add(video0);
        }
        if (markerPlugged) {
            remove(kVideo1);
        } else {
            add(kWebcamVideo1Testbed);
        }
        markerPlugged = !markerPlugged;
        ASSERT_TRUE(waitForHealth(marker, slotOf(marker), markerPlugged ? "Healthy" : "Unhealthy"))
            << "burst " << burst << "\n"
            << daemon_->log();
    }
    // 1,000 events later video0 is plugged, and one more unplug and plug still work.
    ASSERT_TRUE(waitForHealth(instance, slotOf(instance), "Healthy"));
    remove(kVideo0);
    ASSERT_TRUE(waitForHealth(instance, slotOf(instance), "Unhealthy")) << daemon_->log();
    add(video0);
    ASSERT_TRUE(waitForHealth(instance, slotOf(instance), "Healthy")) << daemon_->log();
    EXPECT_EQ(instanceResources().size(), 2u);
    EXPECT_EQ(kubelet_->registrations(instance), 1);
    EXPECT_TRUE(daemon_->running());
    auto result = kubelet_->allocate("default", "pod-a", "main", instance, 1);
    ASSERT_TRUE(result.ok) << result.error;
    EXPECT_EQ(result.response.devices(0).host_path(), "/dev/video0");
}

// The FTDI USB-serial adapter with Akri's usual rule for it, on its tty node.
class SerialAdapterHotplugTest : public UdevTestbedDaemonTest {
protected:
    SerialAdapterHotplugTest() : UdevTestbedDaemonTest(serialAdapterHostTestbed(), "serial") {}

    static constexpr const char* kRule = R"(SUBSYSTEM=="tty", ATTRS{idVendor}=="0403")";
};

TEST_F(SerialAdapterHotplugTest, PluggedAdapterIsOfferedAsTtyUsb0WithUdevAndUsbEnvironment) {
    start(udevConfiguration(kRule, "", "", "serial"));
    ASSERT_TRUE(kubelet_->waitFor([&] { return kubelet_->endpoint(resource_) != ""; }, 20s));
    EXPECT_TRUE(kubelet_->devices(resource_).empty());

    add(serialAdapterDeviceTestbed());
    const std::string instance = instanceResource();
    ASSERT_FALSE(instance.empty()) << daemon_->log();
    ASSERT_TRUE(waitForHealth(instance, slotOf(instance), "Healthy"));
    ASSERT_TRUE(waitForHealth(resource_, slotOf(instance), "Healthy"));

    // Through the configuration-level resource, as a pod that asks for any adapter does.
    auto result = kubelet_->allocate("default", "pod-a", "main", resource_, 1);
    ASSERT_TRUE(result.ok) << result.error;
    ASSERT_EQ(result.response.devices_size(), 1);
    EXPECT_EQ(result.response.devices(0).host_path(), "/dev/ttyUSB0");
    EXPECT_EQ(result.response.devices(0).container_path(), "/dev/ttyUSB0");
    EXPECT_EQ(result.response.devices(0).permissions(), "rwm");
    const auto& envs = result.response.envs();
    const std::map<std::string, std::string> expected = {
        {"UDEV_DEVNODE", "/dev/ttyUSB0"},
        {"UDEV_DEVPATH", kSerialAdapterTty},
        {"USB_VENDOR_ID", "0403"},
        {"USB_PRODUCT_ID", "6015"},
        {"USB_SERIAL", "FT50KUPS"},
        {"USB_MANUFACTURER", "FTDI"},
        {"USB_PRODUCT", "UMFT230XB"},
        {"USB_PORT_PATH", "1-10"},
        {"USB_BUSNUM", "1"},
        {"USB_DEVNUM", "4"},
    };
    for (const auto& [name, value] : expected) {
        ASSERT_TRUE(envs.contains(name)) << name;
        EXPECT_EQ(envs.at(name), value) << name;
    }
}

TEST_F(SerialAdapterHotplugTest, MovedToAnotherPortKeepsItsNameUnderStableIdentity) {
    add(serialAdapterDeviceTestbed());
    start(udevConfiguration(kRule, "      stableIdentity: usb\n", "    removalGracePeriodSeconds: 3600\n",
                            "serial"));
    const std::string instance = instanceResource();
    ASSERT_FALSE(instance.empty()) << daemon_->log();
    ASSERT_TRUE(waitForHealth(instance, slotOf(instance), "Healthy"));

    remove(serialAdapterUsbDevpath());
    ASSERT_TRUE(waitForHealth(instance, slotOf(instance), "Unhealthy")) << daemon_->log();
    ASSERT_TRUE(waitForHealth(resource_, slotOf(instance), "Unhealthy"));

    // Plugged into port 9, enumerated as device 5: the same instance, healthy again.
    add(serialAdapterDeviceTestbed("1-9", 5));
    ASSERT_TRUE(waitForHealth(instance, slotOf(instance), "Healthy")) << daemon_->log();
    EXPECT_EQ(instanceResources(), std::vector<std::string>{instance});
    EXPECT_EQ(kubelet_->registrations(instance), 1);
    auto result = kubelet_->allocate("default", "pod-a", "main", instance, 1);
    ASSERT_TRUE(result.ok) << result.error;
    ASSERT_EQ(result.response.devices_size(), 1);
    EXPECT_EQ(result.response.devices(0).host_path(), "/dev/ttyUSB0");
    EXPECT_EQ(result.response.envs().at("UDEV_DEVPATH"), serialAdapterTty("1-9"));
    EXPECT_EQ(result.response.envs().at("USB_PORT_PATH"), "1-9");
    EXPECT_EQ(result.response.envs().at("USB_DEVNUM"), "5");
    EXPECT_EQ(result.response.envs().at("USB_SERIAL"), "FT50KUPS");
}

}  // namespace
}  // namespace devlet::test

#endif

int main(int argc, char** argv) {
    return devlet::test::runUnderUmockdev(argc, argv);
}
