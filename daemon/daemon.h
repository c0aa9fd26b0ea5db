#pragma once
// The composition root of `devlet run`: owns the loop and, in declaration order,
// everything that posts to it. Wires configurations to probes, probes to the
// inventory, the inventory to the kubelet plugins. Everything runs on the loop.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "cluster/api_client.h"
#include "cluster/brokers.h"
#include "cluster/secrets.h"
#include "cluster/slot_leases.h"
#include "cluster/token_renewal.h"
#include "plugin/plugin_host.h"
#include "plugin/pod_resources_client.h"
#include "runtime/configuration.h"
#include "runtime/discovery.h"
#include "runtime/file_watch.h"
#include "runtime/inventory.h"
#include "runtime/settings.h"
#include "runtime/slot_arbiter.h"
#include "runtime/store.h"
#include "runtime/thread_bound.h"
#include "status/status_server.h"
#include "status/status_source.h"

namespace devlet {

class Daemon : public ProbeSink, public status::StatusSource {
public:
    Daemon(Settings settings, HandlerRegistry& handlers);
    ~Daemon() override;

    // Runs until SIGTERM or SIGINT; returns the process exit code.
    int run();

    void reportSnapshot(const std::string& configuration, std::vector<Instance> instances) override;
    void reportProbeError(const std::string& configuration, const std::string& message) override;
    void reportScan(const std::string& configuration, ScanReport scan) override;

    // status::StatusSource: read by the status server, on the loop.
    std::shared_ptr<const status::StatusSnapshot> statusSnapshot() override;
    std::vector<status::StatusEvent> recentEvents(std::size_t limit) override;

private:
    // Everything after the state store opened: configurations, probes, plugins, status.
    void serve() REQUIRES(loopThread_);
    // The store cannot be written yet (read-only or full file system, a lock): offers
    // nothing and tries again on a timer.
    void waitForStore(const std::string& error) REQUIRES(loopThread_);
    // Starts the kubelet plugins, once: after the first PodResources answer or failure.
    void servePlugins() REQUIRES(loopThread_);
    // Hands what the kubelet says about held devices (PodResources' answer, nullopt when it
    // failed, and the device checkpoint) to the inventory.
    void reconcileWithKubelet(std::optional<std::vector<PodDevice>> held) REQUIRES(loopThread_);
    // Cluster mode: reads the kubeconfig and makes the API client. False (logged) when
    // the kubeconfig is unusable.
    bool startCluster() REQUIRES(loopThread_);
    // Cluster mode: the shared slots' Leases, once the inventory has its held slots.
    void startSlotLeases() REQUIRES(loopThread_);
    // Cluster mode: Akri's broker Pods, Jobs and Services for the instances offered here.
    void startBrokers() REQUIRES(loopThread_);
    void clusterStateChanged() REQUIRES(loopThread_);
    // What the status page shows of cluster mode, compared field by field: the status
    // snapshot is made again when it changes. Counters that move with every renewal or
    // watch event (resource versions, renewals) are left out: the page is not redrawn
    // for them.
    struct ClusterKey {
        bool active = false;  // the slot Leases are watched
        bool reachable = false;
        bool watchCurrent = false;
        std::string watchError;
        std::size_t held = 0;
        std::size_t seen = 0;
        std::size_t elsewhere = 0;
        std::uint64_t taken = 0;
        std::uint64_t refused = 0;
        std::string leasesError;
        bool confirmed = false;
        std::int64_t lastConfirmedMs = 0;
        std::size_t unconfirmed = 0;
        std::uint64_t watchRelists = 0;
        std::string brokersError;
        std::string ownerProblem;
        std::uint64_t recreatedPending = 0;
        std::uint64_t recreatedEnded = 0;
        std::vector<kube::Brokers::Broker> brokerPods;
        std::vector<kube::Secrets::State> secrets;
        std::map<std::string, std::vector<std::string>> referenceProblems;
        std::optional<kube::TokenRenewal::State> token;
        bool operator==(const ClusterKey&) const = default;
    };
    ClusterKey clusterKey() const REQUIRES(loopThread_);
    // Why the cluster API counts as unreachable now; empty when it answers.
    std::string clusterProblem() const REQUIRES(loopThread_);
    void reloadConfigurations() REQUIRES(loopThread_);
    void scheduleReload() REQUIRES(loopThread_);
    void restartProbes(const std::vector<Configuration>& configurations) REQUIRES(loopThread_);
    Configuration withReferencedProperties(const Configuration& configuration) REQUIRES(loopThread_);
    void armGraceTimer() REQUIRES(loopThread_);
    void startWatchdog() REQUIRES(loopThread_);
    void pingWatchdog() REQUIRES(loopThread_);
    void notifyReadyOnce() REQUIRES(loopThread_);
    void updateStatus() REQUIRES(loopThread_);
    void shutdown() REQUIRES(loopThread_);
    // Everything a status snapshot is made of that can change, cheap to read: while it
    // stays the same, the last snapshot is handed out again.
    struct StatusKey {
        std::uint64_t inventory = 0;
        plugin::PluginHost::KubeletState kubelet = plugin::PluginHost::KubeletState::Waiting;
        std::size_t offered = 0;
        std::size_t registered = 0;
        std::uint64_t registrations = 0;
        std::uint64_t registrationFailures = 0;
        std::string podResourcesError;
        ClusterKey cluster;
        bool ready = false;
        bool operator==(const StatusKey&) const = default;
    };
    StatusKey statusKey() const REQUIRES(loopThread_);
    std::shared_ptr<const status::StatusSnapshot> buildStatusSnapshot() REQUIRES(loopThread_);

