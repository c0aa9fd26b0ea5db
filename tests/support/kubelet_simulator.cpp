#include "tests/support/kubelet_simulator.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <system_error>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "podresources/v1/api.grpc.pb.h"

namespace devlet::test {

namespace {

constexpr const char* kHealthy = "Healthy";
constexpr const char* kUnhealthy = "Unhealthy";
constexpr const char* kSupportedVersion = "v1beta1";
// Server::Shutdown cancels calls still running after this; ours finish on their own.
constexpr std::chrono::seconds kShutdownGrace{2};

bool isAlnum(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool isLowerAlnum(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// Kubernetes' IsDNS1123Subdomain.
bool isDnsSubdomain(std::string_view s) {
    if (s.empty() || s.size() > 253) return false;
    size_t start = 0;
    while (true) {
        size_t dot = s.find('.', start);
        std::string_view label = s.substr(start, dot == std::string_view::npos ? dot : dot - start);
        if (label.empty() || !isLowerAlnum(label.front()) || !isLowerAlnum(label.back())) return false;
        for (char c : label) {
            if (!isLowerAlnum(c) && c != '-') return false;
        }
        if (dot == std::string_view::npos) return true;
        start = dot + 1;
    }
}

// Kubernetes' IsQualifiedName: [dns-subdomain/]name, name at most 63 characters.
bool isQualifiedName(std::string_view s) {
    std::string_view name = s;
    size_t slash = s.find('/');
    if (slash != std::string_view::npos) {
        if (s.find('/', slash + 1) != std::string_view::npos) return false;
        if (!isDnsSubdomain(s.substr(0, slash))) return false;
        name = s.substr(slash + 1);
    }
    if (name.empty() || name.size() > 63) return false;
    if (!isAlnum(name.front()) || !isAlnum(name.back())) return false;
    return std::all_of(name.begin(), name.end(),
                       [](char c) { return isAlnum(c) || c == '-' || c == '_' || c == '.'; });
}

bool contains(const std::vector<std::string>& ids, const std::string& id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// PodResources reports one ContainerDevices per device and NUMA node, like the kubelet.
void addContainerDevices(const std::string& resource, const std::vector<std::string>& ids,
                         const std::map<std::string, std::vector<int64_t>>& numaNodes,
                         google::protobuf::RepeatedPtrField<v1::ContainerDevices>* out) {
    for (const auto& id : ids) {
        auto numa = numaNodes.find(id);
        if (numa == numaNodes.end() || numa->second.empty()) {
            auto* devices = out->Add();
            devices->set_resource_name(resource);
            devices->add_device_ids(id);
            continue;
        }
        for (int64_t node : numa->second) {
            auto* devices = out->Add();
            devices->set_resource_name(resource);
            devices->add_device_ids(id);
            devices->mutable_topology()->add_nodes()->set_id(node);
        }
    }
}

grpc::Status unavailable() {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "pod resources API is unavailable (simulated)");
}

}  // namespace

bool isExtendedResourceName(std::string_view name) {
    if (name.find('/') == std::string_view::npos || name.find("kubernetes.io/") != std::string_view::npos) {
        return false;
    }
    if (name.starts_with("requests.")) return false;
    return isQualifiedName("requests." + std::string(name));
}

// Serves v1beta1.Registration; every call is handed to the simulator, which finishes it
// once the plugin answered GetDevicePluginOptions.
class KubeletSimulator::RegistrationService final : public v1beta1::Registration::CallbackService {
public:
    explicit RegistrationService(KubeletSimulator& simulator) : simulator_(simulator) {}

    grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                       const v1beta1::RegisterRequest* request, v1beta1::Empty*) override {
        auto* reactor = context->DefaultReactor();
        simulator_.handleRegister(*request, reactor);
        return reactor;
    }

private:
    KubeletSimulator& simulator_;
};

// Serves v1.PodResourcesLister from the simulator's allocation records.
class KubeletSimulator::PodResourcesService final : public v1::PodResourcesLister::CallbackService {
public:
    explicit PodResourcesService(KubeletSimulator& simulator) : simulator_(simulator) {}

    grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* context, const v1::ListPodResourcesRequest*,
                                   v1::ListPodResourcesResponse* response) override {
        auto* reactor = context->DefaultReactor();
        reactor->Finish(list(*response));
        return reactor;
    }

    grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* context,
                                  const v1::GetPodResourcesRequest* request,
                                  v1::GetPodResourcesResponse* response) override {
        auto* reactor = context->DefaultReactor();
        reactor->Finish(get(*request, *response));
        return reactor;
    }

