#pragma once
// Keeps one DevicePluginServer per offered resource registered with the kubelet.
// Watches the device-plugin dir with inotify: when the kubelet (re)creates
// kubelet.sock, or wipes a socket of ours, every affected plugin is served on a
// fresh socket and registered again. Lives on the loop thread.

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio/steady_timer.hpp>

#include "grpc/grpc_wire.h"
#include "runtime/file_watch.h"
#include "runtime/inventory.h"
#include "runtime/lifetime.h"
#include "runtime/slot_arbiter.h"
#include "runtime/thread_bound.h"

namespace devlet::rpc {
class GrpcChannel;
}

namespace devlet::plugin {

class DevicePluginServer;

class PluginHost : public InventoryObserver {
public:
    enum class KubeletState { Waiting, Registering, Connected };

    PluginHost(boost::asio::io_context& loop, FileWatch& watch, std::string devicePluginDir);
    ~PluginHost() override;

    // The inventory offers the devices and the arbiter decides Allocate (borrowed; both
    // outlive the host's plugins); set before start().
    void setInventory(Inventory& inventory, SlotArbiter& arbiter) {
        inventory_ = &inventory;
        arbiter_ = &arbiter;
    }
    void start();
    // Withdraws every plugin and removes its socket (SIGTERM).
    void stop();

    void resourceChanged(ResourceState state) override;
    bool slotsChanged(const ResourceState& changes) override;
    void resourceWithdrawn(const std::string& resource) override;

    // Sends one registered plugin's device list again, unchanged. The kubelet records its
    // device state, and writes its device checkpoint, on every list it receives: after a
    // pod has ended, that is when its allocations leave the checkpoint. False when no
    // plugin is registered.
    bool resendOneList();

    KubeletState kubeletState() const;
    std::string kubeletSocket() const { return dir_ + "/kubelet.sock"; }
    std::size_t registered() const { return registered_; }
    std::size_t offered() const { return plugins_.size(); }
    // Register calls since start that the kubelet accepted, and that failed.
    std::uint64_t registrations() const { return registrations_; }
    std::uint64_t registrationFailures() const { return registrationFailures_; }
    // Whether the resource's plugin is registered with the kubelet now (status page).
    bool isRegistered(const std::string& resource) const {
        auto it = plugins_.find(resource);
        return it != plugins_.end() && it->second.registration == Plugin::Registration::Done;
    }
    // Why the resource's latest device list is not what the kubelet has (it is larger
    // than the kubelet accepts in one message); empty when the latest list was sent.
    std::string problem(const std::string& resource) const;
    // Called each time every offered resource is registered (readiness).
    std::function<void()> onAllRegistered;

private:
    struct Plugin {
        rpc::GrpcFrame list;  // the latest device list that may go to the kubelet, framed for the wire
        std::string problem;  // why a later list was refused; empty when `list` is the latest
        std::unique_ptr<DevicePluginServer> server;
        enum class Registration { None, Queued, Pending, Done } registration = Registration::None;
        std::uint64_t attempt = 0;  // ignores answers to superseded registrations
        int failures = 0;
    };

    // Every change of a plugin's registration goes through here: it keeps registered_.
    void setRegistration(Plugin& plugin, Plugin::Registration registration);
    // Whether `encoded` (a resource's new list behind room for gRPC's prefix) may go to the
    // kubelet. If not, the plugin keeps its last list, and why is its problem (logged once).
    bool acceptList(const ResourceState& state, Plugin& plugin, const std::optional<std::string>& encoded);
    void onDirectoryEvent(const std::string& name, std::uint32_t mask);
    // After lost inotify events: is kubelet.sock there and new, are our sockets still there?
    void rescanDirectory();
    void socketWiped(const std::string& resource, Plugin& plugin);
    void kubeletAppeared();
    void kubeletGone();
    void registerPlugin(const std::string& resource, Plugin& plugin);
    void onRegistered(const std::string& resource, std::uint64_t attempt, bool ok, const std::string& error);
    void scheduleRetry(const std::string& resource, int failures);
    void registerQueued();
    std::string socketPathFor(const std::string& resource);
    void removeStaleSockets();

    boost::asio::io_context& loop_;
    FileWatch& watch_;
    std::string dir_;
    Inventory* inventory_ = nullptr;
    SlotArbiter* arbiter_ = nullptr;
    std::unique_ptr<rpc::GrpcChannel> kubelet_;  // Registration, on kubelet.sock
    bool kubeletPresent_ = false;
    // (st_dev, st_ino) of the kubelet.sock registered with: a new one means a new kubelet.
    std::optional<std::pair<std::uint64_t, std::uint64_t>> kubeletSocketIdentity_;
    bool stopped_ = false;
    std::map<std::string, Plugin> plugins_;
    std::map<std::string, std::string> socketOwners_;  // socket file name -> resource (may be stale)
    std::size_t registered_ = 0;                       // plugins whose registration is Done
    std::uint64_t generation_ = 0;
    std::uint64_t attempts_ = 0;
    std::uint64_t registrations_ = 0;
    std::uint64_t registrationFailures_ = 0;
    // Registrations in flight at once are bounded: each sets up a connection and a
    // stream, and a thousand set up together cost more memory than they keep.
    std::size_t inFlight_ = 0;
    std::uint64_t kubeletEpoch_ = 0;  // answers from an earlier kubelet do not count
    std::deque<std::string> queued_;  // resources waiting for a registration slot
    std::string waitingSince_;
    Lifetime lifetime_;  // for replies and timers that outlive the host
    ThreadBound loopThread_;
};

}  // namespace devlet::plugin
