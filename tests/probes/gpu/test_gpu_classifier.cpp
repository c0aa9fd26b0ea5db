// The gpu classifier as a table: observations and details in, verdicts and instances out.

#include <gtest/gtest.h>

#include "probes/gpu/gpu_classifier.h"

namespace devlet::gpu {
namespace {

// An Intel Arc A770 behind a PCIe port on NUMA node 1, with both nodes and by-path links.
GpuObservation discreteXe() {
    GpuObservation gpu;
    gpu.card = "card1";
    gpu.devpath = "/devices/pci0000:00/0000:00:01.0/0000:03:00.0/drm/card1";
    gpu.pciAddress = "0000:03:00.0";
    gpu.pciRoot = "pci0000:00";
    gpu.pciDepth = 2;
    gpu.vendor = "0x8086";
    gpu.device = "0x56a0";
    gpu.pciClass = "0x030000";
    gpu.driver = "xe";
    gpu.cardNode = "/dev/dri/card1";
    gpu.renderNode = "/dev/dri/renderD129";
    gpu.cardNodePresent = true;
    gpu.renderNodePresent = true;
    gpu.byPathLinks = {"/dev/dri/by-path/pci-0000:03:00.0-card", "/dev/dri/by-path/pci-0000:03:00.0-render"};
    gpu.numaNode = 1;
    gpu.localMemoryBytes = 17179869184ull;
    gpu.tiles = 1;
    return gpu;
}

GpuObservation integratedI915() {
    GpuObservation gpu;
    gpu.card = "card0";
    gpu.devpath = "/devices/pci0000:00/0000:00:02.0/drm/card0";
    gpu.pciAddress = "0000:00:02.0";
    gpu.pciRoot = "pci0000:00";
    gpu.pciDepth = 1;
    gpu.vendor = "0x8086";
    gpu.device = "0x0166";
    gpu.driver = "i915";
    gpu.cardNode = "/dev/dri/card0";
    gpu.cardNodePresent = true;
    return gpu;
}

GpuDetails defaults() {
    return GpuDetails{};
}

struct Row {
    const char* name;
    GpuObservation gpu;
    GpuDetails details;
    std::string reason;  // empty = offered
};

std::vector<Row> table() {
    std::vector<Row> rows;
    rows.push_back({"intel xe offered", discreteXe(), defaults(), ""});
    rows.push_back({"intel i915 offered", integratedI915(), defaults(), ""});
    {
        GpuObservation gpu = discreteXe();
        gpu.vendor = "0x1002";
        gpu.driver = "amdgpu";
        rows.push_back({"other vendor", gpu, defaults(), "vendor 0x1002 is not in vendors (0x8086)"});
        GpuDetails any = defaults();
        any.vendors.clear();
        rows.push_back({"other vendor, any vendor, wrong driver", gpu, any,
                        "driver amdgpu is not in drivers (i915, xe)"});
        any.drivers.insert("amdgpu");
        rows.push_back({"other vendor and driver allowed", gpu, any, ""});
    }
    {
        GpuObservation gpu = discreteXe();
        gpu.driver = "vfio-pci";
        rows.push_back(
            {"passed through to a VM", gpu, defaults(), "driver vfio-pci is not in drivers (i915, xe)"});
        gpu.driver.clear();
        rows.push_back({"no driver", gpu, defaults(), "no kernel driver is bound"});
    }
    {
        GpuDetails only = defaults();
        only.drivers = {"xe"};
        rows.push_back({"driver filter", integratedI915(), only, "driver i915 is not in drivers (xe)"});
    }
    {
        GpuDetails allow = defaults();
        allow.allowIds = {"0x56a0"};
        rows.push_back({"allowed id", discreteXe(), allow, ""});
        rows.push_back({"not an allowed id", integratedI915(), allow, "device id 0x0166 is not in allowIds"});
        GpuDetails deny = defaults();
        deny.denyIds = {"0x56a0"};
        rows.push_back({"denied id", discreteXe(), deny, "device id 0x56a0 is in denyIds"});
    }
    {
        GpuDetails integrated = defaults();
        integrated.type = GpuType::Integrated;
        rows.push_back({"integrated wanted, discrete seen", discreteXe(), integrated,
                        "a discrete GPU, and type is integrated"});
        rows.push_back({"integrated wanted and seen", integratedI915(), integrated, ""});
        GpuDetails discrete = defaults();
        discrete.type = GpuType::Discrete;
        rows.push_back({"discrete wanted, integrated seen", integratedI915(), discrete,
                        "an integrated GPU, and type is discrete"});
        // A card on the root bus that publishes VRAM is discrete all the same.
        GpuObservation rootBus = discreteXe();
        rootBus.pciDepth = 1;
        rows.push_back({"root-bus card with VRAM is discrete", rootBus, discrete, ""});
    }
    {
        GpuObservation pf = discreteXe();
        pf.sriovTotalVfs = 7;
        rows.push_back({"SR-IOV PF without VFs offered", pf, defaults(), ""});
        pf.sriovNumVfs = 2;
        rows.push_back(
            {"SR-IOV PF with VFs", pf, defaults(),
             "SR-IOV physical function with 2 virtual functions enabled: its virtual functions are "
             "offered instead"});
        GpuObservation vf = discreteXe();
        vf.pciAddress = "0000:03:00.1";
        vf.physicalFunction = "0000:03:00.0";
        rows.push_back({"SR-IOV VF offered", vf, defaults(), ""});
    }
    {
        GpuObservation gpu = discreteXe();
        gpu.cardNodePresent = false;
        gpu.renderNodePresent = false;
        rows.push_back({"no nodes under /dev", gpu, defaults(), "no device node for card1 under /dev/dri"});
        GpuDetails render = defaults();
        render.deviceNodes = DeviceNodes::Render;
        rows.push_back({"render only, HD 4000 has none", integratedI915(), render,
                        "no render node, and deviceNodes is render"});
    }
    return rows;
}

TEST(GpuClassifier, TableOfVerdicts) {
    for (const Row& row : table()) {
        const std::vector<GpuVerdict> verdicts = judgeGpus({row.gpu}, row.details);
        ASSERT_EQ(verdicts.size(), 1u);
        EXPECT_EQ(verdicts[0].reason, row.reason) << row.name;
        EXPECT_EQ(verdicts[0].offered, row.reason.empty()) << row.name;
        EXPECT_EQ(classifyGpus({row.gpu}, row.details).size(), row.reason.empty() ? 1u : 0u) << row.name;
    }
}

TEST(GpuClassifier, DiscreteCardBecomesAnInstanceWithNodesMountsPropertiesAndNumaNode) {
    const std::vector<Instance> instances = classifyGpus({discreteXe()}, defaults());
    ASSERT_EQ(instances.size(), 1u);
    const Instance& gpu = instances[0];
    EXPECT_EQ(gpu.id, "0000:03:00.0");
    EXPECT_FALSE(gpu.shared);
    ASSERT_EQ(gpu.nodes.size(), 2u);
    EXPECT_EQ(gpu.nodes[0].hostPath, "/dev/dri/card1");
    EXPECT_EQ(gpu.nodes[1].hostPath, "/dev/dri/renderD129");
    EXPECT_EQ(gpu.nodes[1].permissions, "rw");
    ASSERT_EQ(gpu.mounts.size(), 2u);
    EXPECT_EQ(gpu.mounts[0].hostPath, "/dev/dri/by-path/pci-0000:03:00.0-card");
    EXPECT_EQ(gpu.mounts[0].containerPath, gpu.mounts[0].hostPath);
    EXPECT_TRUE(gpu.mounts[0].readOnly);
    EXPECT_EQ(gpu.numaNode, 1);
    const std::map<std::string, std::string> expected = {
        {"GPU_PCI_ADDRESS", "0000:03:00.0"},
        {"GPU_PCI_VENDOR_ID", "0x8086"},
        {"GPU_PCI_DEVICE_ID", "0x56a0"},
        {"GPU_DRIVER", "xe"},
        {"GPU_TYPE", "discrete"},
        {"GPU_PCI_ROOT", "pci0000:00"},
        {"GPU_CARD_NODE", "/dev/dri/card1"},
        {"GPU_RENDER_NODE", "/dev/dri/renderD129"},
        {"GPU_LOCAL_MEMORY_BYTES", "17179869184"},
        {"GPU_TILES", "1"},
        {"GPU_NUMA_NODE", "1"},
    };
    EXPECT_EQ(gpu.properties, expected);
}

TEST(GpuClassifier, RenderOnlyAndNoByPathLeaveTheCardNodeAndLinksOut) {
    GpuDetails details = defaults();
    details.deviceNodes = DeviceNodes::Render;
    details.byPath = ByPath::None;
    const std::vector<Instance> instances = classifyGpus({discreteXe()}, details);
    ASSERT_EQ(instances.size(), 1u);
    ASSERT_EQ(instances[0].nodes.size(), 1u);
    EXPECT_EQ(instances[0].nodes[0].hostPath, "/dev/dri/renderD129");
    EXPECT_TRUE(instances[0].mounts.empty());
    EXPECT_FALSE(instances[0].properties.contains("GPU_CARD_NODE"));
}

TEST(GpuClassifier, ByPathAllMountsTheDirectory) {
    GpuDetails details = defaults();
    details.byPath = ByPath::All;
    const std::vector<Instance> instances = classifyGpus({discreteXe()}, details);
    ASSERT_EQ(instances.size(), 1u);
    ASSERT_EQ(instances[0].mounts.size(), 1u);
    EXPECT_EQ(instances[0].mounts[0].hostPath, "/dev/dri/by-path");
}

TEST(GpuClassifier, UnknownMemoryAndNumaAreLeftOutNotGuessed) {
    const std::vector<Instance> instances = classifyGpus({integratedI915()}, defaults());
    ASSERT_EQ(instances.size(), 1u);
    EXPECT_FALSE(instances[0].numaNode.has_value());
    EXPECT_FALSE(instances[0].properties.contains("GPU_LOCAL_MEMORY_BYTES"));
    EXPECT_FALSE(instances[0].properties.contains("GPU_NUMA_NODE"));
    EXPECT_FALSE(instances[0].properties.contains("GPU_TILES"));
    EXPECT_EQ(instances[0].properties.at("GPU_TYPE"), "integrated");
}

TEST(GpuClassifier, VirtualFunctionNamesItsPhysicalFunction) {
    GpuObservation vf = discreteXe();
    vf.pciAddress = "0000:03:00.1";
    vf.physicalFunction = "0000:03:00.0";
    const std::vector<Instance> instances = classifyGpus({vf}, defaults());
    ASSERT_EQ(instances.size(), 1u);
    EXPECT_EQ(instances[0].properties.at("GPU_SRIOV_PHYSICAL_FUNCTION"), "0000:03:00.0");
}

TEST(GpuClassifier, InstancesAreOrderedByPciAddress) {
    GpuObservation second = discreteXe();
    const std::vector<Instance> instances = classifyGpus({second, integratedI915()}, defaults());
    ASSERT_EQ(instances.size(), 2u);
    EXPECT_EQ(instances[0].id, "0000:00:02.0");
    EXPECT_EQ(instances[1].id, "0000:03:00.0");
}

}  // namespace
}  // namespace devlet::gpu
