#include "plugin/pod_resources_client.h"

#include <filesystem>
#include <limits>

#include "grpc/grpc_channel.h"
#include "podresources/v1/api.pb.h"

namespace devlet::plugin {

bool readHeldDevices(std::string_view response, std::vector<PodDevice>& held) {
    v1::ListPodResourcesResponse list;
    if (response.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
        !list.ParseFromArray(response.data(), static_cast<int>(response.size())))
        return false;
    for (const v1::PodResources& pod : list.pod_resources()) {
        for (const v1::ContainerResources& container : pod.containers()) {
            for (const v1::ContainerDevices& devices : container.devices()) {
                for (const std::string& id : devices.device_ids())
                    held.push_back({devices.resource_name(), id, pod.name(), pod.namespace_(), {}});
            }
        }
    }
    return true;
}

PodResourcesClient::PodResourcesClient(boost::asio::io_context& loop, std::string socketPath,
                                       std::chrono::milliseconds interval, ListHandler onList,
                                       ErrorHandler onError)
    : loop_(loop),
      socketPath_(std::move(socketPath)),
      interval_(interval),
      onList_(std::move(onList)),
      onError_(std::move(onError)),
      timer_(loop) {}

PodResourcesClient::~PodResourcesClient() {
    loopThread_.release();
    lifetime_.end();
    stop();
}

void PodResourcesClient::start() {
    loopThread_.check();
    schedule(std::chrono::milliseconds(0));
}

void PodResourcesClient::stop() {
    loopThread_.check();
    timer_.cancel();
}

void PodResourcesClient::schedule(std::chrono::milliseconds delay) {
    timer_.expires_after(delay);
    timer_.async_wait([this](boost::system::error_code ec) {
        if (!ec) poll();
    });
}

void PodResourcesClient::poll() {
    schedule(interval_);
    if (inFlight_) return;
    std::error_code exists;
    if (!std::filesystem::exists(socketPath_, exists)) {
        channel_.reset();
        onError_("no PodResources API at " + socketPath_);
        return;
    }
    if (!channel_) channel_ = std::make_unique<rpc::GrpcChannel>(loop_, socketPath_);
    inFlight_ = true;
    channel_->call(
        "/v1.PodResourcesLister/List", v1::ListPodResourcesRequest().SerializeAsString(),
        {.timeout = std::chrono::seconds(3)},
        lifetime_.guard([this](const rpc::GrpcStatus& status, const std::string& bytes) {
            inFlight_ = false;
            if (!status.ok()) {
                // A fresh connection next time: a restarted kubelet has a new socket.
                channel_.reset();
                onError_("PodResources List at " + socketPath_ + " failed: " + status.message);
                return;
            }
            std::vector<PodDevice> held;
            if (!readHeldDevices(bytes, held)) {
                onError_("PodResources List at " + socketPath_ + " answered something that is not a list");
                return;
            }
            onList_(std::move(held));
        }));
}

}  // namespace devlet::plugin
