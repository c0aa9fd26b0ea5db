// The udev probe end to end on umockdev testbeds of real hardware (facts from real
// machines, trimmed to what the rules and the classifier read): a Logitech C920 webcam is
// enumerated, then unplugged and replugged through uevents on the netlink monitor; an FTDI
// USB-serial adapter is found through its tty node and keeps its name when replugged on
// another port; a keyboard behind three hubs is matched through its ancestors. Runs under
// umockdev-wrapper; skips (77) where umockdev is not available.

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

#include "tests/probes/usb/umockdev_main.h"

#if DEVLET_HAVE_UMOCKDEV

#include <algorithm>
#include <cctype>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <umockdev.h>
#include <unistd.h>

#include "probes/usb/udev_handler.h"
#include "runtime/configuration.h"
#include "runtime/inventory.h"
#include "runtime/naming.h"
#include "tests/probes/usb/dual_camera_testbed.h"
#include "tests/probes/usb/keyboard_testbed.h"
#include "tests/probes/usb/serial_adapter_testbed.h"
#include "tests/probes/usb/webcam_testbed.h"
#include "tests/support/decide_now.h"

namespace devlet::usb {
namespace {

using namespace std::chrono_literals;

// A second capture node on the same interface, plugged while the probe runs.
constexpr const char* kSecondNode =
    R"(P: /devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.2/1-1.2:1.0/video4linux/video1
N: video1
E: DEVNAME=/dev/video1
E: ID_V4L_CAPABILITIES=:capture:
E: MAJOR=81
E: MINOR=1
E: SUBSYSTEM=video4linux
A: dev=81:1
A: name=HD Pro Webcam C920
L: device=../..
)";

constexpr const char* kVideo0 =
    "/devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.2/1-1.2:1.0/video4linux/video0";
constexpr const char* kVideo1 =
    "/devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.2/1-1.2:1.0/video4linux/video1";

class RecordingSink : public ProbeSink {
public:
    void reportSnapshot(const std::string& configuration, std::vector<Instance> instances) override {
        EXPECT_EQ(configuration, "usb");
        snapshots.push_back(std::move(instances));
    }
    void reportProbeError(const std::string&, const std::string& message) override {
        if (!message.empty()) errors.push_back(message);
    }

    std::vector<std::vector<Instance>> snapshots;
    std::vector<std::string> errors;
};

const Instance* findInstance(const std::vector<Instance>& instances, const std::string& id) {
    for (const Instance& instance : instances) {
        if (instance.id == id) return &instance;
    }
    return nullptr;
}

// A probe of one udev configuration on a testbed holding `testbed`.
class UdevTestbedTest : public ::testing::Test {
protected:
    explicit UdevTestbedTest(std::string testbed) : testbedText_(std::move(testbed)) {}

    void SetUp() override {
        testbed_ = umockdev_testbed_new();
        add(testbedText_);
        configuration_.name = "usb";
        configuration_.handler = "udev";
    }

    void TearDown() override {
        stopProbe();
        g_object_unref(testbed_);
    }

    void add(const std::string& description) {
        GError* error = nullptr;
        ASSERT_TRUE(umockdev_testbed_add_from_string(testbed_, description.c_str(), &error))
            << (error ? error->message : "unknown error");
    }

    // `rule` as the one udevRules entry, and more discoveryDetails lines.
    void setRule(const std::string& rule, const std::string& moreDetails = "") {
        configuration_.discoveryDetails = "udevRules:\n  - '" + rule + "'\n" + moreDetails;
    }

    void startProbe() {
        ASSERT_TRUE(handler_.check(configuration_).empty()) << configuration_.discoveryDetails;
        probe_ = handler_.createProbe(configuration_, loop_, sink_);
        probe_->start();
    }

    void stopProbe() {
        if (probe_) probe_->stop();
        probe_.reset();
        sink_.snapshots.clear();
        sink_.errors.clear();
    }

