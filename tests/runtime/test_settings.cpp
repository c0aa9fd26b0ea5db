#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "runtime/kubelet_layout.h"
#include "runtime/settings.h"
#include "tests/support/temp_dir.h"

namespace devlet {
namespace {

using test::TempDir;

std::string allMessages(const LoadedSettings& loaded) {
    std::string all;
    for (const auto& problem : loaded.problems) all += problem.str() + "\n";
    return all;
}

TEST(ParseSettings, EmptyFileMeansDefaults) {
    for (const char* text : {"", "# all defaults\n", "---\n"}) {
        auto loaded = parseSettings(text, "devlet.yaml");
        EXPECT_TRUE(loaded.problems.empty()) << allMessages(loaded);
        const Settings& s = loaded.settings;
        EXPECT_EQ(s.nodeName, "");
        EXPECT_EQ(s.resourceDomain, "akri.sh");
        EXPECT_EQ(s.stateDir, "/var/lib/devlet");
        EXPECT_EQ(s.confDir, "/etc/devlet/conf.d");
        EXPECT_EQ(s.listen, "127.0.0.1:9797");
        EXPECT_EQ(s.logLevel, "info");
        EXPECT_EQ(s.podResourcesInterval, std::chrono::milliseconds(5000));
        EXPECT_EQ(s.slotReleaseGrace, std::chrono::milliseconds(10000));
    }
}

TEST(ParseSettings, ReadsEveryKey) {
    auto loaded = parseSettings(
        "nodeName: edge-1\n"
        "resourceDomain: devices.example.com\n"
        "stateDir: /srv/devlet\n"
        "confDir: /srv/devlet/conf.d\n"
        "kubelet:\n"
        "  devicePluginDir: /var/lib/kubelet/device-plugins\n"
        "  podResourcesSocket: /run/pr.sock\n"
        "  podResourcesIntervalSeconds: 2\n"
        "  slotReleaseGraceSeconds: 0.5\n"
        "status:\n"
        "  listen: \"[::1]:8080\"\n"
        "log:\n"
        "  level: debug\n",
        "devlet.yaml");
    ASSERT_TRUE(loaded.problems.empty()) << allMessages(loaded);
    const Settings& s = loaded.settings;
    EXPECT_EQ(s.nodeName, "edge-1");
    EXPECT_EQ(s.resourceDomain, "devices.example.com");
    EXPECT_EQ(s.stateDir, "/srv/devlet");
    EXPECT_EQ(s.confDir, "/srv/devlet/conf.d");
    EXPECT_EQ(s.devicePluginDir, "/var/lib/kubelet/device-plugins");
    EXPECT_EQ(s.podResourcesSocket, "/run/pr.sock");
    EXPECT_EQ(s.podResourcesInterval, std::chrono::milliseconds(2000));
    EXPECT_EQ(s.slotReleaseGrace, std::chrono::milliseconds(500));
    EXPECT_EQ(s.listen, "[::1]:8080");
    EXPECT_EQ(s.logLevel, "debug");
}

TEST(ParseSettings, ClusterModeIsOffUnlessAKubeconfigIsNamed) {
    auto off = parseSettings("nodeName: edge-1\n", "devlet.yaml");
    ASSERT_TRUE(off.problems.empty()) << allMessages(off);
    EXPECT_FALSE(off.settings.cluster.enabled());
    EXPECT_EQ(off.settings.cluster.namespaceName, "devlet");
    EXPECT_EQ(off.settings.cluster.leaseDuration, std::chrono::seconds(15));
    EXPECT_EQ(off.settings.cluster.brokerPending, std::chrono::seconds(300));
    auto on = parseSettings(
        "cluster:\n  kubeconfig: /etc/devlet/kubeconfig\n  namespace: edge-devices\n  leaseDurationSeconds: "
        "30\n  brokerPendingSeconds: 60\n",
        "devlet.yaml");
    ASSERT_TRUE(on.problems.empty()) << allMessages(on);
    EXPECT_TRUE(on.settings.cluster.enabled());
    EXPECT_EQ(on.settings.cluster.kubeconfig, "/etc/devlet/kubeconfig");
    EXPECT_EQ(on.settings.cluster.namespaceName, "edge-devices");
    EXPECT_EQ(on.settings.cluster.leaseDuration, std::chrono::seconds(30));
    EXPECT_EQ(on.settings.cluster.brokerPending, std::chrono::seconds(60));
}

TEST(ParseSettings, ClusterSettingsProblemsHaveLines) {
    auto loaded = parseSettings(
        "cluster:\n  kubeconfig: relative/kubeconfig\n  namespace: Not_A_Label\n"
        "  leaseDurationSeconds: 0.5\n  nodeName: other\n  kubconfig: x\n  brokerPendingSeconds: 0\n",
        "devlet.yaml");
    const std::string all = allMessages(loaded);
    EXPECT_NE(all.find("devlet.yaml:2: cluster.kubeconfig \"relative/kubeconfig\" must be an absolute path"),
              std::string::npos)
        << all;
    EXPECT_NE(all.find("devlet.yaml:3: cluster.namespace"), std::string::npos) << all;
    EXPECT_NE(all.find("devlet.yaml:4: cluster.leaseDurationSeconds must be a whole number"),
              std::string::npos)
        << all;
    EXPECT_NE(
        all.find("devlet.yaml:5: cluster.nodeName: the node's name in the cluster is the top-level nodeName"),
        std::string::npos)
        << all;
    EXPECT_NE(all.find("devlet.yaml:6: unknown key \"kubconfig\" in cluster; did you mean \"kubeconfig\"?"),
              std::string::npos)
        << all;
    EXPECT_NE(
        all.find("devlet.yaml:7: cluster.brokerPendingSeconds must be a whole number of seconds from 1 to "
                 "86400 (got \"0\")"),
        std::string::npos)
        << all;
    auto unused = parseSettings("cluster:\n  brokerPendingSeconds: 60\n", "devlet.yaml");
    EXPECT_NE(allMessages(unused).find("devlet.yaml:1: cluster: namespace, leaseDurationSeconds and "
                                       "brokerPendingSeconds are used only"),
              std::string::npos)
        << allMessages(unused);
    // The shipped file's defaults, uncommented, change nothing and are accepted.
    auto defaults = parseSettings(
        "cluster:\n  kubeconfig: \"\"\n  namespace: devlet\n  leaseDurationSeconds: 15\n"
        "  brokerPendingSeconds: 300\n",
        "devlet.yaml");
    EXPECT_TRUE(defaults.problems.empty()) << allMessages(defaults);
}

TEST(ParseSettings, UnknownKeyIsErrorWithLineAndSuggestion) {
    auto loaded = parseSettings("logLevel: debug\nnodename: a\n", "devlet.yaml");
    ASSERT_EQ(loaded.problems.size(), 2u) << allMessages(loaded);
    EXPECT_EQ(loaded.problems[0].line, 1);
    EXPECT_NE(loaded.problems[0].message.find("unknown key \"logLevel\""), std::string::npos);
    EXPECT_EQ(loaded.problems[1].str(),
              "devlet.yaml:2: unknown key \"nodename\" in the settings; did you mean \"nodeName\"?");
}

TEST(ParseSettings, UnknownNestedKeyIsError) {
    auto loaded = parseSettings("kubelet:\n  podResourceSocket: /x\nstatus:\n  port: 80\n", "devlet.yaml");
    ASSERT_EQ(loaded.problems.size(), 2u) << allMessages(loaded);
    EXPECT_EQ(
        loaded.problems[0].str(),
        "devlet.yaml:2: unknown key \"podResourceSocket\" in kubelet; did you mean \"podResourcesSocket\"?");
    EXPECT_EQ(loaded.problems[1].line, 4);
    EXPECT_NE(loaded.problems[1].message.find("allowed: listen"), std::string::npos);
}

TEST(ParseSettings, DuplicateKeyIsError) {
    auto loaded = parseSettings("stateDir: /a\nstateDir: /b\n", "devlet.yaml");
    ASSERT_EQ(loaded.problems.size(), 1u);
    EXPECT_EQ(loaded.problems[0].line, 2);
}

TEST(ParseSettings, InvalidResourceDomainRejected) {
    for (const char* domain : {"Akri.sh", "akri_sh", "kubernetes.io", "devices.kubernetes.io", "-a.sh"}) {
        auto loaded = parseSettings(std::string("resourceDomain: ") + domain + "\n", "devlet.yaml");
        ASSERT_EQ(loaded.problems.size(), 1u) << domain;
        EXPECT_EQ(loaded.problems[0].line, 1);
        EXPECT_NE(loaded.problems[0].message.find("resourceDomain"), std::string::npos);
    }
}

TEST(ParseSettings, InvalidValuesRejectedWithLines) {
    auto loaded = parseSettings(
        "stateDir: relative/dir\n"
        "status:\n"
        "  listen: 9797\n"
        "log:\n"
        "  level: verbose\n"
        "kubelet:\n"
        "  podResourcesIntervalSeconds: 0\n"
        "  slotReleaseGraceSeconds: -1\n"
        "nodeName: Bad_Node\n",
        "devlet.yaml");
    std::string all = allMessages(loaded);
    ASSERT_EQ(loaded.problems.size(), 6u) << all;
    EXPECT_NE(all.find("devlet.yaml:1: stateDir \"relative/dir\" must be an absolute path"),
              std::string::npos)
        << all;
    EXPECT_NE(all.find("devlet.yaml:3: status.listen \"9797\""), std::string::npos) << all;
    EXPECT_NE(all.find("devlet.yaml:5: log.level \"verbose\" must be one of error, warning, info, debug"),
              std::string::npos)
        << all;
    EXPECT_NE(all.find("devlet.yaml:7: kubelet.podResourcesIntervalSeconds"), std::string::npos) << all;
    EXPECT_NE(all.find("devlet.yaml:8: kubelet.slotReleaseGraceSeconds"), std::string::npos) << all;
    EXPECT_NE(all.find("devlet.yaml:9: nodeName"), std::string::npos) << all;
}

TEST(ParseSettings, SectionMustBeMapping) {
    auto loaded = parseSettings("status: 127.0.0.1:9797\n", "devlet.yaml");
    ASSERT_EQ(loaded.problems.size(), 1u);
    EXPECT_EQ(loaded.problems[0].str(), "devlet.yaml:1: status must be a mapping");
}

TEST(ParseSettings, EmptySectionMeansDefaults) {
    auto loaded = parseSettings("kubelet:\n#  devicePluginDir: /x\nstatus:\nlog:\n", "devlet.yaml");
    EXPECT_TRUE(loaded.problems.empty()) << allMessages(loaded);
    EXPECT_EQ(loaded.settings.listen, "127.0.0.1:9797");
}

TEST(ParseSettings, BadYamlReportsLine) {
    auto loaded = parseSettings("nodeName: a\nstatus:\n  listen: [x\n", "devlet.yaml");
    ASSERT_EQ(loaded.problems.size(), 1u);
    EXPECT_GE(loaded.problems[0].line, 3);
    EXPECT_NE(loaded.problems[0].message.find("YAML syntax error"), std::string::npos);
}

// yaml-cpp 0.7 would loop forever here (found by fuzz/fuzz_configuration).
TEST(ParseSettings, StrayCommaIsSyntaxErrorNotEndlessLoop) {
    auto loaded = parseSettings("nodeName: a\n---\n,\n", "devlet.yaml");
    ASSERT_FALSE(loaded.problems.empty());
    EXPECT_NE(loaded.problems[0].message.find("YAML syntax error"), std::string::npos);
}

TEST(ParseSettings, MoreThanOneDocumentRejected) {
    auto loaded = parseSettings("nodeName: a\n---\nnodeName: b\n", "devlet.yaml");
    ASSERT_EQ(loaded.problems.size(), 1u);
    EXPECT_EQ(loaded.problems[0].line, 3);
}

TEST(ListenAddress, AcceptsIpv4AndBracketedIpv6) {
    for (const char* listen : {"127.0.0.1:9797", "0.0.0.0:1", "[::1]:9797", "[::]:65535", "[fe80::1]:80"}) {
        EXPECT_EQ(listenProblem(listen), "") << listen;
    }
}

TEST(ListenAddress, RejectsMissingAddressPortOrBrackets) {
    for (const char* listen :
         {"", "9797", ":9797", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:http", "::1:9797",
          "[::1]", "[::1:9797", "[127.0.0.1]:80", "localhost:80", "300.1.1.1:80", "127.0.0.1:123456"}) {
        EXPECT_NE(listenProblem(listen), "") << listen;
    }
}

TEST(ListenAddress, PortZeroTakesAFreePort) {
    EXPECT_EQ(listenProblem("127.0.0.1:0"), "");
}

TEST(LoadSettings, ExplicitMissingFileIsProblem) {
    TempDir dir;
    SettingsOverrides overrides;
    overrides.configFile = dir.path().string() + "/devlet.yaml";
    overrides.nodeName = "edge-1";
    auto loaded = loadSettings(overrides);
    ASSERT_EQ(loaded.problems.size(), 1u);
    EXPECT_EQ(loaded.problems[0].str(),
              dir.path().string() + "/devlet.yaml: cannot read: No such file or directory");
}

TEST(LoadSettings, MissingDefaultFileMeansDefaults) {
    if (std::filesystem::exists(kDefaultSettingsFile)) GTEST_SKIP() << kDefaultSettingsFile << " exists here";
    SettingsOverrides overrides;
    overrides.nodeName = "edge-1";
    auto loaded = loadSettings(overrides);
    EXPECT_TRUE(loaded.problems.empty()) << allMessages(loaded);
    EXPECT_EQ(loaded.settings.resourceDomain, "akri.sh");
    EXPECT_EQ(loaded.settings.listen, "127.0.0.1:9797");
}

TEST(LoadSettings, FileValuesUsedAndFlagsWin) {
    TempDir dir;
    SettingsOverrides overrides;
    overrides.configFile = dir.file("devlet.yaml",
                                    "nodeName: from-file\nstateDir: /file/state\nconfDir: /file/conf\n"
                                    "status:\n  listen: 127.0.0.1:1000\nlog:\n  level: debug\n");
    overrides.nodeName = "from-flag";
    overrides.listen = "0.0.0.0:2000";
    overrides.devicePluginDir = "/flag/device-plugins";
    overrides.podResourcesSocket = "/flag/pod-resources.sock";
    auto loaded = loadSettings(overrides);
    ASSERT_TRUE(loaded.problems.empty()) << allMessages(loaded);
    const Settings& s = loaded.settings;
    EXPECT_EQ(s.nodeName, "from-flag");
    EXPECT_EQ(s.listen, "0.0.0.0:2000");
    EXPECT_EQ(s.stateDir, "/file/state");
    EXPECT_EQ(s.confDir, "/file/conf");
    EXPECT_EQ(s.logLevel, "debug");
    EXPECT_EQ(s.devicePluginDir, "/flag/device-plugins");
    EXPECT_EQ(s.podResourcesSocket, "/flag/pod-resources.sock");
}

TEST(LoadSettings, FileProblemsKeepFileAndLine) {
    TempDir dir;
    SettingsOverrides overrides;
    overrides.configFile = dir.file("devlet.yaml", "nodeName: a\nlog:\n  levle: debug\n");
    auto loaded = loadSettings(overrides);
    ASSERT_EQ(loaded.problems.size(), 1u);
    EXPECT_EQ(loaded.problems[0].file, *overrides.configFile);
    EXPECT_EQ(loaded.problems[0].line, 3);
}

TEST(LoadSettings, InvalidFlagsRejected) {
    TempDir dir;
    SettingsOverrides overrides;
    overrides.configFile = dir.file("devlet.yaml", "nodeName: a\n");
    overrides.listen = "9797";
    overrides.logLevel = "verbose";
    overrides.stateDir = "state";
    auto loaded = loadSettings(overrides);
    std::string all = allMessages(loaded);
    ASSERT_EQ(loaded.problems.size(), 3u) << all;
    EXPECT_NE(all.find("listen address \"9797\""), std::string::npos) << all;
    EXPECT_NE(all.find("log level \"verbose\""), std::string::npos) << all;
    EXPECT_NE(all.find("state dir \"state\" must be an absolute path"), std::string::npos) << all;
    // A rejected flag does not replace the file's value.
    EXPECT_EQ(loaded.settings.listen, "127.0.0.1:9797");
}

TEST(LoadSettings, NodeNameDefaultsToLowerCaseHostname) {
    char host[HOST_NAME_MAX + 1] = {};
    ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
    std::string expected(host);
    std::transform(expected.begin(), expected.end(), expected.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    TempDir dir;
    SettingsOverrides overrides;
    overrides.configFile = dir.file("devlet.yaml", "");
    auto loaded = loadSettings(overrides);
    if (!loaded.problems.empty())
        GTEST_SKIP() << "hostname is not a valid node name here: " << allMessages(loaded);
    EXPECT_EQ(loaded.settings.nodeName, expected);
}

TEST(LoadSettings, KubeletPathsDetectedWhenUnset) {
    TempDir dir;
    SettingsOverrides overrides;
    overrides.configFile = dir.file("devlet.yaml", "nodeName: a\n");
    auto loaded = loadSettings(overrides);
    ASSERT_TRUE(loaded.problems.empty()) << allMessages(loaded);
    const KubeletLayout layout = detectKubeletLayout();
    EXPECT_EQ(loaded.settings.devicePluginDir, layout.devicePluginDir);
    EXPECT_EQ(loaded.settings.podResourcesSocket, layout.podResourcesSocket);
    EXPECT_EQ(loaded.settings.kubeletDistribution, layout.distribution);
    EXPECT_EQ(loaded.settings.kubeletLayout, layout.description);
}

// DEVLET_HOST_ROOT moves detection into a fake root; this test program runs its tests
// one after another, so setting the variable for one test is safe.
class HostRootEnvironment {
public:
    explicit HostRootEnvironment(const std::string& root) { ::setenv("DEVLET_HOST_ROOT", root.c_str(), 1); }
    ~HostRootEnvironment() { ::unsetenv("DEVLET_HOST_ROOT"); }
};

TEST(LoadSettings, KubeletPathsDetectedBelowTheHostRoot) {
    TempDir root;
    root.dir("var/snap/microk8s");
    root.file("var/snap/microk8s/common/var/lib/kubelet/pod-resources/kubelet.sock");
    HostRootEnvironment environment(root.path());
    SettingsOverrides overrides;
    overrides.configFile = root.file("devlet.yaml", "nodeName: a\n");
    auto loaded = loadSettings(overrides);
    ASSERT_TRUE(loaded.problems.empty()) << allMessages(loaded);
    EXPECT_EQ(loaded.settings.kubeletDistribution, "microk8s");
    EXPECT_EQ(loaded.settings.devicePluginDir, root.path().string() + "/var/lib/kubelet/device-plugins");
    EXPECT_EQ(loaded.settings.podResourcesSocket,
              root.path().string() + "/var/snap/microk8s/common/var/lib/kubelet/pod-resources/kubelet.sock");
}

TEST(LoadSettings, ExplicitKubeletPathsAreNamedInTheLayout) {
    TempDir dir;
    SettingsOverrides overrides;
    overrides.configFile = dir.file("devlet.yaml", "nodeName: a\nkubelet:\n  devicePluginDir: /srv/dp\n");
    overrides.podResourcesSocket = "/srv/pr.sock";
    auto loaded = loadSettings(overrides);
    ASSERT_TRUE(loaded.problems.empty()) << allMessages(loaded);
    EXPECT_EQ(loaded.settings.devicePluginDir, "/srv/dp");
    EXPECT_EQ(loaded.settings.podResourcesSocket, "/srv/pr.sock");
    EXPECT_NE(loaded.settings.kubeletLayout.find("device-plugin dir set in the settings"), std::string::npos);
    EXPECT_NE(loaded.settings.kubeletLayout.find("PodResources socket set in the settings"),
              std::string::npos);
}

TEST(LoadSettings, RelativeHostRootIsRefused) {
    HostRootEnvironment environment("fake-root");
    TempDir dir;
    SettingsOverrides overrides;
    overrides.configFile = dir.file("devlet.yaml", "nodeName: a\n");
    auto loaded = loadSettings(overrides);
    EXPECT_NE(allMessages(loaded).find("DEVLET_HOST_ROOT \"fake-root\" must be an absolute path"),
              std::string::npos)
        << allMessages(loaded);
}

}  // namespace
}  // namespace devlet
