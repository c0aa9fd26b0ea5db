// Kubelet path detection for kubeadm, k3s and MicroK8s, each laid out in a fake root as the
// distribution lays out a node (never the real /var).

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "runtime/kubelet_layout.h"
#include "tests/support/temp_dir.h"

namespace devlet {
namespace {

using test::TempDir;
namespace fs = std::filesystem;

constexpr const char* kMicroK8sKubelet = "var/snap/microk8s/common/var/lib/kubelet";

class KubeletLayoutTest : public ::testing::Test {
protected:
    std::string at(const std::string& relative) const { return root_.path().string() + "/" + relative; }
    KubeletLayout detect() const { return detectKubeletLayout(root_.path()); }
    // What a running kubelet leaves below its root directory.
    void kubeletRunningIn(const std::string& kubeletRoot) const {
        root_.file(kubeletRoot + "/device-plugins/kubelet.sock");
        root_.file(kubeletRoot + "/pod-resources/kubelet.sock");
    }

    TempDir root_;
};

TEST_F(KubeletLayoutTest, KubeadmUsesTheUpstreamPaths) {
    root_.file("etc/kubernetes/kubelet.conf");
    kubeletRunningIn("var/lib/kubelet");
    const KubeletLayout layout = detect();
    EXPECT_EQ(layout.distribution, "kubeadm");
    EXPECT_EQ(layout.description, "kubeadm (/etc/kubernetes/kubelet.conf)");
    EXPECT_EQ(layout.devicePluginDir, at("var/lib/kubelet/device-plugins"));
    EXPECT_EQ(layout.podResourcesSocket, at("var/lib/kubelet/pod-resources/kubelet.sock"));
}

TEST_F(KubeletLayoutTest, K3sUsesTheUpstreamPaths) {
    root_.dir("var/lib/rancher/k3s/agent");
    root_.file("etc/rancher/k3s/k3s.yaml");
    kubeletRunningIn("var/lib/kubelet");
    const KubeletLayout layout = detect();
    EXPECT_EQ(layout.distribution, "k3s");
    EXPECT_EQ(layout.description, "k3s (/var/lib/rancher/k3s)");
    EXPECT_EQ(layout.devicePluginDir, at("var/lib/kubelet/device-plugins"));
    EXPECT_EQ(layout.podResourcesSocket, at("var/lib/kubelet/pod-resources/kubelet.sock"));
}

TEST_F(KubeletLayoutTest, K3sRecognisedByItsConfigurationBeforeItFirstRan) {
    root_.file("etc/rancher/k3s/config.yaml");
    const KubeletLayout layout = detect();
    EXPECT_EQ(layout.distribution, "k3s");
    EXPECT_EQ(layout.description, "k3s (/etc/rancher/k3s)");
    EXPECT_EQ(layout.podResourcesSocket, at("var/lib/kubelet/pod-resources/kubelet.sock"));
}

// /var/lib/kubelet existed before MicroK8s was installed: the kubelet's root is the snap's
// directory, but its device manager still uses /var/lib/kubelet/device-plugins.
TEST_F(KubeletLayoutTest, MicroK8sWithItsOwnKubeletRoot) {
    root_.dir("var/lib/kubelet/device-plugins");
    root_.file("var/lib/kubelet/device-plugins/kubelet.sock");
    root_.file(std::string(kMicroK8sKubelet) + "/pod-resources/kubelet.sock");
    const KubeletLayout layout = detect();
    EXPECT_EQ(layout.distribution, "microk8s");
    EXPECT_EQ(layout.description,
              "MicroK8s (kubelet root /var/snap/microk8s/common/var/lib/kubelet; device plugins stay in "
              "/var/lib/kubelet/device-plugins)");
    EXPECT_EQ(layout.devicePluginDir, at("var/lib/kubelet/device-plugins"));
    EXPECT_EQ(layout.podResourcesSocket, at(std::string(kMicroK8sKubelet) + "/pod-resources/kubelet.sock"));
}

// The MicroK8s install hook links /var/lib/kubelet to the snap's kubelet directory with an
// absolute target: resolved inside the fake root, not on this machine.
TEST_F(KubeletLayoutTest, MicroK8sWithVarLibKubeletLinkedIntoTheSnap) {
    kubeletRunningIn(kMicroK8sKubelet);
    root_.dir("var/lib");
    fs::create_directory_symlink("/var/snap/microk8s/common/var/lib/kubelet", at("var/lib/kubelet"));
    const KubeletLayout layout = detect();
    EXPECT_EQ(layout.distribution, "microk8s");
    EXPECT_EQ(layout.description,
              "MicroK8s (/var/lib/kubelet links to /var/snap/microk8s/common/var/lib/kubelet)");
    EXPECT_EQ(layout.devicePluginDir, at(std::string(kMicroK8sKubelet) + "/device-plugins"));
    EXPECT_EQ(layout.podResourcesSocket, at(std::string(kMicroK8sKubelet) + "/pod-resources/kubelet.sock"));
}

TEST_F(KubeletLayoutTest, MicroK8sLinkedRelativelyIsTheSame) {
    kubeletRunningIn(kMicroK8sKubelet);
    root_.dir("var/lib");
    fs::create_directory_symlink("../snap/microk8s/common/var/lib/kubelet", at("var/lib/kubelet"));
    const KubeletLayout layout = detect();
    EXPECT_EQ(layout.distribution, "microk8s");
    EXPECT_EQ(layout.devicePluginDir, at(std::string(kMicroK8sKubelet) + "/device-plugins"));
    EXPECT_EQ(layout.podResourcesSocket, at(std::string(kMicroK8sKubelet) + "/pod-resources/kubelet.sock"));
}

TEST_F(KubeletLayoutTest, MicroK8sInstalledButNotRunningWaitsAtItsSocket) {
    root_.dir("var/snap/microk8s/current");
    const KubeletLayout layout = detect();
    EXPECT_EQ(layout.distribution, "microk8s");
    EXPECT_EQ(layout.devicePluginDir, at("var/lib/kubelet/device-plugins"));
    EXPECT_EQ(layout.podResourcesSocket, at(std::string(kMicroK8sKubelet) + "/pod-resources/kubelet.sock"));
}

TEST_F(KubeletLayoutTest, NothingInstalledMeansTheUpstreamPaths) {
    const KubeletLayout layout = detect();
    EXPECT_EQ(layout.distribution, "unknown");
    EXPECT_EQ(layout.description, "no k3s, MicroK8s or kubeadm found; the upstream kubelet paths");
    EXPECT_EQ(layout.devicePluginDir, at("var/lib/kubelet/device-plugins"));
    EXPECT_EQ(layout.podResourcesSocket, at("var/lib/kubelet/pod-resources/kubelet.sock"));
}

// Both sockets exist (MicroK8s next to a kubelet in /var/lib/kubelet): the upstream one
// wins, as the kubelet there is the one whose device manager devlet registers with.
TEST_F(KubeletLayoutTest, UpstreamSocketFirstWhenBothExist) {
    root_.file("etc/kubernetes/kubelet.conf");
    kubeletRunningIn("var/lib/kubelet");
    root_.file(std::string(kMicroK8sKubelet) + "/pod-resources/kubelet.sock");
    const KubeletLayout layout = detect();
    EXPECT_EQ(layout.podResourcesSocket, at("var/lib/kubelet/pod-resources/kubelet.sock"));
    EXPECT_EQ(layout.distribution, "kubeadm");
}

TEST_F(KubeletLayoutTest, KubeletRootMovedElsewhereIsFollowedAndNamed) {
    root_.file("etc/kubernetes/kubelet.conf");
    kubeletRunningIn("data/kubelet");
    root_.dir("var/lib");
    fs::create_directory_symlink("/data/kubelet", at("var/lib/kubelet"));
    const KubeletLayout layout = detect();
    EXPECT_EQ(layout.distribution, "kubeadm");
    EXPECT_EQ(layout.description,
              "kubeadm (/etc/kubernetes/kubelet.conf); /var/lib/kubelet links to /data/kubelet");
    EXPECT_EQ(layout.devicePluginDir, at("data/kubelet/device-plugins"));
    EXPECT_EQ(layout.podResourcesSocket, at("data/kubelet/pod-resources/kubelet.sock"));
}

TEST_F(KubeletLayoutTest, TrailingSlashOnTheRootChangesNothing) {
    root_.file("etc/kubernetes/kubelet.conf");
    EXPECT_EQ(detectKubeletLayout(root_.path().string() + "/").devicePluginDir,
              at("var/lib/kubelet/device-plugins"));
}

TEST(ResolveInRoot, RealRootKeepsPathsThatAreNoLinks) {
    EXPECT_EQ(resolveInRoot("", "/no/such/path/here"), "/no/such/path/here");
    EXPECT_EQ(resolveInRoot("/", "/no/such/path/here"), "/no/such/path/here");
}

TEST(ResolveInRoot, DotDotNeverLeavesTheRoot) {
    TempDir root;
    root.dir("a");
    fs::create_directory_symlink("../../../../etc", root.path() / "a" / "up");
    EXPECT_EQ(resolveInRoot(root.path(), "/a/up/x"), root.path().string() + "/etc/x");
    EXPECT_EQ(resolveInRoot(root.path(), "/../../x"), root.path().string() + "/x");
}

TEST(ResolveInRoot, LinkLoopsEnd) {
    TempDir root;
    fs::create_symlink("/b", root.path() / "a");
    fs::create_symlink("/a", root.path() / "b");
    // Whatever it returns, it returns: a loop must not hang detection.
    const std::string resolved = resolveInRoot(root.path(), "/a/x");
    EXPECT_EQ(resolved.rfind(root.path().string(), 0), 0u) << resolved;
}

}  // namespace
}  // namespace devlet