    grpc::ServerUnaryReactor* GetAllocatableResources(grpc::CallbackServerContext* context,
                                                      const v1::AllocatableResourcesRequest*,
                                                      v1::AllocatableResourcesResponse* response) override {
        auto* reactor = context->DefaultReactor();
        reactor->Finish(allocatable(*response));
        return reactor;
    }

private:
    // Fills pod from every record of (podNamespace, name); containers in allocation order.
    void fillPod(const std::string& podNamespace, const std::string& name, v1::PodResources& pod) {
        pod.set_name(name);
        pod.set_namespace_(podNamespace);
        for (const auto& record : simulator_.records_) {
            const auto& a = record.allocation;
            if (a.podNamespace != podNamespace || a.pod != name) continue;
            v1::ContainerResources* container = nullptr;
            for (auto& c : *pod.mutable_containers()) {
                if (c.name() == a.container) container = &c;
            }
            if (!container) {
                container = pod.add_containers();
                container->set_name(a.container);
            }
            addContainerDevices(a.resource, a.deviceIds, record.numaNodes, container->mutable_devices());
        }
    }

    grpc::Status list(v1::ListPodResourcesResponse& response) {
        std::lock_guard lock(simulator_.mutex_);
        if (!simulator_.podResourcesAvailable_) return unavailable();
        if (!simulator_.podsKnownLocked()) return grpc::Status::OK;  // an empty pod manager
        std::vector<std::pair<std::string, std::string>> pods;
        for (const auto& record : simulator_.records_) {
            std::pair key{record.allocation.podNamespace, record.allocation.pod};
            if (std::find(pods.begin(), pods.end(), key) == pods.end()) pods.push_back(std::move(key));
        }
        for (const auto& [podNamespace, name] : pods)
            fillPod(podNamespace, name, *response.add_pod_resources());
        return grpc::Status::OK;
    }

    grpc::Status get(const v1::GetPodResourcesRequest& request, v1::GetPodResourcesResponse& response) {
        std::lock_guard lock(simulator_.mutex_);
        if (!simulator_.podResourcesAvailable_) return unavailable();
        bool known =
            simulator_.podsKnownLocked() &&
            std::any_of(simulator_.records_.begin(), simulator_.records_.end(), [&](const Record& r) {
                return r.allocation.podNamespace == request.pod_namespace() &&
                       r.allocation.pod == request.pod_name();
            });
        if (!known) {
            return grpc::Status(grpc::StatusCode::UNKNOWN, "pod " + request.pod_name() + " in namespace " +
                                                               request.pod_namespace() + " not found");
        }
        fillPod(request.pod_namespace(), request.pod_name(), *response.mutable_pod_resources());
        return grpc::Status::OK;
    }

    grpc::Status allocatable(v1::AllocatableResourcesResponse& response) {
        std::lock_guard lock(simulator_.mutex_);
        if (!simulator_.podResourcesAvailable_) return unavailable();
        for (const auto& [name, resource] : simulator_.resources_) {
            std::vector<std::string> ids;
            std::map<std::string, std::vector<int64_t>> numaNodes;
            for (const auto& [id, device] : resource.devices) {
                if (device.health != kHealthy) continue;
                ids.push_back(id);
                numaNodes[id] = device.numaNodes;
            }
            addContainerDevices(name, ids, numaNodes, response.mutable_devices());
        }
        return grpc::Status::OK;
    }

    KubeletSimulator& simulator_;
};

// The kubelet's side of one registration's ListAndWatch stream. It keeps itself alive
// (self_) from begin() until OnDone; the simulator holds another reference to cancel it.
class KubeletSimulator::ListAndWatchStream final
    : public grpc::ClientReadReactor<v1beta1::ListAndWatchResponse>,
      public std::enable_shared_from_this<ListAndWatchStream> {
public:
    ListAndWatchStream(KubeletSimulator& simulator, std::string resource, uint64_t registration,
                       std::shared_ptr<v1beta1::DevicePlugin::Stub> stub)
        : simulator_(simulator),
          resource_(std::move(resource)),
          registration_(registration),
          stub_(std::move(stub)) {}

    void begin() {
        self_ = shared_from_this();
        stub_->async()->ListAndWatch(&context_, &request_, this);
        StartRead(&response_);
        StartCall();
    }

    // Safe at any time, also before begin() (the call then starts cancelled) and after OnDone.
    void cancel() { context_.TryCancel(); }

    void OnReadDone(bool ok) override {
        if (!ok) return;  // the stream ended; OnDone follows
        auto receivedAt = std::chrono::steady_clock::now();
        simulator_.streamMessage(resource_, registration_, response_, receivedAt);
        StartRead(&response_);
    }

    void OnDone(const grpc::Status&) override {
        // The simulator takes the self-reference and destroys the stream on its own thread.
        simulator_.streamEnded(resource_, registration_, std::move(self_));
    }

private:
    KubeletSimulator& simulator_;
    const std::string resource_;
    const uint64_t registration_;
    std::shared_ptr<v1beta1::DevicePlugin::Stub> stub_;
    grpc::ClientContext context_;
    v1beta1::Empty request_;
    v1beta1::ListAndWatchResponse response_;
    std::shared_ptr<ListAndWatchStream> self_;
};

