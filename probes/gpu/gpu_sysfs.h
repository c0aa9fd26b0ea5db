#pragma once
// The gpu handler's OS adapter, the only code that reads DRM and PCI sysfs and opens GPU
// device nodes: a pass over /sys/class/drm/card* into plain GpuObservations, or a read of
// some cards only (those a udev event concerns). Stateless; any thread (the probe calls it
// on the loop: a pass over 16 cards is a few hundred reads).

#include <functional>
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
    // Called with a card's name each time it is read, where set: tests and benchmarks
    // count what an event costs without timing it.
    std::function<void(const std::string& card)> cardRead = nullptr;
};

// Reads every card; a card that cannot be read is left out and said why in `problems`.
// Returns false (and a message in `error`) only when /sys/class/drm itself is unreadable.
bool scanGpus(const SysfsRoots& roots, std::vector<GpuObservation>& observations,
              std::vector<GpuScanProblem>& problems, std::string& error);

// Reads the named cards ("card1") as scanGpus() does, appending to `observations` and
// `problems`. A card sysfs no longer has is gone: left out of both.
void readGpus(const SysfsRoots& roots, const std::vector<std::string>& cards,
              std::vector<GpuObservation>& observations, std::vector<GpuScanProblem>& problems);

// The cards a device holds now (the cardN in /sys<devpath>/drm/), sorted; empty where it
// has none or is gone. For a device an event names whose cards are not known yet.
std::vector<std::string> cardsOfDevice(const SysfsRoots& roots, const std::string& devpath);

}  // namespace devlet::gpu