    // The first snapshot of a probe of `rule`, stopped again afterwards.
    std::vector<Instance> firstSnapshot(const std::string& rule, const std::string& moreDetails = "") {
        setRule(rule, moreDetails);
        startProbe();
        EXPECT_TRUE(runUntilSnapshots(1)) << rule;
        EXPECT_TRUE(sink_.errors.empty()) << sink_.errors.front();
        std::vector<Instance> snapshot =
            sink_.snapshots.empty() ? std::vector<Instance>{} : sink_.snapshots[0];
        stopProbe();
        return snapshot;
    }

    // Runs the loop until `done` holds or a few seconds pass.
    bool runUntil(const std::function<bool()>& done) {
        const auto deadline = std::chrono::steady_clock::now() + 5s;
        while (!done() && std::chrono::steady_clock::now() < deadline) {
            loop_.run_one_for(100ms);
            if (loop_.stopped()) loop_.restart();
        }
        return done();
    }

    bool runUntilSnapshots(std::size_t count) {
        return runUntil([&] { return sink_.snapshots.size() >= count; });
    }

    void uevent(const std::string& devpath, const char* action) {
        umockdev_testbed_uevent(testbed_, ("/sys" + devpath).c_str(), action);
    }

    // Unplugged: a remove uevent, then the devices leave sysfs, deepest first.
    void unplug(const std::string& devpath, std::vector<std::string> below) {
        uevent(devpath, "remove");
        std::sort(below.begin(), below.end(),
                  [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
        below.push_back(devpath);
        for (const std::string& device : below)
            umockdev_testbed_remove_device(testbed_, ("/sys" + device).c_str());
    }

    std::string testbedText_;
    UMockdevTestbed* testbed_ = nullptr;
    Configuration configuration_;
    boost::asio::io_context loop_;
    RecordingSink sink_;
    UdevHandler handler_;
    std::unique_ptr<Probe> probe_;
};

class UdevProbeTest : public UdevTestbedTest {
protected:
    UdevProbeTest() : UdevTestbedTest(test::kWebcamTestbed) {}
    void SetUp() override {
        UdevTestbedTest::SetUp();
        setRule(R"(SUBSYSTEM=="video4linux", ENV{ID_V4L_CAPABILITIES}==":capture:")");
    }
};

TEST_F(UdevProbeTest, StartReportsTheWebcamWithItsNodeAndUsbIds) {
    startProbe();
    ASSERT_TRUE(runUntilSnapshots(1));
    EXPECT_TRUE(sink_.errors.empty()) << sink_.errors.front();
    const std::vector<Instance>& instances = sink_.snapshots[0];
    ASSERT_EQ(instances.size(), 1u);
    const Instance* webcam = findInstance(instances, kVideo0);
    ASSERT_NE(webcam, nullptr) << instances[0].id;
    EXPECT_EQ(webcam->properties.at("UDEV_DEVNODE"), "/dev/video0");
    EXPECT_EQ(webcam->properties.at("UDEV_DEVPATH"), kVideo0);
    EXPECT_EQ(webcam->properties.at("USB_VENDOR_ID"), "046d");
    EXPECT_EQ(webcam->properties.at("USB_PRODUCT_ID"), "082d");
    ASSERT_EQ(webcam->nodes.size(), 1u);
    EXPECT_EQ(webcam->nodes[0].hostPath, "/dev/video0");
}

TEST_F(UdevProbeTest, RemoveUeventWithdrawsTheWebcamAndAddBringsItBack) {
    startProbe();
    ASSERT_TRUE(runUntilSnapshots(1));
    ASSERT_NE(findInstance(sink_.snapshots[0], kVideo0), nullptr);

    uevent(kVideo0, "remove");
    ASSERT_TRUE(runUntilSnapshots(2));
    EXPECT_TRUE(sink_.snapshots[1].empty());

    uevent(kVideo0, "add");
    ASSERT_TRUE(runUntilSnapshots(3));
    ASSERT_EQ(sink_.snapshots[2].size(), 1u);
    EXPECT_EQ(sink_.snapshots[2][0].id, kVideo0);
    EXPECT_EQ(sink_.snapshots[2][0].properties.at("UDEV_DEVNODE"), "/dev/video0");
    EXPECT_TRUE(sink_.errors.empty()) << sink_.errors.front();
}

TEST_F(UdevProbeTest, RemovingTheUsbDeviceWithdrawsItsChildren) {
    startProbe();
    ASSERT_TRUE(runUntilSnapshots(1));
    uevent("/devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.2", "remove");
    ASSERT_TRUE(runUntilSnapshots(2));
    EXPECT_TRUE(sink_.snapshots[1].empty());
}

TEST_F(UdevProbeTest, DevicePluggedWhileRunningIsAdded) {
    startProbe();
    ASSERT_TRUE(runUntilSnapshots(1));
    GError* error = nullptr;
    ASSERT_TRUE(umockdev_testbed_add_from_string(testbed_, kSecondNode, &error))
        << (error ? error->message : "unknown error");
    ASSERT_TRUE(runUntilSnapshots(2));
    ASSERT_EQ(sink_.snapshots[1].size(), 2u);
    const Instance* second = findInstance(sink_.snapshots[1], kVideo1);
    ASSERT_NE(second, nullptr);
    EXPECT_EQ(second->properties.at("UDEV_DEVNODE"), "/dev/video1");
}

TEST_F(UdevProbeTest, EventsThatChangeNothingReportNothing) {
    startProbe();
    ASSERT_TRUE(runUntilSnapshots(1));
    uevent(kVideo0, "change");
    // A remove afterwards proves the change was processed before it.
    uevent(kVideo0, "remove");
    ASSERT_TRUE(runUntilSnapshots(2));
    EXPECT_TRUE(sink_.snapshots[1].empty());
    loop_.poll();
    EXPECT_EQ(sink_.snapshots.size(), 2u);
}

// The FTDI USB-serial adapter: Akri's usual rule for it, on its tty node.
constexpr const char* kSerialRule = R"(SUBSYSTEM=="tty", ATTRS{idVendor}=="0403")";

class SerialAdapterProbeTest : public UdevTestbedTest {
protected:
    SerialAdapterProbeTest() : UdevTestbedTest(test::serialAdapterHostTestbed()) {}
    // The adapter's devices below its USB device at `port`, for unplugging.
    static std::vector<std::string> devicesBelow(const std::string& port) {
        const std::string usb = test::serialAdapterUsbDevpath(port);
        const std::string interface = usb + "/" + port + ":1.0";
        return {interface, interface + "/gpiochip1", interface + "/ttyUSB0", test::serialAdapterTty(port)};
    }
};

TEST_F(SerialAdapterProbeTest, TtyNodeIsOfferedWithTheAdaptersUsbProperties) {
    add(test::serialAdapterDeviceTestbed());
    const std::vector<Instance> instances = firstSnapshot(kSerialRule);
    ASSERT_EQ(instances.size(), 1u);
    const Instance& adapter = instances[0];
    EXPECT_EQ(adapter.id, test::kSerialAdapterTty);
    ASSERT_EQ(adapter.nodes.size(), 1u);
    EXPECT_EQ(adapter.nodes[0].hostPath, "/dev/ttyUSB0");
    EXPECT_EQ(adapter.nodes[0].containerPath, "/dev/ttyUSB0");
    EXPECT_EQ(adapter.nodes[0].permissions, "rwm");
    const std::map<std::string, std::string> expected = {
        {"UDEV_DEVNODE", "/dev/ttyUSB0"},
        {"UDEV_DEVPATH", test::kSerialAdapterTty},
        {"USB_VENDOR_ID", "0403"},
        {"USB_PRODUCT_ID", "6015"},
        {"USB_SERIAL", "FT50KUPS"},
        {"USB_MANUFACTURER", "FTDI"},
        {"USB_PRODUCT", "UMFT230XB"},
        {"USB_BUSNUM", "1"},
        {"USB_DEVNUM", "4"},
        {"USB_PORT_PATH", "1-10"},
        {"USB_CLASS", "00"},
    };
    // The recording has no speed attribute: the property is left out, not guessed.
    EXPECT_EQ(adapter.properties, expected);
}

TEST_F(SerialAdapterProbeTest, RuleWithoutSubsystemAlsoFindsTheUsbDeviceAndTheGpioChip) {
    add(test::serialAdapterDeviceTestbed());
    // The interface and the usb-serial port have no node: they are offered through the USB
    // device (Akri #788), which the rule matches too.
    std::vector<Instance> instances = firstSnapshot(R"(ATTRS{idVendor}=="0403")");
    std::vector<std::string> ids;
    for (const Instance& instance : instances) ids.push_back(instance.id);
    EXPECT_EQ(ids, (std::vector<std::string>{test::kSerialAdapterUsbDevpath, test::kSerialAdapterGpiochip,
                                             test::kSerialAdapterTty}));

    // One instance per adapter under a stable identity, its nodes indexed in devpath order.
    instances = firstSnapshot(R"(ATTRS{idVendor}=="0403")", "stableIdentity: usb\n");
    ASSERT_EQ(instances.size(), 1u);
    EXPECT_EQ(instances[0].id, "usb:0403:6015:FT50KUPS");
    EXPECT_EQ(instances[0].properties.at("UDEV_DEVNODE_0"), "/dev/bus/usb/001/004");
    EXPECT_EQ(instances[0].properties.at("UDEV_DEVNODE_1"), "/dev/gpiochip1");
    EXPECT_EQ(instances[0].properties.at("UDEV_DEVNODE_2"), "/dev/ttyUSB0");
    EXPECT_EQ(instances[0].properties.at("UDEV_DEVPATH"), test::kSerialAdapterUsbDevpath);
}

TEST_F(SerialAdapterProbeTest, PluggedUnpluggedAndRepluggedOnAnotherPortKeepsItsStableName) {
    setRule(kSerialRule, "stableIdentity: usb\n");
    startProbe();
    ASSERT_TRUE(runUntilSnapshots(1));
    EXPECT_TRUE(sink_.snapshots[0].empty());

    add(test::serialAdapterDeviceTestbed());
    ASSERT_TRUE(runUntil([&] { return !sink_.snapshots.back().empty(); }));
    ASSERT_EQ(sink_.snapshots.back().size(), 1u);
    EXPECT_EQ(sink_.snapshots.back()[0].id, "usb:0403:6015:FT50KUPS");
    EXPECT_EQ(sink_.snapshots.back()[0].properties.at("USB_PORT_PATH"), "1-10");

    unplug(test::serialAdapterUsbDevpath(), devicesBelow("1-10"));
    ASSERT_TRUE(runUntil([&] { return sink_.snapshots.back().empty(); }));

    // Plugged into port 9, enumerated as device 5.
    add(test::serialAdapterDeviceTestbed("1-9", 5));
    ASSERT_TRUE(runUntil([&] { return !sink_.snapshots.back().empty(); }));
    ASSERT_EQ(sink_.snapshots.back().size(), 1u);
    const Instance& adapter = sink_.snapshots.back()[0];
    EXPECT_EQ(adapter.id, "usb:0403:6015:FT50KUPS");
    EXPECT_EQ(adapter.properties.at("UDEV_DEVNODE"), "/dev/ttyUSB0");
    EXPECT_EQ(adapter.properties.at("UDEV_DEVPATH"), test::serialAdapterTty("1-9"));
    EXPECT_EQ(adapter.properties.at("USB_PORT_PATH"), "1-9");
    EXPECT_EQ(adapter.properties.at("USB_DEVNUM"), "5");
    EXPECT_TRUE(sink_.errors.empty()) << sink_.errors.front();
}

// The keyboard behind three hubs.
class KeyboardProbeTest : public UdevTestbedTest {
protected:
    KeyboardProbeTest() : UdevTestbedTest(test::kKeyboardTestbed) {}
};

TEST_F(KeyboardProbeTest, EventNodeMatchesThroughTheUsbDeviceAndCarriesItsPortPath) {
    const std::vector<Instance> instances = firstSnapshot(
        R"(SUBSYSTEM=="input", KERNEL=="event*", ATTRS{idVendor}=="05f3", ATTRS{idProduct}=="0007")");
    ASSERT_EQ(instances.size(), 1u);
    const Instance& keyboard = instances[0];
    EXPECT_EQ(keyboard.id, test::kKeyboardEvent);
    ASSERT_EQ(keyboard.nodes.size(), 1u);
    EXPECT_EQ(keyboard.nodes[0].hostPath, "/dev/input/event5");
    const std::map<std::string, std::string> expected = {
        {"UDEV_DEVNODE", "/dev/input/event5"},
        {"UDEV_DEVPATH", test::kKeyboardEvent},
        {"USB_VENDOR_ID", "05f3"},
        {"USB_PRODUCT_ID", "0007"},
        {"USB_BUSNUM", "1"},
        {"USB_DEVNUM", "9"},
        {"USB_PORT_PATH", "1-1.5.4.2"},
        {"USB_SPEED", "12"},
        {"USB_CLASS", "00"},
    };
    // No serial, manufacturer or product: the keyboard has none (its descriptor names none).
    EXPECT_EQ(keyboard.properties, expected);
}

TEST_F(KeyboardProbeTest, ParentFiltersReachEveryHubAboveTheKeyboard) {
    const std::string event = R"(SUBSYSTEM=="input", KERNEL=="event*", )";
    struct Case {
        std::string parentFilters;
        bool matches;
    };
    const Case cases[] = {
        {R"(KERNELS=="1-1.5.4.2:1.0", DRIVERS=="usbhid")", true},  // the interface
        {R"(ATTRS{product}=="Kinesis Keyboard Hub")", true},       // the keyboard's own hub, 1-1.5.4
        {R"(KERNELS=="1-1.5", ATTRS{idVendor}=="17ef")", true},    // the Lenovo hub, two up
        {R"(KERNELS=="1-1", ATTRS{idProduct}=="0020")", true},     // the rate-matching hub, three up
        {R"(KERNELS=="1-1.5.4*", ATTRS{speed}=="480")", false},  // the keyboard and its hub run at 12 Mbit/s
        // Every parent filter must hold on one device: the product id is the keyboard's,
        // the product string its hub's.
        {R"(ATTRS{idProduct}=="0007", ATTRS{product}=="Kinesis Keyboard Hub")", false},
    };
    for (const Case& c : cases) {
        const std::vector<Instance> instances = firstSnapshot(event + c.parentFilters);
        if (c.matches) {
            ASSERT_EQ(instances.size(), 1u) << c.parentFilters;
            EXPECT_EQ(instances[0].id, test::kKeyboardEvent) << c.parentFilters;
            EXPECT_EQ(instances[0].properties.at("USB_PORT_PATH"), "1-1.5.4.2") << c.parentFilters;
        } else {
            EXPECT_TRUE(instances.empty()) << c.parentFilters;
        }
    }
}

TEST_F(KeyboardProbeTest, StableIdentityFallsBackToThePortPathWithoutASerial) {
    const std::vector<Instance> instances = firstSnapshot(
        R"(SUBSYSTEM=="input", KERNEL=="event*", ATTRS{idVendor}=="05f3")", "stableIdentity: usb\n");
    ASSERT_EQ(instances.size(), 1u);
    EXPECT_EQ(instances[0].id, "usb:05f3:0007:port:1-1.5.4.2");
    EXPECT_EQ(instances[0].properties.at("UDEV_DEVNODE"), "/dev/input/event5");
    EXPECT_EQ(instances[0].properties.at("UDEV_DEVPATH"), test::kKeyboardEvent);
}

TEST_F(KeyboardProbeTest, GroupRecursiveMergesTheKeyboardsInterfaceDevicesIntoItsUsbDevice) {
    // The USB device, its HID interface, the input device and its event node all match; the
    // interface and the input device have no node and are offered through the USB device.
    const std::string rule = R"(ATTRS{idVendor}=="05f3", ATTRS{idProduct}=="0007")";
    std::vector<Instance> instances = firstSnapshot(rule);
    ASSERT_EQ(instances.size(), 2u);
    EXPECT_EQ(instances[0].id, test::kKeyboardUsbDevpath);
    EXPECT_EQ(instances[1].id, test::kKeyboardEvent);

    instances = firstSnapshot(rule, "groupRecursive: true\n");
    ASSERT_EQ(instances.size(), 1u);
    const Instance& keyboard = instances[0];
    EXPECT_EQ(keyboard.id, test::kKeyboardUsbDevpath);
    EXPECT_EQ(keyboard.properties.at("UDEV_DEVPATH"), test::kKeyboardUsbDevpath);
    EXPECT_EQ(keyboard.properties.at("UDEV_DEVNODE_0"), "/dev/bus/usb/001/009");
    EXPECT_EQ(keyboard.properties.at("UDEV_DEVNODE_1"), "/dev/input/event5");
    EXPECT_EQ(keyboard.properties.count("UDEV_DEVNODE"), 0u);
    ASSERT_EQ(keyboard.nodes.size(), 2u);
    EXPECT_EQ(keyboard.properties.at("USB_PORT_PATH"), "1-1.5.4.2");
}

TEST_F(KeyboardProbeTest, RemovingAHubTwoLevelsUpWithdrawsTheKeyboard) {
    setRule(R"(SUBSYSTEM=="input", KERNEL=="event*", ATTRS{idVendor}=="05f3")");
    startProbe();
    ASSERT_TRUE(runUntilSnapshots(1));
    ASSERT_EQ(sink_.snapshots[0].size(), 1u);
    uevent("/devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.5", "remove");
    ASSERT_TRUE(runUntilSnapshots(2));
    EXPECT_TRUE(sink_.snapshots[1].empty());
}

// One USB device, two cameras: the colour camera on interface 0, the infrared one on
// interface 2, a metadata node beside each, behind the laptop's internal hub.
constexpr const char* kCaptureRule = R"(SUBSYSTEM=="video4linux", ENV{ID_V4L_CAPABILITIES}==":capture:")";

class DualCameraProbeTest : public UdevTestbedTest {
protected:
    DualCameraProbeTest() : UdevTestbedTest(test::kDualCameraTestbed) {}
    static std::string stableId(const std::string& function = "") {
        return std::string("usb:0bda:58e6:") + test::kDualCameraSerial + function;
    }
};

TEST_F(DualCameraProbeTest, ShippedCameraRuleWithUsbIdentityOffersEachCaptureNodeAsAkriDoes) {
    const std::vector<Instance> instances = firstSnapshot(kCaptureRule, "stableIdentity: usb\n");
    ASSERT_EQ(instances.size(), 2u);
    const Instance* colour = findInstance(instances, stableId());
    const Instance* infrared = findInstance(instances, stableId(":if02"));
    ASSERT_NE(colour, nullptr) << instances[0].id;
    ASSERT_NE(infrared, nullptr) << instances[1].id;
    EXPECT_EQ(colour->properties.at("UDEV_DEVNODE"), "/dev/video0");
    EXPECT_EQ(colour->properties.at("UDEV_DEVPATH"), test::dualCameraVideo(0));
    EXPECT_EQ(infrared->properties.at("UDEV_DEVNODE"), "/dev/video2");
    EXPECT_EQ(infrared->properties.at("UDEV_DEVPATH"), test::dualCameraVideo(2));
    for (const Instance* camera : {colour, infrared}) {
        EXPECT_EQ(camera->properties.count("UDEV_DEVNODE_0"), 0u) << camera->id;
        ASSERT_EQ(camera->nodes.size(), 1u) << camera->id;
        EXPECT_EQ(camera->properties.at("USB_SERIAL"), test::kDualCameraSerial);
        EXPECT_EQ(camera->properties.at("USB_PORT_PATH"), "3-5.2");
    }
}

TEST_F(DualCameraProbeTest, DevpathIdentityOffersEachCaptureNodeUnderItsDevpath) {
    const std::vector<Instance> instances = firstSnapshot(kCaptureRule);
    ASSERT_EQ(instances.size(), 2u);
    EXPECT_EQ(instances[0].id, test::dualCameraVideo(0));
    EXPECT_EQ(instances[1].id, test::dualCameraVideo(2));
    EXPECT_EQ(instances[1].properties.at("UDEV_DEVNODE"), "/dev/video2");
}

TEST_F(DualCameraProbeTest, NodesOfOneInterfaceStayTogetherUnderUsbIdentity) {
    // Every video node: each camera's capture and metadata nodes are one instance.
    const std::vector<Instance> instances =
        firstSnapshot(R"(SUBSYSTEM=="video4linux")", "stableIdentity: usb\n");
    ASSERT_EQ(instances.size(), 2u);
    const Instance* infrared = findInstance(instances, stableId(":if02"));
    ASSERT_NE(infrared, nullptr);
    EXPECT_EQ(infrared->properties.at("UDEV_DEVNODE_0"), "/dev/video2");
    EXPECT_EQ(infrared->properties.at("UDEV_DEVNODE_1"), "/dev/video3");
    EXPECT_EQ(infrared->properties.count("UDEV_DEVNODE"), 0u);
}

TEST_F(DualCameraProbeTest, GroupRecursiveAsksForTheWholeDeviceAsOneInstance) {
    const std::vector<Instance> instances =
        firstSnapshot(kCaptureRule, "stableIdentity: usb\ngroupRecursive: true\n");
    ASSERT_EQ(instances.size(), 1u);
    EXPECT_EQ(instances[0].id, stableId());
    EXPECT_EQ(instances[0].properties.at("UDEV_DEVNODE_0"), "/dev/video0");
    EXPECT_EQ(instances[0].properties.at("UDEV_DEVNODE_1"), "/dev/video2");
}

TEST_F(DualCameraProbeTest, InfraredNodeSeenAloneKeepsItsName) {
    // The name depends on the device, not on what else is seen: the infrared camera matched
    // alone (or first, while the colour one is still being set up) is already :if02.
    const std::vector<Instance> instances =
        firstSnapshot(R"(SUBSYSTEM=="video4linux", ENV{ID_INFRARED_CAMERA}=="1")", "stableIdentity: usb\n");
    ASSERT_EQ(instances.size(), 1u);
    EXPECT_EQ(instances[0].id, stableId(":if02"));
    EXPECT_EQ(instances[0].properties.at("UDEV_DEVNODE"), "/dev/video2");
}

// Akri's udev discoveryProperties on a PCI device bound to vfio-pci, the way KubeVirt
// users pass a GPU to a VM: sysfs links the device to its IOMMU group (13), and the vfio
// driver made /dev/vfio/13 for that group beside the VFIO container node /dev/vfio/vfio.
// A bridge in group 2 is there too (no rule matches it).
constexpr const char* kVfioTestbed = R"(P: /devices/pci0000:00/0000:00:01.0
E: DRIVER=pcieport
E: PCI_SLOT_NAME=0000:00:01.0
E: SUBSYSTEM=pci
A: vendor=0x8086
A: class=0x060400
L: driver=../../../bus/pci/drivers/pcieport
L: iommu_group=../../../kernel/iommu_groups/2

P: /devices/pci0000:00/0000:00:01.0/0000:01:00.0
E: DRIVER=vfio-pci
E: PCI_SLOT_NAME=0000:01:00.0
E: SUBSYSTEM=pci
A: vendor=0x10de
A: class=0x030000
L: driver=../../../../bus/pci/drivers/vfio-pci
L: iommu_group=../../../../kernel/iommu_groups/13

P: /devices/virtual/vfio/13
N: vfio/13
E: DEVNAME=/dev/vfio/13
E: MAJOR=243
E: MINOR=0
E: SUBSYSTEM=vfio
A: dev=243:0

P: /devices/virtual/misc/vfio
N: vfio/vfio
E: DEVNAME=/dev/vfio/vfio
E: MAJOR=10
E: MINOR=196
E: SUBSYSTEM=misc
A: dev=10:196
)";

constexpr const char* kVfioGpu = "/devices/pci0000:00/0000:00:01.0/0000:01:00.0";

class NoObserver : public InventoryObserver {
public:
    void resourceChanged(ResourceState) override {}
    void resourceWithdrawn(const std::string&) override {}
};

class VfioProbeTest : public UdevTestbedTest {
protected:
    VfioProbeTest() : UdevTestbedTest(kVfioTestbed) {}