// A Register call waiting for the plugin's GetDevicePluginOptions answer.
struct KubeletSimulator::PendingRegistration {
    uint64_t id = 0;
    v1beta1::RegisterRequest request;
    grpc::ServerUnaryReactor* reactor = nullptr;
    std::shared_ptr<v1beta1::DevicePlugin::Stub> stub;
    grpc::ClientContext context;
    v1beta1::Empty empty;
    v1beta1::DevicePluginOptions options;
};

KubeletSimulator::KubeletSimulator(std::filesystem::path pluginDir, std::filesystem::path podResourcesSocket)
    : pluginDir_(std::move(pluginDir)), podResourcesSocket_(std::move(podResourcesSocket)) {}

KubeletSimulator::~KubeletSimulator() {
    stop();
}

bool KubeletSimulator::start() {
    std::lock_guard lifecycle(lifecycleMutex_);
    return startServers();
}

void KubeletSimulator::stop() {
    std::lock_guard lifecycle(lifecycleMutex_);
    stopServers();
}

bool KubeletSimulator::restart(std::chrono::milliseconds podsUnknownFor) {
    std::lock_guard lifecycle(lifecycleMutex_);
    stopServers();
    {
        std::lock_guard lock(mutex_);
        for (auto& [name, resource] : resources_) resource.devices.clear();
        podsUnknownUntil_ = std::chrono::steady_clock::now() + podsUnknownFor;
    }
    // Like the kubelet's CleanupPluginDirectory: sockets only, no recursion.
    std::vector<std::filesystem::path> sockets;
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator(pluginDir_, ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
        std::error_code statusError;
        if (it->symlink_status(statusError).type() == std::filesystem::file_type::socket) {
            sockets.push_back(it->path());
        }
    }
    for (const auto& socket : sockets) std::filesystem::remove(socket, ec);
    notifyChanged();
    return startServers();
}

void KubeletSimulator::learnPods() {
    {
        std::lock_guard lock(mutex_);
        podsUnknownUntil_ = {};
    }
    notifyChanged();
}

bool KubeletSimulator::podsKnownLocked() const {
    return std::chrono::steady_clock::now() >= podsUnknownUntil_;
}

void KubeletSimulator::setWritesCheckpoint(bool writes) {
    std::lock_guard lock(mutex_);
    writesCheckpoint_ = writes;
}

