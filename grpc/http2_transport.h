#pragma once
// An HTTP/2 connection on a unix socket, driven by nghttp2 on the loop thread. It
// reads into one buffer shared by every connection of the loop, writes nghttp2's
// output as soon as it is there and keeps a backlog only while the socket is full, so
// an idle connection holds nothing but nghttp2's session. The server and the client
// side of gRPC (GrpcConnection, GrpcChannel) build on it with their own callbacks.

#include <memory>
#include <string>

#include <boost/asio/local/stream_protocol.hpp>

struct nghttp2_session;
struct nghttp2_session_callbacks;
struct nghttp2_option;

namespace devlet::rpc {

class Http2Transport : public std::enable_shared_from_this<Http2Transport> {
public:
    explicit Http2Transport(boost::asio::local::stream_protocol::socket socket);
    virtual ~Http2Transport();
    Http2Transport(const Http2Transport&) = delete;
    Http2Transport& operator=(const Http2Transport&) = delete;

    bool closed() const { return closed_; }

protected:
    // Sends what the session has queued and starts reading; session_ is made by then.
    void run();
    // Writes what nghttp2 has to send. Inside nghttp2's own calls (busy_) it does
    // nothing: the caller that entered nghttp2 flushes when it returns.
    void flush();
    // Closes the socket and calls onClosed() once; the session stays until destruction
    // (nghttp2 may be on the stack).
    void closeSocket();
    virtual void onClosed() = 0;

    // Makes session_ with this connection as nghttp2's user data; false when out of memory.
    bool makeSession(bool server, const nghttp2_session_callbacks* callbacks, const nghttp2_option* option);

    boost::asio::local::stream_protocol::socket socket_;
    nghttp2_session* session_ = nullptr;
    bool busy_ = false;

private:
    void waitReadable();
    void onReadable();
    void waitWritable();

    std::string backlog_;  // output the socket did not take yet
    bool closed_ = false;
};

}  // namespace devlet::rpc
