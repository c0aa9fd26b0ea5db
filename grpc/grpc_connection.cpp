#include "grpc/grpc_connection.h"

#include <algorithm>
#include <array>
#include <cstring>

#include <nghttp2/nghttp2.h>

#include "runtime/log.h"

namespace devlet::rpc {

namespace {
constexpr Log log{"plugin"};
// The kubelet keeps one ListAndWatch stream and makes one call at a time per plugin.
constexpr std::uint32_t kMaxConcurrentStreams = 16;

nghttp2_nv nv(std::string_view name, std::string_view value, bool copyValue = false) {
    nghttp2_nv nv;
    nv.name = reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data()));
    nv.value = reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data()));
    nv.namelen = name.size();
    nv.valuelen = value.size();
    nv.flags = NGHTTP2_NV_FLAG_NO_COPY_NAME | (copyValue ? 0 : NGHTTP2_NV_FLAG_NO_COPY_VALUE);
    return nv;
}

bool startsWith(std::string_view text, std::string_view prefix) {
    return text.substr(0, prefix.size()) == prefix;
}

}  // namespace

// nghttp2 calls these with the connection as user data, inside mem_recv or mem_send.
struct ServerCallbacks {
    // The session's user data is the Http2Transport that made it.
    static GrpcConnection& of(void* self) {
        return static_cast<GrpcConnection&>(*static_cast<Http2Transport*>(self));
    }