namespace {
std::string jsonString(std::string_view text) {
    std::string out = "\"";
    for (char c : text) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
            out += escaped;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

// A stand-in for the pod's uid, which the simulator does not model: stable per pod.
std::string podUid(const std::string& podNamespace, const std::string& pod) {
    const std::size_t hash = std::hash<std::string>{}(podNamespace + "/" + pod);
    char uid[40];
    std::snprintf(uid, sizeof uid, "%08zx-0000-4000-8000-%012zx", hash & 0xffffffff, hash >> 16);
    return uid;
}
}  // namespace

std::string KubeletSimulator::checkpointLocked() const {
    // The layout of the kubelet's checkpointv1 (since 1.20): entries by container and
    // resource, device ids by NUMA node ("-1": no topology), the allocation response
    // base64-encoded; healthy devices by resource; and a checksum over Go's dump of
    // the data, which nobody outside the kubelet can recompute (a fixed number here).
    std::string json = "{\"Data\":{\"PodDeviceEntries\":[";
    bool first = true;
    for (const Record& record : records_) {
        const ContainerAllocation& a = record.allocation;
        std::map<int64_t, std::vector<std::string>> byNode;
        for (const std::string& id : a.deviceIds) {
            auto nodes = record.numaNodes.find(id);
            byNode[nodes == record.numaNodes.end() || nodes->second.empty() ? -1 : nodes->second.front()]
                .push_back(id);
        }
        json += std::string(first ? "" : ",") + "{\"PodUID\":" + jsonString(podUid(a.podNamespace, a.pod)) +
                ",\"ContainerName\":" + jsonString(a.container) +
                ",\"ResourceName\":" + jsonString(a.resource) + ",\"DeviceIDs\":{";
        bool firstNode = true;
        for (const auto& [node, ids] : byNode) {
            json += std::string(firstNode ? "" : ",") + jsonString(std::to_string(node)) + ":[";
            for (std::size_t i = 0; i < ids.size(); ++i) json += (i ? "," : "") + jsonString(ids[i]);
            json += "]";
            firstNode = false;
        }
        json += "},\"AllocResp\":\"\"}";
        first = false;
    }
    json += "],\"RegisteredDevices\":{";
    first = true;
    for (const auto& [name, resource] : resources_) {
        json += std::string(first ? "" : ",") + jsonString(name) + ":[";
        bool firstId = true;
        for (const auto& [id, device] : resource.devices) {
            if (device.health != kHealthy) continue;
            json += (firstId ? "" : ",") + jsonString(id);
            firstId = false;
        }
        json += "]";
        first = false;
    }
    return json + "}},\"Checksum\":1394221432}";
}

void KubeletSimulator::writeCheckpoint() {
    // One writer at a time, each writing the state as it is when its turn comes, so an
    // older image never replaces a newer one.
    std::lock_guard writing(checkpointMutex_);
    std::string json;
    {
        std::lock_guard lock(mutex_);
        if (!writesCheckpoint_) return;
        json = checkpointLocked();
    }
    const std::filesystem::path file = checkpointFile();
    const std::filesystem::path temporary = pluginDir_ / ".kubelet_internal_checkpoint.tmp";
    {
        std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
        out << json;
        if (!out) return;
    }
    std::error_code ec;
    std::filesystem::rename(temporary, file, ec);
}

void KubeletSimulator::stopRegistration() {
    std::lock_guard lifecycle(lifecycleMutex_);
    stopRegistrationServer();
}

bool KubeletSimulator::startServers() {
    collectGarbage();
    bool ok = true;
    if (!podResourcesServer_) {
        removeSocket(podResourcesSocket_);
        podResourcesService_ = std::make_unique<PodResourcesService>(*this);
        grpc::ServerBuilder builder;
        builder.AddListeningPort("unix:" + podResourcesSocket_.string(), grpc::InsecureServerCredentials());
        builder.RegisterService(podResourcesService_.get());
        podResourcesServer_ = builder.BuildAndStart();
        ok = podResourcesServer_ != nullptr;
    }
    if (!registrationServer_) {
        removeSocket(kubeletSocket());
        registrationService_ = std::make_unique<RegistrationService>(*this);
        {
            std::lock_guard lock(mutex_);
            acceptingRegistrations_ = true;
        }
        grpc::ServerBuilder builder;
        builder.AddListeningPort("unix:" + kubeletSocket().string(), grpc::InsecureServerCredentials());
        builder.RegisterService(registrationService_.get());
        registrationServer_ = builder.BuildAndStart();
        if (!registrationServer_) {
            std::lock_guard lock(mutex_);
            acceptingRegistrations_ = false;
            ok = false;
        }
    }
    notifyChanged();
    return ok;
}

void KubeletSimulator::stopServers() {
    stopRegistrationServer();
    endStreams();
    if (podResourcesServer_) {
        podResourcesServer_->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
        podResourcesServer_.reset();
        removeSocket(podResourcesSocket_);
    }
    collectGarbage();
    notifyChanged();
}

void KubeletSimulator::stopRegistrationServer() {
    std::vector<std::shared_ptr<PendingRegistration>> pending;
    {
        std::lock_guard lock(mutex_);
        acceptingRegistrations_ = false;
        for (const auto& [id, registration] : pending_) pending.push_back(registration);
    }
    for (const auto& registration : pending) registration->context.TryCancel();
    {
        std::unique_lock lock(mutex_);
        drained_.wait(lock, [this] { return pending_.empty(); });
    }
    pending.clear();
    if (registrationServer_) {
        registrationServer_->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
        registrationServer_.reset();
        removeSocket(kubeletSocket());
    }
    collectGarbage();
}

void KubeletSimulator::endStreams() {
    std::vector<std::unique_ptr<Endpoint>> ended;
    {
        std::lock_guard lock(mutex_);
        for (auto& [name, resource] : resources_) {
            if (resource.endpoint) ended.push_back(std::move(resource.endpoint));
        }
    }
    for (const auto& endpoint : ended) endpoint->stream->cancel();
    std::unique_lock lock(mutex_);
    drained_.wait(lock, [this] { return liveStreams_ == 0; });
}

void KubeletSimulator::removeSocket(const std::filesystem::path& path) {
    std::error_code ec;
    if (std::filesystem::symlink_status(path, ec).type() == std::filesystem::file_type::socket) {
        std::filesystem::remove(path, ec);
    }
}

void KubeletSimulator::notifyChanged() {
    std::lock_guard lock(mutex_);
    changedLocked();
}

void KubeletSimulator::changedLocked() {
    ++changeCount_;
    changed_.notify_all();
}

void KubeletSimulator::collectGarbage() {
    std::vector<std::shared_ptr<void>> garbage;
    std::lock_guard lock(mutex_);
    garbage.swap(graveyard_);
    // Destroyed after the unlock (declared before the lock), on this non-gRPC thread.
}

void KubeletSimulator::handleRegister(const v1beta1::RegisterRequest& request,
                                      grpc::ServerUnaryReactor* reactor) {
    // The kubelet returns plain Go errors, which reach the plugin as UNKNOWN.
    if (request.version() != kSupportedVersion) {
        reactor->Finish(grpc::Status(grpc::StatusCode::UNKNOWN,
                                     "requested API version \"" + request.version() +
                                         "\" is not supported by kubelet. Supported version is \"" +
                                         kSupportedVersion + "\""));
        return;
    }
    if (!isExtendedResourceName(request.resource_name())) {
        reactor->Finish(grpc::Status(grpc::StatusCode::UNKNOWN,
                                     "the ResourceName \"" + request.resource_name() + "\" is invalid"));
        return;
    }
    const std::string& endpoint = request.endpoint();
    if (endpoint.empty() || endpoint == "." || endpoint == ".." || endpoint.find('/') != std::string::npos) {
        reactor->Finish(grpc::Status(
            grpc::StatusCode::UNKNOWN,
            "invalid endpoint \"" + endpoint + "\": must be a socket file name in " + pluginDir_.string()));
        return;
    }

    auto pending = std::make_shared<PendingRegistration>();
    pending->request = request;
    pending->reactor = reactor;
    std::chrono::milliseconds timeout;
    {
        std::lock_guard lock(mutex_);
        if (!acceptingRegistrations_) {
            reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "kubelet is shutting down"));
            return;
        }
        pending->id = nextRegistration_++;
        pending_.emplace(pending->id, pending);
        timeout = dialTimeout_;
    }

    // A connection of its own per registration, like the kubelet's dial.
    grpc::ChannelArguments arguments;
    arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto channel = grpc::CreateCustomChannel("unix:" + (pluginDir_ / endpoint).string(),
                                             grpc::InsecureChannelCredentials(), arguments);
    pending->stub = v1beta1::DevicePlugin::NewStub(channel);
    // wait_for_ready + deadline behaves like the kubelet's blocking dial with a timeout.
    pending->context.set_wait_for_ready(true);
    pending->context.set_deadline(std::chrono::system_clock::now() + timeout);
    pending->stub->async()->GetDevicePluginOptions(
        &pending->context, &pending->empty, &pending->options,
        [this, registration = pending.get()](const grpc::Status& status) {
            completeRegistration(*registration, status);
        });
}

