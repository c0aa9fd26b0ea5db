// Fuzz target: what a kubelet (or anything that can reach a plugin's socket) writes to a
// device plugin: raw bytes into a GrpcConnection, the server side of gRPC over HTTP/2,
// through a socketpair on an io_context. The service answers as DevicePluginServer does:
// options, ListAndWatch streams fed with device lists, Allocate and
// GetPreferredAllocation from the requests' device ids, statuses for the rest. Once the
// input is read, the service publishes a new list to every open stream (one larger than
// the flow-control window), ends one, and the client half-closes.
// Checked: the connection's calls to its service keep the contract in its header
// (streams it never dispatched are not closed, nothing comes after onDisconnected).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/write.hpp>
#include <sys/socket.h>

#include "deviceplugin/v1beta1/api.pb.h"
#include "grpc/grpc_connection.h"

namespace {

namespace asio = boost::asio;
using asio::local::stream_protocol;
using namespace devlet::rpc;

constexpr std::string_view kService = "/v1beta1.DevicePlugin/";

[[noreturn]] void broken(const std::string& what) {
    std::cerr << "broken promise: " << what << "\n";
    std::abort();
}

std::string deviceList(int devices) {
    v1beta1::ListAndWatchResponse response;
    for (int i = 0; i < devices; ++i) {
        auto* device = response.add_devices();
        device->set_id("cams-4294ea-" + std::to_string(i));
        device->set_health(i % 3 ? "Healthy" : "Unhealthy");
    }
    return response.SerializeAsString();
}

// Made once per size: a 4,000-slot list takes a while to build.
GrpcFrame list(int devices) {
    static std::map<int, GrpcFrame> made;
    GrpcFrame& frame = made[devices];
    if (!frame) frame = frameMessage(deviceList(devices));
    return frame;
}

class PluginLikeService : public GrpcConnection::Service {
public:
    void onCall(GrpcConnection& connection, std::int32_t stream, std::string_view method,
                std::string_view request) override {
        if (disconnected) broken("onCall after onDisconnected");
        if (!dispatched.insert(stream).second) broken("onCall twice for one stream");
        const std::string_view name =
            method.starts_with(kService) ? method.substr(kService.size()) : std::string_view();
        if (name == "ListAndWatch") {
            connection.beginStream(stream);
            connection.sendLatest(stream, list(4));
            watches.push_back(stream);
        } else if (name == "GetDevicePluginOptions") {
            v1beta1::DevicePluginOptions options;
            options.set_get_preferred_allocation_available(true);
            connection.reply(stream, options.SerializeAsString());
        } else if (name == "Allocate") {
            v1beta1::AllocateRequest in;
            if (!in.ParseFromArray(request.data(), static_cast<int>(request.size()))) {
                connection.fail(stream, {GrpcCode::InvalidArgument, "malformed AllocateRequest"});
                return;
            }
            v1beta1::AllocateResponse out;
            for (const auto& container : in.container_requests()) {
                auto* response = out.add_container_responses();
                for (const auto& id : container.devices_ids()) {
                    if (!id.starts_with("cams-4294ea-")) {
                        // The refusal names the id, as the inventory's do: hostile bytes in a status.
                        connection.fail(stream,
                                        {GrpcCode::FailedPrecondition, "slot " + id + " is not offered"});
                        return;
                    }
                    (*response->mutable_envs())["ONVIF_DEVICE_UUID_" + id] = id;
                }
            }
            connection.reply(stream, out.SerializeAsString());
        } else if (name == "GetPreferredAllocation") {
            v1beta1::PreferredAllocationRequest in;
            if (!in.ParseFromArray(request.data(), static_cast<int>(request.size()))) {
                connection.fail(stream, {GrpcCode::InvalidArgument, "malformed PreferredAllocationRequest"});
                return;
            }
            v1beta1::PreferredAllocationResponse out;
            for (const auto& container : in.container_requests()) {
                auto* chosen = out.add_container_responses();
                for (int i = 0; i < container.available_deviceids_size() && i < container.allocation_size();
                     ++i)
                    chosen->add_deviceids(container.available_deviceids(i));
            }
            connection.reply(stream, out.SerializeAsString());
        } else if (name == "PreStartContainer") {
            connection.reply(stream, "");
        } else {
            connection.fail(stream, {GrpcCode::Unimplemented, "unknown method " + std::string(method)});
        }
    }

    void onStreamClosed(GrpcConnection&, std::int32_t stream) override {
        if (disconnected) broken("onStreamClosed after onDisconnected");
        if (!dispatched.count(stream)) broken("onStreamClosed for a stream onCall never saw");
        if (!closed.insert(stream).second) broken("onStreamClosed twice for one stream");
        std::erase(watches, stream);
    }

    void onDisconnected(GrpcConnection&) override {
        if (disconnected) broken("onDisconnected twice");
        disconnected = true;
        watches.clear();
    }

    std::set<std::int32_t> dispatched, closed;
    std::vector<std::int32_t> watches;
    bool disconnected = false;
};

// Runs what is ready until nothing is.
void settle(asio::io_context& loop) {
    loop.restart();
    while (loop.poll() > 0) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static asio::io_context loop;
    stream_protocol::socket client(loop), server(loop);
    asio::local::connect_pair(client, server);
    PluginLikeService service;
    auto connection = std::make_shared<GrpcConnection>(std::move(server), service);
    connection->start();

    // The client reads whatever the server says and drops it, so the server never blocks.
    auto sink = std::make_shared<std::vector<char>>(64 * 1024);
    std::function<void()> readMore = [&] {
        client.async_read_some(asio::buffer(*sink), [&, sink](boost::system::error_code ec, std::size_t) {
            if (!ec) readMore();
        });
    };
    readMore();
    asio::async_write(client, asio::buffer(data, size), [](boost::system::error_code, std::size_t) {});
    settle(loop);

    // The server's turn: a newer list for every stream (the second one far larger than
    // HTTP/2's initial window), then the first stream ends.
    const std::vector<std::int32_t> watches = service.watches;
    for (const std::int32_t stream : watches) connection->sendLatest(stream, list(8));
    for (const std::int32_t stream : watches) connection->sendLatest(stream, list(4000));
    if (!watches.empty()) connection->endStream(watches.front(), {GrpcCode::Ok, ""});
    settle(loop);

    boost::system::error_code ec;
    client.shutdown(stream_protocol::socket::shutdown_send, ec);
    settle(loop);
    connection->close();
    client.close(ec);
    settle(loop);
    if (!connection->closed()) broken("the connection is open after close()");
    return 0;
}
