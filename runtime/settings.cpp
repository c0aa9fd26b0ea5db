#include "runtime/settings.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <exception>
#include <map>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include "runtime/kubelet_layout.h"
#include "runtime/listen_address.h"
#include "runtime/log.h"
#include "runtime/naming.h"
#include "runtime/strict_yaml.h"

namespace devlet {

namespace {

using yaml::Entry;
using yaml::inQuotes;
using yaml::lineOf;
using yaml::Mapping;

constexpr const char* kCommandLine = "command line";
constexpr double kMaxIntervalSeconds = 3600;

const std::vector<std::string> kTopKeys = {"nodeName", "resourceDomain", "stateDir", "confDir",
                                           "kubelet",  "status",         "log",      "cluster"};
const std::vector<std::string> kKubeletKeys = {"devicePluginDir", "podResourcesSocket",
                                               "podResourcesIntervalSeconds", "slotReleaseGraceSeconds"};
const std::vector<std::string> kStatusKeys = {"listen"};
const std::vector<std::string> kLogKeys = {"level"};
const std::vector<std::string> kClusterKeys = {"kubeconfig", "namespace", "leaseDurationSeconds",
                                               "brokerPendingSeconds", "nodeName"};
constexpr long kMaxLeaseSeconds = 3600;
constexpr long kMaxBrokerPendingSeconds = 86400;

std::string resourceDomainProblem(std::string_view domain) {
    if (std::string problem = domainProblem(domain); !problem.empty()) return problem;
    // Also the kubelet's rules for what the domain becomes part of (kubernetes.io is
    // reserved, the "requests." quota prefix must still fit).
    std::string resourceProblem = resourceNameProblem(std::string(domain) + "/x");
    return resourceProblem.empty() ? "" : "cannot be used for resources: " + resourceProblem;
}

std::string nodeNameProblem(std::string_view name) {
    std::string problem = domainProblem(name);
    return problem.empty() ? "" : problem + " (it must be the Kubernetes node name)";
}

std::string pathProblem(std::string_view path) {
    return (path.empty() || path.front() != '/') ? "must be an absolute path" : "";
}

// A namespace is a DNS label (RFC 1123).
std::string namespaceProblem(std::string_view name) {
    if (name.empty() || name.size() > 63) return "must be 1 to 63 characters";
    for (char c : name) {
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
            return "must be lower-case letters, digits and '-' (a Kubernetes namespace)";
    }
    if (name.front() == '-' || name.back() == '-') return "must start and end with a letter or digit";
    return "";
}

std::string logLevelProblem(std::string_view level) {
    LogLevel parsed;
    return parseLogLevel(level, parsed) ? "" : "must be one of error, warning, info, debug";
}

// Reads one settings file; every problem carries file:line.
class SettingsParser {
public:
    SettingsParser(const std::string& file, LoadedSettings& out) : file_(file), out_(out) {}

    void parse(const YAML::Node& root) {
        if (root.IsNull()) return;  // an empty file: all defaults
        auto top = mapping(root, lineOf(root, 1), "the settings", kTopKeys);
        if (!top) return;
        Settings& s = out_.settings;
        readString(*top, "nodeName", "nodeName", s.nodeName, nodeNameProblem, /*emptyMeansUnset=*/true);
        readString(*top, "resourceDomain", "resourceDomain", s.resourceDomain, resourceDomainProblem);
        readString(*top, "stateDir", "stateDir", s.stateDir, pathProblem);
        readString(*top, "confDir", "confDir", s.confDir, pathProblem);
        if (auto kubelet = section(*top, "kubelet", kKubeletKeys)) {
            readString(*kubelet, "devicePluginDir", "kubelet.devicePluginDir", s.devicePluginDir, pathProblem,
                       true);
            readString(*kubelet, "podResourcesSocket", "kubelet.podResourcesSocket", s.podResourcesSocket,
                       pathProblem, true);
            readSeconds(*kubelet, "podResourcesIntervalSeconds", "kubelet.podResourcesIntervalSeconds",
                        s.podResourcesInterval, /*allowZero=*/false);
            readSeconds(*kubelet, "slotReleaseGraceSeconds", "kubelet.slotReleaseGraceSeconds",
                        s.slotReleaseGrace,
                        /*allowZero=*/true);
        }
        if (auto status = section(*top, "status", kStatusKeys)) {
            readString(*status, "listen", "status.listen", s.listen, listenProblem);
        }
        if (auto log = section(*top, "log", kLogKeys)) {
            readString(*log, "level", "log.level", s.logLevel, logLevelProblem);
        }
        readCluster(*top, s.cluster);
    }

