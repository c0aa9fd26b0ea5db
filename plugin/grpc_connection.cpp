#include "plugin/grpc_connection.h"

#include <algorithm>
#include <array>
#include <cstring>

#include <nghttp2/nghttp2.h>
#include <sys/mman.h>

#include "runtime/log.h"

namespace devlet::plugin {

namespace {
constexpr Log log{"plugin"};
// The kubelet keeps one ListAndWatch stream and makes one call at a time per plugin.
constexpr std::uint32_t kMaxConcurrentStreams = 16;
// Output is gathered up to this size before a write: a 4,000-slot device list is
// about 110 KB in 16 KB DATA frames, written in two system calls rather than eight.
constexpr std::size_t kWriteChunk = 64 * 1024;

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

// nghttp2's memory. Every session takes a 16 KiB frame buffer and a 4 KiB stream table
// at once, of which a plugin with a few devices writes a page or two. Blocks that size
// are mapped rather than taken from the heap, so the pages nobody writes cost nothing
// and a closed connection gives its memory back at once.
namespace session_memory {
constexpr std::size_t kHeader = 16;  // the block's size, keeping the 16-byte alignment
constexpr std::size_t kMapFrom = 8192;

void* allocate(std::size_t size) {
    const std::size_t total = size + kHeader;
    void* base = nullptr;
    if (total >= kMapFrom) {
        base = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED) return nullptr;
    } else {
        base = std::malloc(total);
        if (!base) return nullptr;
    }
    *static_cast<std::size_t*>(base) = total;
    return static_cast<char*>(base) + kHeader;
}

void release(void* block, void*) {
    if (!block) return;
    char* base = static_cast<char*>(block) - kHeader;
    const std::size_t total = *reinterpret_cast<std::size_t*>(base);
    if (total >= kMapFrom) {
        ::munmap(base, total);
    } else {
        std::free(base);
    }
}

void* allocate(std::size_t size, void*) {
    return allocate(size);
}

void* allocateZeroed(std::size_t count, std::size_t size, void*) {
    if (size != 0 && count > SIZE_MAX / size) return nullptr;
    void* block = allocate(count * size);
    // Mapped blocks come zeroed.
    if (block && count * size + kHeader < kMapFrom) std::memset(block, 0, count * size);
    return block;
}

void* reallocate(void* block, std::size_t size, void*) {
    if (!block) return allocate(size);
    const std::size_t old = *reinterpret_cast<std::size_t*>(static_cast<char*>(block) - kHeader) - kHeader;
    void* moved = allocate(size);
    if (!moved) return nullptr;
    std::memcpy(moved, block, std::min(old, size));
    release(block, nullptr);
    return moved;
}

nghttp2_mem* allocator() {
    static nghttp2_mem mem{nullptr, allocate, release, allocateZeroed, reallocate};
    return &mem;
}
}  // namespace session_memory
}  // namespace

GrpcFrame frameMessage(std::string_view message) {
    auto frame = std::make_shared<std::string>();
    frame->reserve(message.size() + 5);
    const auto size = static_cast<std::uint32_t>(message.size());
    frame->push_back(0);  // not compressed
    frame->push_back(static_cast<char>(size >> 24));
    frame->push_back(static_cast<char>(size >> 16));
    frame->push_back(static_cast<char>(size >> 8));
    frame->push_back(static_cast<char>(size));
    frame->append(message);
    return frame;
}

std::string percentEncode(std::string_view text) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    out.reserve(text.size());
    for (const char ch : text) {
        const auto byte = static_cast<unsigned char>(ch);
        if (byte < 0x20 || byte > 0x7e || byte == '%') {
            out.push_back('%');
            out.push_back(kHex[byte >> 4]);
            out.push_back(kHex[byte & 0xf]);
        } else {
            out.push_back(ch);
        }
    }
    return out;
}

