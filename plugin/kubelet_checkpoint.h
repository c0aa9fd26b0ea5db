#pragma once
// Reads the kubelet's device-manager checkpoint, `kubelet_internal_checkpoint` in the
// device-plugin directory: the devices the kubelet has allocated to containers, as it
// restores them after a restart or a reboot. It is the kubelet's internal file, so devlet
// only reads it, never trusts it further than the evidence rules in docs/guarantees.md,
// and treats anything it cannot read as "cannot know". A pure function of the bytes.

#include <string>
#include <string_view>
#include <vector>

#include "runtime/kubelet_evidence.h"

namespace devlet {

struct KubeletCheckpoint {
    bool present = false;            // false: no such file (no kubelet yet, or it wrote none)
    std::vector<PodDevice> devices;  // resource, device id and pod uid of each allocation
    std::string error;               // present, but not readable as a checkpoint: why
};

// The checkpoint's file name in the device-plugin directory.
inline constexpr std::string_view kKubeletCheckpointFile = "kubelet_internal_checkpoint";

// Parses the file's content. Accepts the layout kubelets write since 1.20 (DeviceIDs by
// NUMA node) and the one before (a flat list). Its checksum (FNV over a Go-specific dump
// of the data) cannot be recomputed outside the kubelet, so it is not checked; a file cut
// short or otherwise malformed is an error, never a partial list.
KubeletCheckpoint parseKubeletCheckpoint(std::string_view text);

// Reads and parses the file at path; present = false when it does not exist.
KubeletCheckpoint readKubeletCheckpoint(const std::string& path);

}  // namespace devlet
