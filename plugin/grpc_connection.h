#pragma once
// One kubelet connection to a device plugin: the server side of gRPC over HTTP/2
// (nghttp2) on a unix socket. Lives on the loop thread and answers there, so a
// plugin needs no threads of its own. It holds no buffers while the socket keeps
// up: one read buffer serves every connection on the loop, and output goes to the
// socket as nghttp2 produces it. A thousand plugins, each with one connection and
// one long-lived ListAndWatch stream, cost a few KiB each.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/local/stream_protocol.hpp>

struct nghttp2_session;

namespace devlet::plugin {

// gRPC status codes used here (the values are gRPC's).
enum class GrpcCode : int {
    Ok = 0,
    InvalidArgument = 3,
    FailedPrecondition = 9,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
    ResourceExhausted = 8,
};

struct GrpcStatus {
    GrpcCode code = GrpcCode::Ok;
    std::string message;
};

// One gRPC message as it goes on the wire (the 5-byte prefix, then the message), shared
// by every stream that sends it.
using GrpcFrame = std::shared_ptr<const std::string>;
GrpcFrame frameMessage(std::string_view message);

// grpc-message's value: bytes outside printable ASCII, and '%', percent-encoded.
std::string percentEncode(std::string_view text);

class GrpcConnection : public std::enable_shared_from_this<GrpcConnection> {
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

    // Largest request message accepted (gRPC's default receive limit).
    static constexpr std::size_t kMaxRequest = 4 * 1024 * 1024;

    GrpcConnection(boost::asio::local::stream_protocol::socket socket, Service& service);
    ~GrpcConnection();
    GrpcConnection(const GrpcConnection&) = delete;
    GrpcConnection& operator=(const GrpcConnection&) = delete;

    void start();

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
    bool closed() const { return closed_; }

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

    friend struct Http2Callbacks;  // nghttp2's callbacks, in the .cpp

    void requestComplete(std::int32_t stream);
    void submitResponse(std::int32_t stream, Stream& state);
    void resume(std::int32_t stream, Stream& state);
    void waitReadable();
    void onReadable();
    void flush();
    void waitWritable();
    void closeSocket();

    boost::asio::local::stream_protocol::socket socket_;
    Service* service_;
    nghttp2_session* session_ = nullptr;
    std::map<std::int32_t, Stream> streams_;
    std::string backlog_;  // output the socket did not take yet
    bool busy_ = false;    // inside nghttp2: output is flushed when it returns
    bool closed_ = false;
};

}  // namespace devlet::plugin
