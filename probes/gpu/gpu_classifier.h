#pragma once
// The gpu handler's pure half: which observed cards a configuration offers, what each
// becomes (device nodes, by-path mounts, properties, NUMA node), and why the others are
// not offered. No OS access; any thread.

#include <string>
#include <vector>

#include "probes/gpu/gpu_details.h"
#include "probes/gpu/gpu_observation.h"
#include "runtime/instance.h"

namespace devlet::gpu {

// Property names a container sees (with the per-instance _<HASH> copies the core adds).
inline constexpr const char* kPropertyPciAddress = "GPU_PCI_ADDRESS";
inline constexpr const char* kPropertyVendorId = "GPU_PCI_VENDOR_ID";
inline constexpr const char* kPropertyDeviceId = "GPU_PCI_DEVICE_ID";
inline constexpr const char* kPropertyDriver = "GPU_DRIVER";
inline constexpr const char* kPropertyCardNode = "GPU_CARD_NODE";
inline constexpr const char* kPropertyRenderNode = "GPU_RENDER_NODE";
inline constexpr const char* kPropertyMemory = "GPU_LOCAL_MEMORY_BYTES";
inline constexpr const char* kPropertyTiles = "GPU_TILES";
inline constexpr const char* kPropertyNumaNode = "GPU_NUMA_NODE";
inline constexpr const char* kPropertyPciRoot = "GPU_PCI_ROOT";
inline constexpr const char* kPropertyType = "GPU_TYPE";
inline constexpr const char* kPropertyPhysicalFunction = "GPU_SRIOV_PHYSICAL_FUNCTION";

bool isDiscrete(const GpuObservation& gpu);

struct GpuVerdict {
    GpuObservation observation;
    bool offered = false;
    std::string reason;  // why not offered; empty when offered
    Instance instance;   // valid when offered
};

// Every observation with its verdict, in the order given.
std::vector<GpuVerdict> judgeGpus(const std::vector<GpuObservation>& observations, const GpuDetails& details);

// The instances a configuration offers: the offered verdicts' instances, ordered by id.
std::vector<Instance> classifyGpus(const std::vector<GpuObservation>& observations,
                                   const GpuDetails& details);

}  // namespace devlet::gpu
