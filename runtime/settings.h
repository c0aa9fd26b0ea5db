#pragma once
// Daemon settings: built-in defaults, then /etc/devlet/devlet.yaml, then flags.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/configuration.h"

namespace devlet {

// Cluster mode (docs/cluster.md): on only when a kubeconfig is named. The node's name in
// the cluster is Settings::nodeName, the one instance names are made with.
struct ClusterSettings {
    std::string kubeconfig;  // empty: cluster mode off, nothing touches the network
    std::string namespaceName = "devlet";
    std::chrono::seconds leaseDuration{15};
    // How long a broker Pod may stay Pending before it is deleted and made again (Akri's
    // controller: 5 minutes).
    std::chrono::seconds brokerPending{300};
    bool enabled() const { return !kubeconfig.empty(); }
};

struct Settings {
    std::string nodeName;  // default: hostname
    std::string resourceDomain = "akri.sh";
    std::string stateDir = "/var/lib/devlet";
    std::string confDir = "/etc/devlet/conf.d";
    std::string devicePluginDir;     // default: detected (kubeadm, k3s, MicroK8s)
    std::string podResourcesSocket;  // default: detected
    // The detected kubelet layout (KubeletLayout::distribution and ::description), and
    // which of the two paths the settings set instead; for `devlet status` and the log.
    std::string kubeletDistribution;
    std::string kubeletLayout;
    std::string listen = "127.0.0.1:9797";
    std::string logLevel = "info";
    std::chrono::milliseconds podResourcesInterval{5000};
    std::chrono::milliseconds slotReleaseGrace{10000};
    ClusterSettings cluster;
};

// What the command line gave; unset fields keep the file's or the default value.
struct SettingsOverrides {
    std::optional<std::string> configFile;
    std::optional<std::string> nodeName;
    std::optional<std::string> stateDir;
    std::optional<std::string> confDir;
    std::optional<std::string> devicePluginDir;
    std::optional<std::string> podResourcesSocket;
    std::optional<std::string> listen;
    std::optional<std::string> logLevel;
};

// Whether a YAML text is an Akri Configuration (kind or apiVersion says so), or looks like
// devlet's settings (their top-level keys, no kind): for a message that names the right option
// when one is given where the other is expected.
bool looksLikeConfiguration(const std::string& text);
bool looksLikeSettings(const std::string& text);

struct LoadedSettings {
    Settings settings;
    std::vector<ConfigProblem> problems;  // non-empty = refuse to start
};

inline constexpr const char* kDefaultSettingsFile = "/etc/devlet/devlet.yaml";

// A missing default settings file means all defaults; a missing explicit one is an error.
LoadedSettings loadSettings(const SettingsOverrides& overrides);
LoadedSettings parseSettings(const std::string& text, const std::string& fileName);

// Why `listen` is not ADDRESS:PORT (runtime/listen_address.h), or empty.
std::string listenProblem(std::string_view listen);

}  // namespace devlet
