#include "plugin/pod_resources_client.h"

#include <filesystem>

#include <boost/asio/post.hpp>
#include <grpcpp/grpcpp.h>

#include "podresources/v1/api.grpc.pb.h"

namespace devlet::plugin {

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
    *alive_ = false;
    stop();
}

void PodResourcesClient::start() {
    schedule(std::chrono::milliseconds(0));
}

void PodResourcesClient::stop() {
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
    if (!channel_)
        channel_ = grpc::CreateChannel("unix://" + socketPath_, grpc::InsecureChannelCredentials());

    struct Call {
        grpc::ClientContext context;
        v1::ListPodResourcesRequest request;
        v1::ListPodResourcesResponse response;
        std::unique_ptr<v1::PodResourcesLister::Stub> stub;
    };
    auto call = std::make_shared<Call>();
    call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    call->stub = v1::PodResourcesLister::NewStub(channel_);
    inFlight_ = true;
    call->stub->async()->List(
        &call->context, &call->request, &call->response,
        [this, &loop = loop_, call, alive = alive_](grpc::Status status) {
            boost::asio::post(loop, [this, call, alive, status] {
                if (!*alive) return;
                inFlight_ = false;
                if (!status.ok()) {
                    // A fresh channel next time: a restarted kubelet has a new socket and
                    // the old channel would wait out its reconnect backoff.
                    channel_.reset();
                    onError_("PodResources List at " + socketPath_ + " failed: " + status.error_message());
                    return;
                }
                std::vector<PodDevice> held;
                for (const auto& pod : call->response.pod_resources()) {
                    for (const auto& container : pod.containers()) {
                        for (const auto& devices : container.devices()) {
                            for (const auto& id : devices.device_ids()) {
                                held.push_back({devices.resource_name(), id, pod.name(), pod.namespace_()});
                            }
                        }
                    }
                }
                onList_(std::move(held));
            });
        });
}

}  // namespace devlet::plugin