    boost::asio::io_context loop_;  // first: outlives everything that posts to it
    ThreadBound loopThread_;        // the thread that calls run(), and the loop's
    Settings settings_;
    HandlerRegistry& handlers_;
    std::unique_ptr<Store> store_ GUARDED_BY(loopThread_);
    FileWatch watch_;
    plugin::PluginHost host_;
    std::unique_ptr<Inventory> inventory_ GUARDED_BY(loopThread_);
    std::unique_ptr<SlotArbiter> arbiter_
        GUARDED_BY(loopThread_);  // decides who holds every slot; after inventory_, before it goes
    std::unique_ptr<plugin::PodResourcesClient> podResources_ GUARDED_BY(loopThread_);
    std::unique_ptr<status::StatusServer> statusServer_ GUARDED_BY(loopThread_);  // stopped in shutdown()
    std::unique_ptr<kube::ApiClient> kubeClient_
        GUARDED_BY(loopThread_);  // cluster mode only; stopped in shutdown()
    std::unique_ptr<kube::ApiClient> allocateClient_
        GUARDED_BY(loopThread_);  // cluster mode: Allocate's own connection
    std::unique_ptr<kube::ApiClient> heartbeatClient_
        GUARDED_BY(loopThread_);  // cluster mode: the node Lease's own connection
    std::unique_ptr<kube::TokenRenewal> tokenRenewal_
        GUARDED_BY(loopThread_);  // renews the token of all three clients
    std::unique_ptr<kube::SlotLeases> slotLeases_
        GUARDED_BY(loopThread_);                                      // uses both clients and inventory_
    std::unique_ptr<kube::Brokers> brokers_ GUARDED_BY(loopThread_);  // uses kubeClient_ and inventory_
    std::unique_ptr<kube::Secrets> secrets_ GUARDED_BY(loopThread_);  // cluster mode: valueFrom's Secrets
    // Why a configuration's valueFrom properties are missing, as last logged.
    std::map<std::string, std::vector<std::string>> referenceProblems_ GUARDED_BY(loopThread_);
    bool clusterReachable_ GUARDED_BY(loopThread_) = false;
    std::string clusterProblem_ GUARDED_BY(loopThread_);  // why the API is unreachable, as last logged
    std::int64_t startedAtMs_ GUARDED_BY(loopThread_) = 0;
    boost::asio::signal_set signals_ GUARDED_BY(loopThread_);
    boost::asio::steady_timer reloadTimer_ GUARDED_BY(loopThread_);
    boost::asio::steady_timer storeTimer_ GUARDED_BY(loopThread_);
    boost::asio::steady_timer graceTimer_ GUARDED_BY(loopThread_);
    boost::asio::steady_timer watchdogTimer_ GUARDED_BY(loopThread_);
    std::map<std::string, std::vector<Configuration>> lastGood_
        GUARDED_BY(loopThread_);  // by file: what the file last said validly
    std::map<std::string, Configuration> running_ GUARDED_BY(loopThread_);  // configurations with a probe
    std::vector<Configuration> accepted_ GUARDED_BY(loopThread_);  // as last chosen, for restartProbes
    std::map<std::string, std::unique_ptr<Probe>> probes_ GUARDED_BY(loopThread_);
    std::vector<std::string> configurationErrors_ GUARDED_BY(loopThread_);
    std::string podResourcesError_ GUARDED_BY(loopThread_);
    std::string checkpointError_ GUARDED_BY(loopThread_);  // said once per new problem
    std::chrono::steady_clock::time_point lastCheckpointNudge_ GUARDED_BY(loopThread_){};
    std::string lastStatus_ GUARDED_BY(loopThread_);
    std::shared_ptr<const status::StatusSnapshot> snapshot_
        GUARDED_BY(loopThread_);  // the last one handed out
    StatusKey snapshotKey_ GUARDED_BY(loopThread_);
    std::string storeError_ GUARDED_BY(loopThread_);  // why the store could not be opened yet
    int exitCode_ GUARDED_BY(loopThread_) = 0;
    std::chrono::microseconds watchdogInterval_ GUARDED_BY(loopThread_){0};
    bool ready_ GUARDED_BY(loopThread_) = false;
    bool pluginsServed_ GUARDED_BY(loopThread_) = false;
    bool stopping_ GUARDED_BY(loopThread_) = false;
};

}  // namespace devlet