// nghttp2 calls these with the connection as user data, inside mem_recv or mem_send.
struct Http2Callbacks {
    static GrpcConnection& of(void* self) { return *static_cast<GrpcConnection*>(self); }

    static int beginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* self) {
        if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
            of(self).streams_.try_emplace(frame->hd.stream_id);
        return 0;
    }

    static int header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
                      std::size_t nameLength, const std::uint8_t* value, std::size_t valueLength,
                      std::uint8_t, void* self) {
        if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
        auto it = of(self).streams_.find(frame->hd.stream_id);
        if (it == of(self).streams_.end()) return 0;
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
        auto it = of(self).streams_.find(id);
        if (it == of(self).streams_.end()) return 0;
        auto& stream = it->second;
        if (stream.tooLarge) return 0;
        if (stream.request.size() + length > GrpcConnection::kMaxRequest + 5) {
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
        if (requestEnds && of(self).streams_.count(frame->hd.stream_id))
            of(self).requestComplete(frame->hd.stream_id);
        return 0;
    }

    static int streamClose(nghttp2_session*, std::int32_t id, std::uint32_t, void* self) {
        GrpcConnection& connection = of(self);
        auto it = connection.streams_.find(id);
        if (it == connection.streams_.end()) return 0;
        const bool dispatched = it->second.dispatched;
        connection.streams_.erase(it);
        if (dispatched && connection.service_) connection.service_->onStreamClosed(connection, id);
        return 0;
    }

    static ssize_t readBody(nghttp2_session* session, std::int32_t id, std::uint8_t* buffer,
                            std::size_t length, std::uint32_t* flags, nghttp2_data_source*, void* self) {
        auto it = of(self).streams_.find(id);
        if (it == of(self).streams_.end()) {
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
            std::memcpy(buffer, stream.current->data() + stream.offset, copied);
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
            return c;
        }();
        return made;
    }
};

GrpcConnection::GrpcConnection(boost::asio::local::stream_protocol::socket socket, Service& service)
    : socket_(std::move(socket)), service_(&service) {}

GrpcConnection::~GrpcConnection() {
    if (session_) nghttp2_session_del(session_);
}

void GrpcConnection::start() {
    boost::system::error_code ec;
    socket_.non_blocking(true, ec);
    if (ec || nghttp2_session_server_new3(&session_, Http2Callbacks::callbacks(), this,
                                          Http2Callbacks::options(), session_memory::allocator()) != 0) {
        log.warning() << "cannot serve a kubelet connection: " << (ec ? ec.message() : "out of memory");
        closeSocket();
        return;
    }
    // The kubelet's requests repeat the same few headers; without a decoding table
    // (once the kubelet has our settings) each connection keeps none of them.
    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, kMaxConcurrentStreams},
        {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 0},
    };
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
    flush();
    waitReadable();
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
    // Exactly one message: the prefix (compressed flag, 4-byte length) and its bytes.
    const std::string& body = stream.request;
    if (body.size() < 5) {
        fail(id, {GrpcCode::Internal, "the request holds no message"});
        return;
    }
    const auto* prefix = reinterpret_cast<const unsigned char*>(body.data());
    const std::size_t length = (std::size_t{prefix[1]} << 24) | (std::size_t{prefix[2]} << 16) |
                               (std::size_t{prefix[3]} << 8) | std::size_t{prefix[4]};
    if (prefix[0] != 0) {
        fail(id, {GrpcCode::Unimplemented, "compressed requests are not supported"});
        return;
    }
    if (body.size() != length + 5) {
        fail(id, {GrpcCode::Internal, "expected exactly one request message"});
        return;
    }
    stream.dispatched = true;
    // The request is only borrowed by onCall; moved out so the stream keeps no copy.
    const std::string request = std::move(stream.request);
    const std::string method = stream.method;
    if (service_) service_->onCall(*this, id, method, std::string_view(request).substr(5));
}

