#include "status/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "status/status_report.h"

namespace devlet::status {

namespace {

using Labels = std::vector<std::pair<std::string_view, std::string_view>>;

class Exposition {
public:
    void family(std::string_view name, std::string_view type, std::string_view help) {
        out_.append("# HELP ").append(name).append(" ").append(help).append("\n");
        out_.append("# TYPE ").append(name).append(" ").append(type).append("\n");
    }
    void sample(std::string_view name, const Labels& labels, double value) {
        out_.append(name);
        if (!labels.empty()) {
            out_.append("{");
            for (std::size_t i = 0; i < labels.size(); ++i) {
                if (i) out_.append(",");
                out_.append(labels[i].first)
                    .append("=\"")
                    .append(escapeLabelValue(labels[i].second))
                    .append("\"");
            }
            out_.append("}");
        }
        char buffer[64];
        out_.append(" ").append(number(buffer, sizeof buffer, value)).append("\n");
    }
    void sample(std::string_view name, double value) { sample(name, {}, value); }
    // The _bucket series (cumulative, with le and a last +Inf), _sum and _count of one
    // histogram; the family line is written by the caller, once for all label sets.
    void histogram(std::string_view name, const Labels& labels, const DurationHistogram& h) {
        const std::string bucket = std::string(name) + "_bucket";
        Labels withLe = labels;
        withLe.emplace_back("le", "");
        char bound[32];
        for (std::size_t i = 0; i < DurationHistogram::kBoundsSeconds.size(); ++i) {
            // Fixed notation: "0.0005", as people write the bounds, not "5e-04".
            auto [end, ec] = std::to_chars(bound, bound + sizeof bound, DurationHistogram::kBoundsSeconds[i],
                                           std::chars_format::fixed);
            withLe.back().second = std::string_view(bound, ec == std::errc() ? end - bound : 0);
            sample(bucket, withLe, static_cast<double>(h.cumulative(i)));
        }
        withLe.back().second = "+Inf";
        sample(bucket, withLe, static_cast<double>(h.count()));
        sample(std::string(name) + "_sum", labels, h.sumSeconds());
        sample(std::string(name) + "_count", labels, static_cast<double>(h.count()));
    }
    std::string take() { return std::move(out_); }

private:
    // Prometheus' spelling of the special values; the shortest exact text otherwise.
    static std::string_view number(char* buffer, std::size_t size, double value) {
        if (std::isnan(value)) return "NaN";
        if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
        auto [end, ec] = std::to_chars(buffer, buffer + size, value);
        return ec == std::errc() ? std::string_view(buffer, static_cast<std::size_t>(end - buffer)) : "NaN";
    }

    std::string out_;
};

std::string readWhole(const char* path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// Since Linux 6.2 the size of /proc/self/fd is the number of open descriptors; before,
// it is 0 and the directory is read. A daemon with a thousand plugins holds two thousand:
// listing them costs milliseconds, the stat() microseconds.
std::uint64_t countOpenFds() {
    struct stat st {};
    if (::stat("/proc/self/fd", &st) == 0 && st.st_size > 0) return static_cast<std::uint64_t>(st.st_size);
    std::uint64_t n = 0;
    if (DIR* dir = ::opendir("/proc/self/fd")) {
        while (const dirent* entry = ::readdir(dir)) n += entry->d_name[0] != '.';
        ::closedir(dir);
        n -= n > 0 ? 1 : 0;  // the descriptor of the listing itself
    }
    return n;
}

}  // namespace

std::string escapeLabelValue(std::string_view value) {
    std::string out;
    out.reserve(value.size());
    for (char c : value) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '"') {
            out += "\\\"";
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out += c;
        }
    }
    return out;
}

