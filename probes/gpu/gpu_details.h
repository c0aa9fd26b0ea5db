#pragma once
// The `gpu` handler's discoveryDetails: which DRM cards a configuration offers, which of
// their nodes a container gets, and how a request for several GPUs (or shares) is placed.
// Pure: text in, values and problems out; any thread.

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/discovery.h"

namespace devlet::gpu {

enum class GpuType { Any, Integrated, Discrete };
enum class DeviceNodes { All, Render };   // card and render nodes, or the render node only
enum class ByPath { Single, None, All };  // as Intel's plugin's -bypath
// Intel's GPU plugin's -allocation-policy, for requests of several shares.
enum class GpuAllocationPolicy { None, Balanced, Packed };

struct GpuDetails {
    std::set<std::string> vendors = {"0x8086"};  // empty = any vendor
    std::set<std::string> drivers = {"i915", "xe"};
    std::set<std::string> allowIds;  // PCI device ids ("0x56a0"); empty = all
    std::set<std::string> denyIds;
    GpuType type = GpuType::Any;
    DeviceNodes deviceNodes = DeviceNodes::All;
    ByPath byPath = ByPath::Single;
    // Unset: the configuration's spec.devlet.allocationPolicy decides (spread = none,
    // pack = packed).
    std::optional<GpuAllocationPolicy> allocationPolicy;
    bool topologyAware = true;  // prefer one NUMA node, then one PCI root, for a request
    bool queryMemory = true;    // ask mainline i915 for local memory through its device node
    // The safety-net full rescan; udev events do the real work.
    std::chrono::seconds rescanInterval{300};
    bool operator==(const GpuDetails&) const = default;
};

inline constexpr long kMaxRescanIntervalSeconds = 86400;

// Parses discoveryDetails (empty text = every Intel GPU); problems carry lines relative to
// the text; unknown keys are errors.
GpuDetails parseGpuDetails(const std::string& text, std::vector<DetailsProblem>& problems);

// "0x56A0", "56a0" and "0x56a0" all read as "0x56a0"; empty where it is not a 16-bit hex id.
std::string normalisedPciId(const std::string& text);

}  // namespace devlet::gpu
