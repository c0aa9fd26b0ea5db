// The gpu handler's sysfs reader on umockdev testbeds: the recorded HD 4000 laptop, and
// machines built from the i915/xe sysfs facts (xe tiles with VRAM, two NUMA nodes, SR-IOV).
// Runs under umockdev-wrapper; skips (77) where umockdev is not available.

#include <gtest/gtest.h>

#include "tests/probes/usb/umockdev_main.h"

#if DEVLET_HAVE_UMOCKDEV

#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <umockdev.h>

#include "daemon/gpu_probe_command.h"
#include "probes/gpu/gpu_sysfs.h"
#include "tests/probes/gpu/gpu_testbeds.h"

namespace devlet::gpu {
namespace {

class GpuSysfsTest : public ::testing::Test {
protected:
    void SetUp() override { testbed_ = umockdev_testbed_new(); }
    void TearDown() override { g_object_unref(testbed_); }

    void add(const std::string& description) {
        GError* error = nullptr;
        ASSERT_TRUE(umockdev_testbed_add_from_string(testbed_, description.c_str(), &error))
            << (error ? error->message : "unknown error") << "\n"
            << description;
    }

    std::vector<GpuObservation> scan() {
        std::vector<GpuObservation> observations;
        std::vector<GpuScanProblem> problems;
        std::string error;
        EXPECT_TRUE(scanGpus(SysfsRoots{}, observations, problems, error)) << error;
        for (const auto& problem : problems) ADD_FAILURE() << problem.card << ": " << problem.message;
        return observations;
    }

    const GpuObservation* find(const std::vector<GpuObservation>& gpus, const std::string& address) {
        for (const GpuObservation& gpu : gpus) {
            if (gpu.pciAddress == address) return &gpu;
        }
        return nullptr;
    }