void KubeletSimulator::completeRegistration(PendingRegistration& pending, const grpc::Status& status) {
    const std::string& name = pending.request.resource_name();
    grpc::Status reply = grpc::Status::OK;
    std::shared_ptr<ListAndWatchStream> stream;
    std::unique_ptr<Endpoint> replaced;
    if (!status.ok()) {
        reply = grpc::Status(grpc::StatusCode::UNKNOWN,
                             "failed to get device plugin options: " + status.error_message());
    } else {
        std::lock_guard lock(mutex_);
        if (!acceptingRegistrations_) {
            reply = grpc::Status(grpc::StatusCode::UNAVAILABLE, "kubelet stopped while registering " + name);
        } else {
            auto& resource = resources_[name];
            replaced = std::move(resource.endpoint);
            auto endpoint = std::make_unique<Endpoint>();
            endpoint->registration = pending.id;
            endpoint->endpoint = pending.request.endpoint();
            endpoint->stub = pending.stub;
            endpoint->options = pending.options;
            stream = std::make_shared<ListAndWatchStream>(*this, name, pending.id, pending.stub);
            endpoint->stream = stream;
            resource.endpoint = std::move(endpoint);
            ++resource.registrations;
            ++liveStreams_;
        }
    }
    // The newer registration wins; the old stream's end is then ignored.
    if (replaced) replaced->stream->cancel();
    if (stream) stream->begin();
    pending.reactor->Finish(reply);

    // Last touch of the simulator, in one critical section: stop() may destroy it as soon
    // as pending_ is empty. Channels go to the graveyard so that none is destroyed here.
    std::lock_guard lock(mutex_);
    if (replaced) graveyard_.push_back(std::shared_ptr<Endpoint>(std::move(replaced)));
    if (stream) graveyard_.push_back(std::move(stream));
    auto it = pending_.find(pending.id);
    graveyard_.push_back(std::move(it->second));
    pending_.erase(it);
    changedLocked();
    drained_.notify_all();
}

