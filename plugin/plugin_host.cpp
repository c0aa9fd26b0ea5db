#include "plugin/plugin_host.h"

#include <cstdio>
#include <filesystem>
#include <optional>
#include <utility>

#include <malloc.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "deviceplugin/v1beta1/api.pb.h"
#include "grpc/grpc_channel.h"
#include "plugin/device_list_encoder.h"
#include "plugin/device_plugin_server.h"
#include "runtime/log.h"

namespace devlet::plugin {

namespace {
constexpr Log log{"kubelet"};
constexpr const char* kSocketPrefix = "devlet.";
constexpr std::size_t kMaxSocketPath = 107;  // sun_path, less the terminating NUL
constexpr std::size_t kRegistrationWindow = 32;

bool exists(const std::string& path) {
    std::error_code ec;
    return std::filesystem::exists(path, ec);
}

// Tells one kubelet.sock from the next one a restarted kubelet creates at the same path.
std::optional<std::pair<std::uint64_t, std::uint64_t>> fileIdentity(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return std::nullopt;
    return std::pair<std::uint64_t, std::uint64_t>(st.st_dev, st.st_ino);
}
}  // namespace

PluginHost::PluginHost(boost::asio::io_context& loop, FileWatch& watch, std::string devicePluginDir)
    : loop_(loop), watch_(watch), dir_(std::move(devicePluginDir)) {}

PluginHost::~PluginHost() {
    loopThread_.release();
    lifetime_.end();
    stop();
}

void PluginHost::start() {
    loopThread_.check();
    removeStaleSockets();
    watch_.watchDirectory(
        dir_, IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM,
        [this](const std::string& name, std::uint32_t mask) { onDirectoryEvent(name, mask); });
    if (exists(kubeletSocket())) {
        kubeletAppeared();
    } else {
        log.info() << "waiting for kubelet at " << kubeletSocket() << "; devices are offered once it appears";
    }
}

void PluginHost::stop() {
    loopThread_.check();
    if (stopped_) return;
    stopped_ = true;
    queued_.clear();
    for (auto& [resource, plugin] : plugins_) plugin.server.reset();
    plugins_.clear();
    registered_ = 0;
    socketOwners_.clear();
}

void PluginHost::removeStaleSockets() {
    // Sockets of an earlier run that crashed: the kubelet would keep dialling them.
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind(kSocketPrefix, 0) == 0 && entry.is_socket(ec))
            std::filesystem::remove(entry.path(), ec);
    }
}

void PluginHost::onDirectoryEvent(const std::string& name, std::uint32_t mask) {
    if (stopped_) return;
    if (mask & IN_Q_OVERFLOW) {
        rescanDirectory();
        return;
    }
    if (name.empty()) {  // the directory itself appeared or vanished
        if (exists(kubeletSocket())) {
            kubeletAppeared();
        } else {
            kubeletGone();
        }
        return;
    }
    if (name == "kubelet.sock") {
        if (mask & (IN_CREATE | IN_MOVED_TO)) kubeletAppeared();
        if (mask & (IN_DELETE | IN_MOVED_FROM)) kubeletGone();
        return;
    }
    if (!(mask & (IN_DELETE | IN_MOVED_FROM))) return;
    // A kubelet restart wipes every socket at once: one lookup per event, not a scan.
    auto owner = socketOwners_.find(name);
    if (owner == socketOwners_.end()) return;
    const std::string resource = owner->second;
    socketOwners_.erase(owner);
    auto it = plugins_.find(resource);
    if (it == plugins_.end() || !it->second.server ||
        std::filesystem::path(it->second.server->socketPath()).filename() != name)
        return;  // a socket of an earlier registration
    socketWiped(resource, it->second);
}

void PluginHost::socketWiped(const std::string& resource, Plugin& plugin) {
    // Our socket was wiped (a kubelet restart does this): serve anew and register again.
    log.debug() << "socket of " << resource << " removed";
    plugin.server.reset();
    setRegistration(plugin, Plugin::Registration::None);
    registerPlugin(resource, plugin);
}

