#pragma once
// A gRPC client for a unix socket (the kubelet's Registration on kubelet.sock and its
// PodResources API): unary calls over one HTTP/2 connection (nghttp2) on the loop
// thread, made when a call needs it and again after the server hangs up. Replies run
// on the loop as work of their own, never inside a call to this class.

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "grpc/grpc_wire.h"

namespace boost::asio {
class io_context;  // NOLINT(readability-identifier-naming): Asio's name, declared to keep Asio out
}

namespace devlet::rpc {

class GrpcChannel {
public:
    using Reply = std::function<void(const GrpcStatus& status, const std::string& response)>;
    struct CallOptions {
        std::chrono::milliseconds timeout{3000};
        // Until the timeout, wait for the socket to accept a connection instead of failing
        // at once: the kubelet creates kubelet.sock a moment before it listens on it.
        bool waitForReady = false;
    };

    GrpcChannel(boost::asio::io_context& loop, std::string socketPath);
    // Calls still pending end without a reply.
    ~GrpcChannel();
    GrpcChannel(const GrpcChannel&) = delete;
    GrpcChannel& operator=(const GrpcChannel&) = delete;

    // Calls `method` ("/package.Service/Method") with a serialized request; `reply` runs
    // once, with the serialized response or the status that ended the call.
    void call(std::string method, std::string_view request, CallOptions options, Reply reply);
    const std::string& socketPath() const;

    // The connection and the calls, shared with asynchronous work that may outlive the
    // channel (defined in the .cpp).
    struct State;

private:
    std::shared_ptr<State> state_;  // with the loop thread's check
};

}  // namespace devlet::rpc
