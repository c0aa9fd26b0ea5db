#include "runtime/kubelet_layout.h"

#include <cstdlib>
#include <deque>
#include <filesystem>
#include <system_error>
#include <vector>

namespace devlet {

namespace {

namespace fs = std::filesystem;

// The kubelet hard-codes its registration socket here on kubeadm, k3s and MicroK8s alike
// (kubernetes#120626: the device manager ignores --root-dir).
constexpr const char* kKubeletRoot = "/var/lib/kubelet";
constexpr const char* kDevicePluginDir = "/var/lib/kubelet/device-plugins";
constexpr const char* kPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock";
// MicroK8s runs the kubelet with --root-dir=$SNAP_COMMON/var/lib/kubelet, and the
// pod-resources socket follows the root dir. Its install hook links /var/lib/kubelet there
// when /var/lib/kubelet did not exist yet.
constexpr const char* kMicroK8sKubeletRoot = "/var/snap/microk8s/common/var/lib/kubelet";
constexpr const char* kMicroK8sPodResourcesSocket =
    "/var/snap/microk8s/common/var/lib/kubelet/pod-resources/kubelet.sock";
constexpr const char* kMicroK8sSnap = "/var/snap/microk8s";
// k3s keeps its data and its configuration here (server and agent nodes alike).
constexpr const char* kK3sData = "/var/lib/rancher/k3s";
constexpr const char* kK3sConfig = "/etc/rancher/k3s";
constexpr const char* kKubeadmKubeletConfig = "/etc/kubernetes/kubelet.conf";
// Rootless k3s (kubelet root under the user's home) is out of scope: device plugins are
// not expected to work in a user namespace.

// Linux gives up after 40 links on one lookup (ELOOP); so does this.
constexpr int kMaxLinks = 40;

std::string withoutTrailingSlashes(std::string root) {
    while (!root.empty() && root.back() == '/') root.pop_back();
    return root;
}

bool exists(const std::string& path) {
    std::error_code ec;
    return fs::exists(path, ec);
}

std::deque<std::string> components(const std::string& path) {
    std::deque<std::string> parts;
    for (const auto& part : fs::path(path)) {
        const std::string p = part.string();
        if (!p.empty() && p != "/") parts.push_back(p);
    }
    return parts;
}

}  // namespace

std::string resolveInRoot(const std::string& root, const std::string& path) {
    const std::string prefix = withoutTrailingSlashes(root);
    std::vector<std::string> resolved;  // components below root
    std::deque<std::string> pending = components(path);
    int links = 0;
    auto joined = [&] {
        std::string out;
        for (const auto& part : resolved) out += "/" + part;
        return out;
    };
    while (!pending.empty()) {
        std::string part = std::move(pending.front());
        pending.pop_front();
        if (part == ".") continue;
        if (part == "..") {
            if (!resolved.empty()) resolved.pop_back();  // never above root, as in a chroot
            continue;
        }
        resolved.push_back(part);
        const std::string full = prefix + joined();
        std::error_code ec;
        if (links >= kMaxLinks || !fs::is_symlink(fs::symlink_status(full, ec))) continue;
        const fs::path target = fs::read_symlink(full, ec);
        if (ec) continue;
        ++links;
        resolved.pop_back();
        if (target.is_absolute()) resolved.clear();
        std::deque<std::string> targetParts = components(target.string());
        pending.insert(pending.begin(), targetParts.begin(), targetParts.end());
    }
    const std::string inside = joined();
    return prefix + (inside.empty() ? "/" : inside);
}

KubeletLayout detectKubeletLayout(const std::string& root) {
    const std::string prefix = withoutTrailingSlashes(root);
    auto inside = [&](const std::string& resolved) { return resolved.substr(prefix.size()); };

    // The paths devlet opens. On the real root they stay as written, links and all: the
    // kernel follows the links, and /var/lib/kubelet/device-plugins keeps plugin socket
    // paths short (sun_path holds 107 bytes). Below another root an absolute link must be
    // taken relative to that root, so the path is resolved there.
    auto usable = [&](const char* path) {
        return prefix.empty() ? std::string(path) : resolveInRoot(prefix, path);
    };

    KubeletLayout layout;
    layout.devicePluginDir = usable(kDevicePluginDir);
    const std::string kubeletRoot = inside(resolveInRoot(prefix, kKubeletRoot));
    const bool linked = kubeletRoot != kKubeletRoot;
    const bool microK8sLinked = kubeletRoot == kMicroK8sKubeletRoot;

    const std::string upstreamSocket = usable(kPodResourcesSocket);
    const std::string microK8sSocket = usable(kMicroK8sPodResourcesSocket);
    const bool hasMicroK8s = exists(prefix + kMicroK8sSnap);
    if (exists(upstreamSocket)) {
        layout.podResourcesSocket = upstreamSocket;
    } else if (exists(microK8sSocket)) {
        layout.podResourcesSocket = microK8sSocket;
    } else {
        // No kubelet yet: the socket the coming one will create, so devlet waits at the
        // right path.
        layout.podResourcesSocket = hasMicroK8s ? microK8sSocket : upstreamSocket;
    }

    if (hasMicroK8s && (microK8sLinked || layout.podResourcesSocket == microK8sSocket)) {
        layout.distribution = "microk8s";
        layout.description = microK8sLinked ? std::string("MicroK8s (") + kKubeletRoot + " links to " +
                                                  kMicroK8sKubeletRoot + ")"
                                            : std::string("MicroK8s (kubelet root ") + kMicroK8sKubeletRoot +
                                                  "; device plugins stay in " + kDevicePluginDir + ")";
    } else if (exists(prefix + kK3sData) || exists(prefix + kK3sConfig)) {
        layout.distribution = "k3s";
        layout.description = std::string("k3s (") + (exists(prefix + kK3sData) ? kK3sData : kK3sConfig) + ")";
    } else if (exists(prefix + kKubeadmKubeletConfig)) {
        layout.distribution = "kubeadm";
        layout.description = std::string("kubeadm (") + kKubeadmKubeletConfig + ")";
    } else if (hasMicroK8s) {
        layout.distribution = "microk8s";
        layout.description = std::string("MicroK8s (") + kMicroK8sSnap + "), with a kubelet socket in " +
                             kKubeletRoot + "/pod-resources";
    } else {
        layout.distribution = "unknown";
        layout.description = "no k3s, MicroK8s or kubeadm found; the upstream kubelet paths";
    }
    if (linked && !microK8sLinked) {
        layout.description += std::string("; ") + kKubeletRoot + " links to " + kubeletRoot;
    }
    return layout;
}

std::string detectionRoot(std::string& problem) {
    const char* root = std::getenv("DEVLET_HOST_ROOT");
    if (!root || !*root) return "";
    if (root[0] != '/') {
        problem = std::string("DEVLET_HOST_ROOT \"") + root + "\" must be an absolute path";
        return "";
    }
    return root;
}

}  // namespace devlet
