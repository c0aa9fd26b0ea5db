#pragma once
// The Prometheus text exposition (format 0.0.4) of /metrics: the inventory, the kubelet
// connection, the status server itself and the process. Label values are escaped here.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "status/status_source.h"

namespace devlet::status {

// What the status server counts about itself (lives on the loop thread).
struct ServerCounters {
    std::map<int, std::uint64_t> responses;  // by HTTP status code
    std::uint64_t connectionsAccepted = 0;
    std::uint64_t connectionsRefused = 0;  // over the connection limit
    std::uint64_t connectionsOpen = 0;
    std::uint64_t streamsOpened = 0;  // live streams (server-sent events) started
    std::uint64_t streamsOpen = 0;
};

// The process's own figures from /proc/self; zero where unreadable.
struct ProcessStats {
    double cpuSeconds = 0;
    std::uint64_t residentBytes = 0;
    std::uint64_t virtualBytes = 0;
    std::uint64_t openFds = 0;
    std::uint64_t maxFds = 0;
    std::uint64_t threads = 0;
    double startTimeSeconds = 0;  // since the epoch
};
ProcessStats readProcessStats();

// "a\"b" -> a\\\"b: backslash, double quote and line feed escaped.
std::string escapeLabelValue(std::string_view value);

// The families that depend on the snapshot only (kept with it by the server) ...
std::string inventoryMetricsText(const StatusSnapshot& snapshot);
// ... and those that change with every request: the server's counters and the process.
std::string serverMetricsText(const ServerCounters& server, const ProcessStats& process);
// Both: the whole of /metrics.
std::string metricsText(const StatusSnapshot& snapshot, const ServerCounters& server,
                        const ProcessStats& process);

}  // namespace devlet::status
