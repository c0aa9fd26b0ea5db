// `devlet probe usb` on umockdev testbeds holding a webcam, a camera whose string reads
// fail, a USB-serial adapter or a keyboard behind three hubs: the real binary, forked
// after the testbed exists, reads the testbed's sysfs and udev database, and asks the
// camera through libusb. Runs under umockdev-wrapper; skips (77) where umockdev is not
// available.

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

#include "tests/probes/usb/umockdev_main.h"

#if DEVLET_HAVE_UMOCKDEV

#include <string>

// Boost.JSON's implementation, compiled into this test program.
#include <boost/json/src.hpp>
#include <umockdev.h>

#include "tests/probes/usb/canon_camera_testbed.h"
#include "tests/probes/usb/dual_camera_testbed.h"
#include "tests/probes/usb/keyboard_testbed.h"
#include "tests/probes/usb/serial_adapter_testbed.h"
#include "tests/probes/usb/webcam_testbed.h"
#include "tests/support/daemon_process.h"
#include "tests/support/temp_dir.h"

namespace devlet::test {
namespace {

class ProbeCommandTest : public ::testing::Test {
protected:
    void SetUp() override {
        testbed_ = umockdev_testbed_new();
        GError* error = nullptr;
        ASSERT_TRUE(umockdev_testbed_add_from_string(testbed_, kWebcamTestbed, &error))
            << (error ? error->message : "unknown error");
    }
    void TearDown() override { g_object_unref(testbed_); }

    UMockdevTestbed* testbed_ = nullptr;
};

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

TEST_F(ProbeCommandTest, RulePrintsTheMatchingWebcamAndItsInstance) {
    auto result = runDevlet({"probe", "usb", "--rule", R"(SUBSYSTEM=="video4linux")"});
    EXPECT_EQ(result.exitCode, 0) << result.output;
    EXPECT_TRUE(contains(result.output, std::string("matches ") + kWebcamVideo0 + " (/dev/video0)"))
        << result.output;
    EXPECT_TRUE(contains(result.output, "UDEV_DEVNODE=/dev/video0")) << result.output;
    EXPECT_TRUE(contains(result.output, "USB_VENDOR_ID=046d")) << result.output;
}

TEST_F(ProbeCommandTest, UdevIsTheSameCommand) {
    auto result = runDevlet({"probe", "udev", "--rule", R"(SUBSYSTEM=="video4linux")"});
    EXPECT_EQ(result.exitCode, 0) << result.output;
    EXPECT_TRUE(contains(result.output, "UDEV_DEVNODE=/dev/video0")) << result.output;
}

TEST_F(ProbeCommandTest, JsonOutputParsesAndHoldsTheInstance) {
    auto result = runDevlet({"probe", "usb", "--json", "--rule", R"(SUBSYSTEM=="video4linux")"});
    ASSERT_EQ(result.exitCode, 0) << result.output;
    boost::system::error_code error;
    const boost::json::value document = boost::json::parse(result.output, error);
    ASSERT_FALSE(error) << error.message() << ": " << result.output;
    const auto& set = document.at("ruleSets").at(0);
    EXPECT_EQ(set.at("rules").at(0).at("matches").at(0).at("devnode").as_string(), "/dev/video0");
    const auto& instance = set.at("instances").at(0);
    EXPECT_EQ(instance.at("id").as_string(), kWebcamVideo0);
    EXPECT_EQ(instance.at("properties").at("USB_PRODUCT_ID").as_string(), "082d");
}

TEST_F(ProbeCommandTest, RuleThatDoesNotMatchNamesTheFilterThatExcludedTheWebcam) {
    auto result = runDevlet(
        {"probe", "usb", "--rule", R"(SUBSYSTEM=="video4linux", ENV{ID_V4L_CAPABILITIES}==":output:")"});
    EXPECT_EQ(result.exitCode, 0) << result.output;
    EXPECT_TRUE(contains(result.output, std::string("does not match ") + kWebcamVideo0)) << result.output;
    EXPECT_TRUE(contains(result.output, R"(ENV{ID_V4L_CAPABILITIES}==":output:" does not hold)"))
        << result.output;
    EXPECT_TRUE(contains(result.output, "no device matches")) << result.output;
}

TEST_F(ProbeCommandTest, ConfDirRulesAreUsedWithoutRuleFlags) {
    TempDir dir;
    writeFile(dir.path() / "webcams.yaml",
              "apiVersion: akri.sh/v0\n"
              "kind: Configuration\n"
              "metadata:\n"
              "  name: webcams\n"
              "spec:\n"
              "  discoveryHandler:\n"
              "    name: udev\n"
              "    discoveryDetails: |\n"
              "      udevRules:\n"
              "        - 'SUBSYSTEM==\"video4linux\", ENV{ID_V4L_CAPABILITIES}==\":capture:\"'\n"
              "  capacity: 1\n");
    auto result = runDevlet({"probe", "usb", "--conf-dir", dir.path().string()});
    EXPECT_EQ(result.exitCode, 0) << result.output;
    EXPECT_TRUE(contains(result.output, "configuration webcams")) << result.output;
    EXPECT_TRUE(contains(result.output, "UDEV_DEVNODE=/dev/video0")) << result.output;
}

// The Canon camera as the kernel leaves it when its string reads failed at enumeration,
// with its usbdevfs recording, which answers no control transfer: libusb's reads fail too.
class ProbeCommandCameraTest : public ::testing::Test {
protected:
    void SetUp() override {
        testbed_ = umockdev_testbed_new();
        GError* error = nullptr;
        ASSERT_TRUE(umockdev_testbed_add_from_string(testbed_, canonCameraWithoutStrings().c_str(), &error))
            << (error ? error->message : "unknown error");
        const std::string recording = dir_.file("camera.ioctl", kCanonCameraIoctl);
        ASSERT_TRUE(umockdev_testbed_load_ioctl(testbed_, kCanonCameraNode, recording.c_str(), &error))
            << (error ? error->message : "unknown error");
    }
    void TearDown() override { g_object_unref(testbed_); }