ProcessStats readProcessStats() {
    ProcessStats p;
    const long ticks = ::sysconf(_SC_CLK_TCK);
    const auto perSecond = static_cast<double>(ticks);
    const long page = ::sysconf(_SC_PAGESIZE);
    const std::string stat = readWhole("/proc/self/stat");
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    if (const auto close = stat.rfind(')'); close != std::string::npos && ticks > 0) {
        std::istringstream fields(stat.substr(close + 2));
        std::vector<std::string> f;
        for (std::string field; fields >> field;) f.push_back(field);
        // f[0] is field 3 (state): utime 14, stime 15, num_threads 20, starttime 22, vsize 23,
        // rss 24.
        if (f.size() > 21) {
            try {
                p.cpuSeconds = static_cast<double>(std::stoull(f[11]) + std::stoull(f[12])) / perSecond;
                p.threads = std::stoull(f[17]);
                const double startedAfterBoot = static_cast<double>(std::stoull(f[19])) / perSecond;
                p.virtualBytes = std::stoull(f[20]);
                p.residentBytes = std::stoull(f[21]) * static_cast<std::uint64_t>(page);
                std::istringstream procStat(readWhole("/proc/stat"));
                for (std::string line; std::getline(procStat, line);) {
                    if (line.rfind("btime ", 0) == 0)
                        p.startTimeSeconds = std::stod(line.substr(6)) + startedAfterBoot;
                }
            } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch)
                // A kernel with another layout: the figures stay zero.
            }
        }
    }
    p.openFds = countOpenFds();
    std::istringstream limits(readWhole("/proc/self/limits"));
    for (std::string line; std::getline(limits, line);) {
        if (line.rfind("Max open files", 0) != 0) continue;
        std::istringstream words(line.substr(14));
        std::string soft;
        words >> soft;
        std::uint64_t value = 0;
        if (std::from_chars(soft.data(), soft.data() + soft.size(), value).ec == std::errc())
            p.maxFds = value;
    }
    return p;
}