    static int beginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* self) {
        GrpcConnection& connection = of(self);
        connection.loopThread_.check();
        if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
            connection.streams_.try_emplace(frame->hd.stream_id);
        return 0;
    }

    static int header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
                      std::size_t nameLength, const std::uint8_t* value, std::size_t valueLength,
                      std::uint8_t, void* self) {
        if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
        GrpcConnection& connection = of(self);
        connection.loopThread_.check();
        auto it = connection.streams_.find(frame->hd.stream_id);
        if (it == connection.streams_.end()) return 0;
        auto& stream = it->second;
        const std::string_view key(reinterpret_cast<const char*>(name), nameLength);
        const std::string_view text(reinterpret_cast<const char*>(value), valueLength);
        if (key == ":path") {
            stream.method = text;
        } else if (key == "content-type") {
            // application/grpc, or application/grpc+proto and the like.
            stream.grpcRequest = text == "application/grpc" || startsWith(text, "application/grpc+") ||
                                 startsWith(text, "application/grpc;");
        } else if (key == ":method" && text != "POST") {
            stream.method.clear();
            stream.grpcRequest = false;
        }
        return 0;
    }

    static int dataChunk(nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* data,
                         std::size_t length, void* self) {
        GrpcConnection& connection = of(self);
        connection.loopThread_.check();
        auto it = connection.streams_.find(id);
        if (it == connection.streams_.end()) return 0;
        auto& stream = it->second;
        if (stream.tooLarge) return 0;
        if (stream.request.size() + length > kMaxGrpcMessage + 5) {
            stream.tooLarge = true;
            std::string().swap(stream.request);
            return 0;
        }
        stream.request.append(reinterpret_cast<const char*>(data), length);
        return 0;
    }

    static int frame(nghttp2_session*, const nghttp2_frame* frame, void* self) {
        const bool requestEnds = (frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
                                 (frame->hd.flags & NGHTTP2_FLAG_END_STREAM);
        GrpcConnection& connection = of(self);
        connection.loopThread_.check();
        if (requestEnds && connection.streams_.count(frame->hd.stream_id))
            connection.requestComplete(frame->hd.stream_id);
        return 0;
    }

    static int streamClose(nghttp2_session*, std::int32_t id, std::uint32_t, void* self) {
        GrpcConnection& connection = of(self);
        connection.loopThread_.check();
        auto it = connection.streams_.find(id);
        if (it == connection.streams_.end()) return 0;
        const bool dispatched = it->second.dispatched;
        connection.streams_.erase(it);
        if (dispatched && connection.service_) connection.service_->onStreamClosed(connection, id);
        return 0;
    }

    static ssize_t readBody(nghttp2_session* session, std::int32_t id, std::uint8_t* buffer,
                            std::size_t length, std::uint32_t* flags, nghttp2_data_source*, void* self) {
        GrpcConnection& connection = of(self);
        connection.loopThread_.check();
        auto it = connection.streams_.find(id);
        if (it == connection.streams_.end()) {
            *flags |= NGHTTP2_DATA_FLAG_EOF;
            return 0;
        }
        auto& stream = it->second;
        if (!stream.current && stream.next) {
            stream.current = std::move(stream.next);
            stream.offset = 0;
        }
        std::size_t copied = 0;
        if (stream.current) {
            copied = std::min(length, stream.current->size() - stream.offset);
            std::copy_n(stream.current->data() + stream.offset, copied, buffer);
            stream.offset += copied;
            if (stream.offset == stream.current->size()) {
                stream.current = std::move(stream.next);
                stream.offset = 0;
            }
        }
        if (stream.current) return static_cast<ssize_t>(copied);
        if (stream.ending) {
            *flags |= NGHTTP2_DATA_FLAG_EOF;
            const std::string code = std::to_string(static_cast<int>(stream.trailer.code));
            const std::string message = percentEncode(stream.trailer.message);
            nghttp2_nv trailers[] = {nv("grpc-status", code, true), nv("grpc-message", message, true)};
            if (nghttp2_submit_trailer(session, id, trailers, message.empty() ? 1 : 2) == 0)
                *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
            return static_cast<ssize_t>(copied);
        }
        if (copied > 0) return static_cast<ssize_t>(copied);
        stream.deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }

    // Made once: nghttp2 copies callbacks and options into each session.
    static const nghttp2_option* options() {
        static nghttp2_option* made = [] {
            nghttp2_option* o = nullptr;
            nghttp2_option_new(&o);
            // Our responses carry three short headers: no compression table worth its memory.
            nghttp2_option_set_max_deflate_dynamic_table_size(o, 0);
            // The kubelet does not prioritise streams: no closed ones are kept for it.
            nghttp2_option_set_no_closed_streams(o, 1);
            return o;
        }();
        return made;
    }

    static const nghttp2_session_callbacks* callbacks() {
        static nghttp2_session_callbacks* made = [] {
            nghttp2_session_callbacks* c = nullptr;
            nghttp2_session_callbacks_new(&c);
            nghttp2_session_callbacks_set_on_begin_headers_callback(c, beginHeaders);
            nghttp2_session_callbacks_set_on_header_callback(c, header);
            nghttp2_session_callbacks_set_on_data_chunk_recv_callback(c, dataChunk);
            nghttp2_session_callbacks_set_on_frame_recv_callback(c, frame);
            nghttp2_session_callbacks_set_on_stream_close_callback(c, streamClose);
            nghttp2_session_callbacks_set_error_callback2(
                c, [](nghttp2_session*, int code, const char* message, std::size_t length, void*) {
                    log.debug() << "kubelet connection: " << nghttp2_strerror(code) << ": "
                                << std::string_view(message, length);
                    return 0;
                });
            return c;
        }();
        return made;
    }
};

GrpcConnection::GrpcConnection(boost::asio::local::stream_protocol::socket socket, Service& service)
    : Http2Transport(std::move(socket)), service_(&service) {}

void GrpcConnection::start() {
    loopThread_.check();
    if (!makeSession(true, ServerCallbacks::callbacks(), ServerCallbacks::options())) {
        log.warning() << "cannot serve a kubelet connection: out of memory";
        closeSocket();
        return;
    }
    // The decoding table stays at HTTP/2's default size: a smaller one relies on the
    // kubelet's encoder shrinking its own at exactly the right moment (see GrpcChannel).
    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, kMaxConcurrentStreams},
    };
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
    run();
}