    void error(int line, std::string message) { out_.problems.push_back({file_, line, std::move(message)}); }

private:
    void readCluster(const Mapping& top, ClusterSettings& cluster) {
        auto it = top.find("cluster");
        if (it == top.end()) return;
        auto section = this->section(top, "cluster", kClusterKeys);
        if (!section) return;
        // The node's name in the cluster is the one instance names are made with: a
        // second one could only disagree with it.
        if (const Entry* entry = yaml::find(*section, "nodeName"))
            error(entry->line, "cluster.nodeName: the node's name in the cluster is the top-level nodeName");
        readString(*section, "kubeconfig", "cluster.kubeconfig", cluster.kubeconfig, pathProblem, true);
        readString(*section, "namespace", "cluster.namespace", cluster.namespaceName, namespaceProblem);
        readWholeSeconds(*section, "leaseDurationSeconds", "cluster.leaseDurationSeconds", kMaxLeaseSeconds,
                         cluster.leaseDuration);
        readWholeSeconds(*section, "brokerPendingSeconds", "cluster.brokerPendingSeconds",
                         kMaxBrokerPendingSeconds, cluster.brokerPending);
        // A value other than the default without a kubeconfig would be ignored; the
        // defaults, as the shipped file has them, change nothing either way.
        const ClusterSettings defaults;
        if (!cluster.enabled() && (cluster.namespaceName != defaults.namespaceName ||
                                   cluster.leaseDuration != defaults.leaseDuration ||
                                   cluster.brokerPending != defaults.brokerPending)) {
            error(it->second.line,
                  "cluster: namespace, leaseDurationSeconds and brokerPendingSeconds are used only with "
                  "cluster.kubeconfig, which is not set");
        }
    }

    // A whole number of seconds from 1 to `most`.
    void readWholeSeconds(const Mapping& mapping, const std::string& key, const std::string& what, long most,
                          std::chrono::seconds& target) {
        const Entry* entry = yaml::find(mapping, key);
        if (!entry) return;
        const std::optional<long> seconds = yaml::scalarAs<long>(entry->value);
        if (!seconds || *seconds < 1 || *seconds > most) {
            std::string got = entry->value.IsScalar() ? " (got " + inQuotes(entry->value.Scalar()) + ")" : "";
            error(entry->valueLine(),
                  what + " must be a whole number of seconds from 1 to " + std::to_string(most) + got);
            return;
        }
        target = std::chrono::seconds(*seconds);
    }

    std::optional<Mapping> mapping(const YAML::Node& node, int line, const std::string& where,
                                   const std::vector<std::string>& allowed) {
        return yaml::readMapping(node, line, where, &allowed,
                                 [this](int at, std::string message) { error(at, std::move(message)); });
    }

    std::optional<Mapping> section(const Mapping& top, const std::string& key,
                                   const std::vector<std::string>& allowed) {
        auto it = top.find(key);
        if (it == top.end()) return std::nullopt;
        // Every key commented out means defaults.
        return yaml::readMapping(
            it->second.value, it->second.line, key, &allowed,
            [this](int at, std::string message) { error(at, std::move(message)); }, /*emptyAllowed=*/true);
    }

