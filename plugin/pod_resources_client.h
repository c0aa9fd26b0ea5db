#pragma once
// Asks the kubelet's PodResources API which pods hold which devices, every few
// seconds; the answer goes to the loop thread. A missing or failing API is
// reported, never taken as "no pods" (that would free held slots).

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include "runtime/kubelet_evidence.h"
#include "runtime/lifetime.h"
#include "runtime/thread_bound.h"

namespace devlet::rpc {
class GrpcChannel;
}

namespace devlet::plugin {

// The devices a serialized ListPodResourcesResponse reports held, appended to `held`;
// false if the bytes are not such a message (protobuf's lite parser decides).
bool readHeldDevices(std::string_view response, std::vector<PodDevice>& held);

class PodResourcesClient {
public:
    using ListHandler = std::function<void(std::vector<PodDevice>)>;
    using ErrorHandler = std::function<void(const std::string& error)>;

    PodResourcesClient(boost::asio::io_context& loop, std::string socketPath,
                       std::chrono::milliseconds interval, ListHandler onList, ErrorHandler onError);
    ~PodResourcesClient();

    void start();
    void stop();
    const std::string& socketPath() const { return socketPath_; }

private:
    void schedule(std::chrono::milliseconds delay);
    void poll();

    boost::asio::io_context& loop_;
    std::string socketPath_;
    std::chrono::milliseconds interval_;
    ListHandler onList_;
    ErrorHandler onError_;
    boost::asio::steady_timer timer_;
    std::unique_ptr<rpc::GrpcChannel> channel_;
    bool inFlight_ = false;
    Lifetime lifetime_;
    ThreadBound loopThread_;
};

}  // namespace devlet::plugin
