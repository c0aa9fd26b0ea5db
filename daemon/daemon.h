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
    void serve();
    // The store cannot be written yet (read-only or full file system, a lock): offers
    // nothing and tries again on a timer.
    void waitForStore(const std::string& error);
    // Starts the kubelet plugins, once: after the first PodResources answer or failure.
    void servePlugins();
    // Hands what the kubelet says about held devices (PodResources' answer, nullopt when it
    // failed, and the device checkpoint) to the inventory.
    void reconcileWithKubelet(std::optional<std::vector<PodDevice>> held);
    // Cluster mode: reads the kubeconfig and makes the API client. False (logged) when
    // the kubeconfig is unusable.
    bool startCluster();
    // Cluster mode: the shared slots' Leases, once the inventory has its held slots.
    void startSlotLeases();
    // Cluster mode: Akri's broker Pods, Jobs and Services for the instances offered here.
    void startBrokers();
    void clusterStateChanged();
    std::string clusterSummary() const;
    std::string brokersSummary() const;
    // Why the cluster API counts as unreachable now; empty when it answers.
    std::string clusterProblem() const;
    std::string secretsSummary() const;
    std::string tokenSummary() const;
    void reloadConfigurations();
    void scheduleReload();
    void restartProbes(const std::vector<Configuration>& configurations);
    Configuration withReferencedProperties(const Configuration& configuration);
    void armGraceTimer();
    void startWatchdog();
    void pingWatchdog();
    void notifyReadyOnce();
    void updateStatus();
    void shutdown();
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
        std::string cluster;
        bool ready = false;
        bool operator==(const StatusKey&) const = default;
    };
    StatusKey statusKey() const;
    std::shared_ptr<const status::StatusSnapshot> buildStatusSnapshot();

    boost::asio::io_context loop_;  // first: outlives everything that posts to it
    Settings settings_;
    HandlerRegistry& handlers_;
    std::unique_ptr<Store> store_;
    FileWatch watch_;
    plugin::PluginHost host_;
    std::unique_ptr<Inventory> inventory_;
    std::unique_ptr<SlotArbiter> arbiter_;  // decides who holds every slot; after inventory_, before it goes
    std::unique_ptr<plugin::PodResourcesClient> podResources_;
    std::unique_ptr<status::StatusServer> statusServer_;  // stopped in shutdown()
    std::unique_ptr<kube::ApiClient> kubeClient_;         // cluster mode only; stopped in shutdown()
    std::unique_ptr<kube::ApiClient> allocateClient_;     // cluster mode: Allocate's own connection
    std::unique_ptr<kube::ApiClient> heartbeatClient_;    // cluster mode: the node Lease's own connection
    std::unique_ptr<kube::TokenRenewal> tokenRenewal_;    // renews the token of all three clients
    std::unique_ptr<kube::SlotLeases> slotLeases_;        // uses both clients and inventory_
    std::unique_ptr<kube::Brokers> brokers_;              // uses kubeClient_ and inventory_
    std::unique_ptr<kube::Secrets> secrets_;              // cluster mode: valueFrom's Secrets
    // Why a configuration's valueFrom properties are missing, as last logged.
    std::map<std::string, std::vector<std::string>> referenceProblems_;
    bool clusterReachable_ = false;
    std::string clusterProblem_;  // why the API is unreachable, as last logged
    std::int64_t startedAtMs_ = 0;
    boost::asio::signal_set signals_;
    boost::asio::steady_timer reloadTimer_;
    boost::asio::steady_timer storeTimer_;
    boost::asio::steady_timer graceTimer_;
    boost::asio::steady_timer watchdogTimer_;
    std::map<std::string, std::vector<Configuration>> lastGood_;  // by file: what the file last said validly
    std::map<std::string, Configuration> running_;                // configurations with a probe
    std::vector<Configuration> accepted_;                         // as last chosen, for restartProbes
    std::map<std::string, std::unique_ptr<Probe>> probes_;
    std::vector<std::string> configurationErrors_;
    std::string podResourcesError_;
    std::string checkpointError_;  // said once per new problem
    std::chrono::steady_clock::time_point lastCheckpointNudge_{};
    std::string lastStatus_;
    std::shared_ptr<const status::StatusSnapshot> snapshot_;  // the last one handed out
    StatusKey snapshotKey_;
    std::string storeError_;  // why the store could not be opened yet
    int exitCode_ = 0;
    std::chrono::microseconds watchdogInterval_{0};
    bool ready_ = false;
    bool pluginsServed_ = false;
    bool stopping_ = false;
};

}  // namespace devlet