void PluginHost::rescanDirectory() {
    // Events were lost: what they would have said is read from the directory instead.
    const auto kubelet = fileIdentity(kubeletSocket());
    if (!kubelet) {
        kubeletGone();
    } else if (!kubeletPresent_ || kubelet != kubeletSocketIdentity_) {
        log.info() << "kubelet.sock is new since events were lost; registering again";
        kubeletAppeared();  // registers every plugin on a fresh socket
        return;
    }
    std::size_t wiped = 0;
    for (auto& [resource, plugin] : plugins_) {
        if (!plugin.server || exists(plugin.server->socketPath())) continue;
        socketOwners_.erase(std::filesystem::path(plugin.server->socketPath()).filename().string());
        socketWiped(resource, plugin);
        ++wiped;
    }
    log.debug() << "device-plugin directory rescanned: kubelet " << (kubelet ? "present" : "absent") << ", "
                << wiped << " socket(s) of ours gone";
}

void PluginHost::kubeletAppeared() {
    // A kubelet that restarts closed every connection the last one had: their sessions
    // are freed in between the plugins' new sockets, and the next connections would find
    // little room in those holes. Giving the free pages back first keeps a restart from
    // adding a session's worth of pages per plugin (8 MiB at 1,000 plugins).
    ::malloc_trim(0);
    kubeletPresent_ = true;
    kubeletSocketIdentity_ = fileIdentity(kubeletSocket());
    ++kubeletEpoch_;
    inFlight_ = 0;
    queued_.clear();
    kubelet_ = std::make_unique<rpc::GrpcChannel>(loop_, kubeletSocket());
    log.info() << "kubelet at " << kubeletSocket() << "; registering " << plugins_.size()
               << " device plugin(s)";
    for (auto& [resource, plugin] : plugins_) registerPlugin(resource, plugin);
}

void PluginHost::kubeletGone() {
    if (!kubeletPresent_) return;
    kubeletPresent_ = false;
    ++kubeletEpoch_;
    inFlight_ = 0;
    queued_.clear();
    kubelet_.reset();
    for (auto& [resource, plugin] : plugins_) setRegistration(plugin, Plugin::Registration::None);
    log.warning() << "kubelet gone (" << kubeletSocket() << " removed); waiting for it to come back";
}

std::string PluginHost::socketPathFor(const std::string& resource) {
    std::string name = resource;
    for (char& ch : name) {
        if (ch == '/') ch = '_';
    }
    const std::string suffix = "." + std::to_string(++generation_) + ".sock";
    std::string path = dir_ + "/" + kSocketPrefix + name + suffix;
    if (path.size() > kMaxSocketPath) {
        // Long resource names in a deep directory: keep the socket path within sun_path.
        char hash[17];
        std::snprintf(hash, sizeof hash, "%016zx", std::hash<std::string>{}(resource));
        path = dir_ + "/" + kSocketPrefix + hash + suffix;
    }
    return path;
}

void PluginHost::registerPlugin(const std::string& resource, Plugin& plugin) {
    if (!kubeletPresent_ || stopped_ || !inventory_ || !arbiter_) return;
    if (inFlight_ >= kRegistrationWindow) {
        if (plugin.registration != Plugin::Registration::Queued) queued_.push_back(resource);
        setRegistration(plugin, Plugin::Registration::Queued);
        return;
    }
    plugin.server.reset();
    auto server = std::make_unique<DevicePluginServer>(resource, inventory_->isConfigurationLevel(resource),
                                                       loop_, *inventory_, *arbiter_);
    const std::string path = socketPathFor(resource);
    if (auto outcome = server->start(path); !outcome) {
        log.error() << outcome.error();
        setRegistration(plugin, Plugin::Registration::None);
        scheduleRetry(resource, ++plugin.failures);
        return;
    }
    server->publish(plugin.list);
    socketOwners_[std::filesystem::path(path).filename().string()] = resource;
    plugin.server = std::move(server);
    setRegistration(plugin, Plugin::Registration::Pending);
    plugin.attempt = ++attempts_;

    v1beta1::RegisterRequest request;
    request.set_version("v1beta1");
    request.set_endpoint(std::filesystem::path(path).filename().string());
    request.set_resource_name(resource);
    // The kubelet reads the options through GetDevicePluginOptions; send the same here.
    request.mutable_options()->set_get_preferred_allocation_available(
        inventory_->isConfigurationLevel(resource));
    const std::uint64_t attempt = plugin.attempt;
    ++inFlight_;
    // The kubelet dials back with a 10 s timeout before answering. Waiting for the
    // socket rides out the moment between the kubelet's bind() and listen().
    kubelet_->call("/v1beta1.Registration/Register", request.SerializeAsString(),
                   {.timeout = std::chrono::seconds(15), .waitForReady = true},
                   lifetime_.guard([this, attempt, epoch = kubeletEpoch_, resource](
                                       const rpc::GrpcStatus& status, const std::string&) {
                       if (epoch == kubeletEpoch_ && inFlight_ > 0) --inFlight_;
                       onRegistered(resource, attempt, status.ok(), status.message);
                       registerQueued();
                   }));
}

