#include "daemon/daemon.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <boost/asio/post.hpp>
#include <sys/inotify.h>
#include <systemd/sd-daemon.h>

#include "plugin/kubelet_checkpoint.h"
#include "runtime/log.h"

namespace devlet {

namespace {
constexpr Log log{"daemon"};

// How often devlet tries again to open a state store it cannot write.
constexpr std::chrono::seconds kStoreRetry{2};

// Whether a configuration change needs a new probe (discovery itself changed).
bool sameDiscovery(const Configuration& a, const Configuration& b) {
    return a.handler == b.handler && a.discoveryDetails == b.discoveryDetails &&
           a.discoveryProperties == b.discoveryProperties && a.referencedProperties == b.referencedProperties;
}
}  // namespace

Daemon::Daemon(Settings settings, HandlerRegistry& handlers)
    : settings_(std::move(settings)),
      handlers_(handlers),
      watch_(loop_),
      host_(loop_, watch_, settings_.devicePluginDir),
      signals_(loop_),
      reloadTimer_(loop_),
      storeTimer_(loop_),
      graceTimer_(loop_),
      watchdogTimer_(loop_) {}

Daemon::~Daemon() = default;

int Daemon::run() {
    loopThread_.check();
    startedAtMs_ = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
    signals_.add(SIGTERM);
    signals_.add(SIGINT);
    signals_.add(SIGHUP);
    std::function<void(boost::system::error_code, int)> onSignal =
        [this, &onSignal](boost::system::error_code ec, int signal) {
            loopThread_.check();
            if (ec) return;
            if (signal == SIGHUP) {
                log.info() << "SIGHUP: reloading configurations";
                if (inventory_) reloadConfigurations();
                signals_.async_wait(onSignal);
                return;
            }
            log.info() << "shutting down (" << (signal == SIGTERM ? "SIGTERM" : "SIGINT") << ")";
            shutdown();
        };
    signals_.async_wait(onSignal);
    startWatchdog();
    if (settings_.cluster.enabled() && !startCluster()) return 1;

    Outcome why = Outcome::ok();
    store_ = Store::open(settings_.stateDir, StoreOptions{}, why);
    if (store_) {
        serve();
    } else if (why.fault() == Fault::Passing) {
        waitForStore(why.error());
    } else {
        log.error() << why.error();
        return 1;
    }
    loop_.run();
    return exitCode_;
}

void Daemon::waitForStore(const std::string& error) {
    // Offering devices without being able to record who holds them could give a slot
    // twice after a restart, so nothing is offered until state.db can be written. A
    // read-only or full file system is often fixed without restarting devlet, and systemd
    // would give up after a few quick restarts.
    if (error != storeError_) {
        log.error() << error << "; no device is offered until it can be written, trying again every "
                    << kStoreRetry.count() << " s";
        sd_notify(0, ("STATUS=" + error + "; no device is offered until it can be written").c_str());
    }
    storeError_ = error;
    notifyReadyOnce();  // running, and saying why it offers nothing: systemd must not loop it
    storeTimer_.expires_after(kStoreRetry);
    storeTimer_.async_wait([this](boost::system::error_code ec) {
        loopThread_.check();
        if (ec || stopping_) return;
        Outcome why = Outcome::ok();
        store_ = Store::open(settings_.stateDir, StoreOptions{}, why);
        if (store_) {
            log.info() << "state store " << settings_.stateDir << " can be written again";
            serve();
        } else if (why.fault() == Fault::Passing) {
            waitForStore(why.error());
        } else {
            log.error() << why.error();
            exitCode_ = 1;
            shutdown();
        }
    });
}

void Daemon::serve() {
    inventory_ =
        std::make_unique<Inventory>(settings_.nodeName, settings_.resourceDomain, store_.get(), host_);
    inventory_->setHandlers(handlers_);
    // Each container that holds devices gets a live file of them (docs/live-info.md).
    inventory_->setLiveInfoDirectory(settings_.stateDir);
    // Published from the loop after the work at hand: Allocate answers first.
    inventory_->setPublishScheduler(
        [this](std::function<void()> publish) { boost::asio::post(loop_, std::move(publish)); });
    arbiter_ = std::make_unique<SlotArbiter>(*inventory_);
    host_.setInventory(*inventory_, *arbiter_);
    host_.onAllRegistered = [this] {
        loopThread_.check();
        updateStatus();
    };
    log.info() << "devlet " << DEVLET_VERSION << " on node " << settings_.nodeName << "; configurations in "
               << settings_.confDir << ", state in " << settings_.stateDir;
    log.info() << "kubelet layout: " << settings_.kubeletLayout << "; device plugins in "
               << settings_.devicePluginDir << ", PodResources at " << settings_.podResourcesSocket;

    watch_.watchDirectory(settings_.confDir,
                          IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE,
                          [this](const std::string&, std::uint32_t) {
                              loopThread_.check();
                              scheduleReload();
                          });
    reloadConfigurations();
    inventory_->restoreSlots();
    if (kubeClient_) {
        startSlotLeases();
        startBrokers();
    }

    // The plugins are registered once PodResources has answered (or failed) for the first
    // time, and the kubelet's device checkpoint has been read: a slot a running container
    // holds but state.db does not (state moved away) is adopted first, and so never
    // offered to a second pod.
    podResources_ = std::make_unique<plugin::PodResourcesClient>(
        loop_, settings_.podResourcesSocket, settings_.podResourcesInterval,
        [this](std::vector<PodDevice> held) {
            loopThread_.check();
            if (!podResourcesError_.empty()) log.info() << "PodResources API answers again";
            podResourcesError_.clear();
            log.debug() << "PodResources: " << held.size() << " device(s) held by pods";
            reconcileWithKubelet(std::move(held));
        },
        [this](const std::string& message) {
            loopThread_.check();
            // Held slots stay held while the kubelet cannot tell who holds them; without
            // PodResources no slot is ever released, so say so once per new problem.
            // With no kubelet at all nothing is held and nothing is wrong.
            const bool kubelet = host_.kubeletState() != plugin::PluginHost::KubeletState::Waiting;
            if (message != podResourcesError_) {
                (kubelet ? log.warning() : log.debug())
                    << message << "; held slots stay held until it answers";
            }
            podResourcesError_ = message;
            reconcileWithKubelet(std::nullopt);
        });
    podResources_->start();

    // The status page is worth having but not essential: without it devlet still serves
    // the kubelet (another process may hold the port).
    statusServer_ = std::make_unique<status::StatusServer>(
        loop_, *this,
        status::StatusServer::Options{.listen = settings_.listen, .tokenFile = status::defaultTokenFile()});
    if (std::string problem = statusServer_->start(); !problem.empty()) {
        log.error() << "status server: " << problem << "; devlet runs without its status page";
    } else {
        log.info() << "status page at http://" << statusServer_->endpoint() << "/";
    }

    updateStatus();
}

void Daemon::reconcileWithKubelet(std::optional<std::vector<PodDevice>> held) {
    KubeletEvidence evidence;
    evidence.pods = std::move(held);
    KubeletCheckpoint checkpoint =
        readKubeletCheckpoint(settings_.devicePluginDir + "/" + std::string(kKubeletCheckpointFile));
    if (checkpoint.error != checkpointError_) {
        if (!checkpoint.error.empty())
            log.warning() << "the kubelet's device checkpoint cannot be read: " << checkpoint.error
                          << "; no slot is released until it can";
        else if (!checkpointError_.empty())
            log.info() << "the kubelet's device checkpoint can be read again";
        checkpointError_ = checkpoint.error;
    }
    if (checkpoint.present && checkpoint.error.empty()) evidence.checkpoint = std::move(checkpoint.devices);
    evidence.checkpointError = std::move(checkpoint.error);
    const SlotArbiter::Reconciled reconciled = arbiter_->reconcile(evidence, settings_.slotReleaseGrace);
    // A pod that ended stays in the kubelet's checkpoint until the kubelet next writes
    // it, which it does on every device list it receives: one unchanged list, at most
    // once per grace period, lets its end show.
    const auto now = std::chrono::steady_clock::now();
    if (reconciled.checkpointLags && now - lastCheckpointNudge_ >= settings_.slotReleaseGrace &&
        host_.resendOneList())
        lastCheckpointNudge_ = now;
    armGraceTimer();
    servePlugins();
    updateStatus();
}

void Daemon::servePlugins() {
    if (pluginsServed_ || stopping_) return;
    pluginsServed_ = true;
    host_.start();
    // Ready once the first discovery pass is in and the plugins are served: a kubelet
    // that is slow to answer (or a stale kubelet.sock) must not hold `systemctl start`.
    notifyReadyOnce();
}

void Daemon::shutdown() {
    if (stopping_) return;
    stopping_ = true;
    sd_notify(0, "STOPPING=1");
    for (auto& [name, probe] : probes_) probe->stop();
    probes_.clear();
    host_.stop();
    if (podResources_) podResources_->stop();
    if (statusServer_) statusServer_->stop();
    if (brokers_) brokers_->stop();
    if (secrets_) secrets_->stop();
    if (slotLeases_) {
        arbiter_->setSharedSlotGate(nullptr);
        slotLeases_->stop();
    }
    if (tokenRenewal_) tokenRenewal_->stop();
    if (kubeClient_) kubeClient_->stop();
    if (allocateClient_) allocateClient_->stop();
    if (heartbeatClient_) heartbeatClient_->stop();
    reloadTimer_.cancel();
    storeTimer_.cancel();
    graceTimer_.cancel();
    watchdogTimer_.cancel();
    signals_.cancel();
    loop_.stop();
}

// ---------------------------------------------------------------------------
// Configurations

void Daemon::scheduleReload() {
    // Editors write in several steps (temp file, rename, chmod): settle first.
    reloadTimer_.expires_after(std::chrono::milliseconds(100));
    reloadTimer_.async_wait([this](boost::system::error_code ec) {
        loopThread_.check();
        if (!ec) reloadConfigurations();
    });
}

void Daemon::reloadConfigurations() {
    if (stopping_) return;
    configurationErrors_.clear();
    std::set<std::string> files;
    for (const std::string& file : configurationFiles(settings_.confDir)) {
        files.insert(file);
        ParsedConfigurations parsed = loadConfigurationFile(file, handlers_, settings_.resourceDomain);
        for (const ConfigProblem& warning : parsed.warnings) {
            if (!warning.clusterOnly || !settings_.cluster.enabled()) log.warning() << warning.str();
        }
        if (!parsed.problems.empty()) {
            for (const ConfigProblem& problem : parsed.problems) {
                log.error() << problem.str();
                configurationErrors_.push_back(problem.str());
            }
            if (lastGood_.count(file))
                log.warning() << file << " is broken; its last good version keeps running";
            continue;
        }
        lastGood_[file] = std::move(parsed.configurations);
    }
    for (auto it = lastGood_.begin(); it != lastGood_.end();) {
        it = files.count(it->first) ? std::next(it) : lastGood_.erase(it);
    }

    std::vector<const Configuration*> candidates;
    for (const auto& [file, list] : lastGood_) {
        for (const Configuration& configuration : list) candidates.push_back(&configuration);
    }
    ChosenConfigurations chosen = chooseConfigurations(
        candidates,
        [this](const Configuration& c) {
            loopThread_.check();
            auto it = running_.find(c.name);
            return it != running_.end() && it->second.sourceFile == c.sourceFile;
        },
        settings_.resourceDomain);
    for (std::string& message : chosen.rejected) {
        log.error() << message;
        configurationErrors_.push_back(std::move(message));
    }
    std::vector<Configuration>& configurations = chosen.accepted;
    std::map<std::string, std::chrono::milliseconds> grace;
    for (const Configuration& configuration : configurations) {
        const DiscoveryHandler* handler = handlers_.find(configuration.handler);
        grace[configuration.name] = configuration.removalGrace.value_or(
            handler ? handler->defaultRemovalGrace() : std::chrono::milliseconds(0));
    }
    inventory_->applyConfigurations(configurations, grace);
    accepted_ = configurations;
    if (secrets_) secrets_->want(kube::secretsNamed(accepted_));
    restartProbes(configurations);
    armGraceTimer();
    updateStatus();
}

void Daemon::restartProbes(const std::vector<Configuration>& configurations) {
    std::set<std::string> wanted;
    for (const Configuration& c : configurations) wanted.insert(c.name);
    std::erase_if(referenceProblems_, [&](const auto& entry) { return !wanted.count(entry.first); });
    for (auto it = probes_.begin(); it != probes_.end();) {
        if (wanted.count(it->first)) {
            ++it;
            continue;
        }
        it->second->stop();
        running_.erase(it->first);
        it = probes_.erase(it);
    }
    for (const Configuration& given : configurations) {
        const Configuration configuration = withReferencedProperties(given);
        auto running = running_.find(configuration.name);
        if (running != running_.end() && sameDiscovery(running->second, configuration)) {
            running->second = configuration;  // capacity, file or line may have changed
            continue;
        }
        if (auto old = probes_.find(configuration.name); old != probes_.end()) old->second->stop();
        DiscoveryHandler* handler = handlers_.find(configuration.handler);
        if (!handler) continue;  // rejected when parsed
        running_[configuration.name] = configuration;
        auto& probe = probes_[configuration.name];
        probe = handler->createProbe(configuration, loop_, *this);
        probe->start();
    }
}

// Cluster mode: the configuration with its `valueFrom` properties as the Secrets say now;
// what cannot be read is logged once per change and shown with the cluster's status.
Configuration Daemon::withReferencedProperties(const Configuration& configuration) {
    if (!secrets_ || configuration.propertyReferences.empty()) {
        referenceProblems_.erase(configuration.name);
        return configuration;
    }
    Configuration resolved = configuration;
    kube::ResolvedProperties found = secrets_->resolve(configuration.propertyReferences);
    resolved.referencedProperties = std::move(found.values);
    std::vector<std::string>& known = referenceProblems_[configuration.name];
    if (found.problems != known) {
        for (const std::string& problem : found.problems) {
            // Before the first list answers, every property is "not read yet": not worth a line.
            if (std::find(known.begin(), known.end(), problem) == known.end() &&
                !problem.ends_with(" not read yet"))
                log.warning() << "configuration " << configuration.name << ": " << problem
                              << "; discovery goes on without it";
        }
        if (found.problems.empty() && !known.empty())
            log.info() << "configuration " << configuration.name << ": every property from Secrets read";
        known = std::move(found.problems);
    }
    return resolved;
}

// ---------------------------------------------------------------------------
// Discovery

void Daemon::reportSnapshot(const std::string& configuration, std::vector<Instance> instances) {
    loopThread_.check();
    inventory_->reportSnapshot(configuration, std::move(instances));
    armGraceTimer();
    updateStatus();
}

void Daemon::reportProbeError(const std::string& configuration, const std::string& message) {
    loopThread_.check();
    inventory_->reportProbeError(configuration, message);
}

void Daemon::reportScan(const std::string& configuration, ScanReport scan) {
    loopThread_.check();
    inventory_->reportScan(configuration, std::move(scan));
}

void Daemon::armGraceTimer() {
    auto next = inventory_->expireGone();
    if (brokers_) brokers_->inventoryChanged();
    graceTimer_.cancel();
    if (!next) return;
    graceTimer_.expires_at(*next);
    graceTimer_.async_wait([this](boost::system::error_code ec) {
        loopThread_.check();
        if (!ec) armGraceTimer();
    });
}

// ---------------------------------------------------------------------------
// systemd

void Daemon::notifyReadyOnce() {
    if (ready_) return;
    ready_ = true;
    sd_notify(0, "READY=1");
}

void Daemon::startWatchdog() {
    std::uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return;
    watchdogInterval_ = std::chrono::microseconds(usec / 2);
    pingWatchdog();
}

void Daemon::pingWatchdog() {
    // Pinged from the loop: a loop that hangs stops pinging and systemd restarts us.
    sd_notify(0, "WATCHDOG=1");
    watchdogTimer_.expires_after(watchdogInterval_);
    watchdogTimer_.async_wait([this](boost::system::error_code ec) {
        loopThread_.check();
        if (!ec) pingWatchdog();
    });
}

void Daemon::updateStatus() {
    const Inventory::Offered offered = inventory_->offered();
    std::string kubelet;
    switch (host_.kubeletState()) {
        case plugin::PluginHost::KubeletState::Waiting:
            kubelet = "waiting for kubelet at " + host_.kubeletSocket();
            break;
        case plugin::PluginHost::KubeletState::Registering:
            kubelet = "registering with kubelet";
            break;
        case plugin::PluginHost::KubeletState::Connected:
            kubelet = "kubelet connected";
            break;
    }
    std::string status = std::to_string(offered.instances) + " instance(s) in " +
                         std::to_string(running_.size()) + " configuration(s); " +
                         std::to_string(inventory_->slotsHeld()) + " of " + std::to_string(offered.slots) +
                         " slot(s) in use; " + kubelet;
    if (!configurationErrors_.empty())
        status += "; " + std::to_string(configurationErrors_.size()) + " configuration error(s)";
    if (!podResourcesError_.empty() && host_.kubeletState() != plugin::PluginHost::KubeletState::Waiting)
        status += "; PodResources unavailable, slots are not released";
    if (kubeClient_) status += clusterReachable_ ? "; cluster API reachable" : "; cluster API unreachable";
    if (status == lastStatus_) return;
    lastStatus_ = status;
    sd_notify(0, ("STATUS=" + status).c_str());
    log.info() << status;
}

// ---------------------------------------------------------------------------
// Cluster mode

bool Daemon::startCluster() {
    kube::KubeconfigLoad load = kube::loadKubeconfig(settings_.cluster.kubeconfig);
    if (!load.config) {
        log.error() << "cluster mode: " << load.error;
        return false;
    }
    const std::string server = load.config->server;
    kube::ClientOptions options;
    options.userAgent = std::string("devlet/") + DEVLET_VERSION + " (" + settings_.nodeName + ")";
    // Allocate's Leases go over a connection of their own: never behind renewals.
    allocateClient_ = std::make_unique<kube::ApiClient>(loop_, *load.config, options);
    // The node Lease's renewals vouch for every shared slot held here: never behind deletes.
    heartbeatClient_ = std::make_unique<kube::ApiClient>(loop_, *load.config, options);
    kubeClient_ = std::make_unique<kube::ApiClient>(loop_, std::move(*load.config), options);
    if (!kubeClient_->problem().empty()) {
        log.error() << "cluster mode: " << kubeClient_->problem();
        return false;
    }
    // The token is renewed before it expires, for all three clients, and written back into
    // the kubeconfig.
    tokenRenewal_ = std::make_unique<kube::TokenRenewal>(
        loop_, *kubeClient_,
        std::vector<kube::ApiClient*>{kubeClient_.get(), allocateClient_.get(), heartbeatClient_.get()},
        settings_.cluster.kubeconfig);
    tokenRenewal_->onStateChanged([this] {
        loopThread_.check();
        if (inventory_) updateStatus();
    });
    // A Secret that changes restarts the probes of the configurations naming it.
    secrets_ = std::make_unique<kube::Secrets>(*kubeClient_);
    secrets_->onChanged([this] {
        loopThread_.check();
        if (!stopping_ && inventory_) {
            restartProbes(accepted_);
            updateStatus();
        }
    });
    log.info() << "cluster mode: API server " << server << ", namespace " << settings_.cluster.namespaceName
               << ", node " << settings_.nodeName;
    tokenRenewal_->start();
    return true;
}

void Daemon::startSlotLeases() {
    kube::SlotLeases::Options options;
    options.namespaceName = settings_.cluster.namespaceName;
    options.node = settings_.nodeName;
    options.durationSeconds = static_cast<int>(settings_.cluster.leaseDuration.count());
    slotLeases_ = std::make_unique<kube::SlotLeases>(loop_, *kubeClient_, *allocateClient_, *heartbeatClient_,
                                                     *arbiter_, *inventory_, options);
    slotLeases_->onStateChanged([this] {
        loopThread_.check();
        clusterStateChanged();
        // Who holds which shared slot decides where a shared instance's broker may go.
        if (brokers_ && brokers_->active()) brokers_->inventoryChanged();
    });
    arbiter_->setSharedSlotGate(slotLeases_.get());
    // Watching the Leases is also how devlet knows the API server answers, without polling.
    slotLeases_->start();
}

void Daemon::startBrokers() {
    kube::Brokers::Options options;
    options.namespaceName = settings_.cluster.namespaceName;
    options.node = settings_.nodeName;
    options.pendingGrace = settings_.cluster.brokerPending;
    brokers_ = std::make_unique<kube::Brokers>(loop_, *kubeClient_, *inventory_, *arbiter_, options);
    brokers_->onStateChanged([this] {
        loopThread_.check();
        clusterStateChanged();
    });
    brokers_->start();
}

void Daemon::clusterStateChanged() {
    // Reachable means answered recently: the watch works and the API confirmed this node's
    // Lease within the trust window, not merely that a connection is open.
    const std::string problem = clusterProblem();
    const bool reachable = problem.empty();
    if (reachable != clusterReachable_ && reachable) {
        log.info() << "cluster API reachable; watching Leases in namespace "
                   << settings_.cluster.namespaceName;
        clusterProblem_.clear();
    } else if (!reachable && ((slotLeases_->state().synced && slotLeases_->state().lastConfirmedMs != 0) ||
                              !slotLeases_->watch()->lastError.empty())) {
        // Said once per reason: a Role without `list` fails from the start and on every
        // retry, and is the mistake a setup most likely has.
        if (problem != clusterProblem_)
            log.warning() << "cluster API unreachable: " << problem;
        else
            log.debug() << "cluster API: " << problem;
        clusterProblem_ = problem;
    }
    clusterReachable_ = reachable;
    if (inventory_) updateStatus();
}

std::string Daemon::clusterProblem() const {
    const kube::Informer::State& watch = *slotLeases_->watch();
    std::string problem = watch.lastError.empty() ? slotLeases_->problem() : watch.lastError;
    // A 401 has one likely cause devlet can name: the token's own expiry.
    const std::int64_t now =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    if (problem.find("401") != std::string::npos && tokenRenewal_ && tokenRenewal_->expiredAt(now))
        problem += " (the kubeconfig's token expired at " +
                   kube::formatUnixTime(tokenRenewal_->state().expiresAt) +
                   ": write the node's kubeconfig again, see docs/cluster.md)";
    return problem;
}

Daemon::ClusterKey Daemon::clusterKey() const {
    ClusterKey key;
    if (!slotLeases_ || !slotLeases_->watch()) return key;
    const kube::Informer::State& watch = *slotLeases_->watch();
    const kube::SlotLeases::State& leases = slotLeases_->state();
    key.active = true;
    key.reachable = clusterReachable_;
    key.watchCurrent = watch.watchCurrent;
    key.watchError = watch.lastError;
    key.held = leases.held;
    key.seen = leases.seen;
    key.elsewhere = leases.elsewhere;
    key.taken = leases.taken;
    key.refused = leases.refused;
    key.leasesError = leases.lastError;
    key.confirmed = leases.confirmed;
    key.lastConfirmedMs = leases.lastConfirmedMs;
    key.unconfirmed = leases.unconfirmed;
    key.watchRelists = leases.watchRelists;
    if (brokers_) {
        const kube::Brokers::State& brokers = brokers_->state();
        key.brokersError = brokers.lastError;
        key.ownerProblem = brokers.ownerProblem;
        key.recreatedPending = brokers.recreatedPending;
        key.recreatedEnded = brokers.recreatedEnded;
        key.brokerPods = brokers_->brokers();
    }
    if (secrets_) key.secrets = secrets_->states();
    key.referenceProblems = referenceProblems_;
    if (tokenRenewal_) key.token = tokenRenewal_->state();
    return key;
}

// ---------------------------------------------------------------------------
// Status server

Daemon::StatusKey Daemon::statusKey() const {
    // A plugin that registers counts a registration; one that loses its registration
    // lowers `registered`: between them they see every change of a plugin's state.
    return {inventory_ ? inventory_->revision() : 0,
            host_.kubeletState(),
            host_.offered(),
            host_.registered(),
            host_.registrations(),
            host_.registrationFailures(),
            podResourcesError_,
            clusterKey(),
            ready_};
}

std::shared_ptr<const status::StatusSnapshot> Daemon::statusSnapshot() {
    loopThread_.check();
    // The plugins first: while a change is on its way to them, the status server answers
    // from the snapshot before it, and renders the new one once the plugins have it. A
    // thousand instances take milliseconds to render, which the kubelet need not wait for.
    if (snapshot_ && inventory_ && inventory_->publicationPending()) return snapshot_;
    StatusKey key = statusKey();
    if (!snapshot_ || !(key == snapshotKey_)) {
        snapshot_ = buildStatusSnapshot();
        snapshotKey_ = std::move(key);
    }
    return snapshot_;
}

std::shared_ptr<const status::StatusSnapshot> Daemon::buildStatusSnapshot() {
    auto snapshot = std::make_shared<status::StatusSnapshot>();
    status::DaemonStatus& d = snapshot->daemon;
    d.version = DEVLET_VERSION;
    d.nodeName = settings_.nodeName;
    d.resourceDomain = settings_.resourceDomain;
    d.confDir = settings_.confDir;
    d.stateDir = settings_.stateDir;
    d.startedAtMs = startedAtMs_;
    d.nowMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
    d.firstPassDone = ready_;
    d.configurationErrors = configurationErrors_;

    status::KubeletStatus& k = snapshot->kubelet;
    switch (host_.kubeletState()) {
        case plugin::PluginHost::KubeletState::Waiting:
            k.state = status::KubeletStatus::State::Waiting;
            break;
        case plugin::PluginHost::KubeletState::Registering:
            k.state = status::KubeletStatus::State::Registering;
            break;
        case plugin::PluginHost::KubeletState::Connected:
            k.state = status::KubeletStatus::State::Connected;
            break;
    }
    k.kubeletSocket = host_.kubeletSocket();
    k.distribution = settings_.kubeletDistribution;
    k.layout = settings_.kubeletLayout;
    k.devicePluginDir = settings_.devicePluginDir;
    k.podResourcesSocket = settings_.podResourcesSocket;
    k.podResourcesError = podResourcesError_;
    k.pluginsOffered = host_.offered();
    k.pluginsRegistered = host_.registered();
    k.registrations = host_.registrations();
    k.registrationFailures = host_.registrationFailures();

    if (slotLeases_ && slotLeases_->watch()) {
        status::ClusterStatus& c = snapshot->cluster;
        const kube::Informer::State& watch = *slotLeases_->watch();
        const kube::SlotLeases::State& leases = slotLeases_->state();
        c.leasesHeld = leases.held;
        c.leasesSeen = leases.seen;
        c.slotsElsewhere = leases.elsewhere;
        c.leasesTaken = leases.taken;
        c.allocationsRefused = leases.refused;
        c.nodeLeaseConfirmed = leases.confirmed;
        c.nodeLeaseConfirmedMs = leases.lastConfirmedMs;
        c.holdsUnconfirmed = leases.unconfirmed;
        c.watchRelists = leases.watchRelists;
        c.enabled = true;
        c.server = kubeClient_->config().server;
        c.namespaceName = settings_.cluster.namespaceName;
        c.reachable = clusterReachable_;
        c.watchCurrent = watch.watchCurrent;
        c.lastError = clusterReachable_ ? std::string() : clusterProblem();
        if (tokenRenewal_) {
            using Kind = kube::TokenRenewal::State::Kind;
            const kube::TokenRenewal::State& t = tokenRenewal_->state();
            switch (t.kind) {
                case Kind::Expiring:
                    c.token.kind = "expiring";
                    break;
                case Kind::DoesNotExpire:
                case Kind::NotAJwt:
                    c.token.kind = "doesNotExpire";
                    break;
                case Kind::TokenFile:
                    c.token.kind = "tokenFile";
                    break;
                case Kind::NotAToken:
                    c.token.kind = "clientCertificate";
                    break;
            }
            c.token.serviceAccount = t.serviceAccount;
            c.token.expiresAtMs = t.expiresAt * 1000;
            c.token.nextRenewalMs = t.nextRenewalAt * 1000;
            c.token.lastRenewalMs = t.lastRenewalAt * 1000;
            c.token.renewals = t.renewals;
            c.token.renewalFailures = t.failures;
            c.token.lastError = t.lastError;
        }
        if (brokers_) {
            for (const kube::Brokers::Broker& b : brokers_->brokers())
                c.brokers.push_back({b.pod, b.configuration, b.instance, b.phase, b.reason, b.failed,
                                     b.recreations, b.recreatedBecause});
            c.brokersRecreatedPending = brokers_->state().recreatedPending;
            c.brokersRecreatedEnded = brokers_->state().recreatedEnded;
            c.brokersError = brokers_->state().lastError.empty() ? brokers_->state().ownerProblem
                                                                 : brokers_->state().lastError;
        }
        if (secrets_) {
            for (kube::Secrets::State& s : secrets_->states()) {
                c.secrets.push_back({std::move(s.name.first), std::move(s.name.second), s.read, s.exists,
                                     std::move(s.error), std::move(s.keys)});
            }
        }
        for (const auto& [configuration, problems] : referenceProblems_) {
            for (const std::string& problem : problems)
                c.secretProblems.push_back(
                    std::string("configuration ").append(configuration).append(": ").append(problem));
        }
    }

    if (!inventory_) return snapshot;
    for (ConfigurationView& view : inventory_->view()) {
        status::ConfigurationStatus c;
        c.name = view.configuration.name;
        c.handler = view.configuration.handler;
        c.resource = view.resource;
        c.capacity = view.configuration.capacity;
        c.sourceFile = view.configuration.sourceFile;
        c.sourceLine = view.configuration.sourceLine;
        c.probeError = view.probeError;
        c.registered = host_.isRegistered(view.resource);
        if (std::string problem = host_.problem(view.resource); !problem.empty())
            c.listProblems.push_back(view.resource + ": " + problem);
        DiscoveryView& discovery = view.discovery;
        c.discovery.lastScanMs = discovery.lastScanMs;
        c.discovery.lastScanDuration = discovery.lastScan.duration;
        c.discovery.scans = discovery.scans;
        c.discovery.errors = discovery.errors;
        c.discovery.lastError = std::move(discovery.lastError);
        c.discovery.lastErrorMs = discovery.lastErrorMs;
        c.discovery.excluded = std::move(discovery.lastScan.excluded);
        c.discovery.scanDurations = discovery.scanDurations;
        c.discovery.publishLatency = discovery.publishLatency;
        const std::map<std::string, std::string>& deviceStates = discovery.lastScan.deviceStates;
        const std::map<std::string, std::vector<std::string>>& deviceNotes = discovery.lastScan.deviceNotes;
        if (auto counts = inventory_->allocationCounts().find(c.name);
            counts != inventory_->allocationCounts().end()) {
            c.allocations = counts->second.granted;
            c.refusals = counts->second.refused;
        }
        for (InstanceView& instance : view.instances) {
            status::InstanceStatus i;
            static_cast<InstanceView&>(i) = std::move(instance);
            i.resource = inventory_->instanceResource(i.name);
            i.registered = host_.isRegistered(i.resource);
            i.capacity = c.capacity;
            if (std::string problem = host_.problem(i.resource); !problem.empty())
                c.listProblems.push_back(i.resource + ": " + problem);
            if (auto state = deviceStates.find(i.device.id); state != deviceStates.end())
                i.deviceState = state->second;
            if (auto notes = deviceNotes.find(i.device.id); notes != deviceNotes.end())
                i.deviceNotes = notes->second;
            c.instances.push_back(std::move(i));
        }
        snapshot->configurations.push_back(std::move(c));
    }
    return snapshot;
}

std::vector<status::StatusEvent> Daemon::recentEvents(std::size_t limit) {
    loopThread_.check();
    std::vector<status::StatusEvent> events;
    if (!store_) return events;
    for (StoredEvent& e : store_->recentEvents(static_cast<int>(limit))) {
        events.push_back({e.timeMs, std::move(e.level), std::move(e.subject), std::move(e.message)});
    }
    return events;
}

}  // namespace devlet
