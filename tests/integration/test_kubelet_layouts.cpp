// devlet finding the kubelet by itself on kubeadm, k3s and MicroK8s (with its own kubelet
// root, and with /var/lib/kubelet linked into the snap as MicroK8s' install hook links
// it): each layout is built in a fake host root that devlet's detection is pointed at
// (DEVLET_HOST_ROOT), the kubelet simulator serves where that distribution's kubelet
// serves, and the real daemon starts without kubelet paths. It must register, release a
// slot through PodResources (so both paths were right), and name the layout and the paths
// in `devlet status`.

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/integration/fixture.h"

namespace devlet::test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCl = "akri.sh/cams";
constexpr const char* kFoo0 = "akri.sh/cams-8120fe";
constexpr const char* kMicroK8sKubelet = "var/snap/microk8s/common/var/lib/kubelet";

struct Layout {
    std::string name;
    std::vector<std::string> markers;  // what the distribution leaves on a node (dirs end in /)
    bool linked = false;               // /var/lib/kubelet -> /var/snap/microk8s/common/var/lib/kubelet
    std::string pluginDir;             // where its kubelet serves kubelet.sock, below the root
    std::string podResourcesSocket;
    std::string distribution;  // what devlet must detect
    std::string description;
};

const std::vector<Layout>& layouts() {
    static const std::vector<Layout> all = {
        {"kubeadm",
         {"etc/kubernetes/kubelet.conf"},
         false,
         "var/lib/kubelet/device-plugins",
         "var/lib/kubelet/pod-resources/kubelet.sock",
         "kubeadm",
         "kubeadm (/etc/kubernetes/kubelet.conf)"},
        {"k3s",
         {"var/lib/rancher/k3s/agent/", "etc/rancher/k3s/k3s.yaml"},
         false,
         "var/lib/kubelet/device-plugins",
         "var/lib/kubelet/pod-resources/kubelet.sock",
         "k3s",
         "k3s (/var/lib/rancher/k3s)"},
        {"microk8s",
         {"var/snap/microk8s/current/args/kubelet"},
         false,
         "var/lib/kubelet/device-plugins",
         std::string(kMicroK8sKubelet) + "/pod-resources/kubelet.sock",
         "microk8s",
         "MicroK8s (kubelet root /var/snap/microk8s/common/var/lib/kubelet; device plugins stay in "
         "/var/lib/kubelet/device-plugins)"},
        {"microk8s_linked",
         {"var/snap/microk8s/current/args/kubelet"},
         true,
         std::string(kMicroK8sKubelet) + "/device-plugins",
         std::string(kMicroK8sKubelet) + "/pod-resources/kubelet.sock",
         "microk8s",
         "MicroK8s (/var/lib/kubelet links to /var/snap/microk8s/common/var/lib/kubelet)"},
    };
    return all;
}

class KubeletLayoutsTest : public DaemonTest, public ::testing::WithParamInterface<Layout> {
protected:
    void SetUp() override {
        DaemonTest::SetUp();
        // A short root: plugin sockets below /var/snap/microk8s/... must fit in sun_path.
        char name[] = "/tmp/dl-XXXXXX";
        ASSERT_NE(::mkdtemp(name), nullptr);
        root_ = name;
        const Layout& layout = GetParam();
        for (const std::string& marker : layout.markers) {
            if (marker.back() == '/') {
                fs::create_directories(root_ / marker);
            } else {
                writeFile(root_ / marker, "");
            }
        }
        if (layout.linked) {
            fs::create_directories(root_ / kMicroK8sKubelet);
            fs::create_directories(root_ / "var/lib");
            fs::create_directory_symlink("/var/snap/microk8s/common/var/lib/kubelet",
                                         root_ / "var/lib/kubelet");
        }
        fs::create_directories(root_ / layout.pluginDir);
        fs::create_directories((root_ / layout.podResourcesSocket).parent_path());
        kubelet_ =
            std::make_unique<KubeletSimulator>(root_ / layout.pluginDir, root_ / layout.podResourcesSocket);
        daemon_->detectKubeletPathsBelow(root_);
        writeFile(daemon_->confDir() / "cams.yaml", echoConfiguration("cams", 2));
    }
    void TearDown() override {
        DaemonTest::TearDown();
        std::error_code ec;
        if (!root_.empty()) fs::remove_all(root_, ec);
    }

    fs::path root_;
};

TEST_P(KubeletLayoutsTest, FindsTheKubeletAndSaysWhichLayout) {
    const Layout& layout = GetParam();
    ASSERT_TRUE(kubelet_->start());
    daemon_->start();
    ASSERT_TRUE(waitForDevices(kCl, 4)) << daemon_->log();
    ASSERT_TRUE(waitForDevices(kFoo0, 2)) << daemon_->log();

    // PodResources at the detected path: a slot held through the instance's resource is
    // Unhealthy in the configuration's, and Healthy again once its pod is gone.
    auto held = kubelet_->allocate("default", "pod-a", "main", kFoo0, 1);
    ASSERT_TRUE(held.ok) << held.error;
    const std::string slot = held.deviceIds.at(0);
    ASSERT_TRUE(waitForHealth(kCl, slot, "Unhealthy")) << daemon_->log();
    kubelet_->removePod("default", "pod-a");
    EXPECT_TRUE(waitForHealth(kCl, slot, "Healthy")) << daemon_->log();

    ASSERT_TRUE(daemon_->waitForLog("status page at http://", 20s));
    const std::string log = daemon_->log();
    const std::size_t at = log.find("status page at http://") + 22;
    const std::string address = log.substr(at, log.find('/', at) - at);
    const CommandResult status = runDevlet({"status", "--listen", address});
    ASSERT_EQ(status.exitCode, 0) << status.output;
    EXPECT_NE(status.output.find("kubelet paths: " + layout.description + "\n"), std::string::npos)
        << status.output;
    EXPECT_NE(status.output.find("device plugins: " + (root_ / layout.pluginDir).string() + "\n"),
              std::string::npos)
        << status.output;
    EXPECT_NE(status.output.find("PodResources:   " + (root_ / layout.podResourcesSocket).string() + "\n"),
              std::string::npos)
        << status.output;
    const CommandResult json = runDevlet({"status", "--json", "--listen", address});
    ASSERT_EQ(json.exitCode, 0) << json.output;
    EXPECT_NE(json.output.find("\"distribution\":\"" + layout.distribution + "\""), std::string::npos)
        << json.output;
    EXPECT_NE(json.output.find("\"podResourcesError\":null"), std::string::npos) << json.output;
    EXPECT_TRUE(daemon_->waitForLog("kubelet layout: " + layout.description, 1s));
}

INSTANTIATE_TEST_SUITE_P(Distributions, KubeletLayoutsTest, ::testing::ValuesIn(layouts()),
                         [](const ::testing::TestParamInfo<Layout>& info) { return info.param.name; });

}  // namespace
}  // namespace devlet::test
