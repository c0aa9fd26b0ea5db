#pragma once
// What the status server may know about the daemon: plain values, copied on the loop
// thread into an immutable snapshot, plus the narrow interface the daemon implements to
// hand them out. No Beast, no JSON here; the core types come from runtime/.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/discovery.h"
#include "runtime/histogram.h"
#include "runtime/instance.h"

namespace devlet::status {

// An instance with what the daemon adds for the page: its resource, whether its plugin
// is registered, the configuration's capacity (slots at or above it are left over after
// it shrank, held until released) and the handler's word on the device. Its fields from
// InstanceView: name, configuration, device (properties not yet redacted), present,
// offered, firstSeenMs, lastSeenMs, slots.
struct InstanceStatus : InstanceView {
    std::string resource;     // instance-level resource
    bool registered = false;  // its plugin is registered with the kubelet now
    int capacity = 1;
    std::string deviceState;  // the handler's word on it ("up without authentication"); may be empty
    std::vector<std::string> deviceNotes;  // the handler's remarks on it (a rewritten camera address)
};

// What a configuration's probe says about its passes (see runtime/inventory.h DiscoveryView).
struct DiscoveryStatus {
    std::int64_t lastScanMs = 0;  // 0 = the probe reports no passes
    std::chrono::nanoseconds lastScanDuration{0};
    std::uint64_t scans = 0;
    std::uint64_t errors = 0;
    std::string lastError;
    std::int64_t lastErrorMs = 0;
    std::vector<ExcludedDevice> excluded;  // seen, not offered, and why
    DurationHistogram scanDurations;
    DurationHistogram publishLatency;
};

struct ConfigurationStatus {
    std::string name;
    std::string handler;
    std::string resource;  // configuration-level resource
    int capacity = 1;
    std::string sourceFile;
    int sourceLine = 0;
    std::string probeError;  // empty = discovery works
    // A device list of the configuration (its own or an instance's) that the kubelet could
    // not receive, so it was not sent: "<resource>: why", one each.
    std::vector<std::string> listProblems;
    bool registered = false;        // the configuration-level plugin is registered now
    std::uint64_t allocations = 0;  // Allocate calls granted since start, both resource kinds
    std::uint64_t refusals = 0;     // and refused
    DiscoveryStatus discovery;
    std::vector<InstanceStatus> instances;
};

struct KubeletStatus {
    enum class State { Waiting, Registering, Connected };
    State state = State::Waiting;
    std::string kubeletSocket;
    std::string distribution;  // detected layout: "microk8s", "k3s", "kubeadm", "unknown"
    std::string layout;        // the same for people, with the links followed
    std::string devicePluginDir;
    std::string podResourcesSocket;
    std::string podResourcesError;  // empty = answering (or not asked yet)
    std::size_t pluginsOffered = 0;
    std::size_t pluginsRegistered = 0;
    std::uint64_t registrations = 0;         // Register calls the kubelet accepted since start
    std::uint64_t registrationFailures = 0;  // and refused or left unanswered
};

// Cluster mode (docs/cluster.md): whether the Kubernetes API server answers.
// A broker Pod of this node (docs/cluster.md#brokers-and-services), as the API shows it.
struct BrokerStatus {
    std::string pod;
    std::string configuration;
    std::string instance;
    std::string phase;   // Pending, Running, Succeeded, Failed; empty before the API says
    std::string reason;  // why it failed or waits
    bool failed = false;
    std::uint64_t recreations = 0;  // times devlet deleted it to make it again (ended, or Pending too long)
    std::string recreatedBecause;   // why the last time; empty when never
};

// A Secret a configuration's valueFrom names (cluster mode): whether it could be read, and
// its keys; never its data.
struct SecretStatus {
    std::string namespaceName;
    std::string name;
    bool read = false;    // listed at least once
    bool exists = false;  // as of the last list or event
    std::string error;    // the last failed list or watch
    std::vector<std::string> keys;
};

// The kubeconfig's credentials: a ServiceAccount token's expiry and its renewal. Never the
// token.
struct ClusterTokenStatus {
    // "expiring", "doesNotExpire" (no exp, or not a JSON Web Token), "tokenFile" (renewed by
    // whoever writes the file), "clientCertificate"
    std::string kind;
    std::string serviceAccount;         // NAMESPACE/NAME; expiring only
    std::int64_t expiresAtMs = 0;       // wall clock; 0: does not expire
    std::int64_t nextRenewalMs = 0;     // 0: none planned
    std::int64_t lastRenewalMs = 0;     // 0: not renewed since start
    std::uint64_t renewals = 0;         // since start
    std::uint64_t renewalFailures = 0;  // failed tries since start
    std::string lastError;              // why the last try failed; empty after a renewal
};

struct ClusterStatus {
    bool enabled = false;  // a kubeconfig is set
    std::string server;
    std::string namespaceName;
    bool reachable = false;                 // the Lease watch listed and nothing failed since
    bool watchCurrent = false;              // its watch stream is open now
    std::string lastError;                  // empty = none since the last success
    std::size_t leasesHeld = 0;             // Leases of shared slots this node holds
    std::size_t leasesSeen = 0;             // devlet's Leases in the namespace
    std::size_t slotsElsewhere = 0;         // shared slots other nodes hold now
    std::uint64_t leasesTaken = 0;          // Leases taken by Allocate since start
    std::uint64_t allocationsRefused = 0;   // Allocate calls refused for a slot held elsewhere or the API
    bool nodeLeaseConfirmed = false;        // the API confirmed this node's Lease within the trust window
    std::int64_t nodeLeaseConfirmedMs = 0;  // wall clock of the last confirmation; 0: never
    std::size_t holdsUnconfirmed = 0;       // held shared slots whose hold the API has not confirmed
    std::uint64_t watchRelists = 0;         // the watch missed this node's own renewal and was listed again
    std::vector<BrokerStatus> brokers;      // by Pod name
    ClusterTokenStatus token;               // the kubeconfig's credentials and their renewal
    std::string brokersError;               // the last failed apply or delete, or why Pods have no owner
    std::uint64_t brokersRecreatedPending = 0;  // broker Pods made again after the pending grace, since start
    std::uint64_t brokersRecreatedEnded = 0;    // and after they ended (Failed or Succeeded)
    std::vector<SecretStatus> secrets;          // by namespace and name
    // "configuration cams: property password_default: Secret default/onvif has no key password"
    std::vector<std::string> secretProblems;
};

struct DaemonStatus {
    std::string version;
    std::string nodeName;
    std::string resourceDomain;
    std::string confDir;
    std::string stateDir;
    std::int64_t startedAtMs = 0;  // wall clock
    std::int64_t nowMs = 0;        // wall clock when the snapshot was taken
    bool firstPassDone = false;    // configurations loaded and probes started once
    std::vector<std::string> configurationErrors;
};

struct StatusSnapshot {
    DaemonStatus daemon;
    KubeletStatus kubelet;
    ClusterStatus cluster;
    std::vector<ConfigurationStatus> configurations;  // by name
};

struct StatusEvent {
    std::int64_t timeMs = 0;
    std::string level;  // "info", "warning", "error"
    std::string subject;
    std::string message;
};

// Implemented by the daemon; called on the loop thread only.
class StatusSource {
public:
    virtual ~StatusSource() = default;
    // The same object for as long as nothing in it changed (only DaemonStatus::nowMs is
    // then out of date): the server renders a snapshot once and serves those bytes until
    // a new one comes.
    virtual std::shared_ptr<const StatusSnapshot> statusSnapshot() = 0;
    // Newest first.
    virtual std::vector<StatusEvent> recentEvents(std::size_t limit) = 0;
};

}  // namespace devlet::status
