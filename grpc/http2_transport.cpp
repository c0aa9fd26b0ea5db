#include "grpc/http2_transport.h"

#include <array>
#include <cstdint>

#include <nghttp2/nghttp2.h>

#include "runtime/log.h"

namespace devlet::rpc {

namespace {
constexpr Log log{"kubelet"};
// Output is gathered up to this size before a write: a 4,000-slot device list is
// about 110 KB in 16 KB DATA frames, written in two system calls rather than eight.
constexpr std::size_t kWriteChunk = std::size_t{64} * 1024;
// Reads per readiness, so one busy connection cannot starve the loop.
constexpr int kReadRounds = 16;

}  // namespace

bool Http2Transport::makeSession(bool server, const nghttp2_session_callbacks* callbacks,
                                 const nghttp2_option* option) {
    const int made = server ? nghttp2_session_server_new2(&session_, callbacks, this, option)
                            : nghttp2_session_client_new2(&session_, callbacks, this, option);
    return made == 0;
}

Http2Transport::Http2Transport(boost::asio::local::stream_protocol::socket socket)
    : socket_(std::move(socket)) {}

Http2Transport::~Http2Transport() {
    if (session_) nghttp2_session_del(session_);
}

void Http2Transport::run() {
    boost::system::error_code ec;
    socket_.non_blocking(true, ec);
    if (ec) {
        log.warning() << "cannot use a kubelet connection: " << ec.message();
        closeSocket();
        return;
    }
    flush();
    if (!closed_) waitReadable();
}

void Http2Transport::waitReadable() {
    socket_.async_wait(boost::asio::socket_base::wait_read,
                       [self = shared_from_this()](boost::system::error_code ec) {
                           if (!ec) self->onReadable();
                       });
}

void Http2Transport::onReadable() {
    if (closed_) return;
    // One buffer for every connection of the loop: nghttp2 copies what it keeps.
    thread_local std::array<std::uint8_t, std::size_t{64} * 1024> buffer;
    for (int round = 0; round < kReadRounds; ++round) {
        boost::system::error_code ec;
        const std::size_t n = socket_.read_some(boost::asio::buffer(buffer), ec);
        if (ec == boost::asio::error::would_block) break;
        if (ec) {  // end of file: the peer hung up
            log.debug() << "HTTP/2 connection: " << ec.message();
            closeSocket();
            return;
        }
        busy_ = true;
        const auto consumed = nghttp2_session_mem_recv(session_, buffer.data(), n);
        busy_ = false;
        if (closed_) return;
        if (consumed < 0) {
            log.debug() << "HTTP/2 connection: " << nghttp2_strerror(static_cast<int>(consumed));
            flush();  // the GOAWAY that says why, if it can still be written
            closeSocket();
            return;
        }
        if (n < buffer.size()) break;
    }
    flush();
    if (!closed_) waitReadable();
}

void Http2Transport::flush() {
    if (busy_ || closed_ || !session_ || !backlog_.empty()) return;
    thread_local std::string out;
    for (;;) {
        out.clear();
        bool more = true;
        busy_ = true;
        while (out.size() < kWriteChunk) {
            const std::uint8_t* data = nullptr;
            const auto n = nghttp2_session_mem_send(session_, &data);
            if (n < 0) {
                busy_ = false;
                log.debug() << "HTTP/2 connection: " << nghttp2_strerror(static_cast<int>(n));
                closeSocket();
                return;
            }
            if (n == 0) {
                more = false;
                break;
            }
            out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
        }
        busy_ = false;
        if (closed_) return;
        std::size_t written = 0;
        while (written < out.size()) {
            boost::system::error_code ec;
            written +=
                socket_.write_some(boost::asio::buffer(out.data() + written, out.size() - written), ec);
            if (ec == boost::asio::error::would_block) break;
            if (ec) {
                closeSocket();
                return;
            }
        }
        if (written < out.size()) {
            backlog_.assign(out, written);
            waitWritable();
            return;
        }
        if (!more) break;
    }
    if (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)) {
        log.debug() << "HTTP/2 connection: session over";
        closeSocket();
    }
}

void Http2Transport::waitWritable() {
    socket_.async_wait(
        boost::asio::socket_base::wait_write, [self = shared_from_this()](boost::system::error_code ec) {
            if (ec || self->closed_) return;
            std::string& backlog = self->backlog_;
            std::size_t written = 0;
            while (written < backlog.size()) {
                written += self->socket_.write_some(
                    boost::asio::buffer(backlog.data() + written, backlog.size() - written), ec);
                if (ec == boost::asio::error::would_block) break;
                if (ec) {
                    self->closeSocket();
                    return;
                }
            }
            backlog.erase(0, written);
            if (!backlog.empty()) {
                self->waitWritable();
                return;
            }
            std::string().swap(backlog);  // an idle connection keeps no buffer
            self->flush();
        });
}

void Http2Transport::closeSocket() {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ec;
    socket_.close(ec);
    std::string().swap(backlog_);
    onClosed();
}

}  // namespace devlet::rpc