    UMockdevTestbed* testbed_ = nullptr;
};

TEST_F(GpuSysfsTest, RecordedHd4000ReadsAsAnIntegratedI915CardWithoutRenderNode) {
    add(test::kHd4000Testbed);
    const std::vector<GpuObservation> gpus = scan();
    ASSERT_EQ(gpus.size(), 1u);
    const GpuObservation& gpu = gpus[0];
    EXPECT_EQ(gpu.card, "card0");
    EXPECT_EQ(gpu.devpath, "/devices/pci0000:00/0000:00:02.0/drm/card0");
    EXPECT_EQ(gpu.pciAddress, "0000:00:02.0");
    EXPECT_EQ(gpu.pciRoot, "pci0000:00");
    EXPECT_EQ(gpu.pciDepth, 1);
    EXPECT_EQ(gpu.vendor, "0x8086");
    EXPECT_EQ(gpu.device, "0x0166");
    EXPECT_EQ(gpu.subsystemVendor, "0x17aa");
    EXPECT_EQ(gpu.subsystemDevice, "0x21fb");
    EXPECT_EQ(gpu.pciClass, "0x030000");
    EXPECT_EQ(gpu.driver, "i915");
    EXPECT_EQ(gpu.cardNode, "/dev/dri/card0");
    EXPECT_TRUE(gpu.cardNodePresent);
    EXPECT_TRUE(gpu.renderNode.empty());
    EXPECT_FALSE(gpu.numaNode.has_value());
    EXPECT_EQ(gpu.tiles, 0);
    EXPECT_EQ(gpu.sriovNumVfs, 0);
    EXPECT_TRUE(gpu.physicalFunction.empty());
    // The mocked node answers no i915 ioctl: memory is unknown, and the reason says so.
    EXPECT_FALSE(gpu.localMemoryBytes.has_value());
    EXPECT_NE(gpu.memorySource.find("unknown"), std::string::npos) << gpu.memorySource;
}

TEST_F(GpuSysfsTest, XeCardWithTwoTilesSumsTheirVramAndKnowsItsNumaNode) {
    add(test::pciePort("/devices/pci0000:00/0000:00:01.0"));
    test::SyntheticGpu gpu;
    gpu.parent = "/devices/pci0000:00/0000:00:01.0";
    gpu.address = "0000:03:00.0";
    gpu.device = "0x0bd5";
    gpu.card = 1;
    gpu.numaNode = 1;
    gpu.localCpus = "8-15";
    gpu.tiles = 2;
    gpu.vramPerTile = 17179869184ull;
    add(test::gpuTestbed(gpu));
    const std::vector<GpuObservation> gpus = scan();
    ASSERT_EQ(gpus.size(), 1u);
    const GpuObservation& xe = gpus[0];
    EXPECT_EQ(xe.pciAddress, "0000:03:00.0");
    EXPECT_EQ(xe.pciDepth, 2);
    EXPECT_EQ(xe.driver, "xe");
    EXPECT_EQ(xe.device, "0x0bd5");
    EXPECT_EQ(xe.tiles, 2);
    ASSERT_TRUE(xe.localMemoryBytes.has_value()) << xe.memorySource;
    EXPECT_EQ(*xe.localMemoryBytes, 2 * 17179869184ull);
    EXPECT_EQ(xe.numaNode, 1);
    EXPECT_EQ(xe.localCpus, "8-15");
    EXPECT_EQ(xe.cardNode, "/dev/dri/card1");
    EXPECT_EQ(xe.renderNode, "/dev/dri/renderD129");
    EXPECT_TRUE(xe.cardNodePresent);
    EXPECT_TRUE(xe.renderNodePresent);
    EXPECT_EQ(xe.byPathLinks, (std::vector<std::string>{"/dev/dri/by-path/pci-0000:03:00.0-card",
                                                        "/dev/dri/by-path/pci-0000:03:00.0-render"}));
}

TEST_F(GpuSysfsTest, I915TilesAreTheCardsGts) {
    test::SyntheticGpu gpu;
    gpu.address = "0000:00:02.0";
    gpu.device = "0x9a49";
    gpu.driver = "i915";
    gpu.tiles = 2;
    add(test::gpuTestbed(gpu));
    const std::vector<GpuObservation> gpus = scan();
    ASSERT_EQ(gpus.size(), 1u);
    EXPECT_EQ(gpus[0].tiles, 2);
    EXPECT_EQ(gpus[0].driver, "i915");
}

TEST_F(GpuSysfsTest, OutOfTreeI915LocalMemoryIsPerTileTimesTiles) {
    add(test::pciePort("/devices/pci0000:00/0000:00:01.0"));
    test::SyntheticGpu gpu;
    gpu.parent = "/devices/pci0000:00/0000:00:01.0";
    gpu.address = "0000:3a:00.0";
    gpu.device = "0x0bd5";
    gpu.driver = "i915";
    gpu.tiles = 2;
    gpu.lmemPerTile = 68719476736ull;
    add(test::gpuTestbed(gpu));
    const std::vector<GpuObservation> gpus = scan();
    ASSERT_EQ(gpus.size(), 1u);
    ASSERT_TRUE(gpus[0].localMemoryBytes.has_value()) << gpus[0].memorySource;
    EXPECT_EQ(*gpus[0].localMemoryBytes, 2 * 68719476736ull);
    EXPECT_EQ(gpus[0].memorySource, "i915 lmem_total_bytes");
}

TEST_F(GpuSysfsTest, GpusOnTwoSocketsReportTheirNumaNodesAndPciRoots) {
    for (const auto& [root, address, card, numa] :
         {std::tuple{"/devices/pci0000:00", "0000:00:01.0", 0, 0},
          std::tuple{"/devices/pci0000:80", "0000:80:01.0", 1, 1}}) {
        add(test::pciePort(std::string(root) + "/" + address));
        test::SyntheticGpu gpu;
        gpu.parent = std::string(root) + "/" + address;
        gpu.address = numa == 0 ? "0000:03:00.0" : "0000:83:00.0";
        gpu.card = card;
        gpu.numaNode = numa;
        gpu.tiles = 1;
        gpu.vramPerTile = 8589934592ull;
        add(test::gpuTestbed(gpu));
    }
    const std::vector<GpuObservation> gpus = scan();
    ASSERT_EQ(gpus.size(), 2u);
    const GpuObservation* first = find(gpus, "0000:03:00.0");
    const GpuObservation* second = find(gpus, "0000:83:00.0");
    ASSERT_TRUE(first && second);
    EXPECT_EQ(first->numaNode, 0);
    EXPECT_EQ(first->pciRoot, "pci0000:00");
    EXPECT_EQ(second->numaNode, 1);
    EXPECT_EQ(second->pciRoot, "pci0000:80");
}

TEST_F(GpuSysfsTest, SriovPhysicalFunctionCountsItsVirtualFunctionsAndEachVfNamesItsPf) {
    add(test::pciePort("/devices/pci0000:00/0000:00:01.0"));
    const std::string port = "/devices/pci0000:00/0000:00:01.0";
    test::SyntheticGpu pf;
    pf.parent = port;
    pf.address = "0000:4d:00.0";
    pf.card = 0;
    pf.tiles = 1;
    pf.vramPerTile = 4294967296ull;
    pf.sriovNumVfs = 2;
    add(test::gpuTestbed(pf));
    for (int vf = 1; vf <= 2; ++vf) {
        test::SyntheticGpu gpu;
        gpu.parent = port;
        gpu.address = "0000:4d:00." + std::to_string(vf);
        gpu.card = vf;
        gpu.physfn = "0000:4d:00.0";
        add(test::gpuTestbed(gpu));
    }
    const std::vector<GpuObservation> gpus = scan();
    ASSERT_EQ(gpus.size(), 3u);
    const GpuObservation* physical = find(gpus, "0000:4d:00.0");
    ASSERT_NE(physical, nullptr);
    EXPECT_EQ(physical->sriovNumVfs, 2);
    EXPECT_EQ(physical->sriovTotalVfs, 7);
    const GpuObservation* virtual1 = find(gpus, "0000:4d:00.1");
    ASSERT_NE(virtual1, nullptr);
    EXPECT_EQ(virtual1->physicalFunction, "0000:4d:00.0");
    EXPECT_EQ(virtual1->sriovNumVfs, 0);
}

TEST_F(GpuSysfsTest, ReadingSomeCardsGivesWhatAFullPassGivesForThemAndNothingForGoneOnes) {
    add(test::kHd4000Testbed);
    add(test::pciePort("/devices/pci0000:00/0000:00:01.0"));
    test::SyntheticGpu gpu;
    gpu.parent = "/devices/pci0000:00/0000:00:01.0";
    gpu.address = "0000:03:00.0";
    gpu.card = 1;
    gpu.tiles = 2;
    gpu.vramPerTile = 8589934592ull;
    add(test::gpuTestbed(gpu));
    const std::vector<GpuObservation> all = scan();
    ASSERT_EQ(all.size(), 2u);

    std::vector<GpuObservation> observations;
    std::vector<GpuScanProblem> problems;
    std::vector<std::string> reads;
    SysfsRoots roots;
    roots.cardRead = [&](const std::string& card) { reads.push_back(card); };
    // card7 never existed: gone, neither an observation nor a problem.
    readGpus(roots, {"card1", "card7"}, observations, problems);
    ASSERT_EQ(observations.size(), 1u);
    EXPECT_EQ(observations[0], all[1]);
    EXPECT_TRUE(problems.empty());
    EXPECT_EQ(reads, (std::vector<std::string>{"card1", "card7"}));

    EXPECT_EQ(cardsOfDevice(roots, "/devices/pci0000:00/0000:00:01.0/0000:03:00.0"),
              std::vector<std::string>{"card1"});
    EXPECT_EQ(cardsOfDevice(roots, test::kHd4000Devpath), std::vector<std::string>{"card0"});
    EXPECT_TRUE(cardsOfDevice(roots, "/devices/pci0000:00/0000:00:01.0").empty());
    EXPECT_TRUE(cardsOfDevice(roots, "/devices/pci0000:00/0000:00:09.0").empty());
}

TEST_F(GpuSysfsTest, NoDrmClassMeansNoGpusAndNoError) {
    add(test::pciePort("/devices/pci0000:00/0000:00:01.0"));
    EXPECT_TRUE(scan().empty());
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

TEST_F(GpuSysfsTest, ProbeCommandPrintsWhatWasReadAndWhyACardIsNotOffered) {
    add(test::kHd4000Testbed);
    add(test::pciePort("/devices/pci0000:00/0000:00:01.0"));
    test::SyntheticGpu pf;
    pf.parent = "/devices/pci0000:00/0000:00:01.0";
    pf.address = "0000:4d:00.0";
    pf.card = 1;
    pf.tiles = 1;
    pf.vramPerTile = 4294967296ull;
    pf.sriovNumVfs = 2;
    add(test::gpuTestbed(pf));
    std::ostringstream out, err;
    ASSERT_EQ(probeGpuCommand({}, out, err), 0) << err.str();
    const std::string text = out.str();
    EXPECT_TRUE(contains(text, "card0: 0000:00:02.0 vendor 0x8086 device 0x0166")) << text;
    EXPECT_TRUE(contains(text, "driver:   i915, integrated")) << text;
    EXPECT_TRUE(contains(text, "offered:  yes, instance id 0000:00:02.0")) << text;
    EXPECT_TRUE(contains(text, "memory:   4294967296 (4 GiB) from xe tile physical_vram_size_bytes")) << text;
    EXPECT_TRUE(contains(text, "physical function, 2 of 7 virtual functions enabled")) << text;
    EXPECT_TRUE(contains(text, "offered:  no, SR-IOV physical function with 2 virtual functions")) << text;
    EXPECT_TRUE(contains(text, "1 of 2 cards offered")) << text;
}

TEST_F(GpuSysfsTest, ProbeCommandRejectsUnknownOptions) {
    add(test::kHd4000Testbed);
    std::ostringstream out, err;
    EXPECT_EQ(probeGpuCommand({"--vendor"}, out, err), 2);
    EXPECT_TRUE(contains(err.str(), "unknown option for probe gpu: --vendor")) << err.str();
}

}  // namespace
}  // namespace devlet::gpu

#endif

int main(int argc, char** argv) {
    return devlet::test::runUnderUmockdev(argc, argv);
}
