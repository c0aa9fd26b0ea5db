#pragma once
// A kubelet, as far as device plugins can tell, for integration tests and benchmarks: it
// serves v1beta1.Registration on <dir>/kubelet.sock and v1.PodResourcesLister on its own
// socket, dials every registered plugin back, consumes its ListAndWatch stream and
// allocates like the kubelet's device manager (reuse, GetPreferredAllocation, one Allocate
// per container and resource). It owns its gRPC servers, channels and streams; gRPC's
// threads update its state under one mutex, and every public method may be called from any
// thread except gRPC callback threads (the ListAndWatch observer must not call stop(),
// restart() or stopRegistration()).

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace devlet::test {

// What the simulator knows about one device of a resource, from the latest ListAndWatch
// message (or "Unhealthy" for all of them after the stream ended).
struct DeviceState {
    std::string health;              // as the plugin sent it: "Healthy", "Unhealthy", ...
    std::vector<int64_t> numaNodes;  // empty: no topology
    bool operator==(const DeviceState&) const = default;
};

struct AllocationResult {
    bool ok = false;
    std::string error;  // kubelet-side error text or the plugin's gRPC error message
    std::vector<std::string> deviceIds;
    v1beta1::ContainerAllocateResponse response;
};

// One container's devices of one resource, as PodResources List reports them.
struct ContainerAllocation {
    std::string podNamespace;
    std::string pod;
    std::string container;
    std::string resource;
    std::vector<std::string> deviceIds;
    v1beta1::ContainerAllocateResponse response;
};

// The kubelet's IsExtendedResourceName: contains '/', is not in kubernetes.io, does not
// start with "requests.", and "requests." + name is a valid qualified name.
bool isExtendedResourceName(std::string_view name);

class KubeletSimulator {
public:
    // receivedAt is taken when the message arrived, before the simulator processed it.
    using ListAndWatchObserver =
        std::function<void(const std::string& resource, const v1beta1::ListAndWatchResponse& response,
                           std::chrono::steady_clock::time_point receivedAt)>;

    // pluginDir: the device-plugin directory (kubelet.sock and the plugins' sockets);
    // podResourcesSocket: where v1.PodResourcesLister is served (any directory).
    KubeletSimulator(std::filesystem::path pluginDir, std::filesystem::path podResourcesSocket);
    ~KubeletSimulator();
    KubeletSimulator(const KubeletSimulator&) = delete;
    KubeletSimulator& operator=(const KubeletSimulator&) = delete;

    // Starts whichever of the two servers is not running. False if one cannot listen.
    bool start();
    // Stops both servers, ends every registration and ListAndWatch stream (devices keep
    // their last state, endpoints are cleared) and removes both sockets. Pod allocations
    // are kept.
    void stop();
    // A kubelet restart: stop(), delete every unix socket in pluginDir (other files stay),
    // clear every resource's device list (like the kubelet's stopped endpoints after it
    // read its checkpoint), then start() again. Pod allocations and counters are kept.
    // podsUnknownFor > 0 is a restart while the node cannot reach its API server: the new
    // process's pod manager is empty for that long, so PodResources lists no pod (while
    // the containers keep running and the device checkpoint keeps their devices).
    bool restart(std::chrono::milliseconds podsUnknownFor = std::chrono::milliseconds(0));
    // Ends the time restart() left PodResources without pods: the API server answered.
    void learnPods();
    // "No kubelet yet": stops serving Registration and removes kubelet.sock. Existing
    // ListAndWatch streams and PodResources keep running; start() serves it again.
    void stopRegistration();

    // How long Register waits for the plugin's socket to answer GetDevicePluginOptions
    // (the kubelet's blocking dial uses 10 s).
    void setDialTimeout(std::chrono::milliseconds timeout);
    // False: every PodResources RPC fails with UNAVAILABLE.
    void setPodResourcesAvailable(bool available);
    // The device checkpoint, <pluginDir>/kubelet_internal_checkpoint, as the kubelet's
    // device manager writes it: after every ListAndWatch message and every allocation,
    // with each container's devices and each resource's healthy devices. A pod removed
    // stays in it until the next write, as in the kubelet. On by default.
    void setWritesCheckpoint(bool writes);
    std::filesystem::path checkpointFile() const { return pluginDir_ / "kubelet_internal_checkpoint"; }

    std::filesystem::path kubeletSocket() const { return pluginDir_ / "kubelet.sock"; }
    const std::filesystem::path& podResourcesSocket() const { return podResourcesSocket_; }

    // Every resource that ever registered successfully, sorted.
    std::vector<std::string> resources() const;
    // How many resources() would return, without copying their names.
    std::size_t resourceCount() const;
    // The resource's devices from its latest ListAndWatch message; empty if unknown.
    std::map<std::string, DeviceState> devices(const std::string& resource) const;
    // Successful registrations of the resource since construction (kept across restarts).
    int registrations(const std::string& resource) const;
    // The endpoint file name of the resource's live registration; "" when it has none
    // (never registered, ListAndWatch ended, or after stop()/restart()).
    std::string endpoint(const std::string& resource) const;
    // The options GetDevicePluginOptions returned for the live registration.
    v1beta1::DevicePluginOptions options(const std::string& resource) const;
    // ListAndWatch messages received for the resource (all registrations, kept across restarts),
    // each counted once the observer has seen it.
    uint64_t listAndWatchMessages(const std::string& resource) const;
    // Every recorded container allocation, in allocation order.
    std::vector<ContainerAllocation> allocations() const;

    // Waits until predicate() is true, re-checking it whenever the simulator's state
    // changes. The predicate runs on the calling thread without the simulator's lock held,
    // so it may call the accessors above. False on timeout.
    bool waitFor(const std::function<bool()>& predicate, std::chrono::milliseconds timeout);

    // Called on a gRPC thread for each message of a live registration, after the device
    // list was updated and before waitFor() callers are woken. Messages of one stream
    // arrive in order; different streams may call it concurrently. What it captures must
    // outlive the simulator (or the observer must be replaced and the streams ended).
    void onListAndWatch(ListAndWatchObserver observer);
    void onListAndWatch(
        std::function<void(const std::string& resource, const v1beta1::ListAndWatchResponse& response)>
            observer);

    // Like the kubelet admitting one container that requests count devices of resource:
    // reuse (e.g. an init container's devices of the same pod) is taken first; the rest
    // come from healthy devices no other container holds, through GetPreferredAllocation
    // when the plugin offers it; then one Allocate with all ids. A container that already
    // holds devices of the resource gets them back without an RPC (like a container
    // restart). Success is recorded for PodResources and holds the devices.
    AllocationResult allocate(const std::string& podNamespace, const std::string& pod,
                              const std::string& container, const std::string& resource, int count,
                              const std::vector<std::string>& reuse = {});
    // Calls Allocate with exactly these ids (no availability check, no preferred
    // allocation) and records them on success, replacing the container's earlier record
    // for the resource. For tests that force a conflict.
    AllocationResult allocateIds(const std::string& podNamespace, const std::string& pod,
                                 const std::string& container, const std::string& resource,
                                 const std::vector<std::string>& ids);
    // Forgets the pod's allocations: PodResources stops listing it, its devices are free.
    void removePod(const std::string& podNamespace, const std::string& pod);

private:
    class RegistrationService;
    class PodResourcesService;
    class ListAndWatchStream;
    struct PendingRegistration;

    // The live registration of a resource: the connection the kubelet dialled back.
    struct Endpoint {
        uint64_t registration = 0;  // unique per successful Register
        std::string endpoint;
        std::shared_ptr<v1beta1::DevicePlugin::Stub> stub;
        v1beta1::DevicePluginOptions options;
        std::shared_ptr<ListAndWatchStream> stream;
    };
    struct Resource {
        std::unique_ptr<Endpoint> endpoint;  // null: no live registration
        std::map<std::string, DeviceState> devices;
        int registrations = 0;
        uint64_t messages = 0;
    };
    struct Record {
        ContainerAllocation allocation;
        std::map<std::string, std::vector<int64_t>> numaNodes;  // device id -> NUMA nodes at allocation
    };

    // Entry points for the gRPC-side helpers.
    void handleRegister(const v1beta1::RegisterRequest& request, grpc::ServerUnaryReactor* reactor);
    void completeRegistration(PendingRegistration& pending, const grpc::Status& status);
    void streamMessage(const std::string& resource, uint64_t registration,
                       const v1beta1::ListAndWatchResponse& response,
                       std::chrono::steady_clock::time_point receivedAt);
    void streamEnded(const std::string& resource, uint64_t registration,
                     std::shared_ptr<ListAndWatchStream> stream);

    // Lifecycle steps, called with lifecycleMutex_ held.
    bool startServers();
    void stopServers();
    void stopRegistrationServer();
    void endStreams();

    void removeSocket(const std::filesystem::path& path);
    void notifyChanged();
    void changedLocked();
    // Destroys what gRPC threads retired. gRPC 1.51 must not see its last callback-using
    // channel or server destroyed on one of its own callback threads (the shared callback
    // completion queue would join its own thread), so channels die here, on ours.
    void collectGarbage();
    std::set<std::string> inUseLocked(const std::string& resource) const;
    // Whether PodResources lists pods now (see restart()).
    bool podsKnownLocked() const;
    // The checkpoint's JSON, as the kubelet would write it now.
    std::string checkpointLocked() const;
    // Writes it (a temporary file, renamed) unless writing is off; never under mutex_.
    void writeCheckpoint();
    AllocationResult callAllocate(const std::shared_ptr<v1beta1::DevicePlugin::Stub>& stub,
                                  const std::vector<std::string>& ids);
    void record(const std::string& podNamespace, const std::string& pod, const std::string& container,
                const std::string& resource, const AllocationResult& result);

    const std::filesystem::path pluginDir_;
    const std::filesystem::path podResourcesSocket_;

    // Serialises start/stop/restart/stopRegistration (they shut servers down, which waits
    // for gRPC handlers, so they never run under mutex_).
    std::mutex lifecycleMutex_;
    std::unique_ptr<RegistrationService> registrationService_;
    std::unique_ptr<PodResourcesService> podResourcesService_;
    std::unique_ptr<grpc::Server> registrationServer_;
    std::unique_ptr<grpc::Server> podResourcesServer_;

    // Serialises allocate/allocateIds across their RPCs, like the kubelet admitting one
    // pod at a time.
    std::mutex admissionMutex_;

    // Serialises checkpoint writes; taken before mutex_, never while holding it.
    std::mutex checkpointMutex_;

    // Guards everything below; never held while calling into gRPC or the observer.
    mutable std::mutex mutex_;
    std::condition_variable drained_;  // liveStreams_ or pending_ shrank
    bool acceptingRegistrations_ = false;
    bool podResourcesAvailable_ = true;
    bool writesCheckpoint_ = true;
    std::chrono::steady_clock::time_point podsUnknownUntil_{};
    std::chrono::milliseconds dialTimeout_{10000};
    uint64_t nextRegistration_ = 1;
    std::map<std::string, Resource> resources_;
    std::map<uint64_t, std::shared_ptr<PendingRegistration>> pending_;
    size_t liveStreams_ = 0;
    std::vector<Record> records_;
    std::shared_ptr<const ListAndWatchObserver> observer_;
    std::vector<std::shared_ptr<void>> graveyard_;  // ended streams and registrations; see collectGarbage
    std::condition_variable changed_;               // changeCount_ grew; waitFor sleeps on it
    uint64_t changeCount_ = 0;
};

}  // namespace devlet::test
