// libusb details on a recorded camera: libusb lists the Canon camera of a umockdev testbed
// from its recorded descriptors and opens its node, whose ioctl recording holds no control
// transfers, so every string descriptor read fails, as on a device that refuses them. The
// udev probe holds the camera back until that read (on its worker thread) has failed,
// then keeps what sysfs has and leaves the rest out. Runs under
// umockdev-wrapper; skips (77) where umockdev is not available.

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

#include "tests/probes/usb/umockdev_main.h"

#if DEVLET_HAVE_UMOCKDEV

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <umockdev.h>

#include "probes/usb/udev_handler.h"
#include "probes/usb/usb_descriptors.h"
#include "runtime/configuration.h"
#include "tests/probes/usb/canon_camera_testbed.h"
#include "tests/support/temp_dir.h"

namespace devlet::usb {
namespace {

using namespace std::chrono_literals;

class RecordingSink : public ProbeSink {
public:
    void reportSnapshot(const std::string&, std::vector<Instance> instances) override {
        snapshots.push_back(std::move(instances));
    }
    void reportProbeError(const std::string&, const std::string& message) override {
        if (!message.empty()) errors.push_back(message);
    }

    std::vector<std::vector<Instance>> snapshots;
    std::vector<std::string> errors;
};

class UsbDescriptorsTest : public ::testing::Test {
protected:
    void SetUp() override { testbed_ = umockdev_testbed_new(); }
    void TearDown() override {
        if (probe_) probe_->stop();
        probe_.reset();
        g_object_unref(testbed_);
    }

    void load(const std::string& description) {
        GError* error = nullptr;
        ASSERT_TRUE(umockdev_testbed_add_from_string(testbed_, description.c_str(), &error))
            << (error ? error->message : "unknown error");
        const std::string recording = dir_.file("camera.ioctl", test::kCanonCameraIoctl);
        ASSERT_TRUE(umockdev_testbed_load_ioctl(testbed_, test::kCanonCameraNode, recording.c_str(), &error))
            << (error ? error->message : "unknown error");
    }

    void startProbe(const std::string& extraDetails = "", UdevHandler* handler = nullptr) {
        if (!handler) handler = &handler_;
        Configuration configuration;
        configuration.name = "cameras";
        configuration.handler = "udev";
        configuration.discoveryDetails =
            "udevRules:\n"
            "  - 'SUBSYSTEM==\"usb\", ENV{DEVTYPE}==\"usb_device\", ATTR{idVendor}==\"04a9\"'\n" +
            extraDetails;
        ASSERT_TRUE(handler->check(configuration).empty());
        probe_ = handler->createProbe(configuration, loop_, sink_);
        probe_->start();
    }

    bool runUntil(const std::function<bool()>& done) {
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (!done() && std::chrono::steady_clock::now() < deadline) {
            loop_.run_one_for(100ms);
            if (loop_.stopped()) loop_.restart();
        }
        return done();
    }
    bool runUntilSnapshots(std::size_t count) {
        return runUntil([&] { return sink_.snapshots.size() >= count; });
    }

