#pragma once
// The contract between probes and the core: a handler checks a configuration's
// discoveryDetails and starts a probe for it; a probe reports full snapshots.

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/instance.h"

namespace boost::asio {
class io_context;  // NOLINT(readability-identifier-naming): Asio's name, declared to keep Asio out
}

namespace devlet {

struct Configuration;

struct DetailsProblem {
    int line = 0;  // 1-based within the details text; 0 = unknown
    std::string message;
    // Accepted as Akri accepts it, but worth saying (`descriptions: []`: no devices); a
    // warning does not reject the file.
    bool warning = false;
};

// A discovery property a handler does not read, or reads but cannot use as given.
struct PropertyWarning {
    std::string property;  // its name in spec.discoveryHandler.discoveryProperties
    std::string message;
};

// A device a probe saw for a configuration but does not offer, and why: what a person
// reads on the status page when the camera they expect is missing.
struct ExcludedDevice {
    std::string id;      // as the handler names devices (PCI address, devpath, service URL); may be empty
    std::string reason;  // a sentence for people: "filtered out by macAddresses Exclude"
    // How many devices this entry stands for: handlers that see many devices they do not
    // want (udev: every device no rule matches) report them as one counted entry.
    std::size_t count = 1;
    bool operator==(const ExcludedDevice&) const = default;
};

// One discovery pass of a probe for one configuration, for people and metrics.
struct ScanReport {
    std::chrono::nanoseconds duration{0};  // how long the pass took
    // Everything the pass saw but does not offer (the complete list; it replaces the last).
    std::vector<ExcludedDevice> excluded;
    // The handler's own word on a device it offers, by instance id ("up with
    // authentication", "up without authentication"); devices not named have none.
    std::map<std::string, std::string> deviceStates;
    // What a user should know about a device it offers, by instance id, one sentence each
    // ("service address rewritten to the contacted host: media: 192.168.1.64 -> 203.0.113.5:8080").
    std::map<std::string, std::vector<std::string>> deviceNotes;
    bool operator==(const ScanReport&) const = default;
};

// Receives what probes see; called on the loop thread only.
class ProbeSink {
public:
    virtual ~ProbeSink() = default;
    // The complete set of devices the probe sees now for this configuration.
    virtual void reportSnapshot(const std::string& configuration, std::vector<Instance> instances) = 0;
    // Discovery for this configuration is degraded; empty message = recovered.
    virtual void reportProbeError(const std::string& configuration, const std::string& message) = 0;
    // A discovery pass ended: how long it took, what it saw but does not offer and why, and
    // what state the devices it offers are in. Optional: a probe that never calls it works
    // the same, and its configuration shows no explanations.
    // By value, as the overriders keep it; the default ignores it.
    virtual void reportScan(const std::string& configuration,
                            ScanReport scan) {  // NOLINT(performance-unnecessary-value-param)
        (void)configuration;
        (void)scan;
    }
};

class Probe {
public:
    virtual ~Probe() = default;
    // Starts async work on the loop; reports through the sink given at creation.
    virtual void start() = 0;
    // Cancels all I/O; the sink is not called afterwards.
    virtual void stop() = 0;
};

// A handler's own choice of slots for a configuration-level GetPreferredAllocation (the
// gpu handler's Intel policies with NUMA and PCI-root preference). `device` is valid for
// the call only; called on the loop thread.
struct SlotCandidate {
    std::string id;
    std::string instance;
    int index = 0;
    const Instance* device = nullptr;
};
using SlotPreference = std::function<std::vector<std::string>(
    const Configuration& configuration, const std::vector<SlotCandidate>& available,
    const std::vector<std::string>& mustInclude, int size)>;

class DiscoveryHandler {
public:
    virtual ~DiscoveryHandler() = default;
    virtual std::string_view name() const = 0;
    // Parses discoveryDetails; no problem other than warnings = valid.
    virtual std::vector<DetailsProblem> check(const Configuration& configuration) const = 0;
    // A warning for every discovery property it does not read or that has no effect as
    // given: Akri accepts any property name, so none is refused, and none is ignored
    // silently. The default reads none.
    virtual std::vector<PropertyWarning> checkDiscoveryProperties(const Configuration& configuration) const;
    // Whether it reads properties given by `valueFrom` (Configuration::referencedProperties,
    // resolved in cluster mode); for the others such an entry is warned about and left out.
    virtual bool readsReferencedProperties() const { return false; }
    // How long a vanished device stays (Unhealthy) before its plugin is withdrawn.
    virtual std::chrono::milliseconds defaultRemovalGrace() const { return std::chrono::milliseconds(0); }
    // How the configuration-level resource picks slots; empty = the core's spread or pack.
    virtual SlotPreference slotPreference() const { return {}; }
    // Whether a configuration-level request gets distinct devices when the configuration
    // does not say (spec.devlet.uniqueDevices): Akri's rule, unless the handler's peers differ.
    virtual bool defaultUniqueDevices() const { return true; }
    virtual std::unique_ptr<Probe> createProbe(const Configuration& configuration,
                                               boost::asio::io_context& loop, ProbeSink& sink) = 0;
};

// The handlers the composition root makes available, by name.
class HandlerRegistry {
public:
    void add(std::unique_ptr<DiscoveryHandler> handler);
    DiscoveryHandler* find(std::string_view name) const;
    std::vector<std::string> names() const;

private:
    std::vector<std::unique_ptr<DiscoveryHandler>> handlers_;
};

}  // namespace devlet
