#include "grpc/grpc_channel.h"

#include <algorithm>
#include <cstring>
#include <list>
#include <map>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nghttp2/nghttp2.h>

#include "grpc/http2_transport.h"
#include "runtime/log.h"
#include "runtime/thread_bound.h"

namespace devlet::rpc {

namespace {
constexpr Log log{"kubelet"};
constexpr auto kFirstRetry = std::chrono::milliseconds(10);
constexpr auto kLastRetry = std::chrono::milliseconds(500);

nghttp2_nv nv(std::string_view name, std::string_view value) {
    nghttp2_nv header;
    header.name = reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data()));
    header.value = reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data()));
    header.namelen = name.size();
    header.valuelen = value.size();
    header.flags = NGHTTP2_NV_FLAG_NO_COPY_NAME;
    return header;
}
}  // namespace

struct Call {
    std::string method;
    GrpcFrame request;
    std::size_t sent = 0;
    GrpcChannel::Reply reply;
    bool waitForReady = false;
    std::unique_ptr<boost::asio::steady_timer> deadline;
    std::int32_t stream = 0;  // once submitted
    bool done = false;
    // The response as it arrives.
    bool sawStatus = false;
    GrpcStatus status;
    std::string httpStatus;
    std::string body;
    bool tooLarge = false;
};

class ClientConnection;

// The channel is the only owner of its State. Asynchronous work (the connect, the retry
// timer, a deadline, the connection's callbacks, a posted reply) holds a weak reference, so
// once the channel is gone none of it runs; replies are always posted, never called from
// the channel's own code, so a reply that destroys the channel cannot pull the State from
// under a running handler.
struct GrpcChannel::State : std::enable_shared_from_this<GrpcChannel::State> {
    State(boost::asio::io_context& loop, std::string path) : loop(loop), path(std::move(path)), retry(loop) {}

    boost::asio::io_context& loop;
    std::string path;
    ThreadBound loopThread;
    std::list<std::shared_ptr<Call>> calls GUARDED_BY(loopThread);  // not yet answered
    std::shared_ptr<ClientConnection> connection GUARDED_BY(loopThread);
    bool connecting GUARDED_BY(loopThread) = false;
    boost::asio::steady_timer retry;
    std::chrono::milliseconds backoff GUARDED_BY(loopThread) = kFirstRetry;

    void connect() REQUIRES(loopThread);
    void submitWaiting() REQUIRES(loopThread);
    void finish(const std::shared_ptr<Call>& call, GrpcStatus status, std::string response = {})
        REQUIRES(loopThread);
};

// One connection to the server; its calls go back to the State when they end.
class ClientConnection : public Http2Transport {
public:
    ClientConnection(boost::asio::local::stream_protocol::socket socket,
                     std::weak_ptr<GrpcChannel::State> state)
        : Http2Transport(std::move(socket)), state_(std::move(state)) {}

    bool start();
    void submit(const std::shared_ptr<Call>& call) REQUIRES(loopThread_);
    void cancel(const Call& call) REQUIRES(loopThread_);
    // Hangs up without reporting anything: the channel is going away.
    void abandon() REQUIRES(loopThread_);

    // The channel's loop thread: the connection lives there with it.
    const ThreadBound& loopThread() const RETURN_CAPABILITY(loopThread_) { return loopThread_; }

private:
    friend struct ClientCallbacks;
    void onClosed() override;
    void complete(std::int32_t stream, std::uint32_t error) REQUIRES(loopThread_);

    ThreadBound loopThread_;
    std::weak_ptr<GrpcChannel::State> state_;
    std::map<std::int32_t, std::shared_ptr<Call>> streams_ GUARDED_BY(loopThread_);
};

struct ClientCallbacks {
    static ClientConnection& of(void* self) {
        return static_cast<ClientConnection&>(*static_cast<Http2Transport*>(self));
    }
    static Call* callOf(void* self, std::int32_t stream) {
        ClientConnection& connection = of(self);
        connection.loopThread_.check();
        auto& streams = connection.streams_;
        auto it = streams.find(stream);
        return it == streams.end() ? nullptr : it->second.get();
    }

