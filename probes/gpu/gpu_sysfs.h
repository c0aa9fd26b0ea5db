#pragma once
// The gpu handler's OS adapter, the only code that reads DRM and PCI sysfs and opens GPU
// device nodes: one pass over /sys/class/drm/card* into plain GpuObservations. Stateless;
// any thread (the probe calls it on the loop: a pass over 16 cards is a few hundred reads).

#include <string>
#include <vector>

#include "probes/gpu/gpu_observation.h"

namespace devlet::gpu {

struct SysfsRoots {
    std::string sys = "/sys";  // where sysfs is mounted (a copy of a tree for benchmarks)
    std::string dev = "/dev";  // where device nodes are; reported paths always say /dev
    // Ask a mainline i915 card for its local memory through DRM_IOCTL_I915_QUERY when
    // sysfs does not publish it (needs the device node to open).
    bool queryMemory = true;
    // Node Feature Discovery's local feature dir; the gpu probe writes its file there
    // only where the dir exists.
    std::string nfdFeatureDir = "/etc/kubernetes/node-feature-discovery/features.d";
};

// Reads every card; a card that cannot be read is left out and said why in `problems`.
// Returns false (and a message in `error`) only when /sys/class/drm itself is unreadable.
bool scanGpus(const SysfsRoots& roots, std::vector<GpuObservation>& observations,
              std::vector<GpuScanProblem>& problems, std::string& error);

}  // namespace devlet::gpu
