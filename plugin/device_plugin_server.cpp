#include "plugin/device_plugin_server.h"

#include <chrono>
#include <mutex>
#include <set>
#include <variant>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "plugin/device_list_encoder.h"
#include "runtime/log.h"

namespace devlet::plugin {

namespace {
constexpr Log log{"plugin"};

void fillResponse(const ContainerGrant& grant, v1beta1::ContainerAllocateResponse& response) {
    for (const auto& [key, value] : grant.envs) (*response.mutable_envs())[key] = value;
    for (const DeviceNode& node : grant.devices) {
        auto* spec = response.add_devices();
        spec->set_host_path(node.hostPath);
        spec->set_container_path(node.containerPath.empty() ? node.hostPath : node.containerPath);
        spec->set_permissions(node.permissions);
    }
    for (const Mount& mount : grant.mounts) {
        auto* m = response.add_mounts();
        m->set_host_path(mount.hostPath);
        m->set_container_path(mount.containerPath);
        m->set_read_only(mount.readOnly);
    }
}
}  // namespace

// The gRPC service. Shared with reactors and posted work, so it outlives the
// server; once stopped, posted work finds `stopped_` and touches nothing else.
// ListAndWatch sends lists that DeviceListEncoder serialized once for every stream.
class DevicePluginService final : public v1beta1::DevicePlugin::WithRawCallbackMethod_ListAndWatch<
                                      v1beta1::DevicePlugin::CallbackService>,
                                  public std::enable_shared_from_this<DevicePluginService> {
public:
    DevicePluginService(std::string resource, bool preferred, boost::asio::io_context& loop,
                        Inventory& inventory)
        : resource_(std::move(resource)), preferred_(preferred), loop_(loop), inventory_(inventory) {}

    // A unary call answered on the loop; whoever claims it first finishes it.
    struct PendingCall {
        grpc::ServerUnaryReactor* reactor;
        bool claimed = false;
    };

    using List = std::shared_ptr<const grpc::ByteBuffer>;

    class Watch : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
    public:
        explicit Watch(std::shared_ptr<DevicePluginService> service) : service_(std::move(service)) {}

        // Called with service_->mutex_ held.
        void push(List list) {
            latest_ = std::move(list);
            if (!writing_ && !finished_ && latest_ != sent_) {
                writing_ = true;
                sent_ = latest_;
                StartWrite(sent_.get());
            }
        }
        void finish(const grpc::Status& status) {
            if (finished_) return;
            finished_ = true;
            Finish(status);
        }
        void OnWriteDone(bool ok) override {
            std::lock_guard lock(service_->mutex_);
            writing_ = false;
            if (!ok) {
                finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream closed"));
                return;
            }
            if (latest_) push(latest_);
        }
        void OnCancel() override {
            std::lock_guard lock(service_->mutex_);
            finish(grpc::Status::CANCELLED);
        }
        void OnDone() override {
            {
                std::lock_guard lock(service_->mutex_);
                service_->watches_.erase(this);
            }
            delete this;
        }

    private:
        std::shared_ptr<DevicePluginService> service_;
        List latest_;
        List sent_;
        bool writing_ = false;
        bool finished_ = false;
    };

    grpc::ServerUnaryReactor* GetDevicePluginOptions(grpc::CallbackServerContext* context,
                                                     const v1beta1::Empty*,
                                                     v1beta1::DevicePluginOptions* options) override {
        options->set_pre_start_required(false);
        options->set_get_preferred_allocation_available(preferred_);
        auto* reactor = context->DefaultReactor();
        reactor->Finish(grpc::Status::OK);
        return reactor;
    }

