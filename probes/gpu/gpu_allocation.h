#pragma once
// Which GPU shares a configuration-level request gets (GetPreferredAllocation): Intel's
// GPU plugin policies (none, balanced, packed) with a topology preference on top: one
// NUMA node first, then one PCI root, so the Topology Manager and the choice agree.
// Pure; any thread.

#include <optional>
#include <string>
#include <vector>

#include "probes/gpu/gpu_details.h"

namespace devlet::gpu {

// One free share as the kubelet offers it.
struct GpuSlot {
    std::string id;   // the slot's device id
    std::string gpu;  // the instance it belongs to
    int index = 0;    // the slot's number on its GPU
    std::optional<int> numaNode;
    std::string pciRoot;
};

struct GpuAllocationRequest {
    std::vector<GpuSlot> available;        // free shares (mustInclude among them)
    std::vector<std::string> mustInclude;  // ids the kubelet already chose
    int size = 0;
    GpuAllocationPolicy policy = GpuAllocationPolicy::None;
    bool topologyAware = true;
    bool uniqueDevices = false;  // never two shares of one GPU
};

// The ids to allocate: mustInclude first, then the best of the others; fewer than `size`
// only where not enough are available.
std::vector<std::string> chooseGpuSlots(const GpuAllocationRequest& request);

}  // namespace devlet::gpu