void PluginHost::onRegistered(const std::string& resource, std::uint64_t attempt, bool ok,
                              const std::string& error) {
    auto it = plugins_.find(resource);
    if (it == plugins_.end() || it->second.attempt != attempt || stopped_) return;
    Plugin& plugin = it->second;
    ++(ok ? registrations_ : registrationFailures_);
    if (!ok) {
        setRegistration(plugin, Plugin::Registration::None);
        if (plugin.failures++ == 0)
            log.warning() << "registering " << resource << " failed: " << error << "; retrying";
        scheduleRetry(resource, plugin.failures);
        return;
    }
    setRegistration(plugin, Plugin::Registration::Done);
    if (plugin.failures)
        log.info() << resource << " registered after " << plugin.failures << " failed attempt(s)";
    plugin.failures = 0;
    log.debug() << resource << " registered as " << plugin.server->socketPath();
    if (registered() == plugins_.size()) {
        log.info() << "all " << plugins_.size() << " device plugin(s) registered with the kubelet";
        if (onAllRegistered) onAllRegistered();
    }
}

void PluginHost::registerQueued() {
    while (inFlight_ < kRegistrationWindow && !queued_.empty() && !stopped_) {
        const std::string resource = std::move(queued_.front());
        queued_.pop_front();
        auto it = plugins_.find(resource);
        if (it == plugins_.end() || it->second.registration != Plugin::Registration::Queued) continue;
        setRegistration(it->second, Plugin::Registration::None);
        registerPlugin(resource, it->second);
    }
}

void PluginHost::scheduleRetry(const std::string& resource, int failures) {
    const auto delay = std::chrono::milliseconds(std::min(50L << std::min(failures, 7), 5000L));
    auto timer = std::make_shared<boost::asio::steady_timer>(loop_, delay);
    timer->async_wait(lifetime_.guard([this, timer, resource](boost::system::error_code ec) {
        if (ec || stopped_) return;
        auto it = plugins_.find(resource);
        if (it == plugins_.end() || it->second.registration != Plugin::Registration::None) return;
        registerPlugin(resource, it->second);
    }));
}

bool PluginHost::resendOneList() {
    loopThread_.check();
    for (auto& [resource, plugin] : plugins_) {
        if (plugin.registration != Plugin::Registration::Done || !plugin.server || !plugin.list) continue;
        plugin.server->publish(plugin.list);
        return true;
    }
    return false;
}

void PluginHost::resourceChanged(ResourceState state) {
    loopThread_.check();
    if (stopped_) return;
    auto [it, added] = plugins_.try_emplace(state.resource);
    Plugin& plugin = it->second;
    // Kept as it goes on the wire, shared with the plugin's streams: a thousand plugins
    // hold one copy of their lists, and the same list again (a change elsewhere in the
    // configuration) is not sent.
    bool changed = false;
    if (auto encoded = encodeDeviceList(state.devices, rpc::kGrpcPrefix);
        acceptList(state, plugin, encoded)) {
        rpc::GrpcFrame list = rpc::frameInPlace(std::move(*encoded));
        changed = added || !plugin.list || *plugin.list != *list;
        if (changed) plugin.list = std::move(list);
    }
    if (plugin.server) {
        if (changed) plugin.server->publish(plugin.list);
    } else if (plugin.registration == Plugin::Registration::None && plugin.failures == 0) {
        registerPlugin(it->first, plugin);
    }
    if (added) log.debug() << it->first << " offered with " << state.devices.size() << " device(s)";
}