    static constexpr const char* kRule = R"(SUBSYSTEM=="usb", ATTR{idVendor}=="04a9")";
    TempDir dir_;
    UMockdevTestbed* testbed_ = nullptr;
};

TEST_F(ProbeCommandCameraTest, TableSaysWhichStringsLibusbWasAskedForAndThatTheReadsFailed) {
    auto result = runDevlet({"probe", "usb", "--rule", kRule});
    EXPECT_EQ(result.exitCode, 0) << result.output;
    EXPECT_TRUE(contains(result.output, std::string("matches ") + kCanonCameraDevpath)) << result.output;
    EXPECT_TRUE(contains(result.output,
                         "libusb read of the USB strings sysfs lacks (manufacturer, product, serial): "
                         "nothing read; failed:"))
        << result.output;
    EXPECT_TRUE(contains(result.output, "USB_VENDOR_ID=04a9")) << result.output;
    EXPECT_FALSE(contains(result.output, "USB_SERIAL=")) << result.output;
}

TEST_F(ProbeCommandCameraTest, JsonHoldsTheLibusbReadOfEachMatch) {
    auto result = runDevlet({"probe", "usb", "--json", "--rule", kRule});
    ASSERT_EQ(result.exitCode, 0) << result.output;
    boost::system::error_code error;
    const boost::json::value document = boost::json::parse(result.output, error);
    ASSERT_FALSE(error) << error.message() << ": " << result.output;
    const auto& match = document.at("ruleSets").at(0).at("rules").at(0).at("matches").at(0);
    const auto& strings = match.at("usbStrings");
    EXPECT_EQ(strings.at("usbDevice").as_string(), kCanonCameraDevpath);
    EXPECT_EQ(strings.at("sysfsLacks").as_array().size(), 3u);
    EXPECT_TRUE(strings.at("read").as_object().empty());
    EXPECT_FALSE(strings.at("failed").as_array().empty());
    const auto& instance = document.at("ruleSets").at(0).at("instances").at(0);
    EXPECT_FALSE(instance.at("properties").as_object().contains("USB_SERIAL"));
}

TEST_F(ProbeCommandTest, DevicesWithEveryStringInSysfsAreNotAskedThroughLibusb) {
    auto result = runDevlet({"probe", "usb", "--json", "--rule", R"(SUBSYSTEM=="video4linux")"});
    ASSERT_EQ(result.exitCode, 0) << result.output;
    const boost::json::value document = boost::json::parse(result.output);
    const auto& match = document.at("ruleSets").at(0).at("rules").at(0).at("matches").at(0);
    EXPECT_FALSE(match.as_object().contains("usbStrings"));
}

// A testbed holding one recording, for the tests of other devices.
class ProbeCommandRecordingTest : public ::testing::Test {
protected:
    void load(const char* description) {
        testbed_ = umockdev_testbed_new();
        GError* error = nullptr;
        ASSERT_TRUE(umockdev_testbed_add_from_string(testbed_, description, &error))
            << (error ? error->message : "unknown error");
    }
    void TearDown() override {
        if (testbed_) g_object_unref(testbed_);
    }

