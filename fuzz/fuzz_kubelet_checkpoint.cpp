// Fuzz target: the kubelet's device checkpoint as devlet reads it. Any input gives either
// an error and no device, or devices that each name a resource; never a crash.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "plugin/kubelet_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const devlet::KubeletCheckpoint checkpoint =
        devlet::parseKubeletCheckpoint(std::string_view(reinterpret_cast<const char*>(data), size));
    if (!checkpoint.present) std::abort();
    if (!checkpoint.error.empty() && !checkpoint.devices.empty()) std::abort();
    for (const devlet::PodDevice& device : checkpoint.devices) {
        if (!device.pod.empty() || !device.podNamespace.empty()) std::abort();
    }
    return 0;
}
