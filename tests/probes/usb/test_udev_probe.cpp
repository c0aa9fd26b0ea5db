// The udev probe end to end on a umockdev testbed: a Logitech C920 webcam (facts from a
// real machine's udev database, trimmed to what the rules and the classifier read) is
// enumerated, then unplugged and replugged through uevents on the netlink monitor. Runs
// under umockdev-wrapper; skips (77) where umockdev is not available.

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

#include "tests/probes/usb/umockdev_main.h"

#if DEVLET_HAVE_UMOCKDEV

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <umockdev.h>

#include "probes/usb/udev_handler.h"
#include "runtime/configuration.h"
#include "tests/probes/usb/webcam_testbed.h"

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
        EXPECT_EQ(configuration, "webcams");
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

class UdevProbeTest : public ::testing::Test {
protected:
    void SetUp() override {
        testbed_ = umockdev_testbed_new();
        GError* error = nullptr;
        ASSERT_TRUE(umockdev_testbed_add_from_string(testbed_, test::kWebcamTestbed, &error))
            << (error ? error->message : "unknown error");
        configuration_.name = "webcams";
        configuration_.handler = "udev";
        configuration_.discoveryDetails =
            "udevRules:\n"
            "  - 'SUBSYSTEM==\"video4linux\", ENV{ID_V4L_CAPABILITIES}==\":capture:\"'\n";
    }

    void TearDown() override {
        if (probe_) probe_->stop();
        probe_.reset();
        g_object_unref(testbed_);
    }

    void startProbe() {
        ASSERT_TRUE(handler_.check(configuration_).empty());
        probe_ = handler_.createProbe(configuration_, loop_, sink_);
        probe_->start();
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

    void uevent(const char* devpath, const char* action) {
        umockdev_testbed_uevent(testbed_, (std::string("/sys") + devpath).c_str(), action);
    }

    UMockdevTestbed* testbed_ = nullptr;
    Configuration configuration_;
    boost::asio::io_context loop_;
    RecordingSink sink_;
    UdevHandler handler_;
    std::unique_ptr<Probe> probe_;
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

}  // namespace
}  // namespace devlet::usb

#endif

int main(int argc, char** argv) {
    return devlet::test::runUnderUmockdev(argc, argv);
}
