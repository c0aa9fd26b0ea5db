#include "plugin/http2_transport.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <malloc.h>
#include <nghttp2/nghttp2.h>
#include <sys/mman.h>

#include "runtime/log.h"

namespace devlet::plugin {

namespace {
constexpr Log log{"kubelet"};
// Output is gathered up to this size before a write: a 4,000-slot device list is
// about 110 KB in 16 KB DATA frames, written in two system calls rather than eight.
constexpr std::size_t kWriteChunk = std::size_t{64} * 1024;
// Reads per readiness, so one busy connection cannot starve the loop.
constexpr int kReadRounds = 16;

}  // namespace

// nghttp2's memory for one session. A session takes a 16 KiB frame buffer when it is
// made, of which a plugin with a few devices writes a page per frame. Blocks that large
// are mapped rather than taken from the heap, so the pages nobody writes cost nothing,
// and the frame buffer's pages are given back whenever the connection has sent all it
// had: with a thousand idle kubelet connections that is 4 MiB. Its content is scratch by
// then (nghttp2 has handed out the frames it packed there); the next frame finds zeroed
// pages.
class SessionMemory {
public:
    SessionMemory() : memory_{this, allocate, release, allocateZeroed, reallocate} {}
    SessionMemory(const SessionMemory&) = delete;
    SessionMemory& operator=(const SessionMemory&) = delete;
    ~SessionMemory() {
        for (const Block& block : mapped_) ::munmap(block.address, block.size);
    }

    nghttp2_mem* get() { return &memory_; }
    // The large block a session takes while it is being made is its frame buffer.
    void making(bool on) { making_ = on; }
    void releaseFrameBuffer() {
        if (frameBuffer_.address) ::madvise(frameBuffer_.address, frameBuffer_.size, MADV_DONTNEED);
    }

private:
    static constexpr std::size_t kMapFrom = 8192;
    struct Block {
        void* address = nullptr;
        std::size_t size = 0;
    };

    static SessionMemory& of(void* self) { return *static_cast<SessionMemory*>(self); }
    static void* allocate(std::size_t size, void* self) { return of(self).take(size, false); }
    static void release(void* block, void* self) { of(self).give(block); }
    static void* allocateZeroed(std::size_t count, std::size_t size, void* self) {
        if (size != 0 && count > SIZE_MAX / size) return nullptr;
        return of(self).take(count * size, true);
    }
    static void* reallocate(void* block, std::size_t size, void* self) {
        return of(self).resize(block, size);
    }

    void* take(std::size_t size, bool zeroed) {
        if (size < kMapFrom) return zeroed ? std::calloc(1, size) : std::malloc(size);
        void* address = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (address == MAP_FAILED) return nullptr;  // mapped blocks come zeroed
        mapped_.push_back({address, size});
        if (making_ && !frameBuffer_.address) frameBuffer_ = mapped_.back();
        return address;
    }

    void give(void* address) {
        if (!address) return;
        auto it = std::find_if(mapped_.begin(), mapped_.end(),
                               [&](const Block& b) { return b.address == address; });
        if (it == mapped_.end()) {
            std::free(address);
            return;
        }
        ::munmap(it->address, it->size);
        if (frameBuffer_.address == address) frameBuffer_ = {};
        mapped_.erase(it);
    }

    void* resize(void* address, std::size_t size) {
        if (!address) return take(size, false);
        auto it = std::find_if(mapped_.begin(), mapped_.end(),
                               [&](const Block& b) { return b.address == address; });
        if (it == mapped_.end() && size < kMapFrom) return std::realloc(address, size);
        const std::size_t old = it != mapped_.end() ? it->size : ::malloc_usable_size(address);
        void* moved = take(size, false);
        if (!moved) return nullptr;
        std::memcpy(moved, address, std::min(old, size));
        give(address);
        return moved;
    }

    nghttp2_mem memory_;
    std::vector<Block> mapped_;  // usually one: the frame buffer
    Block frameBuffer_;
    bool making_ = false;
};

bool Http2Transport::makeSession(bool server, const nghttp2_session_callbacks* callbacks,
                                 const nghttp2_option* option) {
    memory_ = std::make_unique<SessionMemory>();
    memory_->making(true);
    const int made = server ? nghttp2_session_server_new3(&session_, callbacks, this, option, memory_->get())
                            : nghttp2_session_client_new3(&session_, callbacks, this, option, memory_->get());
    memory_->making(false);
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
    memory_->releaseFrameBuffer();  // all sent: its content is scratch now
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

}  // namespace devlet::plugin
