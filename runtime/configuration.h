#pragma once
// Configurations in Akri's `Configuration` format, parsed and checked; devlet's
// additions live under `spec.devlet`. Pure: reads text, returns values and problems.

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace devlet {

class HandlerRegistry;

enum class AllocationPolicy { Spread, Pack };

struct ConfigProblem {
    std::string file;
    int line = 0;  // 1-based; 0 = whole file
    std::string message;
    // A broker or service spec: used in cluster mode, so warned only without it.
    bool clusterOnly = false;
    std::string str() const;  // "file:line: message"
};

// A discovery property whose value lives in the cluster (Akri's `valueFrom`): read from the
// API in cluster mode (cluster/secrets.h), never written into the configuration itself.
struct PropertyReference {
    std::string property;                   // its name in discoveryProperties
    bool secret = true;                     // secretKeyRef; false: configMapKeyRef
    std::string namespaceName = "default";  // Akri's default
    std::string name;
    std::string key;
    bool optional = false;  // a missing Secret or key leaves the property out instead of failing
    int line = 0;           // of valueFrom
    std::string where;      // "spec.discoveryHandler.discoveryProperties[2].valueFrom", for messages
    bool operator==(const PropertyReference&) const = default;
};

struct Configuration {
    std::string name;
    std::string handler;           // udev, onvif, debugEcho, gpu
    std::string discoveryDetails;  // YAML text, as in Akri (an opaque string)
    int detailsLine = 0;           // file line where the details text starts
    std::map<std::string, std::string> discoveryProperties;
    std::vector<PropertyReference> propertyReferences;  // valueFrom entries, by their order
    // Their values as the API gave them (cluster mode, filled in by the daemon before the
    // probe starts): secrets, never logged or shown.
    std::map<std::string, std::string> referencedProperties;
    int capacity = 1;
    std::map<std::string, std::string> brokerProperties;
    // Akri's broker and service specs as JSON text (converted from the YAML, so that the
    // cluster code needs no YAML): empty when not given. Used in cluster mode only.
    std::string brokerPodSpec;             // spec.brokerSpec.brokerPodSpec (a PodSpec)
    std::string brokerJobSpec;             // spec.brokerSpec.brokerJobSpec (a JobSpec)
    std::string instanceServiceSpec;       // a ServiceSpec
    std::string configurationServiceSpec;  // a ServiceSpec
    // devlet's additions (spec.devlet)
    AllocationPolicy allocationPolicy = AllocationPolicy::Spread;
    bool uniqueDevices = true;          // a CL request never gets two slots of one device (Akri)
    std::string configurationResource;  // overrides "<domain>/<name>" (e.g. gpu.intel.com/i915)
    std::optional<std::chrono::milliseconds> removalGrace;  // unset = the handler's default
    std::string sourceFile;
    int sourceLine = 0;
    bool operator==(const Configuration&) const = default;
};

struct ParsedConfigurations {
    std::vector<Configuration> configurations;
    std::vector<ConfigProblem> problems;  // non-empty = the file is rejected as a whole
    std::vector<ConfigProblem> warnings;  // accepted but ignored (brokerSpec, ...)
};

// Parses one (multi-document) YAML file. Every problem carries file:line.
ParsedConfigurations parseConfigurations(const std::string& text, const std::string& fileName,
                                         const HandlerRegistry& handlers, const std::string& resourceDomain);
ParsedConfigurations loadConfigurationFile(const std::string& path, const HandlerRegistry& handlers,
                                           const std::string& resourceDomain);

// The configuration-level resource: configurationResource, or "<domain>/<name>".
std::string configurationLevelResource(const Configuration& configuration, const std::string& resourceDomain);

// Why `candidate` cannot be offered beside `accepted`: its configuration-level resource is
// already another's, or has the shape of one of their instance-level resources
// ("<domain>/<name>-<6 hex>"), so two plugins could claim one name. Empty if it can.
std::string resourceConflict(const Configuration& candidate, const std::vector<Configuration>& accepted,
                             const std::string& resourceDomain);

// Which configurations run, out of every file's last good ones (in file order). Where two
// definitions clash (a name, or a resource: resourceConflict), the one already running
// keeps running and the newcomer is the error; otherwise the first in file order wins.
struct ChosenConfigurations {
    std::vector<Configuration> accepted;
    std::vector<std::string> rejected;  // "file:line: configuration "x" why; this one is ignored"
};
ChosenConfigurations chooseConfigurations(const std::vector<const Configuration*>& candidates,
                                          const std::function<bool(const Configuration&)>& running,
                                          const std::string& resourceDomain);

// Files in a conf dir that hold configurations (*.yaml, *.yml; editor temp files skipped).
std::vector<std::string> configurationFiles(const std::string& dir);

}  // namespace devlet
