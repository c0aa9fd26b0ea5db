#pragma once
// What the gpu handler reads about one DRM card: plain values, no OS handles, so the
// classifier and its tests need no hardware. Filled by GpuSysfs (gpu_sysfs.h).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace devlet::gpu {

struct GpuObservation {
    std::string card;        // "card0"
    std::string devpath;     // the card's sysfs devpath, "/devices/pci0000:00/0000:00:02.0/drm/card0"
    std::string pciAddress;  // "0000:00:02.0": the instance id
    std::string pciRoot;     // "pci0000:00": the host bridge the device hangs below
    int pciDepth = 0;        // PCI functions between the root and the device, itself included (1 = root bus)
    std::string vendor;      // "0x8086", as sysfs writes it
    std::string device;      // "0x0166"
    std::string subsystemVendor;
    std::string subsystemDevice;
    std::string pciClass;  // "0x030000"
    std::string driver;    // "i915", "xe"; empty = no driver bound
    // Device nodes as the host names them (/dev/dri/...), empty where absent.
    std::string cardNode;
    std::string renderNode;
    std::vector<std::string> byPathLinks;  // /dev/dri/by-path/pci-<address>-* that exist
    bool cardNodePresent = false;          // the node exists under /dev
    bool renderNodePresent = false;
    std::optional<int> numaNode;  // unset where sysfs says -1 or nothing
    std::string localCpus;        // "0-7,16-23"
    std::optional<std::uint64_t> localMemoryBytes;
    std::string memorySource;  // where the memory figure came from, or why there is none
    int tiles = 0;             // 0 = not published (one GT)
    int sriovNumVfs = 0;       // virtual functions enabled on this physical function
    int sriovTotalVfs = 0;
    std::string physicalFunction;  // PCI address of the PF when this is a virtual function
    bool operator==(const GpuObservation&) const = default;
};

// Card names in the kernel's order: "card9" before "card10".
struct CardOrder {
    bool operator()(const std::string& a, const std::string& b) const {
        return a.size() != b.size() ? a.size() < b.size() : a < b;
    }
};

// One card that could not be read: the scan goes on without it.
struct GpuScanProblem {
    std::string card;
    std::string message;
};

}  // namespace devlet::gpu