    void readString(const Mapping& mapping, const std::string& key, const std::string& what,
                    std::string& target, std::string (*problemOf)(std::string_view),
                    bool emptyMeansUnset = false) {
        auto it = mapping.find(key);
        if (it == mapping.end()) return;
        const Entry& entry = it->second;
        std::string value;
        if (!entry.value.IsNull()) {
            if (!entry.value.IsScalar()) {
                error(entry.valueLine(), what + " must be a string");
                return;
            }
            value = entry.value.Scalar();
        }
        if (value.empty() && emptyMeansUnset) {
            target.clear();
            return;
        }
        if (std::string problem = problemOf(value); !problem.empty()) {
            error(entry.valueLine(), what + " " + inQuotes(value) + " " + problem);
            return;
        }
        target = value;
    }

    void readSeconds(const Mapping& mapping, const std::string& key, const std::string& what,
                     std::chrono::milliseconds& target, bool allowZero) {
        auto it = mapping.find(key);
        if (it == mapping.end()) return;
        const Entry& entry = it->second;
        const std::optional<double> seconds = yaml::scalarAs<double>(entry.value);
        std::string range = allowZero ? "between 0 and 3600" : "more than 0 and at most 3600";
        if (!seconds || !std::isfinite(*seconds) || *seconds < 0 || (*seconds == 0 && !allowZero) ||
            *seconds > kMaxIntervalSeconds) {
            std::string got = entry.value.IsScalar() ? " (got " + inQuotes(entry.value.Scalar()) + ")" : "";
            error(entry.valueLine(), what + " must be a number of seconds " + range + got);
            return;
        }
        auto milliseconds = std::llround(*seconds * 1000);
        if (!allowZero && milliseconds < 1) milliseconds = 1;
        target = std::chrono::milliseconds(milliseconds);
    }

    std::string file_;
    LoadedSettings& out_;
};

// The kubelet uses the lower-cased hostname as the node name (nodeutil.GetHostname), and
// instance hashes must use the same name as Akri's agent does.
std::optional<std::string> hostNodeName() {
    char name[HOST_NAME_MAX + 1] = {};
    if (::gethostname(name, sizeof name - 1) != 0) return std::nullopt;
    std::string result(name);
    std::transform(result.begin(), result.end(), result.begin(),
                   [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; });
    return result;
}

void applyOverride(const std::optional<std::string>& flag, const std::string& what, std::string& target,
                   std::string (*problemOf)(std::string_view), std::vector<ConfigProblem>& problems) {
    if (!flag) return;
    if (std::string problem = problemOf(*flag); !problem.empty()) {
        problems.push_back({kCommandLine, 0, what + " " + inQuotes(*flag) + " " + problem});
        return;
    }
    target = *flag;
}

}  // namespace

std::string listenProblem(std::string_view listen) {
    const auto parsed = parseListenAddress(listen);
    const std::string* problem = std::get_if<std::string>(&parsed);
    return problem ? *problem : std::string();
}

LoadedSettings parseSettings(const std::string& text, const std::string& fileName) {
    LoadedSettings out;
    SettingsParser parser(fileName, out);
    try {
        std::vector<YAML::Node> documents = yaml::loadAll(text);
        std::vector<YAML::Node> nonEmpty;
        for (const auto& document : documents) {
            if (!document.IsNull()) nonEmpty.push_back(document);
        }
        if (nonEmpty.size() > 1) {
            parser.error(lineOf(nonEmpty[1], 0), "the settings file must hold one YAML document");
        }
        if (!nonEmpty.empty()) parser.parse(nonEmpty.front());
    } catch (const YAML::Exception& e) {
        std::string prefix = dynamic_cast<const YAML::ParserException*>(&e) ? "YAML syntax error: " : "";
        parser.error(e.mark.line >= 0 ? e.mark.line + 1 : 0, prefix + e.msg);
    } catch (const std::exception& e) {
        parser.error(0, e.what());
    }
    return out;
}

bool looksLikeConfiguration(const std::string& text) {
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.rfind("kind:", 0) == 0 && line.find("Configuration") != std::string::npos) return true;
        if (line.rfind("apiVersion:", 0) == 0 && line.find("akri.sh/") != std::string::npos) return true;
    }
    return false;
}