std::string inventoryMetricsText(const StatusSnapshot& s) {
    Exposition e;
    e.family("devlet_build_info", "gauge", "Always 1; the labels say which devlet runs on which node.");
    e.sample("devlet_build_info", {{"version", s.daemon.version}, {"node", s.daemon.nodeName}}, 1);
    e.family("devlet_ready", "gauge", "1 when /readyz answers 200.");
    e.sample("devlet_ready", readiness(s).ready ? 1 : 0);

    e.family("devlet_kubelet_state", "gauge", "1 for the kubelet connection's current state.");
    for (auto state : {KubeletStatus::State::Waiting, KubeletStatus::State::Registering,
                       KubeletStatus::State::Connected}) {
        const std::string name = kubeletStateName(state);
        e.sample("devlet_kubelet_state", {{"state", name}}, s.kubelet.state == state ? 1 : 0);
    }
    e.family("devlet_plugins_offered", "gauge", "Device plugins (resources) devlet offers.");
    e.sample("devlet_plugins_offered", static_cast<double>(s.kubelet.pluginsOffered));
    e.family("devlet_plugins_registered", "gauge", "Device plugins registered with the kubelet now.");
    e.sample("devlet_plugins_registered", static_cast<double>(s.kubelet.pluginsRegistered));
    e.family("devlet_pod_resources_up", "gauge",
             "0 while the kubelet's PodResources API does not answer (held slots are not released).");
    e.sample("devlet_pod_resources_up", s.kubelet.podResourcesError.empty() ? 1 : 0);
    if (s.cluster.enabled) {
        e.family("devlet_cluster_api_up", "gauge",
                 "1 while the Kubernetes API server answers (cluster mode only), 0 while it does not.");
        e.sample("devlet_cluster_api_up", s.cluster.reachable ? 1 : 0);
        e.family("devlet_cluster_watch_current", "gauge",
                 "1 while the Lease watch stream is open (cluster mode only).");
        e.sample("devlet_cluster_watch_current", s.cluster.watchCurrent ? 1 : 0);
        e.family(
            "devlet_cluster_node_lease_confirmed", "gauge",
            "1 while the API has confirmed this node's Lease within two thirds of its duration (cluster mode "
            "only): shared slots are given and offered only then.");
        e.sample("devlet_cluster_node_lease_confirmed", s.cluster.nodeLeaseConfirmed ? 1 : 0);
        e.family(
            "devlet_cluster_holds_unconfirmed", "gauge",
            "Held slots of shared devices whose hold the API has not confirmed since (cluster mode only): "
            "another node may take them over once this node's Lease lapses there.");
        e.sample("devlet_cluster_holds_unconfirmed", static_cast<double>(s.cluster.holdsUnconfirmed));
        e.family("devlet_cluster_watch_relists_total", "counter",
                 "Times the Lease watch did not show this node's own renewal in time and was listed again.");
        e.sample("devlet_cluster_watch_relists_total", static_cast<double>(s.cluster.watchRelists));
        if (s.cluster.token.expiresAtMs != 0) {
            e.family("devlet_cluster_token_expiry_seconds", "gauge",
                     "When the kubeconfig's ServiceAccount token expires, in Unix seconds (cluster mode, a "
                     "token that expires only); devlet renews it before.");
            const std::int64_t expiresAt = s.cluster.token.expiresAtMs / 1000;  // whole seconds
            e.sample("devlet_cluster_token_expiry_seconds", static_cast<double>(expiresAt));
        }
        e.family("devlet_cluster_token_renewals_total", "counter",
                 "Times the kubeconfig's token was renewed since start.");
        e.sample("devlet_cluster_token_renewals_total", static_cast<double>(s.cluster.token.renewals));
        e.family("devlet_cluster_token_renewal_failures_total", "counter",
                 "Failed tries to renew the kubeconfig's token since start (each is tried again).");
        e.sample("devlet_cluster_token_renewal_failures_total",
                 static_cast<double>(s.cluster.token.renewalFailures));
        e.family("devlet_cluster_leases_held", "gauge", "Leases of shared slots this node holds.");
        e.sample("devlet_cluster_leases_held", static_cast<double>(s.cluster.leasesHeld));
        e.family("devlet_cluster_slots_held_elsewhere", "gauge",
                 "Slots of shared devices other nodes hold now: listed Unhealthy here.");
        e.sample("devlet_cluster_slots_held_elsewhere", static_cast<double>(s.cluster.slotsElsewhere));
        e.family("devlet_cluster_secret_problems", "gauge",
                 "valueFrom properties a configuration lacks: its Secret or key missing or not readable.");
        e.sample("devlet_cluster_secret_problems", static_cast<double>(s.cluster.secretProblems.size()));
        e.family("devlet_cluster_broker_pods", "gauge",
                 "This node's broker Pods (brokerSpec.brokerPodSpec).");
        e.sample("devlet_cluster_broker_pods", static_cast<double>(s.cluster.brokers.size()));
        e.family("devlet_cluster_broker_pods_failed", "gauge",
                 "This node's broker Pods that failed or whose container cannot start.");
        e.sample("devlet_cluster_broker_pods_failed",
                 static_cast<double>(std::count_if(s.cluster.brokers.begin(), s.cluster.brokers.end(),
                                                   [](const BrokerStatus& b) { return b.failed; })));
        e.family("devlet_cluster_broker_pods_recreated_total", "counter",
                 "Broker Pods deleted to be made again: Pending longer than cluster.brokerPendingSeconds, or "
                 "ended (Failed or Succeeded).");
        e.sample("devlet_cluster_broker_pods_recreated_total", {{"reason", "pending"}},
                 static_cast<double>(s.cluster.brokersRecreatedPending));
        e.sample("devlet_cluster_broker_pods_recreated_total", {{"reason", "ended"}},
                 static_cast<double>(s.cluster.brokersRecreatedEnded));
        // Akri's controller's gauge, for the Pods of this node only: each node exports its
        // own, and their sum is what Akri's one controller would show. Like Akri's, it counts
        // a Pod from its creation until it ends or goes.
        std::map<std::string, int> brokerPods;
        for (const BrokerStatus& b : s.cluster.brokers) {
            int& count = brokerPods[b.configuration];
            if (b.phase != "Failed" && b.phase != "Succeeded") ++count;
        }
        e.family("akri_broker_pod_count", "gauge", "Akri Broker Pod Count");
        for (const auto& [configuration, count] : brokerPods)
            e.sample("akri_broker_pod_count", {{"configuration", configuration}, {"node", s.daemon.nodeName}},
                     static_cast<double>(count));
    }

    e.family("devlet_configurations", "gauge", "Configurations running.");
    e.sample("devlet_configurations", static_cast<double>(s.configurations.size()));
    e.family("devlet_configuration_errors", "gauge", "Problems in the configuration files (ignored parts).");
    e.sample("devlet_configuration_errors", static_cast<double>(s.daemon.configurationErrors.size()));

    e.family("devlet_probe_up", "gauge",
             "1 while a configuration's discovery works, 0 while it reports an error.");
    for (const ConfigurationStatus& c : s.configurations)
        e.sample("devlet_probe_up", {{"configuration", c.name}, {"handler", c.handler}},
                 c.probeError.empty() ? 1 : 0);

    e.family("devlet_allocations_total", "counter",
             "Allocate calls granted since start, by configuration (both resource kinds).");
    for (const ConfigurationStatus& c : s.configurations)
        e.sample("devlet_allocations_total", {{"configuration", c.name}}, static_cast<double>(c.allocations));
    e.family("devlet_allocation_refusals_total", "counter",
             "Allocate calls refused since start (slot held elsewhere, device gone), by configuration.");
    for (const ConfigurationStatus& c : s.configurations)
        e.sample("devlet_allocation_refusals_total", {{"configuration", c.name}},
                 static_cast<double>(c.refusals));
    e.family("devlet_kubelet_registrations_total", "counter",
             "Device plugin registrations with the kubelet since start, by result.");
    e.sample("devlet_kubelet_registrations_total", {{"result", "ok"}},
             static_cast<double>(s.kubelet.registrations));
    e.sample("devlet_kubelet_registrations_total", {{"result", "failed"}},
             static_cast<double>(s.kubelet.registrationFailures));

    e.family("devlet_instances", "gauge",
             "Instances by configuration and health (healthy, unhealthy, withdrawn).");
    for (const ConfigurationStatus& c : s.configurations) {
        std::map<std::string, std::size_t> byHealth{{"healthy", 0}, {"unhealthy", 0}, {"withdrawn", 0}};
        for (const InstanceStatus& i : c.instances) ++byHealth[instanceHealth(i)];
        for (const auto& [health, n] : byHealth)
            e.sample("devlet_instances", {{"configuration", c.name}, {"health", health}},
                     static_cast<double>(n));
    }
    e.family(
        "devlet_slots", "gauge",
        "Capacity slots by configuration and state (free, held, unavailable; in cluster mode also elsewhere: "
        "held on another node).");
    for (const ConfigurationStatus& c : s.configurations) {
        std::map<std::string, std::size_t> byState{{"free", 0}, {"held", 0}, {"unavailable", 0}};
        if (s.cluster.enabled) byState["elsewhere"] = 0;
        for (const InstanceStatus& i : c.instances) {
            for (const Slot& slot : i.slots) {
                if (!slot.holderResource.empty()) {
                    ++byState["held"];
                } else if (i.present && i.offered && slot.index < i.capacity &&
                           i.heldElsewhere.count(slot.deviceId)) {
                    ++byState["elsewhere"];
                } else if (i.present && i.offered && slot.index < i.capacity) {
                    ++byState["free"];
                } else {
                    ++byState["unavailable"];
                }
            }
        }
        for (const auto& [state, n] : byState)
            e.sample("devlet_slots", {{"configuration", c.name}, {"state", state}}, static_cast<double>(n));
    }

    e.family("devlet_discovery_scans_total", "counter",
             "Discovery passes the configuration's probe reported since the configuration was loaded.");
    for (const ConfigurationStatus& c : s.configurations)
        e.sample("devlet_discovery_scans_total", {{"configuration", c.name}, {"handler", c.handler}},
                 static_cast<double>(c.discovery.scans));
    e.family("devlet_discovery_errors_total", "counter",
             "Errors the configuration's probe reported (a failed pass, or a new problem).");
    for (const ConfigurationStatus& c : s.configurations)
        e.sample("devlet_discovery_errors_total", {{"configuration", c.name}, {"handler", c.handler}},
                 static_cast<double>(c.discovery.errors));
    e.family("devlet_discovery_last_scan_timestamp_seconds", "gauge",
             "When the probe's latest pass ended, in seconds since the epoch (0: it reports none).");
    for (const ConfigurationStatus& c : s.configurations)
        e.sample("devlet_discovery_last_scan_timestamp_seconds",
                 {{"configuration", c.name}, {"handler", c.handler}},
                 static_cast<double>(c.discovery.lastScanMs) / 1000.0);
    e.family("devlet_discovery_excluded_devices", "gauge",
             "Devices the latest pass saw but does not offer (filtered out, refused, unusable).");
    for (const ConfigurationStatus& c : s.configurations) {
        std::size_t n = 0;
        for (const ExcludedDevice& excluded : c.discovery.excluded) n += excluded.count;
        e.sample("devlet_discovery_excluded_devices", {{"configuration", c.name}, {"handler", c.handler}},
                 static_cast<double>(n));
    }
    e.family("devlet_discovery_duration_seconds", "histogram",
             "How long the configuration's discovery passes took.");
    for (const ConfigurationStatus& c : s.configurations)
        e.histogram("devlet_discovery_duration_seconds", {{"configuration", c.name}, {"handler", c.handler}},
                    c.discovery.scanDurations);
    e.family("devlet_discovery_to_plugin_seconds", "histogram",
             "From a probe's report reaching the inventory to the changed device lists being handed to "
             "the device plugins, which send them on the kubelet's ListAndWatch streams.");
    for (const ConfigurationStatus& c : s.configurations)
        e.histogram("devlet_discovery_to_plugin_seconds", {{"configuration", c.name}, {"handler", c.handler}},
                    c.discovery.publishLatency);
    return e.take();
}

