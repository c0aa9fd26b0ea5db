// The gpu probe end to end on umockdev testbeds: the recorded HD 4000 is offered at start,
// and udev events on the drm and pci subsystems (a card plugged and removed, a driver
// rebound to vfio-pci, SR-IOV virtual functions created) update the snapshot without
// polling, re-reading only the cards an event concerns (counted through the sysfs
// reader's hook). Runs under umockdev-wrapper; skips (77) where umockdev is not available.

#include <gtest/gtest.h>

#include "tests/probes/usb/umockdev_main.h"

#if DEVLET_HAVE_UMOCKDEV

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <stdlib.h>
#include <umockdev.h>
#include <unistd.h>

#include "probes/gpu/gpu_handler.h"
#include "runtime/configuration.h"
#include "tests/probes/gpu/gpu_testbeds.h"

namespace devlet::gpu {
namespace {

using namespace std::chrono_literals;

constexpr const char* kPort = "/devices/pci0000:00/0000:00:01.0";
constexpr const char* kXe = "/devices/pci0000:00/0000:00:01.0/0000:03:00.0";

class RecordingSink : public ProbeSink {
public:
    void reportSnapshot(const std::string& configuration, std::vector<Instance> instances) override {
        EXPECT_EQ(configuration, "gpus");
        snapshots.push_back(std::move(instances));
    }
    void reportProbeError(const std::string&, const std::string& message) override {
        if (!message.empty()) errors.push_back(message);
    }
    void reportScan(const std::string&, ScanReport scan) override { scans.push_back(std::move(scan)); }
    std::vector<std::vector<Instance>> snapshots;
    std::vector<ScanReport> scans;
    std::vector<std::string> errors;
};

std::vector<std::string> ids(const std::vector<Instance>& instances) {
    std::vector<std::string> result;
    for (const Instance& instance : instances) result.push_back(instance.id);
    return result;
}

test::SyntheticGpu xeCard() {
    test::SyntheticGpu gpu;
    gpu.parent = kPort;
    gpu.address = "0000:03:00.0";
    gpu.card = 1;
    gpu.numaNode = 0;
    gpu.tiles = 2;
    gpu.vramPerTile = 8589934592ull;
    return gpu;
}

class GpuProbeTest : public ::testing::Test {
protected:
    void SetUp() override {
        testbed_ = umockdev_testbed_new();
        add(test::kHd4000Testbed);
        configuration_.name = "gpus";
        configuration_.handler = "gpu";
    }

    void TearDown() override {
        if (probe_) probe_->stop();
        probe_.reset();
        g_object_unref(testbed_);
    }

    void add(const std::string& description) {
        GError* error = nullptr;
        ASSERT_TRUE(umockdev_testbed_add_from_string(testbed_, description.c_str(), &error))
            << (error ? error->message : "unknown error");
    }

    void startProbe() {
        ASSERT_TRUE(handler_.check(configuration_).empty());
        probe_ = handler_.createProbe(configuration_, loop_, sink_);
        probe_->start();
    }

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

    // The xe card's driver link now names `driver` (the testbed API cannot replace a link).
    void rebind(const std::string& driver) {
        const std::string sys = test::testbedSysDir(testbed_);
        ASSERT_EQ(::unlink((sys + kXe + "/driver").c_str()), 0);
        umockdev_testbed_set_attribute_link(testbed_, (std::string("/sys") + kXe).c_str(), "driver",
                                            ("../../../../bus/pci/drivers/" + driver).c_str());
    }

