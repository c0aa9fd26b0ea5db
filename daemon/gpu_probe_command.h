#pragma once
// `devlet probe gpu`: one sysfs pass that prints every DRM card, what was read about it,
// and whether a gpu configuration offers it or why not. No daemon, no event loop; main
// thread only.

#include <iosfwd>
#include <string>
#include <vector>

#include "probes/gpu/gpu_sysfs.h"

namespace devlet::gpu {

// `args` follow `probe gpu`: [--details FILE] (discoveryDetails to judge against; default
// every Intel i915/xe GPU) [--any-vendor]. Returns the exit code: 0 done (also when there
// is no GPU), 1 sysfs cannot be read, 2 a usage or details error.
int probeGpuCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                    const SysfsRoots& roots = {});

}  // namespace devlet::gpu