namespace {
DeviceState deviceState(const v1beta1::Device& device) {
    DeviceState state{device.health(), {}};
    for (const auto& node : device.topology().nodes()) state.numaNodes.push_back(node.id());
    return state;
}

// Updates `devices` in place when the list names the same devices in the same order (a
// health change, the usual message). A configuration lists thousands of slots: freeing
// and allocating them for every message was most of the simulator's work, on the gRPC
// thread that also completes Allocate calls.
bool updateDevices(std::map<std::string, DeviceState>& devices,
                   const v1beta1::ListAndWatchResponse& response) {
    if (devices.size() != static_cast<std::size_t>(response.devices_size())) return false;
    auto entry = devices.begin();
    for (const auto& device : response.devices()) {
        if (entry->first != device.id()) return false;
        ++entry;
    }
    entry = devices.begin();
    for (const auto& device : response.devices()) (entry++)->second = deviceState(device);
    return true;
}
}  // namespace

void KubeletSimulator::streamMessage(const std::string& name, uint64_t registration,
                                     const v1beta1::ListAndWatchResponse& response,
                                     std::chrono::steady_clock::time_point receivedAt) {
    // The stream is live, so the simulator is too (stop() waits for every stream's end).
    std::map<std::string, DeviceState> replaced;  // freed after the unlock
    std::shared_ptr<const ListAndWatchObserver> observer;
    {
        std::lock_guard lock(mutex_);
        auto it = resources_.find(name);
        if (it == resources_.end() || !it->second.endpoint ||
            it->second.endpoint->registration != registration) {
            return;  // a replaced or ended registration
        }
        auto& resource = it->second;
        if (!updateDevices(resource.devices, response)) {
            replaced.swap(resource.devices);
            for (const auto& device : response.devices())
                resource.devices.insert_or_assign(device.id(), deviceState(device));
        }
        observer = observer_;
    }
    // The message counts once the observer has run, so a waitFor on the message count
    // also covers the observer's side effects.
    if (observer) (*observer)(name, response, receivedAt);
    {
        std::lock_guard lock(mutex_);
        if (auto it = resources_.find(name); it != resources_.end()) ++it->second.messages;
    }
    notifyChanged();
    // After the waiters had their chance, so a test waiting for a list is not held up by
    // the file; they hear of it too.
    writeCheckpoint();
    notifyChanged();
}

void KubeletSimulator::streamEnded(const std::string& name, uint64_t registration,
                                   std::shared_ptr<ListAndWatchStream> stream) {
    // One critical section: stop() may destroy the simulator as soon as liveStreams_ is 0.
    std::lock_guard lock(mutex_);
    auto it = resources_.find(name);
    if (it != resources_.end() && it->second.endpoint && it->second.endpoint->registration == registration) {
        // The kubelet never redials: the devices stay, unhealthy, until the plugin registers again.
        for (auto& [id, device] : it->second.devices) device.health = kUnhealthy;
        graveyard_.push_back(std::shared_ptr<Endpoint>(std::move(it->second.endpoint)));
    }
    graveyard_.push_back(std::move(stream));
    --liveStreams_;
    changedLocked();
    drained_.notify_all();
}

void KubeletSimulator::setDialTimeout(std::chrono::milliseconds timeout) {
    std::lock_guard lock(mutex_);
    dialTimeout_ = timeout;
}

void KubeletSimulator::setPodResourcesAvailable(bool available) {
    {
        std::lock_guard lock(mutex_);
        podResourcesAvailable_ = available;
    }
    notifyChanged();
}

std::vector<std::string> KubeletSimulator::resources() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> names;
    for (const auto& [name, resource] : resources_) names.push_back(name);
    return names;
}

std::size_t KubeletSimulator::resourceCount() const {
    std::lock_guard lock(mutex_);
    return resources_.size();
}

std::map<std::string, DeviceState> KubeletSimulator::devices(const std::string& resource) const {
    std::lock_guard lock(mutex_);
    auto it = resources_.find(resource);
    return it == resources_.end() ? std::map<std::string, DeviceState>{} : it->second.devices;
}

int KubeletSimulator::registrations(const std::string& resource) const {
    std::lock_guard lock(mutex_);
    auto it = resources_.find(resource);
    return it == resources_.end() ? 0 : it->second.registrations;
}

std::string KubeletSimulator::endpoint(const std::string& resource) const {
    std::lock_guard lock(mutex_);
    auto it = resources_.find(resource);
    return it == resources_.end() || !it->second.endpoint ? std::string{} : it->second.endpoint->endpoint;
}