    grpc::ServerWriteReactor<grpc::ByteBuffer>* ListAndWatch(grpc::CallbackServerContext*,
                                                             const grpc::ByteBuffer*) override {
        auto* watch = new Watch(shared_from_this());
        std::lock_guard lock(mutex_);
        if (stopped_) {
            watch->finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "device plugin is stopping"));
            return watch;
        }
        watches_.insert(watch);
        if (latest_) watch->push(latest_);
        return watch;
    }

    grpc::ServerUnaryReactor* Allocate(grpc::CallbackServerContext* context,
                                       const v1beta1::AllocateRequest* request,
                                       v1beta1::AllocateResponse* response) override {
        return onLoop(context, [this, request, response]() -> grpc::Status {
            for (const auto& container : request->container_requests()) {
                std::vector<std::string> ids(container.devices_ids().begin(), container.devices_ids().end());
                auto result = inventory_.allocate(resource_, ids);
                if (auto* refused = std::get_if<AllocationRefused>(&result)) {
                    log.warning() << "Allocate " << resource_ << " refused: " << refused->message;
                    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, refused->message);
                }
                fillResponse(std::get<ContainerGrant>(result), *response->add_container_responses());
            }
            return grpc::Status::OK;
        });
    }

    grpc::ServerUnaryReactor* GetPreferredAllocation(
        grpc::CallbackServerContext* context, const v1beta1::PreferredAllocationRequest* request,
        v1beta1::PreferredAllocationResponse* response) override {
        return onLoop(context, [this, request, response]() -> grpc::Status {
            for (const auto& container : request->container_requests()) {
                std::vector<std::string> available(container.available_deviceids().begin(),
                                                   container.available_deviceids().end());
                std::vector<std::string> must(container.must_include_deviceids().begin(),
                                              container.must_include_deviceids().end());
                auto* out = response->add_container_responses();
                for (auto& id : inventory_.preferredAllocation(resource_, available, must,
                                                               container.allocation_size())) {
                    out->add_deviceids(std::move(id));
                }
            }
            return grpc::Status::OK;
        });
    }

    grpc::ServerUnaryReactor* PreStartContainer(grpc::CallbackServerContext* context,
                                                const v1beta1::PreStartContainerRequest*,
                                                v1beta1::PreStartContainerResponse*) override {
        auto* reactor = context->DefaultReactor();
        reactor->Finish(grpc::Status::OK);
        return reactor;
    }

    void publish(List list) {
        std::lock_guard lock(mutex_);
        latest_ = std::move(list);
        // A copy: a reaction run inline may remove a stream from the set.
        const std::vector<Watch*> watches(watches_.begin(), watches_.end());
        for (Watch* watch : watches) watch->push(latest_);
    }

    void stop() {
        std::lock_guard lock(mutex_);
        stopped_ = true;
        const std::vector<Watch*> watches(watches_.begin(), watches_.end());
        for (Watch* watch : watches) watch->finish(grpc::Status::OK);
        for (const auto& call : pending_) {
            if (call->claimed) continue;
            call->claimed = true;
            call->reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "device plugin is stopping"));
        }
        pending_.clear();
    }

private:
    // Runs `work` on the loop thread (the inventory lives there) and finishes the call with its status.
    template <typename Work>
    grpc::ServerUnaryReactor* onLoop(grpc::CallbackServerContext* context, Work work) {
        auto* reactor = context->DefaultReactor();
        auto call = std::make_shared<PendingCall>(PendingCall{reactor});
        {
            std::lock_guard lock(mutex_);
            if (stopped_) {
                reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "device plugin is stopping"));
                return reactor;
            }
            pending_.insert(call);
        }
        boost::asio::post(loop_, [self = shared_from_this(), call, work = std::move(work)]() mutable {
            {
                std::lock_guard lock(self->mutex_);
                if (call->claimed) return;
                call->claimed = true;
                self->pending_.erase(call);
            }
            grpc::Status status;
            try {
                status = work();
            } catch (const std::exception& e) {
                status = grpc::Status(grpc::StatusCode::INTERNAL, e.what());
            }
            call->reactor->Finish(status);
        });
        return reactor;
    }

    const std::string resource_;
    const bool preferred_;
    boost::asio::io_context& loop_;
    Inventory& inventory_;
    // Guards the stream set, the latest list, pending calls and every Watch's state.
    std::recursive_mutex mutex_;
    std::set<Watch*> watches_;
    std::set<std::shared_ptr<PendingCall>> pending_;
    List latest_;
    bool stopped_ = false;
};

DevicePluginServer::DevicePluginServer(std::string resource, bool preferredAllocation,
                                       boost::asio::io_context& loop, Inventory& inventory)
    : resource_(resource),
      service_(
          std::make_shared<DevicePluginService>(std::move(resource), preferredAllocation, loop, inventory)) {}

DevicePluginServer::~DevicePluginServer() {
    stop();
}

Outcome DevicePluginServer::start(const std::string& socketPath) {
    socketPath_ = socketPath;
    ::unlink(socketPath.c_str());
    grpc::ServerBuilder builder;
    // A node runs one plugin per device, each with one kubelet connection and one
    // long-lived stream: per-plugin memory is what counts. The kubelet sends small
    // requests on a local socket, so none of the optional filters, no channelz
    // bookkeeping and a small read buffer.
    builder.AddChannelArgument(GRPC_ARG_MINIMAL_STACK, 1);
    builder.AddChannelArgument(GRPC_ARG_ENABLE_CHANNELZ, 0);
    builder.AddChannelArgument(GRPC_ARG_TCP_READ_CHUNK_SIZE, 1024);
    builder.AddChannelArgument(GRPC_ARG_TCP_MIN_READ_CHUNK_SIZE, 256);
    builder.AddChannelArgument(GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, 1024);
    builder.AddListeningPort("unix:" + socketPath, grpc::InsecureServerCredentials());
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    if (!server_) return Outcome::failure("cannot serve " + resource_ + " on " + socketPath);
    return Outcome::ok();
}

void DevicePluginServer::stop() {
    if (!server_) return;
    service_->stop();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    server_.reset();
    ::unlink(socketPath_.c_str());
}

void DevicePluginServer::publish(const ResourceState& state) {
    const std::string encoded = encoder_.encode(state.devices);
    grpc::Slice slice(encoded.data(), encoded.size());
    service_->publish(std::make_shared<const grpc::ByteBuffer>(&slice, 1));
}

}  // namespace devlet::plugin