    UMockdevTestbed* testbed_ = nullptr;
};

class ProbeCommandSerialAdapterTest : public ProbeCommandRecordingTest {
protected:
    void SetUp() override { load(kSerialAdapterTestbed); }
};

TEST_F(ProbeCommandSerialAdapterTest, AkrisRulePrintsTheTtyNodeAndTheAdaptersProperties) {
    auto result = runDevlet({"probe", "usb", "--rule", R"(SUBSYSTEM=="tty", ATTRS{idVendor}=="0403")"});
    EXPECT_EQ(result.exitCode, 0) << result.output;
    EXPECT_TRUE(contains(result.output, std::string("matches ") + kSerialAdapterTty + " (/dev/ttyUSB0)\n"))
        << result.output;
    EXPECT_TRUE(contains(result.output,
                         std::string("the parent filters hold on \"") + kSerialAdapterUsbDevpath + "\""))
        << result.output;
    for (const char* property : {"UDEV_DEVNODE=/dev/ttyUSB0", "USB_VENDOR_ID=0403", "USB_PRODUCT_ID=6015",
                                 "USB_SERIAL=FT50KUPS", "USB_PORT_PATH=1-10"}) {
        EXPECT_TRUE(contains(result.output, property)) << property << "\n" << result.output;
    }
    // The other devices are in other subsystems: counted, not listed.
    EXPECT_TRUE(contains(result.output, "6 other device(s) in other subsystems do not match"))
        << result.output;
}

TEST_F(ProbeCommandSerialAdapterTest, WrongVendorNamesEachDeviceUpTheChainAndWhatItHas) {
    auto result = runDevlet({"probe", "usb", "--rule", R"(SUBSYSTEM=="tty", ATTRS{idVendor}=="067b")"});
    EXPECT_EQ(result.exitCode, 0) << result.output;
    EXPECT_TRUE(contains(result.output, std::string("does not match ") + kSerialAdapterTty)) << result.output;
    EXPECT_TRUE(contains(result.output, std::string("\"") + kSerialAdapterUsbDevpath +
                                            R"(": ATTRS{idVendor}=="067b" fails, ATTR{idVendor} is "0403")"))
        << result.output;
    EXPECT_TRUE(contains(result.output, "no device matches")) << result.output;
}

TEST_F(ProbeCommandSerialAdapterTest, AllListsTheGpioChipWithTheSubsystemThatExcludedIt) {
    auto result = runDevlet({"probe", "usb", "--all", "--json", "--rule", R"(SUBSYSTEM=="tty")"});
    ASSERT_EQ(result.exitCode, 0) << result.output;
    const boost::json::value document = boost::json::parse(result.output);
    const auto& rule = document.at("ruleSets").at(0).at("rules").at(0);
    EXPECT_EQ(rule.at("matches").as_array().size(), 1u);
    bool listed = false;
    for (const auto& excluded : rule.at("excluded").as_array()) {
        if (excluded.at("devpath").as_string() != kSerialAdapterGpiochip) continue;
        listed = true;
        EXPECT_TRUE(
            contains(std::string(excluded.at("excludedBy").as_string()), R"(SUBSYSTEM=="tty" does not hold)"))
            << excluded;
    }
    EXPECT_TRUE(listed) << result.output;
}

class ProbeCommandKeyboardTest : public ProbeCommandRecordingTest {
protected:
    void SetUp() override { load(kKeyboardTestbed); }
};

TEST_F(ProbeCommandKeyboardTest, AncestorRuleSaysWhichHubTheParentFiltersHeldOn) {
    auto result =
        runDevlet({"probe", "usb", "--rule", R"(SUBSYSTEM=="input", KERNEL=="event*", KERNELS=="1-1.5")"});
    EXPECT_EQ(result.exitCode, 0) << result.output;
    EXPECT_TRUE(contains(result.output, std::string("matches ") + kKeyboardEvent + " (/dev/input/event5)\n"))
        << result.output;
    EXPECT_TRUE(contains(result.output,
                         "the parent filters hold on \"/devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.5\""))
        << result.output;
    // The input device beside the node is in the subsystem: listed with its reason.
    EXPECT_TRUE(contains(result.output, std::string("does not match ") + kKeyboardInput + "\n" +
                                            R"(      KERNEL=="event*" does not hold: KERNEL is "input5")"))
        << result.output;
    EXPECT_TRUE(contains(result.output, "USB_PORT_PATH=1-1.5.4.2")) << result.output;
    EXPECT_FALSE(contains(result.output, "USB_SERIAL=")) << result.output;
}

TEST_F(ProbeCommandKeyboardTest, ParentFiltersSplitOverTwoDevicesAreExplainedPerDevice) {
    const std::string filters = R"(SUBSYSTEM=="input", KERNEL=="event*", ATTRS{idProduct}=="0007", )"
                                R"(ATTRS{product}=="Kinesis Keyboard Hub")";
    auto result = runDevlet({"probe", "usb", "--json", "--rule", filters});
    ASSERT_EQ(result.exitCode, 0) << result.output;
    const boost::json::value document = boost::json::parse(result.output);
    const auto& rule = document.at("ruleSets").at(0).at("rules").at(0);
    EXPECT_TRUE(rule.at("matches").as_array().empty());
    std::string why;
    for (const auto& excluded : rule.at("excluded").as_array()) {
        if (excluded.at("devpath").as_string() == kKeyboardEvent) why = excluded.at("excludedBy").as_string();
    }
    // The keyboard has the product id but no product string, its hub the string but
    // another product id.
    EXPECT_TRUE(contains(
        why, std::string("\"") + kKeyboardUsbDevpath +
                 R"(": ATTRS{product}=="Kinesis Keyboard Hub" fails, there is no attribute product)"))
        << why;
    EXPECT_TRUE(contains(why, std::string("\"") + kKeyboardHubDevpath +
                                  R"(": ATTRS{idProduct}=="0007" fails, ATTR{idProduct} is "0081")"))
        << why;
    EXPECT_TRUE(document.at("ruleSets").at(0).at("instances").as_array().empty());
}

TEST_F(ProbeCommandKeyboardTest, ConfigurationWithStableIdentityAndGroupingShowsOneInstance) {
    TempDir dir;
    writeFile(dir.path() / "keyboards.yaml",
              "apiVersion: akri.sh/v0\n"
              "kind: Configuration\n"
              "metadata:\n"
              "  name: keyboards\n"
              "spec:\n"
              "  discoveryHandler:\n"
              "    name: udev\n"
              "    discoveryDetails: |\n"
              "      udevRules:\n"
              "        - 'ATTRS{idVendor}==\"05f3\", ATTRS{idProduct}==\"0007\"'\n"
              "      groupRecursive: true\n"
              "      stableIdentity: usb\n"
              "  capacity: 1\n");
    auto result = runDevlet({"probe", "usb", "--json", "--conf-dir", dir.path().string()});
    ASSERT_EQ(result.exitCode, 0) << result.output;
    const boost::json::value document = boost::json::parse(result.output);
    const auto& instances = document.at("ruleSets").at(0).at("instances").as_array();
    ASSERT_EQ(instances.size(), 1u) << result.output;
    EXPECT_EQ(instances[0].at("id").as_string(), "usb:05f3:0007:port:1-1.5.4.2");
    const auto& properties = instances[0].at("properties");
    EXPECT_EQ(properties.at("UDEV_DEVNODE_0").as_string(), "/dev/bus/usb/001/009");
    EXPECT_EQ(properties.at("UDEV_DEVNODE_1").as_string(), "/dev/input/event5");
}

// The shipped webcam configuration on a laptop whose camera is two cameras on one USB
// device (colour on interface 0, infrared on interface 2): one instance per capture node,
// each with UDEV_DEVNODE, as a broker written for Akri expects.
class ProbeCommandDualCameraTest : public ProbeCommandRecordingTest {
protected:
    void SetUp() override { load(kDualCameraTestbed); }
};

TEST_F(ProbeCommandDualCameraTest, ShippedCameraExampleOffersEachCaptureNodeWithItsOwnDevnode) {
    const char* examples = std::getenv("DEVLET_EXAMPLES_DIR");
    ASSERT_NE(examples, nullptr) << "meson sets DEVLET_EXAMPLES_DIR";
    const std::string file = std::string(examples) + "/conf.d/usb-cameras.yaml";
    auto result = runDevlet({"probe", "usb", "--json", "--configuration", file});
    ASSERT_EQ(result.exitCode, 0) << result.output;
    const boost::json::value document = boost::json::parse(result.output);
    const auto& instances = document.at("ruleSets").at(0).at("instances").as_array();
    ASSERT_EQ(instances.size(), 2u) << result.output;
    const std::string serial = std::string("usb:0bda:58e6:") + kDualCameraSerial;
    EXPECT_EQ(instances[0].at("id").as_string(), serial);
    EXPECT_EQ(instances[0].at("properties").at("UDEV_DEVNODE").as_string(), "/dev/video0");
    EXPECT_EQ(instances[1].at("id").as_string(), serial + ":if02");
    EXPECT_EQ(instances[1].at("properties").at("UDEV_DEVNODE").as_string(), "/dev/video2");
    for (const auto& instance : instances) {
        EXPECT_FALSE(instance.at("properties").as_object().contains("UDEV_DEVNODE_0")) << result.output;
    }
}

}  // namespace
}  // namespace devlet::test

#endif

int main(int argc, char** argv) {
    return devlet::test::runUnderUmockdev(argc, argv);
}