bool PluginHost::acceptList(const ResourceState& state, Plugin& plugin,
                            const std::optional<std::string>& encoded) {
    // The kubelet's gRPC client (grpc-go) takes messages of up to 4 MiB; a larger list
    // would end its ListAndWatch stream, and the next one would end the same way.
    std::string problem;
    if (!encoded) {
        problem = "its device list of " + std::to_string(state.devices.size()) +
                  " device(s) could not be encoded; the kubelet keeps the list it had, if any";
    } else if (const std::size_t size = encoded->size() - rpc::kGrpcPrefix; size > rpc::kMaxGrpcMessage) {
        char mib[32];
        std::snprintf(mib, sizeof mib, "%.1f", static_cast<double>(size) / (1024.0 * 1024.0));
        problem = "its device list of " + std::to_string(state.devices.size()) + " device(s) is " +
                  std::to_string(size) + " bytes (" + mib + " MiB), more than the 4 MiB (" +
                  std::to_string(rpc::kMaxGrpcMessage) +
                  " bytes) the kubelet accepts in one message, so it is not sent and the kubelet keeps "
                  "the list it had, if any; lower the configuration's capacity or split its devices "
                  "over several configurations";
    }
    if (problem.empty()) {
        if (!plugin.problem.empty())
            log.info() << state.resource << ": its device list fits the kubelet's limit again";
        plugin.problem.clear();
        return true;
    }
    if (plugin.problem.empty())
        log.error() << "configuration \"" << state.configuration << "\", resource " << state.resource << ": "
                    << problem;
    plugin.problem = std::move(problem);
    return false;
}

bool PluginHost::slotsChanged(const ResourceState& changes) {
    loopThread_.check();
    if (stopped_) return true;
    auto it = plugins_.find(changes.resource);
    // A refused list is not what the kubelet has: only the full list can say what changed.
    if (it == plugins_.end() || !it->second.list || !it->second.problem.empty()) return false;
    Plugin& plugin = it->second;
    const std::string_view sent = std::string_view(*plugin.list).substr(rpc::kGrpcPrefix);
    auto patched = patchDeviceList(sent, changes.devices, rpc::kGrpcPrefix);
    // One that grew too large goes through resourceChanged, which refuses it and says why.
    if (!patched || patched->size() - rpc::kGrpcPrefix > rpc::kMaxGrpcMessage) return false;
    rpc::GrpcFrame list = rpc::frameInPlace(std::move(*patched));
    if (*list == *plugin.list) return true;
    plugin.list = std::move(list);
    if (plugin.server) plugin.server->publish(plugin.list);
    return true;
}

void PluginHost::resourceWithdrawn(const std::string& resource) {
    loopThread_.check();
    auto it = plugins_.find(resource);
    if (it == plugins_.end()) return;
    setRegistration(it->second, Plugin::Registration::None);
    plugins_.erase(it);  // the server's destructor ends its streams and removes its socket
    log.info() << resource << " withdrawn";
}

std::string PluginHost::problem(const std::string& resource) const {
    auto it = plugins_.find(resource);
    return it == plugins_.end() ? std::string() : it->second.problem;
}

PluginHost::KubeletState PluginHost::kubeletState() const {
    if (!kubeletPresent_) return KubeletState::Waiting;
    return registered() == plugins_.size() ? KubeletState::Connected : KubeletState::Registering;
}

void PluginHost::setRegistration(Plugin& plugin, Plugin::Registration registration) {
    if (plugin.registration == Plugin::Registration::Done) --registered_;
    if (registration == Plugin::Registration::Done) ++registered_;
    plugin.registration = registration;
}

}  // namespace devlet::plugin