void GrpcConnection::submitResponse(std::int32_t id, Stream& stream) {
    nghttp2_nv headers[] = {nv(":status", "200"), nv("content-type", "application/grpc")};
    nghttp2_data_provider body{};
    body.read_callback = Http2Callbacks::readBody;
    stream.responding = true;
    if (nghttp2_submit_response(session_, id, headers, std::size(headers), &body) != 0)
        nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_INTERNAL_ERROR);
}

void GrpcConnection::reply(std::int32_t id, std::string_view message) {
    auto it = streams_.find(id);
    if (closed_ || it == streams_.end() || it->second.responding) return;
    Stream& stream = it->second;
    stream.current = frameMessage(message);
    stream.offset = 0;
    stream.ending = true;
    submitResponse(id, stream);
    flush();
}

void GrpcConnection::fail(std::int32_t id, const GrpcStatus& status) {
    auto it = streams_.find(id);
    if (closed_ || it == streams_.end()) return;
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
    auto it = streams_.find(id);
    if (closed_ || it == streams_.end() || it->second.responding) return;
    submitResponse(id, it->second);
    flush();
}

void GrpcConnection::sendLatest(std::int32_t id, GrpcFrame frame) {
    auto it = streams_.find(id);
    if (closed_ || it == streams_.end() || !it->second.responding || it->second.ending) return;
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
    auto it = streams_.find(id);
    if (closed_ || it == streams_.end() || !it->second.responding || it->second.ending) return;
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
    service_ = nullptr;
    if (closed_) return;
    if (session_) {
        // A graceful GOAWAY: what is already on its way (a stream's trailers) still counts.
        nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(session_),
                              NGHTTP2_NO_ERROR, nullptr, 0);
        flush();
    }
    closeSocket();
}

void GrpcConnection::waitReadable() {
    socket_.async_wait(boost::asio::socket_base::wait_read,
                       [self = shared_from_this()](boost::system::error_code ec) {
                           if (!ec) self->onReadable();
                       });
}

void GrpcConnection::onReadable() {
    if (closed_) return;
    // One buffer for every connection of the loop: nghttp2 copies what it keeps.
    thread_local std::array<std::uint8_t, 64 * 1024> buffer;
    for (int round = 0; round < 16; ++round) {
        boost::system::error_code ec;
        const std::size_t n = socket_.read_some(boost::asio::buffer(buffer), ec);
        if (ec == boost::asio::error::would_block) break;
        if (ec) {  // end of file: the kubelet hung up
            closeSocket();
            return;
        }
        busy_ = true;
        const auto consumed = nghttp2_session_mem_recv(session_, buffer.data(), n);
        busy_ = false;
        if (closed_) return;
        if (consumed < 0) {
            log.debug() << "kubelet connection: " << nghttp2_strerror(static_cast<int>(consumed));
            // GOAWAY with the reason, if it can still be written.
            flush();
            closeSocket();
            return;
        }
        if (n < buffer.size()) break;
    }
    flush();
    if (!closed_) waitReadable();
}

void GrpcConnection::flush() {
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
                log.debug() << "kubelet connection: " << nghttp2_strerror(static_cast<int>(n));
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
    if (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)) closeSocket();
}

void GrpcConnection::waitWritable() {
    socket_.async_wait(
        boost::asio::socket_base::wait_write, [self = shared_from_this()](boost::system::error_code ec) {
            if (ec || self->closed_) return;
            std::size_t written = 0;
            std::string& backlog = self->backlog_;
            while (written < backlog.size()) {
                const std::size_t n = self->socket_.write_some(
                    boost::asio::buffer(backlog.data() + written, backlog.size() - written), ec);
                written += n;
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

void GrpcConnection::closeSocket() {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ec;
    socket_.close(ec);
    std::string().swap(backlog_);
    Service* service = service_;
    service_ = nullptr;
    if (service) service->onDisconnected(*this);
}

}  // namespace devlet::plugin