void GrpcConnection::requestComplete(std::int32_t id) {
    Stream& stream = streams_.at(id);
    if (!stream.grpcRequest || stream.method.empty()) {
        // Not gRPC at all: HTTP's answer, as gRPC servers give it.
        nghttp2_nv headers[] = {nv(":status", "415")};
        stream.responding = true;
        nghttp2_submit_response(session_, id, headers, std::size(headers), nullptr);
        return;
    }
    if (stream.tooLarge) {
        fail(id, {GrpcCode::ResourceExhausted, "request larger than 4 MiB"});
        return;
    }
    const auto message = singleMessage(stream.request);
    if (const auto* problem = std::get_if<GrpcStatus>(&message)) {
        fail(id, *problem);
        return;
    }
    stream.dispatched = true;
    // The request is only borrowed by onCall; moved out so the stream keeps no copy.
    const std::string request = std::move(stream.request);
    const std::string method = std::move(stream.method);
    if (service_) service_->onCall(*this, id, method, std::get<std::string_view>(singleMessage(request)));
}

void GrpcConnection::submitResponse(std::int32_t id, Stream& stream) {
    nghttp2_nv headers[] = {nv(":status", "200"), nv("content-type", "application/grpc")};
    nghttp2_data_provider body{};
    body.read_callback = ServerCallbacks::readBody;
    stream.responding = true;
    if (nghttp2_submit_response(session_, id, headers, std::size(headers), &body) != 0)
        nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_INTERNAL_ERROR);
}

bool GrpcConnection::awaiting(std::int32_t id) const {
    loopThread_.check();
    auto it = streams_.find(id);
    return !closed() && it != streams_.end() && !it->second.responding;
}

void GrpcConnection::reply(std::int32_t id, std::string_view message) {
    loopThread_.check();
    auto it = streams_.find(id);
    if (closed() || it == streams_.end() || it->second.responding) return;
    Stream& stream = it->second;
    stream.current = frameMessage(message);
    stream.offset = 0;
    stream.ending = true;
    submitResponse(id, stream);
    flush();
}

void GrpcConnection::fail(std::int32_t id, const GrpcStatus& status) {
    loopThread_.check();
    auto it = streams_.find(id);
    if (closed() || it == streams_.end()) return;
    Stream& stream = it->second;
    if (stream.responding) {
        endStream(id, status);
        return;
    }
    // Trailers-only: one HEADERS frame that ends the stream.
    const std::string code = std::to_string(static_cast<int>(status.code));
    const std::string message = percentEncode(status.message);
    nghttp2_nv headers[] = {nv(":status", "200"), nv("content-type", "application/grpc"),
                            nv("grpc-status", code, true), nv("grpc-message", message, true)};
    stream.responding = true;
    nghttp2_submit_response(session_, id, headers, message.empty() ? 3 : 4, nullptr);
    flush();
}

void GrpcConnection::beginStream(std::int32_t id) {
    loopThread_.check();
    auto it = streams_.find(id);
    if (closed() || it == streams_.end() || it->second.responding) return;
    submitResponse(id, it->second);
    flush();
}

void GrpcConnection::sendLatest(std::int32_t id, GrpcFrame frame) {
    loopThread_.check();
    auto it = streams_.find(id);
    if (closed() || it == streams_.end() || !it->second.responding || it->second.ending) return;
    Stream& stream = it->second;
    if (!stream.current || stream.offset == 0) {
        stream.current = std::move(frame);
        stream.offset = 0;
    } else {
        stream.next = std::move(frame);  // after the one half sent
    }
    resume(id, stream);
    flush();
}

void GrpcConnection::endStream(std::int32_t id, const GrpcStatus& status) {
    loopThread_.check();
    auto it = streams_.find(id);
    if (closed() || it == streams_.end() || !it->second.responding || it->second.ending) return;
    Stream& stream = it->second;
    stream.ending = true;
    stream.trailer = status;
    resume(id, stream);
    flush();
}

void GrpcConnection::resume(std::int32_t id, Stream& stream) {
    if (!stream.deferred) return;
    stream.deferred = false;
    nghttp2_session_resume_data(session_, id);
}

void GrpcConnection::close() {
    loopThread_.check();
    service_ = nullptr;
    if (closed()) return;
    if (session_) {
        // A graceful GOAWAY: what is already on its way (a stream's trailers) still counts.
        nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(session_),
                              NGHTTP2_NO_ERROR, nullptr, 0);
        flush();
    }
    closeSocket();
}

void GrpcConnection::onClosed() {
    loopThread_.check();
    Service* service = service_;
    service_ = nullptr;
    if (service) service->onDisconnected(*this);
}

}  // namespace devlet::rpc