    UMockdevTestbed* testbed_ = nullptr;
    Configuration configuration_;
    boost::asio::io_context loop_;
    RecordingSink sink_;
    GpuHandler handler_;
    std::unique_ptr<Probe> probe_;
};

TEST_F(GpuProbeTest, StartOffersTheRecordedHd4000) {
    startProbe();
    ASSERT_TRUE(runUntilSnapshots(1));
    ASSERT_EQ(ids(sink_.snapshots[0]), (std::vector<std::string>{"0000:00:02.0"}));
    const Instance& gpu = sink_.snapshots[0][0];
    ASSERT_EQ(gpu.nodes.size(), 1u);
    EXPECT_EQ(gpu.nodes[0].hostPath, "/dev/dri/card0");
    EXPECT_EQ(gpu.properties.at("GPU_PCI_DEVICE_ID"), "0x0166");
    EXPECT_EQ(gpu.properties.at("GPU_DRIVER"), "i915");
    EXPECT_EQ(gpu.properties.at("GPU_TYPE"), "integrated");
    EXPECT_TRUE(sink_.errors.empty()) << sink_.errors.front();
}

TEST_F(GpuProbeTest, CardPluggedWhileRunningIsOfferedAndRemovedIsWithdrawn) {
    startProbe();
    ASSERT_TRUE(runUntilSnapshots(1));
    add(test::pciePort(kPort) + test::gpuTestbed(xeCard()));
    ASSERT_TRUE(runUntil([&] { return sink_.snapshots.back().size() == 2; }));
    const Instance& xe = sink_.snapshots.back()[1];
    EXPECT_EQ(xe.id, "0000:03:00.0");
    EXPECT_EQ(xe.properties.at("GPU_LOCAL_MEMORY_BYTES"), "17179869184");
    EXPECT_EQ(xe.properties.at("GPU_TILES"), "2");
    EXPECT_EQ(xe.numaNode, 0);

    // The kernel drops the device from sysfs before udev forwards the remove events; the
    // loop does not run until both are done, which is that order as the probe sees it
    // (umockdev sends no event for a device it no longer has).
    uevent(std::string(kXe) + "/drm/card1", "remove");
    uevent(kXe, "remove");
    umockdev_testbed_remove_device(testbed_, (std::string("/sys") + kXe + "/drm/card1").c_str());
    umockdev_testbed_remove_device(testbed_, (std::string("/sys") + kXe + "/drm/renderD129").c_str());
    umockdev_testbed_remove_device(testbed_, (std::string("/sys") + kXe).c_str());
    ASSERT_TRUE(runUntil([&] { return sink_.snapshots.back().size() == 1; }));
    EXPECT_EQ(ids(sink_.snapshots.back()), (std::vector<std::string>{"0000:00:02.0"}));
}

TEST_F(GpuProbeTest, DriverRebindToVfioWithdrawsTheGpuAndBackBringsItBack) {
    add(test::pciePort(kPort) + test::gpuTestbed(xeCard()));
    startProbe();
    ASSERT_TRUE(runUntilSnapshots(1));
    ASSERT_EQ(sink_.snapshots[0].size(), 2u);
    rebind("vfio-pci");
    uevent(kXe, "bind");
    ASSERT_TRUE(runUntil([&] { return sink_.snapshots.back().size() == 1; }));
    EXPECT_EQ(ids(sink_.snapshots.back()), (std::vector<std::string>{"0000:00:02.0"}));
    rebind("xe");
    uevent(kXe, "bind");
    ASSERT_TRUE(runUntil([&] { return sink_.snapshots.back().size() == 2; }));
}

TEST_F(GpuProbeTest, EnablingVirtualFunctionsSwapsThePhysicalFunctionForItsVfs) {
    test::SyntheticGpu pf = xeCard();
    pf.sriovNumVfs = 0;
    add(test::pciePort(kPort) + test::gpuTestbed(pf));
    startProbe();
    ASSERT_TRUE(runUntilSnapshots(1));
    ASSERT_EQ(ids(sink_.snapshots[0]), (std::vector<std::string>{"0000:00:02.0", "0000:03:00.0"}));

    // What echo 2 > sriov_numvfs does: the VFs appear, and the PF says how many it has.
    umockdev_testbed_set_attribute(testbed_, (std::string("/sys") + kXe).c_str(), "sriov_numvfs", "2");
    for (int vf = 1; vf <= 2; ++vf) {
        test::SyntheticGpu gpu;
        gpu.parent = kPort;
        gpu.address = "0000:03:00." + std::to_string(vf);
        gpu.card = 1 + vf;
        gpu.physfn = "0000:03:00.0";
        add(test::gpuTestbed(gpu));
    }
    uevent(kXe, "change");
    ASSERT_TRUE(runUntil([&] {
        return sink_.snapshots.back().size() == 3 && sink_.snapshots.back()[1].id != "0000:03:00.0";
    }));
    EXPECT_EQ(ids(sink_.snapshots.back()),
              (std::vector<std::string>{"0000:00:02.0", "0000:03:00.1", "0000:03:00.2"}));
    EXPECT_EQ(sink_.snapshots.back()[1].properties.at("GPU_SRIOV_PHYSICAL_FUNCTION"), "0000:03:00.0");
}

TEST_F(GpuProbeTest, EventsThatChangeNothingReportNothing) {
    startProbe();
    ASSERT_TRUE(runUntilSnapshots(1));
    uevent(test::kHd4000Devpath, "change");
    uevent(std::string(test::kHd4000Devpath) + "/drm/card0", "change");
    // A device plugged afterwards proves the changes were read before it.
    add(test::pciePort(kPort) + test::gpuTestbed(xeCard()));
    ASSERT_TRUE(runUntil([&] { return sink_.snapshots.back().size() == 2; }));
    EXPECT_EQ(sink_.snapshots.size(), 2u);
}

TEST_F(GpuProbeTest, NodeFeatureFileFollowsTheOfferedGpusAndGoesWithTheProbe) {
    char pattern[] = "/tmp/devlet-gpu-features-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    SysfsRoots roots;
    roots.nfdFeatureDir = pattern;
    GpuHandler handler(roots);
    probe_ = handler.createProbe(configuration_, loop_, sink_);
    probe_->start();
    ASSERT_TRUE(runUntilSnapshots(1));
    const std::string file = std::string(pattern) + "/devlet-gpu-gpus";
    auto read = [&] {
        std::ifstream in(file);
        std::stringstream text;
        text << in.rdbuf();
        return text.str();
    };
    EXPECT_EQ(read(), "devlet-gpu.gpus.count=1\ndevlet-gpu.gpus.memory=0\ndevlet-gpu.gpus.tiles=1\n");
    add(test::pciePort(kPort) + test::gpuTestbed(xeCard()));
    ASSERT_TRUE(runUntil([&] { return sink_.snapshots.back().size() == 2; }));
    EXPECT_NE(read().find("devlet-gpu.gpus.count=2\n"), std::string::npos) << read();
    EXPECT_NE(read().find("devlet-gpu.gpus.numa-gpu-map=0-1\n"), std::string::npos) << read();
    probe_->stop();
    EXPECT_FALSE(std::filesystem::exists(file));
    std::filesystem::remove_all(pattern);
}

// The probe with the sysfs reader's card reads recorded, in order.
class GpuProbeReadsTest : public GpuProbeTest {
protected:
    void startCountingProbe(const std::string& details = "") {
        SysfsRoots roots;
        roots.nfdFeatureDir.clear();
        roots.cardRead = [this](const std::string& card) { reads_.push_back(card); };
        counting_ = std::make_unique<GpuHandler>(roots);
        configuration_.discoveryDetails = details;
        ASSERT_TRUE(counting_->check(configuration_).empty());
        probe_ = counting_->createProbe(configuration_, loop_, sink_);
        probe_->start();
    }
    // The reads since the last call.
    std::vector<std::string> takeReads() { return std::exchange(reads_, {}); }