std::string serverMetricsText(const ServerCounters& server, const ProcessStats& process) {
    Exposition e;

    e.family("devlet_http_responses_total", "counter", "Status server responses by HTTP status code.");
    for (const auto& [code, n] : server.responses)
        e.sample("devlet_http_responses_total", {{"code", std::to_string(code)}}, static_cast<double>(n));
    e.family("devlet_http_connections_total", "counter", "Status server connections accepted.");
    e.sample("devlet_http_connections_total", static_cast<double>(server.connectionsAccepted));
    e.family("devlet_http_connections_refused_total", "counter",
             "Status server connections closed at once because too many were open.");
    e.sample("devlet_http_connections_refused_total", static_cast<double>(server.connectionsRefused));
    e.family("devlet_http_connections_open", "gauge", "Status server connections open now.");
    e.sample("devlet_http_connections_open", static_cast<double>(server.connectionsOpen));
    e.family("devlet_http_streams_total", "counter",
             "Live status streams (server-sent events) started since start.");
    e.sample("devlet_http_streams_total", static_cast<double>(server.streamsOpened));
    e.family("devlet_http_streams_open", "gauge", "Live status streams open now.");
    e.sample("devlet_http_streams_open", static_cast<double>(server.streamsOpen));

    e.family("process_cpu_seconds_total", "counter", "User and system CPU time spent in seconds.");
    e.sample("process_cpu_seconds_total", process.cpuSeconds);
    e.family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
    e.sample("process_resident_memory_bytes", static_cast<double>(process.residentBytes));
    e.family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
    e.sample("process_virtual_memory_bytes", static_cast<double>(process.virtualBytes));
    e.family("process_open_fds", "gauge", "Number of open file descriptors.");
    e.sample("process_open_fds", static_cast<double>(process.openFds));
    e.family("process_max_fds", "gauge", "Maximum number of open file descriptors.");
    e.sample("process_max_fds", static_cast<double>(process.maxFds));
    e.family("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.");
    e.sample("process_start_time_seconds", process.startTimeSeconds);
    e.family("process_threads", "gauge", "Number of OS threads in the process.");
    e.sample("process_threads", static_cast<double>(process.threads));
    return e.take();
}

std::string metricsText(const StatusSnapshot& snapshot, const ServerCounters& server,
                        const ProcessStats& process) {
    return inventoryMetricsText(snapshot) + serverMetricsText(server, process);
}

}  // namespace devlet::status