    static int header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
                      std::size_t nameLength, const std::uint8_t* value, std::size_t valueLength,
                      std::uint8_t, void* self) {
        Call* call = callOf(self, frame->hd.stream_id);
        if (!call || frame->hd.type != NGHTTP2_HEADERS) return 0;
        const std::string_view key(reinterpret_cast<const char*>(name), nameLength);
        const std::string_view text(reinterpret_cast<const char*>(value), valueLength);
        if (key == ":status") {
            call->httpStatus = text;
        } else if (key == "grpc-status") {
            call->sawStatus = true;
            call->status.code = parseGrpcCode(text);
        } else if (key == "grpc-message") {
            call->status.message = percentDecode(text);
        }
        return 0;
    }

    static int dataChunk(nghttp2_session*, std::uint8_t, std::int32_t stream, const std::uint8_t* data,
                         std::size_t length, void* self) {
        Call* call = callOf(self, stream);
        if (!call || call->tooLarge) return 0;
        if (call->body.size() + length > kMaxGrpcMessage + 5) {
            call->tooLarge = true;
            std::string().swap(call->body);
            return 0;
        }
        call->body.append(reinterpret_cast<const char*>(data), length);
        return 0;
    }

    static int frame(nghttp2_session*, const nghttp2_frame* frame, void*) {
        if (frame->hd.type == NGHTTP2_GOAWAY) {
            log.debug() << "GOAWAY from the server: " << nghttp2_http2_strerror(frame->goaway.error_code)
                        << " "
                        << std::string_view(reinterpret_cast<const char*>(frame->goaway.opaque_data),
                                            frame->goaway.opaque_data_len);
        }
        return 0;
    }

    static int streamClose(nghttp2_session*, std::int32_t stream, std::uint32_t error, void* self) {
        ClientConnection& connection = of(self);
        connection.loopThread_.check();
        connection.complete(stream, error);
        return 0;
    }

    static ssize_t readRequest(nghttp2_session*, std::int32_t stream, std::uint8_t* buffer,
                               std::size_t length, std::uint32_t* flags, nghttp2_data_source*, void* self) {
        Call* call = callOf(self, stream);
        if (!call) {
            *flags |= NGHTTP2_DATA_FLAG_EOF;
            return 0;
        }
        const std::size_t n = std::min(length, call->request->size() - call->sent);
        std::copy_n(call->request->data() + call->sent, n, buffer);
        call->sent += n;
        if (call->sent == call->request->size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
        return static_cast<ssize_t>(n);
    }

    static const nghttp2_session_callbacks* callbacks() {
        static nghttp2_session_callbacks* made = [] {
            nghttp2_session_callbacks* c = nullptr;
            nghttp2_session_callbacks_new(&c);
            nghttp2_session_callbacks_set_on_header_callback(c, header);
            nghttp2_session_callbacks_set_on_data_chunk_recv_callback(c, dataChunk);
            nghttp2_session_callbacks_set_on_stream_close_callback(c, streamClose);
            nghttp2_session_callbacks_set_on_frame_recv_callback(c, frame);
            nghttp2_session_callbacks_set_error_callback2(
                c, [](nghttp2_session*, int code, const char* message, std::size_t length, void*) {
                    log.debug() << "HTTP/2: " << nghttp2_strerror(code) << ": "
                                << std::string_view(message, length);
                    return 0;
                });
            return c;
        }();
        return made;
    }
};

bool ClientConnection::start() {
    if (!makeSession(false, ClientCallbacks::callbacks(), nullptr)) return false;
    // The compression table stays at HTTP/2's default: a smaller one needs the server's
    // encoder to shrink its table at exactly the right moment, and gRPC C++'s does not
    // always (nghttp2 then rightly ends the connection with COMPRESSION_ERROR).
    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
    };
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
    run();
    return !closed();
}

void ClientConnection::submit(const std::shared_ptr<Call>& call) {
    const nghttp2_nv headers[] = {
        nv(":method", "POST"),
        nv(":scheme", "http"),
        nv(":path", call->method),
        nv(":authority", "localhost"),
        nv("content-type", "application/grpc"),
        nv("te", "trailers"),
    };
    nghttp2_data_provider body{};
    body.read_callback = ClientCallbacks::readRequest;
    const std::int32_t stream =
        nghttp2_submit_request(session_, nullptr, headers, std::size(headers), &body, nullptr);
    if (stream < 0) {
        if (auto state = state_.lock()) {
            state->loopThread.check();
            state->finish(call, {GrpcCode::Internal, nghttp2_strerror(stream)});
        }
        return;
    }
    call->stream = stream;
    call->sent = 0;
    streams_[stream] = call;
    flush();
}

void ClientConnection::cancel(const Call& call) {
    if (closed() || call.stream <= 0) return;
    streams_.erase(call.stream);
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, call.stream, NGHTTP2_CANCEL);
    flush();
}

void ClientConnection::complete(std::int32_t stream, std::uint32_t error) {
    auto it = streams_.find(stream);
    if (it == streams_.end()) return;
    const std::shared_ptr<Call> call = std::move(it->second);
    streams_.erase(it);
    auto state = state_.lock();
    if (!state) return;
    state->loopThread.check();
    if (call->sawStatus && call->status.code != GrpcCode::Ok) {
        state->finish(call, call->status);
    } else if (call->sawStatus) {
        if (call->tooLarge) {
            state->finish(call, {GrpcCode::ResourceExhausted, "response larger than 4 MiB"});
            return;
        }
        const auto message = singleMessage(call->body);
        if (const auto* problem = std::get_if<GrpcStatus>(&message)) {
            state->finish(call, *problem);
        } else {
            state->finish(call, {}, std::string(std::get<std::string_view>(message)));
        }
    } else if (error != NGHTTP2_NO_ERROR) {
        state->finish(call,
                      {GrpcCode::Unavailable, std::string("stream reset: ") + nghttp2_http2_strerror(error)});
    } else {
        state->finish(call,
                      {GrpcCode::Unknown, "answer without a gRPC status (HTTP status " +
                                              (call->httpStatus.empty() ? "none" : call->httpStatus) + ")"});
    }
}

