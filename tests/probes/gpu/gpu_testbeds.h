#pragma once
// GPU machines as umockdev testbed descriptions. The HD 4000 comes from a real machine's
// udev database (Intel HD Graphics 4000 8086:0166, i915, on a Lenovo board), trimmed to
// what the gpu handler reads. The others are built from the sysfs facts of the i915 and xe
// drivers: an xe card with two tiles and VRAM behind a PCIe port, a two-socket machine
// with GPUs on two NUMA nodes, an SR-IOV physical function with two virtual functions.

#include <string>
#include <tuple>
#include <vector>

namespace devlet::test {

// The recorded laptop: card0 and controlD64, no render node (an old kernel's recording).
inline constexpr const char* kHd4000Testbed = R"(P: /devices/pci0000:00/0000:00:02.0
E: DRIVER=i915
E: MODALIAS=pci:v00008086d00000166sv000017AAsd000021FBbc03sc00i00
E: PCI_CLASS=30000
E: PCI_ID=8086:0166
E: PCI_SLOT_NAME=0000:00:02.0
E: PCI_SUBSYS_ID=17AA:21FB
E: SUBSYSTEM=pci
A: vendor=0x8086
A: device=0x0166
A: subsystem_vendor=0x17aa
A: subsystem_device=0x21fb
A: class=0x030000
L: driver=../../../bus/pci/drivers/i915

P: /devices/pci0000:00/0000:00:02.0/drm/card0
N: dri/card0
E: DEVNAME=/dev/dri/card0
E: DEVTYPE=drm_minor
E: ID_FOR_SEAT=drm-pci-0000_00_02_0
E: ID_PATH=pci-0000:00:02.0
E: ID_PATH_TAG=pci-0000_00_02_0
E: MAJOR=226
E: MINOR=0
E: SUBSYSTEM=drm
E: TAGS=:seat:uaccess:udev-acl:
A: dev=226:0
L: device=../..

P: /devices/pci0000:00/0000:00:02.0/drm/controlD64
N: dri/controlD64
E: DEVNAME=/dev/dri/controlD64
E: DEVTYPE=drm_minor
E: MAJOR=226
E: MINOR=64
E: SUBSYSTEM=drm
A: dev=226:64
L: device=../..

P: /devices/pci0000:00/0000:00:02.0/drm/card0/card0-HDMI-A-1
E: SUBSYSTEM=drm
L: device=../../..
)";

inline constexpr const char* kHd4000Devpath = "/devices/pci0000:00/0000:00:02.0";

// One Intel GPU as the kernel lays it out: the PCI function `address` below `parent`
// (a host bridge "/devices/pci0000:00", or a port under it), its card and render node,
// by-path links, NUMA node, and per driver: xe tiles with VRAM, or i915 GTs.
struct SyntheticGpu {
    std::string parent = "/devices/pci0000:00";
    std::string address;
    std::string device = "0x56a0";
    std::string driver = "xe";
    int card = 0;
    int numaNode = -1;
    std::string localCpus = "0-7";
    int tiles = 0;
    unsigned long long vramPerTile = 0;  // xe: tileN/physical_vram_size_bytes
    unsigned long long lmemPerTile = 0;  // Intel's out-of-tree i915: cardN/lmem_total_bytes
    int sriovNumVfs = -1;                // -1: not SR-IOV capable
    std::string physfn;                  // the PF's address for a virtual function
};

inline std::string pciFunction(const std::string& devpath, const std::string& vendor,
                               const std::string& device, const std::string& pciClass,
                               const std::string& driver, const std::string& extra) {
    const std::string slot = devpath.substr(devpath.rfind('/') + 1);
    int depth = 0;
    for (char c : devpath) depth += c == '/' ? 1 : 0;
    std::string up;
    for (int i = 0; i < depth; ++i) up += "../";
    std::string text = "P: " + devpath + "\nE: SUBSYSTEM=pci\nE: PCI_SLOT_NAME=" + slot + "\n";
    if (!driver.empty()) text += "E: DRIVER=" + driver + "\n";
    text += "A: vendor=" + vendor + "\nA: device=" + device + "\nA: class=" + pciClass +
            "\nA: subsystem_vendor=0x8086\nA: subsystem_device=0x1020\n" + extra;
    if (!driver.empty()) text += "L: driver=" + up + "bus/pci/drivers/" + driver + "\n";
    return text + "\n";
}