    test::TempDir dir_;
    UMockdevTestbed* testbed_ = nullptr;
    boost::asio::io_context loop_;
    RecordingSink sink_;
    UdevHandler handler_;
    std::unique_ptr<Probe> probe_;
};

TEST_F(UsbDescriptorsTest, LibusbReadsTheRecordedCameraAndToleratesRefusedStringReads) {
    load(test::kCanonCameraTestbed);
    const UsbStrings read = readUsbStrings(1, 11, usbStringNames());
    EXPECT_TRUE(read.found);
    EXPECT_EQ(read.vendorId, "04a9");
    EXPECT_EQ(read.productId, "31c0");
    // The recording has no control transfers: the device "refuses" every string read.
    EXPECT_TRUE(read.strings.empty());
    EXPECT_FALSE(read.problems.empty());
}

TEST_F(UsbDescriptorsTest, HubWithoutStringDescriptorsIsNotOpened) {
    load(test::kCanonCameraTestbed);
    // The Intel hub (8087:0020) at 001/002 names no string in its device descriptor.
    const UsbStrings read = readUsbStrings(1, 2, usbStringNames());
    EXPECT_TRUE(read.found);
    EXPECT_EQ(read.vendorId, "8087");
    EXPECT_TRUE(read.strings.empty());
    ASSERT_EQ(read.problems.size(), 3u);
    EXPECT_EQ(read.problems[0], "manufacturer: the device has none");
}

TEST_F(UsbDescriptorsTest, DeviceThatIsNotThereIsNotFound) {
    load(test::kCanonCameraTestbed);
    const UsbStrings read = readUsbStrings(1, 99, usbStringNames());
    EXPECT_FALSE(read.found);
    EXPECT_TRUE(read.strings.empty());
    EXPECT_FALSE(read.problems.empty());
}

TEST_F(UsbDescriptorsTest, ProbeTakesTheCamerasPropertiesFromSysfs) {
    load(test::kCanonCameraTestbed);
    startProbe();
    ASSERT_TRUE(runUntilSnapshots(1));
    EXPECT_TRUE(sink_.errors.empty()) << sink_.errors.front();
    ASSERT_EQ(sink_.snapshots[0].size(), 1u);
    const Instance& camera = sink_.snapshots[0][0];
    EXPECT_EQ(camera.id, test::kCanonCameraDevpath);
    const std::map<std::string, std::string> expected = {
        {"UDEV_DEVNODE", test::kCanonCameraNode},
        {"UDEV_DEVPATH", test::kCanonCameraDevpath},
        {"USB_VENDOR_ID", "04a9"},
        {"USB_PRODUCT_ID", "31c0"},
        {"USB_SERIAL", "C767F1C714174C309255F70E4A7B2EE2"},
        {"USB_MANUFACTURER", "Canon Inc."},
        {"USB_PRODUCT", "Canon Digital Camera"},
        {"USB_BUSNUM", "1"},
        {"USB_DEVNUM", "11"},
        {"USB_PORT_PATH", "1-1.5.2.3"},
        {"USB_SPEED", "480"},
        {"USB_CLASS", "00"},
    };
    EXPECT_EQ(camera.properties, expected);
}

TEST_F(UsbDescriptorsTest, StringsSysfsLacksAreAskedForAndLeftOutWhenTheDeviceRefuses) {
    load(test::canonCameraWithoutStrings());
    startProbe("stableIdentity: usb\n");
    ASSERT_TRUE(runUntil([&] { return !sink_.snapshots.empty() && !sink_.snapshots.back().empty(); }));
    EXPECT_TRUE(sink_.errors.empty()) << sink_.errors.front();
    // Held back while libusb asked the camera: no snapshot ever named it otherwise.
    for (const auto& snapshot : sink_.snapshots) {
        for (const Instance& instance : snapshot) EXPECT_EQ(instance.id, "usb:04a9:31c0:port:1-1.5.2.3");
    }
    ASSERT_EQ(sink_.snapshots.back().size(), 1u);
    const Instance& camera = sink_.snapshots.back()[0];
    // No serial: the stable id falls back to the port path.
    EXPECT_EQ(camera.id, "usb:04a9:31c0:port:1-1.5.2.3");
    EXPECT_FALSE(camera.properties.contains("USB_SERIAL"));
    EXPECT_FALSE(camera.properties.contains("USB_MANUFACTURER"));
    EXPECT_FALSE(camera.properties.contains("USB_PRODUCT"));
    EXPECT_EQ(camera.properties.at("USB_VENDOR_ID"), "04a9");
    EXPECT_EQ(camera.properties.at("USB_DEVNUM"), "11");
    EXPECT_EQ(camera.properties.at("UDEV_DEVNODE"), test::kCanonCameraNode);
}

// A read the test answers when it opens the gate. Shared with the probe's worker thread,
// and opened on every way out of the test, so that stopping the probe never waits forever.
struct ReadGate {
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    std::atomic<int> reads = 0;
    std::atomic<bool> opened = false;
    void open() {
        if (!opened.exchange(true)) release.set_value();
    }
};

TEST_F(UsbDescriptorsTest, CameraWaitsForItsReadAndIsOfferedOnceUnderItsSerial) {
    // The recording refuses every string read, so this read is the test's: it answers with
    // the camera's serial once the test lets it, to show the camera is held back meanwhile.
    auto gate = std::make_shared<ReadGate>();
    struct OpenOnExit {
        std::shared_ptr<ReadGate> gate;
        ~OpenOnExit() { gate->open(); }
    } openOnExit{gate};
    UdevHandler handler([gate](const UsbStringRequest& request) {
        ++gate->reads;
        gate->released.wait();
        UsbStrings read;
        read.found = true;
        if (request.names.contains("serial")) read.strings["serial"] = "C767F1C714174C309255F70E4A7B2EE2";
        return read;
    });
    load(test::canonCameraWithoutStrings());
    startProbe("stableIdentity: usb\n", &handler);
    ASSERT_TRUE(runUntil([&] { return !sink_.snapshots.empty() && gate->reads > 0; }));
    EXPECT_TRUE(sink_.snapshots.back().empty());  // held: its name is not known yet
    gate->open();
    ASSERT_TRUE(runUntil([&] { return !sink_.snapshots.back().empty(); }));
    for (const auto& snapshot : sink_.snapshots) {
        for (const Instance& instance : snapshot) {
            EXPECT_EQ(instance.id, "usb:04a9:31c0:C767F1C714174C309255F70E4A7B2EE2");
        }
    }
    EXPECT_EQ(sink_.snapshots.back()[0].properties.at("USB_SERIAL"), "C767F1C714174C309255F70E4A7B2EE2");
    EXPECT_EQ(gate->reads.load(), 1);
}

TEST_F(UsbDescriptorsTest, HubWhoseDescriptorNamesNoStringIsOfferedWithoutARead) {
    // The Intel hub has no manufacturer, product or serial in sysfs, and its device
    // descriptor (sysfs's `descriptors`) names none: there is nothing to ask it for.
    std::atomic<int> reads = 0;
    UdevHandler handler([&reads](const UsbStringRequest&) {
        ++reads;
        return UsbStrings{};
    });
    load(test::kCanonCameraTestbed);
    Configuration configuration;
    configuration.name = "hubs";
    configuration.handler = "udev";
    configuration.discoveryDetails = "udevRules:\n  - 'SUBSYSTEM==\"usb\", ATTR{idVendor}==\"8087\"'\n";
    probe_ = handler.createProbe(configuration, loop_, sink_);
    probe_->start();
    ASSERT_TRUE(runUntilSnapshots(1));
    ASSERT_EQ(sink_.snapshots[0].size(), 1u);  // in the first snapshot: not held back
    EXPECT_EQ(sink_.snapshots[0][0].properties.at("USB_VENDOR_ID"), "8087");
    probe_->stop();
    probe_.reset();
    EXPECT_EQ(reads.load(), 0);
}

TEST_F(UsbDescriptorsTest, CameraThatVanishesIsWithdrawnAndNoLongerListed) {
    load(test::canonCameraWithoutStrings());
    startProbe();
    ASSERT_TRUE(runUntil([&] { return !sink_.snapshots.empty() && sink_.snapshots.back().size() == 1; }));
    const std::size_t offered = sink_.snapshots.size();
    const std::string syspath = std::string("/sys") + test::kCanonCameraDevpath;
    umockdev_testbed_uevent(testbed_, syspath.c_str(), "remove");
    umockdev_testbed_remove_device(testbed_, syspath.c_str());
    ASSERT_TRUE(runUntilSnapshots(offered + 1));
    EXPECT_TRUE(sink_.snapshots.back().empty());
    EXPECT_FALSE(readUsbStrings(1, 11, usbStringNames()).found);
}

}  // namespace
}  // namespace devlet::usb

#endif

int main(int argc, char** argv) {
    return devlet::test::runUnderUmockdev(argc, argv);
}