void ClientConnection::abandon() {
    state_.reset();
    streams_.clear();
    if (!closed()) closeSocket();
}

void ClientConnection::onClosed() {
    loopThread_.check();
    auto state = state_.lock();
    auto streams = std::move(streams_);
    streams_.clear();
    if (!state) return;
    state->loopThread.check();
    for (auto& [stream, call] : streams)
        state->finish(call, {GrpcCode::Unavailable, "connection to " + state->path + " closed"});
    // Calls made meanwhile go out on a new connection.
    const bool waiting = std::any_of(state->calls.begin(), state->calls.end(),
                                     [](const auto& call) { return call->stream == 0; });
    if (waiting) state->connect();
}

void GrpcChannel::State::connect() {
    if (connecting) return;
    connecting = true;
    auto socket = std::make_shared<boost::asio::local::stream_protocol::socket>(loop);
    socket->async_connect(
        boost::asio::local::stream_protocol::endpoint(path),
        [weak = weak_from_this(), socket](boost::system::error_code ec) {
            auto self = weak.lock();
            if (!self) return;
            self->loopThread.check();
            self->connecting = false;
            if (!ec) {
                auto connection = std::make_shared<ClientConnection>(std::move(*socket), weak);
                if (connection->start()) {
                    self->connection = std::move(connection);
                    self->backoff = kFirstRetry;
                    self->submitWaiting();
                    return;
                }
                ec = boost::asio::error::connection_aborted;
            }
            // No server there (yet): calls that may wait, wait and retry.
            const std::string why = "cannot connect to " + self->path + ": " + ec.message();
            bool waiting = false;
            for (const auto& call : std::list(self->calls)) {
                if (call->stream != 0) continue;
                if (call->waitForReady) {
                    waiting = true;
                } else {
                    self->finish(call, {GrpcCode::Unavailable, why});
                }
            }
            if (!waiting) return;
            self->retry.expires_after(self->backoff);
            self->backoff = std::min(self->backoff * 2, std::chrono::milliseconds(kLastRetry));
            self->retry.async_wait([weak](boost::system::error_code waited) {
                auto again = weak.lock();
                if (waited || !again) return;
                again->loopThread.check();
                again->connect();
            });
        });
}

void GrpcChannel::State::submitWaiting() {
    for (const auto& call : std::list(calls)) {
        if (call->stream == 0 && !call->done && connection && !connection->closed()) {
            connection->loopThread().check();
            connection->submit(call);
        }
    }
}

void GrpcChannel::State::finish(const std::shared_ptr<Call>& call, GrpcStatus status, std::string response) {
    if (call->done) return;
    call->done = true;
    if (call->deadline) call->deadline->cancel();
    calls.remove(call);
    boost::asio::post(loop, [weak = weak_from_this(), reply = std::move(call->reply),
                             status = std::move(status), response = std::move(response)] {
        auto self = weak.lock();
        if (!self) return;
        self->loopThread.check();
        reply(status, response);
    });
}

GrpcChannel::GrpcChannel(boost::asio::io_context& loop, std::string socketPath)
    : state_(std::make_shared<State>(loop, std::move(socketPath))) {}

GrpcChannel::~GrpcChannel() {
    state_->retry.cancel();
    for (const auto& call : state_->calls) {
        if (call->deadline) call->deadline->cancel();
    }
    state_->calls.clear();
    if (state_->connection) {
        auto connection = std::move(state_->connection);
        connection->abandon();
    }
}

const std::string& GrpcChannel::socketPath() const {
    return state_->path;
}

void GrpcChannel::call(std::string method, std::string_view request, CallOptions options, Reply reply) {
    state_->loopThread.check();
    auto call = std::make_shared<Call>();
    call->method = std::move(method);
    call->request = frameMessage(request);
    call->reply = std::move(reply);
    call->waitForReady = options.waitForReady;
    call->deadline = std::make_unique<boost::asio::steady_timer>(state_->loop, options.timeout);
    call->deadline->async_wait([weak = std::weak_ptr(state_),
                                weakCall = std::weak_ptr(call)](boost::system::error_code ec) {
        auto state = weak.lock();
        auto expired = weakCall.lock();
        if (ec || !state || !expired) return;
        state->loopThread.check();
        if (expired->done) return;
        if (state->connection) {
            state->connection->loopThread().check();
            state->connection->cancel(*expired);
        }
        state->finish(expired, {GrpcCode::DeadlineExceeded, "no answer from " + state->path + " in time"});
    });
    state_->calls.push_back(call);
    if (state_->connection && !state_->connection->closed()) {
        state_->connection->loopThread().check();
        state_->connection->submit(call);
    } else {
        state_->connection.reset();
        state_->connect();
    }
}

}  // namespace devlet::rpc