inline std::string gpuTestbed(const SyntheticGpu& gpu) {
    const std::string devpath = gpu.parent + "/" + gpu.address;
    std::string extra =
        "A: numa_node=" + std::to_string(gpu.numaNode) + "\nA: local_cpulist=" + gpu.localCpus + "\n";
    if (gpu.sriovNumVfs >= 0) {
        extra += "A: sriov_numvfs=" + std::to_string(gpu.sriovNumVfs) + "\nA: sriov_totalvfs=7\n";
    }
    if (!gpu.physfn.empty()) extra += "L: physfn=../" + gpu.physfn + "\n";
    if (gpu.driver == "xe") {
        for (int t = 0; t < gpu.tiles; ++t) {
            const std::string tile = "tile" + std::to_string(t);
            extra += "A: " + tile + "/physical_vram_size_bytes=" + std::to_string(gpu.vramPerTile) + "\n";
            extra += "A: " + tile + "/gt" + std::to_string(t) + "/freq0/cur_freq=1000\n";
        }
    }
    std::string text = pciFunction(devpath, "0x8086", gpu.device, "0x030000", gpu.driver, extra);
    const std::string card = "card" + std::to_string(gpu.card);
    const std::string render = "renderD" + std::to_string(128 + gpu.card);
    std::string cardExtra;
    if (gpu.driver == "i915") {
        for (int t = 0; t < gpu.tiles; ++t)
            cardExtra += "A: gt/gt" + std::to_string(t) + "/id=" + std::to_string(t) + "\n";
        if (gpu.lmemPerTile > 0) cardExtra += "A: lmem_total_bytes=" + std::to_string(gpu.lmemPerTile) + "\n";
    }
    text += "P: " + devpath + "/drm/" + card + "\nN: dri/" + card + "\nS: dri/by-path/pci-" + gpu.address +
            "-card\nE: DEVNAME=/dev/dri/" + card +
            "\nE: DEVTYPE=drm_minor\nE: SUBSYSTEM=drm\nE: MAJOR=226\nE: MINOR=" + std::to_string(gpu.card) +
            "\nA: dev=226:" + std::to_string(gpu.card) + "\n" + cardExtra + "L: device=../..\n\n";
    text +=
        "P: " + devpath + "/drm/" + render + "\nN: dri/" + render + "\nS: dri/by-path/pci-" + gpu.address +
        "-render\nE: DEVNAME=/dev/dri/" + render +
        "\nE: DEVTYPE=drm_minor\nE: SUBSYSTEM=drm\nE: MAJOR=226\nE: MINOR=" + std::to_string(128 + gpu.card) +
        "\nA: dev=226:" + std::to_string(128 + gpu.card) + "\nL: device=../..\n\n";
    return text;
}

// A PCIe root port on a host bridge, the parent of a discrete card.
inline std::string pciePort(const std::string& devpath) {
    return pciFunction(devpath, "0x8086", "0x7ab8", "0x060400", "pcieport", "");
}

// A two-socket machine: sockets 0 and 1 (NUMA nodes 0 and 1), each with a host bridge, two
// PCIe ports and an Arc card (0x56a0, i915) behind each port: card0 and card1 on node 0,
// card2 and card3 on node 1. One description per card, with its port.
inline std::vector<std::string> fourArcGpusOnTwoNumaNodes() {
    std::vector<std::string> descriptions;
    int card = 0;
    for (const auto& [root, bus, numa] :
         {std::tuple{"pci0000:00", "00", 0}, std::tuple{"pci0000:80", "80", 1}}) {
        for (int port = 1; port <= 2; ++port) {
            const std::string portPath =
                std::string("/devices/") + root + "/0000:" + bus + ":0" + std::to_string(port) + ".0";
            SyntheticGpu gpu;
            gpu.parent = portPath;
            gpu.address = "0000:" + std::string(numa == 0 ? "0" : "8") + std::to_string(3 + port) + ":00.0";
            gpu.device = "0x56a0";
            gpu.driver = "i915";
            gpu.card = card++;
            gpu.numaNode = numa;
            descriptions.push_back(pciePort(portPath) + gpuTestbed(gpu));
        }
    }
    return descriptions;
}

}  // namespace devlet::test