    // What a container that asks for the instance's resource gets.
    ContainerGrant grantFor(const std::vector<Instance>& snapshot) {
        NoObserver observer;
        Inventory inventory("node-a", "akri.sh", nullptr, observer);
        SlotArbiter arbiter(inventory);
        inventory.applyConfigurations({configuration_}, {});
        inventory.reportSnapshot(configuration_.name, snapshot);
        for (const ResourceState& resource : inventory.resources()) {
            if (resource.instance.empty() || resource.devices.empty()) continue;
            auto granted = test::allocateNow(arbiter, resource.resource, {resource.devices[0].id});
            if (auto* grant = std::get_if<ContainerGrant>(&granted)) return *grant;
            ADD_FAILURE() << std::get<AllocationRefused>(granted).message;
        }
        ADD_FAILURE() << "no instance resource offered";
        return {};
    }
};

TEST_F(VfioProbeTest, ContainerGetsThePciAddressAndTheDevicesVfioGroup) {
    configuration_.discoveryProperties = {{"devicePluginResourceName", "akri.sh/udev-gpu"},
                                          {"vfioPassthrough", "true"}};
    std::vector<Instance> snapshot = firstSnapshot(R"(SUBSYSTEM=="pci", DRIVER=="vfio-pci")");
    ASSERT_EQ(snapshot.size(), 1u);
    EXPECT_EQ(snapshot[0].id, kVfioGpu);

    ContainerGrant grant = grantFor(snapshot);
    std::string hash = instanceHash(kVfioGpu, "node-a", false);
    for (char& c : hash) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_EQ(grant.envs["PCI_RESOURCE_AKRI_SH_UDEV-GPU"], "0000:01:00.0");
    EXPECT_EQ(grant.envs["PCI_RESOURCE_AKRI_SH_UDEV-GPU_" + hash], "0000:01:00.0");
    EXPECT_EQ(grant.envs["UDEV_DEVPATH"], kVfioGpu);
    EXPECT_FALSE(grant.envs.contains("UDEV_DEVNODE"));  // a PCI device has no node of its own
    ASSERT_EQ(grant.devices.size(), 2u);
    EXPECT_EQ(grant.devices[0], (DeviceNode{"/dev/vfio/13", "/dev/vfio/13", "rwm"}));
    EXPECT_EQ(grant.devices[1], (DeviceNode{"/dev/vfio/vfio", "/dev/vfio/vfio", "rwm"}));
    // The nodes the container gets are the ones the testbed's vfio driver made.
    for (const DeviceNode& node : grant.devices)
        EXPECT_EQ(::access(node.hostPath.c_str(), F_OK), 0) << node.hostPath;
}

TEST_F(VfioProbeTest, WithoutVfioPassthroughTheContainerGetsNoVfioNodes) {
    configuration_.discoveryProperties = {{"devicePluginResourceName", "akri.sh/udev-gpu"}};
    std::vector<Instance> snapshot = firstSnapshot(R"(SUBSYSTEM=="pci", DRIVER=="vfio-pci")");
    ASSERT_EQ(snapshot.size(), 1u);
    ContainerGrant grant = grantFor(snapshot);
    EXPECT_EQ(grant.envs["PCI_RESOURCE_AKRI_SH_UDEV-GPU"], "0000:01:00.0");
    EXPECT_TRUE(grant.devices.empty());
}

TEST_F(VfioProbeTest, WithoutDiscoveryPropertiesNothingIsAdded) {
    std::vector<Instance> snapshot = firstSnapshot(R"(SUBSYSTEM=="pci", DRIVER=="vfio-pci")");
    ASSERT_EQ(snapshot.size(), 1u);
    ContainerGrant grant = grantFor(snapshot);
    for (const auto& [name, value] : grant.envs) EXPECT_FALSE(name.starts_with("PCI_RESOURCE")) << name;
    EXPECT_TRUE(grant.devices.empty());
}

}  // namespace
}  // namespace devlet::usb

#endif

int main(int argc, char** argv) {
    return devlet::test::runUnderUmockdev(argc, argv);
}