v1beta1::DevicePluginOptions KubeletSimulator::options(const std::string& resource) const {
    std::lock_guard lock(mutex_);
    auto it = resources_.find(resource);
    return it == resources_.end() || !it->second.endpoint ? v1beta1::DevicePluginOptions{}
                                                          : it->second.endpoint->options;
}

uint64_t KubeletSimulator::listAndWatchMessages(const std::string& resource) const {
    std::lock_guard lock(mutex_);
    auto it = resources_.find(resource);
    return it == resources_.end() ? 0 : it->second.messages;
}

std::vector<ContainerAllocation> KubeletSimulator::allocations() const {
    std::lock_guard lock(mutex_);
    std::vector<ContainerAllocation> result;
    for (const auto& record : records_) result.push_back(record.allocation);
    return result;
}

bool KubeletSimulator::waitFor(const std::function<bool()>& predicate, std::chrono::milliseconds timeout) {
    collectGarbage();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::unique_lock lock(mutex_);
    while (true) {
        // Read the count before evaluating, so a change during predicate() wakes us.
        const uint64_t seen = changeCount_;
        lock.unlock();
        if (predicate()) return true;
        lock.lock();
        if (!changed_.wait_until(lock, deadline, [&] { return changeCount_ != seen; })) {
            lock.unlock();
            return predicate();
        }
    }
}

void KubeletSimulator::onListAndWatch(ListAndWatchObserver observer) {
    std::lock_guard lock(mutex_);
    observer_ = observer ? std::make_shared<const ListAndWatchObserver>(std::move(observer)) : nullptr;
}

void KubeletSimulator::onListAndWatch(
    std::function<void(const std::string& resource, const v1beta1::ListAndWatchResponse& response)>
        observer) {
    if (!observer) {
        onListAndWatch(ListAndWatchObserver{});
        return;
    }
    onListAndWatch(
        ListAndWatchObserver([observer = std::move(observer)](
                                 const std::string& resource, const v1beta1::ListAndWatchResponse& response,
                                 std::chrono::steady_clock::time_point) { observer(resource, response); }));
}

std::set<std::string> KubeletSimulator::inUseLocked(const std::string& resource) const {
    std::set<std::string> inUse;
    for (const auto& record : records_) {
        if (record.allocation.resource == resource) {
            inUse.insert(record.allocation.deviceIds.begin(), record.allocation.deviceIds.end());
        }
    }
    return inUse;
}

AllocationResult KubeletSimulator::allocate(const std::string& podNamespace, const std::string& pod,
                                            const std::string& container, const std::string& resource,
                                            int count, const std::vector<std::string>& reuse) {
    // The kubelet admits one pod at a time.
    std::lock_guard admission(admissionMutex_);
    collectGarbage();
    AllocationResult result;
    std::shared_ptr<v1beta1::DevicePlugin::Stub> stub;
    bool preferredAvailable = false;
    std::vector<std::string> chosen;
    std::vector<std::string> available;  // healthy, held by no container, sorted
    const size_t required = count > 0 ? static_cast<size_t>(count) : 0;
    {
        std::lock_guard lock(mutex_);
        for (const auto& record : records_) {
            const auto& a = record.allocation;
            if (a.podNamespace != podNamespace || a.pod != pod || a.container != container ||
                a.resource != resource) {
                continue;
            }
            // A restarted container keeps its devices; no Allocate call.
            if (a.deviceIds.size() != required) {
                result.error = "pod \"" + podNamespace + "/";
                result.error += pod + "\" container \"";
                result.error += container + "\" changed request for resource \"";
                result.error += resource + "\" from " + std::to_string(a.deviceIds.size()) + " to " +
                                std::to_string(count);
                return result;
            }
            result.ok = true;
            result.deviceIds = a.deviceIds;
            result.response = a.response;
            return result;
        }
        if (required == 0) {
            result.ok = true;
            return result;
        }
        auto it = resources_.find(resource);
        if (it == resources_.end()) {
            result.error = "cannot allocate unregistered device " + resource;
            return result;
        }
        const auto& devices = it->second.devices;
        if (std::none_of(devices.begin(), devices.end(),
                         [](const auto& d) { return d.second.health == kHealthy; })) {
            result.error = "no healthy devices present; cannot allocate unhealthy devices " + resource;
            return result;
        }
        for (const auto& id : reuse) {
            if (chosen.size() < required && !contains(chosen, id)) chosen.push_back(id);
        }
        if (chosen.size() < required) {
            const auto inUse = inUseLocked(resource);
            for (const auto& [id, device] : devices) {
                if (device.health == kHealthy && !inUse.contains(id) && !contains(chosen, id))
                    available.push_back(id);
            }
            const size_t needed = required - chosen.size();
            if (available.size() < needed) {
                result.error = "requested number of devices unavailable for " + resource +
                               ". Requested: " + std::to_string(needed) +
                               ", Available: " + std::to_string(available.size());
                return result;
            }
        }
        if (!it->second.endpoint) {
            result.error = "unknown Device Plugin " + resource;
            return result;
        }
        stub = it->second.endpoint->stub;
        preferredAvailable = it->second.endpoint->options.get_preferred_allocation_available();
    }

    if (chosen.size() < required && preferredAvailable) {
        v1beta1::PreferredAllocationRequest request;
        auto* containerRequest = request.add_container_requests();
        for (const auto& id : available) containerRequest->add_available_deviceids(id);
        for (const auto& id : chosen) {
            containerRequest->add_available_deviceids(id);
            containerRequest->add_must_include_deviceids(id);
        }
        containerRequest->set_allocation_size(count);
        grpc::ClientContext context;
        v1beta1::PreferredAllocationResponse response;
        grpc::Status status = stub->GetPreferredAllocation(&context, request, &response);
        if (!status.ok()) {
            result.error =
                "device plugin GetPreferredAllocation rpc failed with err: " + status.error_message();
            return result;
        }
        // Only a hint: ids that are not available are dropped, a shortfall is filled below.
        if (response.container_responses_size() > 0) {
            for (const auto& id : response.container_responses(0).deviceids()) {
                if (chosen.size() < required && contains(available, id) && !contains(chosen, id)) {
                    chosen.push_back(id);
                }
            }
        }
    }
    for (const auto& id : available) {
        if (chosen.size() < required && !contains(chosen, id)) chosen.push_back(id);
    }

    result = callAllocate(stub, chosen);
    if (result.ok) record(podNamespace, pod, container, resource, result);
    return result;
}