    std::vector<std::string> reads_;
    std::unique_ptr<GpuHandler> counting_;
};

constexpr const char* kSecondPort = "/devices/pci0000:00/0000:00:1c.0";

test::SyntheticGpu secondXeCard() {
    test::SyntheticGpu gpu = xeCard();
    gpu.parent = kSecondPort;
    gpu.address = "0000:05:00.0";
    gpu.card = 2;
    return gpu;
}

TEST_F(GpuProbeReadsTest, RebindingOneCardReReadsOnlyThatCard) {
    add(test::pciePort(kPort) + test::gpuTestbed(xeCard()) + test::pciePort(kSecondPort) +
        test::gpuTestbed(secondXeCard()));
    startCountingProbe();
    ASSERT_TRUE(runUntilSnapshots(1));
    ASSERT_EQ(ids(sink_.snapshots[0]),
              (std::vector<std::string>{"0000:00:02.0", "0000:03:00.0", "0000:05:00.0"}));
    EXPECT_EQ(takeReads(), (std::vector<std::string>{"card0", "card1", "card2"}));

    rebind("vfio-pci");
    uevent(kXe, "bind");
    ASSERT_TRUE(runUntil([&] { return sink_.snapshots.back().size() == 2; }));
    EXPECT_EQ(ids(sink_.snapshots.back()), (std::vector<std::string>{"0000:00:02.0", "0000:05:00.0"}));
    EXPECT_EQ(takeReads(), std::vector<std::string>{"card1"});

    // A render node's event is its card's; a connector's (a monitor plugged) too. Each is
    // handled once its reads are in.
    uevent(std::string(kXe) + "/drm/renderD129", "change");
    ASSERT_TRUE(runUntil([&] { return !reads_.empty(); }));
    EXPECT_EQ(takeReads(), std::vector<std::string>{"card1"});
    uevent(std::string(test::kHd4000Devpath) + "/drm/card0/card0-HDMI-A-1", "change");
    ASSERT_TRUE(runUntil([&] { return !reads_.empty(); }));
    EXPECT_EQ(takeReads(), std::vector<std::string>{"card0"});

    rebind("xe");
    uevent(kXe, "bind");
    ASSERT_TRUE(runUntil([&] { return sink_.snapshots.back().size() == 3; }));
    EXPECT_EQ(takeReads(), std::vector<std::string>{"card1"});
    // Nothing changed in between: three snapshots in all.
    EXPECT_EQ(sink_.snapshots.size(), 3u);
    EXPECT_TRUE(sink_.errors.empty()) << sink_.errors.front();
}

TEST_F(GpuProbeReadsTest, VirtualFunctionsUnderAPhysicalFunctionAreReadWithItAndNothingElse) {
    test::SyntheticGpu pf = xeCard();
    pf.sriovNumVfs = 0;
    add(test::pciePort(kPort) + test::gpuTestbed(pf) + test::pciePort(kSecondPort) +
        test::gpuTestbed(secondXeCard()));
    startCountingProbe();
    ASSERT_TRUE(runUntilSnapshots(1));
    ASSERT_EQ(ids(sink_.snapshots[0]),
              (std::vector<std::string>{"0000:00:02.0", "0000:03:00.0", "0000:05:00.0"}));
    takeReads();

    // echo 2 > sriov_numvfs: the PF's count changes (no event of its own here) and the VFs
    // appear, each with add events for its PCI function and DRM nodes.
    umockdev_testbed_set_attribute(testbed_, (std::string("/sys") + kXe).c_str(), "sriov_numvfs", "2");
    for (int vf = 1; vf <= 2; ++vf) {
        test::SyntheticGpu gpu;
        gpu.parent = kPort;
        gpu.address = "0000:03:00." + std::to_string(vf);
        gpu.card = 2 + vf;
        gpu.physfn = "0000:03:00.0";
        add(test::gpuTestbed(gpu));
    }
    const std::vector<std::string> withVfs = {"0000:00:02.0", "0000:03:00.1", "0000:03:00.2", "0000:05:00.0"};
    ASSERT_TRUE(runUntil([&] { return ids(sink_.snapshots.back()) == withVfs; }))
        << ::testing::PrintToString(ids(sink_.snapshots.back()));
    // The PF was read because its VFs name it; the other GPUs were not read at all.
    std::vector<std::string> reads = takeReads();
    EXPECT_NE(std::find(reads.begin(), reads.end(), "card1"), reads.end());
    EXPECT_NE(std::find(reads.begin(), reads.end(), "card3"), reads.end());
    EXPECT_NE(std::find(reads.begin(), reads.end(), "card4"), reads.end());
    EXPECT_EQ(std::find(reads.begin(), reads.end(), "card0"), reads.end());
    EXPECT_EQ(std::find(reads.begin(), reads.end(), "card2"), reads.end());
    // No snapshot ever offered the PF beside one of its VFs.
    for (const std::vector<Instance>& snapshot : sink_.snapshots) {
        const std::vector<std::string> offered = ids(snapshot);
        const bool pf = std::find(offered.begin(), offered.end(), "0000:03:00.0") != offered.end();
        const bool vf = std::find(offered.begin(), offered.end(), "0000:03:00.1") != offered.end();
        EXPECT_FALSE(pf && vf) << ::testing::PrintToString(offered);
    }

    // echo 0 > sriov_numvfs: the VFs leave; their remove events lead to the PF, offered again.
    umockdev_testbed_set_attribute(testbed_, (std::string("/sys") + kXe).c_str(), "sriov_numvfs", "0");
    for (int vf = 1; vf <= 2; ++vf) {
        const std::string devpath = std::string(kPort) + "/0000:03:00." + std::to_string(vf);
        const std::string card = devpath + "/drm/card" + std::to_string(2 + vf);
        uevent(card, "remove");
        uevent(devpath, "remove");
        for (const std::string& device :
             {card, devpath + "/drm/renderD" + std::to_string(128 + 2 + vf), devpath})
            umockdev_testbed_remove_device(testbed_, ("/sys" + device).c_str());
    }
    ASSERT_TRUE(runUntil([&] {
        return ids(sink_.snapshots.back()) ==
               std::vector<std::string>{"0000:00:02.0", "0000:03:00.0", "0000:05:00.0"};
    })) << ::testing::PrintToString(ids(sink_.snapshots.back()));
    reads = takeReads();
    EXPECT_NE(std::find(reads.begin(), reads.end(), "card1"), reads.end());
    EXPECT_EQ(std::find(reads.begin(), reads.end(), "card0"), reads.end());
    EXPECT_EQ(std::find(reads.begin(), reads.end(), "card2"), reads.end());
    EXPECT_TRUE(sink_.errors.empty()) << sink_.errors.front();
}

// The reason a card is not offered, in the last pass's report; empty if it is not listed.
std::string lastReason(const std::vector<ScanReport>& scans, const std::string& id) {
    if (scans.empty()) return {};
    for (const ExcludedDevice& device : scans.back().excluded) {
        if (device.id == id) return device.reason;
    }
    return {};
}

TEST_F(GpuProbeReadsTest, PassAfterAnEventStillNamesEveryCardNotOffered) {
    // A PF with two VFs enabled behind the second port, and the plain xe card.
    test::SyntheticGpu pf = secondXeCard();
    pf.sriovNumVfs = 2;
    std::string testbed = test::pciePort(kPort) + test::gpuTestbed(xeCard()) + test::pciePort(kSecondPort) +
                          test::gpuTestbed(pf);
    for (int vf = 1; vf <= 2; ++vf) {
        test::SyntheticGpu gpu;
        gpu.parent = kSecondPort;
        gpu.address = "0000:05:00." + std::to_string(vf);
        gpu.card = 2 + vf;
        gpu.physfn = "0000:05:00.0";
        testbed += test::gpuTestbed(gpu);
    }
    add(testbed);
    startCountingProbe();
    ASSERT_TRUE(runUntilSnapshots(1));
    EXPECT_EQ(ids(sink_.snapshots[0]),
              (std::vector<std::string>{"0000:00:02.0", "0000:03:00.0", "0000:05:00.1", "0000:05:00.2"}));
    EXPECT_NE(lastReason(sink_.scans, "0000:05:00.0").find("SR-IOV physical function"), std::string::npos)
        << lastReason(sink_.scans, "0000:05:00.0");
    takeReads();

    rebind("vfio-pci");
    uevent(kXe, "bind");
    ASSERT_TRUE(runUntil([&] { return sink_.snapshots.back().size() == 3; }));
    EXPECT_EQ(takeReads(), std::vector<std::string>{"card1"});
    // The report after the event is complete: the PF read at start is still named.
    EXPECT_NE(lastReason(sink_.scans, "0000:05:00.0").find("SR-IOV physical function"), std::string::npos)
        << lastReason(sink_.scans, "0000:05:00.0");
    EXPECT_NE(lastReason(sink_.scans, "0000:03:00.0").find("vfio-pci"), std::string::npos)
        << lastReason(sink_.scans, "0000:03:00.0");
    EXPECT_EQ(sink_.scans.back().excluded.size(), 2u);
}

TEST_F(GpuProbeReadsTest, SafetyNetRescanReadsEveryCard) {
    add(test::pciePort(kPort) + test::gpuTestbed(xeCard()));
    startCountingProbe("rescanIntervalSeconds: 1\n");
    ASSERT_TRUE(runUntilSnapshots(1));
    EXPECT_EQ(takeReads(), (std::vector<std::string>{"card0", "card1"}));
    // The next rescan, whenever it comes, reads both cards again.
    ASSERT_TRUE(runUntil([&] { return reads_.size() >= 2; }));
    EXPECT_EQ(takeReads(), (std::vector<std::string>{"card0", "card1"}));
}

TEST_F(GpuProbeTest, BrokenDetailsAreRejectedByCheck) {
    configuration_.discoveryDetails = "vendor: 0x8086\n";
    const std::vector<DetailsProblem> problems = handler_.check(configuration_);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_NE(problems[0].message.find("did you mean \"vendors\""), std::string::npos) << problems[0].message;
}

}  // namespace
}  // namespace devlet::gpu

#endif

int main(int argc, char** argv) {
    return devlet::test::runUnderUmockdev(argc, argv);
}
