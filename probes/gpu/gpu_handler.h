#pragma once
// The `gpu` discovery handler: offers DRM GPUs (Intel i915 and xe by default) found in
// sysfs, keeps each configuration's snapshot current from udev `drm` and `pci` events,
// and places multi-GPU requests with Intel's allocation policies and a NUMA/PCI-root
// preference. Probes live on the loop thread.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "probes/gpu/gpu_sysfs.h"
#include "runtime/discovery.h"

namespace devlet::gpu {

class GpuHandler : public DiscoveryHandler {
public:
    // Registers the gpu slot preference with the inventory (process-wide, by handler name).
    explicit GpuHandler(SysfsRoots roots = {});
    std::string_view name() const override { return "gpu"; }
    std::vector<DetailsProblem> check(const Configuration& configuration) const override;
    // A driver reload or a GPU reset unbinds and rebinds within seconds: pods keep asking
    // for the same card meanwhile.
    std::chrono::milliseconds defaultRemovalGrace() const override { return std::chrono::seconds(5); }
    SlotPreference slotPreference() const override;
    // Intel's GPU plugin (shared-dev-num) shares one GPU among the units a container asks for.
    bool defaultUniqueDevices() const override { return false; }
    std::unique_ptr<Probe> createProbe(const Configuration& configuration, boost::asio::io_context& loop,
                                       ProbeSink& sink) override;

private:
    SysfsRoots roots_;
};

}  // namespace devlet::gpu