bool looksLikeSettings(const std::string& text) {
    static const char* kKeys[] = {"nodeName:", "stateDir:",       "confDir:",  "kubelet:", "cluster:",
                                  "listen:",   "resourceDomain:", "logLevel:", "status:"};
    std::istringstream lines(text);
    std::string line;
    bool settingsKey = false;
    while (std::getline(lines, line)) {
        if (line.rfind("kind:", 0) == 0 || line.rfind("apiVersion:", 0) == 0) return false;
        for (const char* key : kKeys) settingsKey = settingsKey || line.rfind(key, 0) == 0;
    }
    return settingsKey;
}

LoadedSettings loadSettings(const SettingsOverrides& overrides) {
    LoadedSettings out;
    const std::string file = overrides.configFile.value_or(kDefaultSettingsFile);
    int readError = 0;
    if (auto text = yaml::readText(file, readError)) {
        out = parseSettings(*text, file);
        // The natural first mistake: a configuration file where the settings go.
        if (!out.problems.empty() && looksLikeConfiguration(*text))
            out.problems = {
                {file, 0,
                 "this is an Akri Configuration (kind: Configuration), not devlet's settings: put it "
                 "in the configuration directory, or give it to a probe with --configuration " +
                     file}};
    } else if (!(readError == ENOENT && !overrides.configFile)) {
        out.problems.push_back({file, 0, std::string("cannot read: ") + std::strerror(readError)});
    }

    // Flags win over the file.
    Settings& s = out.settings;
    applyOverride(overrides.nodeName, "node name", s.nodeName, nodeNameProblem, out.problems);
    applyOverride(overrides.stateDir, "state dir", s.stateDir, pathProblem, out.problems);
    applyOverride(overrides.confDir, "conf dir", s.confDir, pathProblem, out.problems);
    applyOverride(overrides.devicePluginDir, "device-plugin dir", s.devicePluginDir, pathProblem,
                  out.problems);
    applyOverride(overrides.podResourcesSocket, "pod-resources socket", s.podResourcesSocket, pathProblem,
                  out.problems);
    applyOverride(overrides.listen, "listen address", s.listen, listenProblem, out.problems);
    applyOverride(overrides.logLevel, "log level", s.logLevel, logLevelProblem, out.problems);

    if (s.nodeName.empty()) {
        auto hostName = hostNodeName();
        if (!hostName) {
            out.problems.push_back(
                {file, 0,
                 std::string("cannot read the hostname (") + std::strerror(errno) + "); set nodeName"});
        } else if (std::string problem = nodeNameProblem(*hostName); !problem.empty()) {
            out.problems.push_back(
                {file, 0, "the hostname " + inQuotes(*hostName) + " " + problem + "; set nodeName"});
        } else {
            s.nodeName = *hostName;
        }
    }
    std::string rootProblem;
    const std::string root = detectionRoot(rootProblem);
    if (!rootProblem.empty()) out.problems.push_back({"environment", 0, rootProblem});
    const KubeletLayout layout = detectKubeletLayout(root);
    s.kubeletDistribution = layout.distribution;
    s.kubeletLayout = layout.description;
    if (s.devicePluginDir.empty()) {
        s.devicePluginDir = layout.devicePluginDir;
    } else {
        s.kubeletLayout += "; device-plugin dir set in the settings";
    }
    if (s.podResourcesSocket.empty()) {
        s.podResourcesSocket = layout.podResourcesSocket;
    } else {
        s.kubeletLayout += "; PodResources socket set in the settings";
    }
    return out;
}

}  // namespace devlet
