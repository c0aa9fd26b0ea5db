#pragma once
// Where the kubelet keeps its device-plugin directory and PodResources socket on this host,
// and which Kubernetes distribution's layout that is (kubeadm, k3s, MicroK8s). A pure
// function of the file system below a root directory, so tests hand it a fake root.

#include <string>

namespace devlet {

struct KubeletLayout {
    // "microk8s", "k3s", "kubeadm", or "unknown" (none recognised: the upstream paths).
    std::string distribution;
    // One line for people: the distribution, what gave it away, and the links followed,
    // e.g. "MicroK8s (/var/lib/kubelet links to /var/snap/microk8s/common/var/lib/kubelet)".
    std::string description;
    std::string devicePluginDir;
    std::string podResourcesSocket;
    bool podResourcesFound = false;  // false: the socket is the one a kubelet will create
};

// Detects the layout below root ("" or "/": the real root). Links are followed inside
// root, as a process chrooted there would follow them, so /var/lib/kubelet linked to
// MicroK8s' kubelet directory is recognised in a fake root as on the host. The paths are
// as written on the real root (the kernel follows the links), resolved below another.
KubeletLayout detectKubeletLayout(const std::string& root = "");

// The root detection looks at: $DEVLET_HOST_ROOT when set (tests; devlet in a container
// with the host's file system mounted elsewhere), else "". Sets problem when it is not an
// absolute path.
std::string detectionRoot(std::string& problem);

// path (absolute) as seen from inside root: each symlink on the way is followed, absolute
// targets taken relative to root; components that do not exist are kept as they are.
// Returns root + the resolved path.
std::string resolveInRoot(const std::string& root, const std::string& path);

}  // namespace devlet
