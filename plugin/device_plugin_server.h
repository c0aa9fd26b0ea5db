#pragma once
// One kubelet device plugin: a listening unix socket of its own serving one
// resource's GetDevicePluginOptions, ListAndWatch, Allocate, GetPreferredAllocation
// and PreStartContainer over gRPC (GrpcConnection). Everything runs on the loop
// thread, where the SlotArbiter decides: an Allocate is answered in the same turn of
// the loop that read it, with no thread handoff (in cluster mode, one naming slots of a
// shared device once cluster mode has taken them).

#include <memory>
#include <string>
#include <vector>

#include <boost/asio/local/stream_protocol.hpp>

#include "grpc/grpc_connection.h"
#include "runtime/inventory.h"
#include "runtime/lifetime.h"
#include "runtime/outcome.h"
#include "runtime/slot_arbiter.h"
#include "runtime/thread_bound.h"

namespace boost::asio {
class io_context;
}

namespace devlet::plugin {

class DevicePluginServer : private rpc::GrpcConnection::Service {
public:
    DevicePluginServer(std::string resource, bool preferredAllocation, boost::asio::io_context& loop,
                       Inventory& inventory, SlotArbiter& arbiter);
    ~DevicePluginServer() override;
    DevicePluginServer(const DevicePluginServer&) = delete;
    DevicePluginServer& operator=(const DevicePluginServer&) = delete;

    // Serves on socketPath (a fresh file name per registration).
    Outcome start(const std::string& socketPath);
    // Ends every ListAndWatch stream, closes the connections, removes the socket.
    void stop();
    // Sends the full device list (a framed ListAndWatchResponse) to every ListAndWatch
    // stream now and to later ones.
    void publish(rpc::GrpcFrame list);

    const std::string& socketPath() const { return socketPath_; }
    const std::string& resource() const { return resource_; }

private:
    struct Watch {
        rpc::GrpcConnection* connection;
        std::int32_t stream;
    };

    void accept();
    void onCall(rpc::GrpcConnection& connection, std::int32_t stream, std::string_view method,
                std::string_view request) override;
    void onStreamClosed(rpc::GrpcConnection& connection, std::int32_t stream) override;
    void onDisconnected(rpc::GrpcConnection& connection) override;
    // Parses the call, asks the arbiter, and answers when it has decided (at once, or in
    // cluster mode once the slot Leases of shared devices are taken).
    void allocate(rpc::GrpcConnection& connection, std::int32_t stream, std::string_view request);
    rpc::GrpcStatus preferredAllocation(std::string_view request, std::string& response) const;
    void dropClosedConnections();

    std::string resource_;
    bool preferred_;
    boost::asio::io_context& loop_;
    Inventory& inventory_;
    SlotArbiter& arbiter_;
    std::string socketPath_;
    rpc::GrpcFrame latest_;
    std::unique_ptr<boost::asio::local::stream_protocol::acceptor> acceptor_;
    std::vector<std::shared_ptr<rpc::GrpcConnection>> connections_;  // the kubelet's, usually one
    std::vector<Watch> watches_;
    // Accept handlers and answers that complete after the server is gone find it ended.
    Lifetime lifetime_;
    ThreadBound loopThread_;
};

}  // namespace devlet::plugin