AllocationResult KubeletSimulator::allocateIds(const std::string& podNamespace, const std::string& pod,
                                               const std::string& container, const std::string& resource,
                                               const std::vector<std::string>& ids) {
    std::lock_guard admission(admissionMutex_);
    collectGarbage();
    std::shared_ptr<v1beta1::DevicePlugin::Stub> stub;
    {
        std::lock_guard lock(mutex_);
        auto it = resources_.find(resource);
        if (it == resources_.end() || !it->second.endpoint) {
            AllocationResult result;
            result.error = "cannot allocate unregistered device " + resource;
            return result;
        }
        stub = it->second.endpoint->stub;
    }
    AllocationResult result = callAllocate(stub, ids);
    if (result.ok) record(podNamespace, pod, container, resource, result);
    return result;
}

AllocationResult KubeletSimulator::callAllocate(const std::shared_ptr<v1beta1::DevicePlugin::Stub>& stub,
                                                const std::vector<std::string>& ids) {
    AllocationResult result;
    v1beta1::AllocateRequest request;
    auto* containerRequest = request.add_container_requests();
    for (const auto& id : ids) containerRequest->add_devices_ids(id);
    grpc::ClientContext context;
    v1beta1::AllocateResponse response;
    grpc::Status status = stub->Allocate(&context, request, &response);
    if (!status.ok()) {
        result.error = status.error_message();
        return result;
    }
    if (response.container_responses_size() == 0) {
        result.error = "no containers return in allocation response";
        return result;
    }
    result.ok = true;
    result.deviceIds = ids;
    result.response = response.container_responses(0);
    return result;
}

void KubeletSimulator::record(const std::string& podNamespace, const std::string& pod,
                              const std::string& container, const std::string& resource,
                              const AllocationResult& result) {
    {
        std::lock_guard lock(mutex_);
        Record record{
            ContainerAllocation{podNamespace, pod, container, resource, result.deviceIds, result.response},
            {}};
        if (auto it = resources_.find(resource); it != resources_.end()) {
            for (const auto& id : result.deviceIds) {
                auto device = it->second.devices.find(id);
                if (device != it->second.devices.end()) record.numaNodes[id] = device->second.numaNodes;
            }
        }
        auto existing = std::find_if(records_.begin(), records_.end(), [&](const Record& r) {
            return r.allocation.podNamespace == podNamespace && r.allocation.pod == pod &&
                   r.allocation.container == container && r.allocation.resource == resource;
        });
        if (existing != records_.end()) {
            *existing = std::move(record);
        } else {
            records_.push_back(std::move(record));
        }
    }
    writeCheckpoint();
    notifyChanged();
}

void KubeletSimulator::removePod(const std::string& podNamespace, const std::string& pod) {
    collectGarbage();
    {
        std::lock_guard lock(mutex_);
        std::erase_if(records_, [&](const Record& r) {
            return r.allocation.podNamespace == podNamespace && r.allocation.pod == pod;
        });
    }
    notifyChanged();
}

}  // namespace devlet::test
