#pragma once
// One client's connection to a gRPC server: the server side of gRPC over HTTP/2
// (nghttp2) on a unix socket (the kubelet's connection to a device plugin). Lives on
// the loop thread and answers there, so a server needs no threads of its own; a
// thousand device plugins, each with one connection and one long-lived ListAndWatch
// stream, cost a few KiB each.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "grpc/grpc_wire.h"
#include "grpc/http2_transport.h"
#include "runtime/thread_bound.h"

namespace devlet::rpc {

class GrpcConnection : public Http2Transport {
public:
    // What the connection asks of its server; called on the loop thread, never after close().
    class Service {
    public:
        virtual ~Service() = default;
        // A call's request arrived whole (the client half-closed its side). Answer with
        // reply() or fail(), now or later, or open a server stream with beginStream().
        virtual void onCall(GrpcConnection& connection, std::int32_t stream, std::string_view method,
                            std::string_view request) = 0;
        // A stream that onCall saw has ended (answered, cancelled, or reset by the client).
        virtual void onStreamClosed(GrpcConnection& connection, std::int32_t stream) = 0;
        // The connection is gone; its streams are over.
        virtual void onDisconnected(GrpcConnection& connection) = 0;
    };

    GrpcConnection(boost::asio::local::stream_protocol::socket socket, Service& service);

    void start();

    // Whether a call is still waiting for its answer (not answered, cancelled or reset):
    // an answer given later, after other work, checks first.
    bool awaiting(std::int32_t stream) const;

    // Unary answers: one message and status OK, or a status without a message.
    void reply(std::int32_t stream, std::string_view message);
    void fail(std::int32_t stream, const GrpcStatus& status);

    // Server streams: response headers now, then messages. A message that has not begun
    // to go out is replaced by a newer one: a device list supersedes the one before.
    void beginStream(std::int32_t stream);
    void sendLatest(std::int32_t stream, GrpcFrame frame);
    void endStream(std::int32_t stream, const GrpcStatus& status);

    // Ends the connection: GOAWAY, what can be written now, then the socket closes. The
    // service hears nothing more from it.
    void close();

private:
    struct Stream {
        std::string method;
        std::string request;
        bool grpcRequest = false;  // POST with content-type application/grpc
        bool compressed = false;   // grpc-encoding other than identity
        bool tooLarge = false;
        bool dispatched = false;  // the service saw it
        bool responding = false;  // response headers submitted with a data source
        bool deferred = false;    // the data source waits for a message
        bool ending = false;      // trailers follow the last message
        GrpcStatus trailer;
        GrpcFrame current;
        std::size_t offset = 0;
        GrpcFrame next;
    };

    friend struct ServerCallbacks;  // nghttp2's callbacks, in the .cpp

    void requestComplete(std::int32_t stream) REQUIRES(loopThread_);
    void submitResponse(std::int32_t stream, Stream& state) REQUIRES(loopThread_);
    void resume(std::int32_t stream, Stream& state) REQUIRES(loopThread_);
    void onClosed() override;

    ThreadBound loopThread_;
    Service* service_ GUARDED_BY(loopThread_);
    std::map<std::int32_t, Stream> streams_ GUARDED_BY(loopThread_);
};

}  // namespace devlet::rpc
