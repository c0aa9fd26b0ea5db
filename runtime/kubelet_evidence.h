#pragma once
// What the kubelet says about the devices containers hold: the slot arbiter weighs it
// (adoption, release), the kubelet side gathers it (PodResources, the device checkpoint).

#include <optional>
#include <string>
#include <vector>

namespace devlet {

// A device the kubelet reports as held by a container: PodResources names its pod, the
// kubelet's device checkpoint only the pod's uid.
struct PodDevice {
    std::string resource;
    std::string deviceId;
    std::string pod;
    std::string podNamespace;
    std::string podUid;
};

// What the kubelet says, at one moment, about which devices containers hold. A slot is
// released only on positive evidence that no container uses it (docs/guarantees.md):
// - PodResources answered, and does not list it, for the release grace period;
// - the kubelet's device checkpoint does not list it either: a kubelet drops a pod's
//   devices from it only once it knows all its pods (its sources are ready), so a kubelet
//   that restarted without its API server keeps listing what running containers hold;
// - a kubelet that writes no checkpoint counts only while PodResources lists some device:
//   an empty answer is what a kubelet that has not learned its pods yet gives.
struct KubeletEvidence {
    // PodResources List; nullopt when it did not answer.
    std::optional<std::vector<PodDevice>> pods;
    // The devices the kubelet's checkpoint records as allocated; nullopt when it has none.
    std::optional<std::vector<PodDevice>> checkpoint;
    // The checkpoint exists but could not be read: nothing is released while it lasts.
    std::string checkpointError;
};

}  // namespace devlet
