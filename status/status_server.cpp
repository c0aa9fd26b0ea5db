#include "status/status_server.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/listen_address.h"
#include "runtime/log.h"
#include "runtime/thread_bound.h"
#include "status/metrics.h"
#include "status/status_page.h"
#include "status/status_report.h"
#include "status/status_source.h"

namespace devlet::status {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr Log log{"status"};

// A GET needs a few hundred bytes of header; these are generous and still small.
constexpr std::uint32_t kHeaderLimit = 8 * 1024;
constexpr std::uint64_t kBodyLimit = 1024;
constexpr std::size_t kBufferLimit = 16 * 1024;
constexpr std::string_view kStreamPath = "/api/v1/status/stream";
// How often live streams look for a new snapshot (cheap while nothing changed), and how
// long a stream may be silent before it gets a keep-alive comment.
constexpr std::chrono::milliseconds kStreamCheck{250};
constexpr std::chrono::seconds kStreamKeepAlive{15};

bool isLoopback(const asio::ip::address& address) {
    if (address.is_loopback()) return true;
    return address.is_v6() && address.to_v6().is_v4_mapped() &&
           asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6()).is_loopback();
}

// Compares in time that does not depend on where the first difference is.
bool sameSecret(std::string_view a, std::string_view b) {
    unsigned char difference = a.size() == b.size() ? 0 : 1;
    for (std::size_t i = 0; i < a.size(); ++i) difference |= a[i] ^ b[i % (b.empty() ? 1 : b.size())];
    return difference == 0 && !b.empty();
}

}  // namespace

std::string defaultTokenFile() {
    if (const char* credentials = std::getenv("CREDENTIALS_DIRECTORY"); credentials && *credentials)
        return std::string(credentials) + "/status-token";
    return "/etc/devlet/status-token";
}

// ---------------------------------------------------------------------------

class Session;

// What connections share with the server. Lives on the server's own thread, except the
// fields marked "loop", which only the daemon's loop thread touches. Outlives the server
// while handlers that hold it are still queued.
struct ServerShared : std::enable_shared_from_this<ServerShared> {
    ThreadBound loopThread;  // the daemon's loop: the fields marked "loop" are its alone
    // loop: the daemon's; null once stopped (set by stop(), on the loop too).
    StatusSource* source GUARDED_BY(loopThread) = nullptr;
    // loop: the snapshot last handed to the server thread, and the events read with it.
    std::shared_ptr<const StatusSnapshot> loopSnapshot GUARDED_BY(loopThread);
    std::shared_ptr<const std::vector<StatusEvent>> loopEvents GUARDED_BY(loopThread);

    asio::io_context* loop = nullptr;
    asio::io_context* io = nullptr;  // the server's
    std::string token;               // empty = no authentication
    std::chrono::milliseconds requestTimeout{15000};
    std::size_t maxStreams = 8;
    bool stopped = false;
    ServerCounters counters;
    std::uint64_t nextSession = 0;
    std::map<std::uint64_t, std::weak_ptr<Session>> sessions;
    std::set<std::uint64_t> streams;  // connections that are live streams now
    std::function<void()> streamOpened;
    // What was rendered from the snapshot the loop handed over last.
    std::optional<SnapshotDocuments> documents;
    std::shared_ptr<const std::vector<StatusEvent>> events;
    std::shared_ptr<const std::string> inventoryMetrics;
    std::vector<std::function<void()>> waiting;  // for the snapshot the loop hands over next
    bool fetching = false;
    ProcessStats process;
    std::chrono::steady_clock::time_point processReadAt{};

    // Asks the loop for its current snapshot and runs `then` back on the server thread
    // with `documents` rendering it. The loop's part is cheap while nothing changed (the
    // same snapshot again); an answer also shows that the loop runs (/healthz). Requests
    // that come while a round trip is under way are answered with it. The loop's handler
    // holds nothing of the server's but this: were it never to run (the loop stops first),
    // no socket of the server's thread would be left to the loop to destroy.
    void fetch(std::function<void()> then) {
        waiting.push_back(std::move(then));
        if (fetching) return;
        fetching = true;
        asio::post(*loop, [self = shared_from_this()] {
            self->loopThread.check();
            if (!self->source) return;  // stopped: the server's context may be gone
            std::shared_ptr<const StatusSnapshot> snapshot;
            try {
                snapshot = self->source->statusSnapshot();
                if (snapshot != self->loopSnapshot) {
                    // Events live in the state database, which only the loop reads.
                    self->loopEvents = std::make_shared<const std::vector<StatusEvent>>(
                        self->source->recentEvents(kEventsInEvents));
                    self->loopSnapshot = snapshot;
                }
            } catch (const std::exception& e) {
                log.error() << "the status snapshot failed: " << e.what();
                snapshot = self->loopSnapshot;  // the last good one, if any
            }
            asio::post(*self->io, [self, snapshot = std::move(snapshot), events = self->loopEvents] {
                self->fetching = false;
                if (self->stopped || !snapshot) return;
                self->adopt(snapshot, events);
                std::vector<std::function<void()>> ready;
                ready.swap(self->waiting);
                for (auto& then : ready) then();
            });
        });
    }

    void adopt(const std::shared_ptr<const StatusSnapshot>& snapshot,
               const std::shared_ptr<const std::vector<StatusEvent>>& recent) {
        if (documents && documents->snapshot() == snapshot) return;
        events = recent;
        documents.emplace(snapshot, [recent](std::size_t limit) {
            return std::vector<StatusEvent>(
                recent->begin(),
                recent->begin() + static_cast<std::ptrdiff_t>(std::min(limit, recent->size())));
        });
        inventoryMetrics.reset();
    }

    // The process's figures, read at most once a second: Prometheus scrapes every few
    // seconds at most, and a busy scraper need not make devlet read /proc on every request.
    const ProcessStats& processStats() {
        const auto now = std::chrono::steady_clock::now();
        if (processReadAt == std::chrono::steady_clock::time_point{} ||
            now - processReadAt >= std::chrono::seconds(1)) {
            process = readProcessStats();
            processReadAt = now;
        }
        return process;
    }
};

std::int64_t wallMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// A body of shared texts written one after another: a kept document goes out with one
// writev, without being copied (Beast's BodyWriter for DocumentParts).
struct PartsBody {
    using value_type = DocumentParts;
    static std::uint64_t size(const value_type& parts) {
        std::uint64_t n = 0;
        for (const auto& part : parts) n += part->size();
        return n;
    }
    class writer {  // NOLINT(readability-identifier-naming): the name Beast's BodyWriter needs
    public:
        using const_buffers_type = std::vector<asio::const_buffer>;
        template <bool isRequest, class Fields>
        writer(const http::header<isRequest, Fields>&, const value_type& parts) : parts_(parts) {}
        void init(beast::error_code& ec) { ec = {}; }
        boost::optional<std::pair<const_buffers_type, bool>> get(beast::error_code& ec) {
            ec = {};
            if (done_) return boost::none;
            done_ = true;
            const_buffers_type buffers;
            for (const auto& part : parts_) buffers.emplace_back(part->data(), part->size());
            return std::make_pair(std::move(buffers), false);
        }

    private:
        const value_type& parts_;
        bool done_ = false;
    };
};

using Answer = http::response<PartsBody>;

class Session : public std::enable_shared_from_this<Session> {
public:
    Session(tcp::socket socket, std::shared_ptr<ServerShared> shared, std::uint64_t id)
        : stream_(std::move(socket)), shared_(std::move(shared)), id_(id), buffer_(kBufferLimit) {
        ++shared_->counters.connectionsOpen;
    }
    ~Session() {
        --shared_->counters.connectionsOpen;
        shared_->sessions.erase(id_);
        shared_->streams.erase(id_);
        shared_->counters.streamsOpen = shared_->streams.size();
    }

    void start() { readRequest(); }
    void close() {
        beast::error_code ec;
        stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
        stream_.close();
    }

    // A live stream's next message: the status document (the latest wins while a write is
    // in flight: a slow reader skips states, it does not queue them) or, with no parts, a
    // comment that keeps an idle connection open through proxies.
    void push(DocumentParts status) {
        if (!streaming_) return;
        if (writing_) {
            if (!status.empty()) pendingStatus_ = std::move(status);
            return;
        }
        writeEvent(std::move(status));
    }
    std::chrono::steady_clock::time_point lastPush() const { return lastPush_; }

private:
    void readRequest() {
        parser_.emplace();
        parser_->header_limit(kHeaderLimit);
        parser_->body_limit(kBodyLimit);
        stream_.expires_after(shared_->requestTimeout);
        http::async_read(
            stream_, buffer_, *parser_,
            [self = shared_from_this()](beast::error_code ec, std::size_t) { self->onRead(ec); });
    }

    void onRead(beast::error_code ec) {
        if (shared_->stopped) return;
        if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
            ec == asio::error::operation_aborted || ec == asio::error::connection_reset ||
            ec == asio::error::eof) {
            close();
            return;
        }
        if (ec) {
            // The request cannot be read to its end: answer and close the connection.
            const http::status status = ec == http::error::header_limit
                                            ? http::status::request_header_fields_too_large
                                        : ec == http::error::body_limit ? http::status::payload_too_large
                                                                        : http::status::bad_request;
            send(plain(status, std::string(http::obsolete_reason(status)) + "\n", false, 11), false);
            return;
        }
        const auto& request = parser_->get();
        if (std::optional<Answer> early = answerWithoutSnapshot(request)) {
            send(std::move(*early), request.keep_alive());
            return;
        }
        // The rest needs what the daemon knows: the loop hands over its snapshot.
        stream_.expires_never();  // a hung loop holds the request; the connection limit bounds them
        shared_->fetch([self = shared_from_this()] { self->answerFromSnapshot(); });
    }

    void answerFromSnapshot() {
        const auto& request = parser_->get();
        Answer response;
        try {
            response = answer(request);
        } catch (const std::exception& e) {
            // No exception leaves a handler: a failure here is the server's, and it says so.
            log.error() << "answering " << request.target() << " failed: " << e.what();
            response = plain(http::status::internal_server_error, "internal error\n", request.keep_alive(),
                             request.version());
        }
        if (streaming_) return;  // the answer is a live stream, already under way
        send(std::move(response), request.keep_alive());
    }

    static Answer withBody(http::status status, std::string_view type, DocumentParts body, bool keepAlive,
                           unsigned version) {
        Answer a{status, version};
        a.set(http::field::content_type, type);
        a.body() = std::move(body);
        a.keep_alive(keepAlive);
        return a;
    }

    static Answer plain(http::status status, std::string body, bool keepAlive, unsigned version) {
        return withBody(status, "text/plain; charset=utf-8",
                        {std::make_shared<const std::string>(std::move(body))}, keepAlive, version);
    }

    static std::string_view pathOf(const http::request<http::string_body>& request) {
        const std::string_view target = request.target();
        return target.substr(0, target.find_first_of("?#"));
    }

    // What is answered without the daemon's state: errors, a missing token, the page.
    std::optional<Answer> answerWithoutSnapshot(const http::request<http::string_body>& request) {
        const bool keepAlive = request.keep_alive();
        const unsigned version = request.version();
        if (request.method() != http::verb::get && request.method() != http::verb::head) {
            auto r = plain(http::status::method_not_allowed,
                           "only GET and HEAD: this server changes nothing\n", keepAlive, version);
            r.set(http::field::allow, "GET, HEAD");
            return r;
        }
        const std::string_view target = request.target();
        if (target.empty() || target.front() != '/') {
            return plain(http::status::bad_request, "the target must be a path\n", keepAlive, version);
        }
        const std::string_view path = pathOf(request);
        if (!shared_->token.empty() && path != "/healthz" && path != "/readyz") {
            const std::string_view authorization = request[http::field::authorization];
            constexpr std::string_view kBearer = "Bearer ";
            if (authorization.substr(0, kBearer.size()) != kBearer ||
                !sameSecret(authorization.substr(kBearer.size()), shared_->token)) {
                auto r = plain(http::status::unauthorized, "a bearer token is needed\n", keepAlive, version);
                r.set(http::field::www_authenticate, "Bearer realm=\"devlet\"");
                return r;
            }
        }
        if (path == "/" || path == "/index.html") {
            static const auto page = std::make_shared<const std::string>(statusPage());
            auto r = withBody(http::status::ok, "text/html; charset=utf-8", {page}, keepAlive, version);
            r.set("Content-Security-Policy",
                  "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                  "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
                  "frame-ancestors 'none'");
            r.set("X-Frame-Options", "DENY");
            return r;
        }
        if (path == kStreamPath && request.method() == http::verb::head)
            return withBody(http::status::ok, "text/event-stream; charset=utf-8", {}, false, version);
        constexpr std::string_view kApi = "/api/v1/";
        const bool known = path == "/healthz" || path == "/readyz" || path == "/metrics" ||
                           path == kStreamPath || path.substr(0, kApi.size()) == kApi;
        if (!known) return notFound(keepAlive, version);
        return std::nullopt;
    }

    static Answer notFound(bool keepAlive, unsigned version) {
        return plain(http::status::not_found,
                     "not found; try /, /api/v1/status, /metrics, /healthz or /readyz\n", keepAlive, version);
    }

    Answer answer(const http::request<http::string_body>& request) {
        const bool keepAlive = request.keep_alive();
        const unsigned version = request.version();
        const std::string_view path = pathOf(request);
        SnapshotDocuments& documents = *shared_->documents;
        if (path == "/healthz") {
            // The loop handed over its snapshot just now: it runs.
            return plain(http::status::ok, "ok\n", keepAlive, version);
        }
        if (path == "/readyz") {
            const Readiness ready = readiness(*documents.snapshot());
            std::string body = ready.ready ? "ready\n" : "not ready:\n";
            for (const std::string& reason : ready.reasons) body += "- " + reason + "\n";
            return plain(ready.ready ? http::status::ok : http::status::service_unavailable, std::move(body),
                         keepAlive, version);
        }
        if (path == "/metrics") {
            if (!shared_->inventoryMetrics)
                shared_->inventoryMetrics =
                    std::make_shared<const std::string>(inventoryMetricsText(*documents.snapshot()));
            auto live = std::make_shared<const std::string>(
                serverMetricsText(shared_->counters, shared_->processStats()));
            return withBody(http::status::ok, "text/plain; version=0.0.4; charset=utf-8",
                            {shared_->inventoryMetrics, std::move(live)}, keepAlive, version);
        }
        if (path == kStreamPath) return startStream(request, documents);
        constexpr std::string_view kApi = "/api/v1/";
        if (path.substr(0, kApi.size()) == kApi) {
            if (DocumentParts body = documents.api(path.substr(kApi.size()), wallMs()); !body.empty())
                return withBody(http::status::ok, "application/json", std::move(body), keepAlive, version);
        }
        return notFound(keepAlive, version);
    }

    // Server-sent events: the status document now and after every change, on this
    // connection until the client goes. Bounded: beyond maxStreams a client is told to poll.
    Answer startStream(const http::request<http::string_body>& request, SnapshotDocuments& documents) {
        if (shared_->streams.size() >= shared_->maxStreams) {
            auto r = plain(http::status::service_unavailable,
                           "too many live streams; poll /api/v1/status instead\n", false, request.version());
            r.set(http::field::retry_after, "10");
            return r;
        }
        streaming_ = true;
        shared_->streams.insert(id_);
        shared_->counters.streamsOpen = shared_->streams.size();
        ++shared_->counters.responses[200];
        ++shared_->counters.streamsOpened;
        // Close-delimited: the body is the stream, and ends when the connection does.
        pendingStatus_ = documents.api("status", wallMs());
        auto header = std::make_shared<const std::string>(
            "HTTP/1.1 200 OK\r\nServer: devlet\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
            "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n"
            // The browser reconnects after this long if the connection drops.
            "retry: 2000\n\n");
        writeRaw({header});
        watchForClose();
        if (shared_->streamOpened) shared_->streamOpened();
        return {};
    }

    // One status message, or with no parts a keep-alive comment. The document is compact
    // JSON: no line break in it ends the data line early.
    void writeEvent(DocumentParts status) {
        static const auto eventStart = std::make_shared<const std::string>("event: status\ndata: ");
        static const auto eventEnd = std::make_shared<const std::string>("\n\n");
        static const auto keepAlive = std::make_shared<const std::string>(": keep-alive\n\n");
        if (status.empty()) {
            writeRaw({keepAlive});
            return;
        }
        status.insert(status.begin(), eventStart);
        status.push_back(eventEnd);
        writeRaw(std::move(status));
    }

    void writeRaw(DocumentParts parts) {
        writing_ = true;
        lastPush_ = std::chrono::steady_clock::now();
        std::vector<asio::const_buffer> buffers;
        for (const auto& part : parts) buffers.push_back(asio::buffer(*part));
        // A client that does not read for this long is cut off: its socket buffer is full.
        stream_.expires_after(shared_->requestTimeout);
        asio::async_write(stream_, buffers,
                          [self = shared_from_this(), parts = std::move(parts)](
                              beast::error_code ec, std::size_t) { self->onStreamWrite(ec); });
    }

    void onStreamWrite(beast::error_code ec) {
        writing_ = false;
        if (ec || shared_->stopped) {
            close();
            return;
        }
        stream_.expires_never();  // idle until the next change; the close watch needs no limit
        if (!pendingStatus_.empty()) writeEvent(std::exchange(pendingStatus_, {}));
    }

    // A stream's client sends nothing after its request: anything it does send, or the end
    // of the connection, ends the stream.
    void watchForClose() {
        stream_.async_read_some(
            asio::buffer(closeWatch_),
            [self = shared_from_this()](beast::error_code, std::size_t) { self->close(); });
    }

    void send(Answer response, bool keepAlive) {
        ++shared_->counters.responses[static_cast<int>(response.result_int())];
        response.set(http::field::server, "devlet");
        response.set(http::field::cache_control, "no-store");
        response.set("X-Content-Type-Options", "nosniff");
        const bool head = parser_ && parser_->is_header_done() && parser_->get().method() == http::verb::head;
        response.prepare_payload();
        if (head) response.body().clear();  // Content-Length stays that of the GET
        response_ = std::move(response);
        keepAlive_ = keepAlive;
        stream_.expires_after(shared_->requestTimeout);
        if (head) {
            serializer_.emplace(response_);
            http::async_write_header(stream_, *serializer_,
                                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                                         self->serializer_.reset();
                                         self->onWrite(ec);
                                     });
            return;
        }
        http::async_write(stream_, response_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
            self->onWrite(ec);
        });
    }

    void onWrite(beast::error_code ec) {
        response_.body().clear();
        if (ec || !keepAlive_ || shared_->stopped) {
            close();
            return;
        }
        readRequest();
    }

    beast::tcp_stream stream_;
    std::shared_ptr<ServerShared> shared_;
    std::uint64_t id_;
    beast::flat_buffer buffer_;
    std::optional<http::request_parser<http::string_body>> parser_;
    Answer response_;
    std::optional<http::response_serializer<PartsBody>> serializer_;
    bool keepAlive_ = false;
    bool streaming_ = false;
    bool writing_ = false;
    DocumentParts pendingStatus_;
    std::chrono::steady_clock::time_point lastPush_{};
    std::array<char, 64> closeWatch_{};
};

// ---------------------------------------------------------------------------

class StatusServer::Impl {
public:
    Impl(asio::io_context& loop, StatusSource& source, Options options)
        : options_(std::move(options)),
          shared_(std::make_shared<ServerShared>()),
          acceptor_(io_),
          retry_(io_),
          streamTimer_(io_),
          work_(asio::make_work_guard(io_)) {
        shared_->source = &source;  // before any handler of the server's can reach it
        shared_->loop = &loop;
        shared_->io = &io_;
        shared_->requestTimeout = options_.requestTimeout;
        shared_->maxStreams = options_.maxStreams;
        shared_->streamOpened = [this] { watchStreams(); };
    }

    ~Impl() { stop(); }

    // The source and what the loop hands over belong to the daemon's loop thread.
    void checkLoopThread() const ASSERT_CAPABILITY(shared_->loopThread) { shared_->loopThread.check(); }

    std::string start() {
        const auto parsed = parseListenAddress(options_.listen);
        if (const auto* problem = std::get_if<std::string>(&parsed))
            return "\"" + options_.listen + "\" " + *problem;
        const ListenAddress& where = std::get<ListenAddress>(parsed);
        beast::error_code ec;
        const asio::ip::address ip = asio::ip::make_address(where.address, ec);
        if (ec) return "\"" + where.address + "\" is not an IP address";
        if (!isLoopback(ip)) {
            if (std::string problem = loadToken(); !problem.empty()) return problem;
        }
        const tcp::endpoint endpoint(ip, where.port);
        acceptor_.open(endpoint.protocol(), ec);
        if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
        if (!ec) acceptor_.bind(endpoint, ec);
        if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
        if (ec) {
            acceptor_.close(ec);
            return "cannot listen on " + options_.listen + ": " + ec.message();
        }
        const tcp::endpoint bound = acceptor_.local_endpoint(ec);
        endpoint_ = (bound.address().is_v6() ? "[" + bound.address().to_string() + "]"
                                             : bound.address().to_string()) +
                    ":" + std::to_string(bound.port());
        accept();
        thread_ = std::thread([this] {
            // Below the loop and the plugins' gRPC threads: when a client hammers the page
            // on a small node, the kubelet's work gets the CPU first.
            ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10);
            io_.run();
        });
        return {};
    }

    // On the loop thread: after it, the source is not called again and the thread is gone.
    void stop() REQUIRES(shared_->loopThread) {
        if (stopped_) return;
        stopped_ = true;
        shared_->source = nullptr;  // loop side: no snapshot goes to the server thread any more
        auto closeAll = [this] {
            shared_->stopped = true;
            shared_->streamOpened = nullptr;
            shared_->waiting.clear();
            beast::error_code ec;
            acceptor_.close(ec);
            retry_.cancel();
            streamTimer_.cancel();
            auto sessions = shared_->sessions;
            for (auto& [id, weak] : sessions) {
                if (auto session = weak.lock()) session->close();
            }
            io_.stop();
        };
        if (thread_.joinable()) {
            asio::post(io_, closeAll);
            thread_.join();
        } else {
            closeAll();
        }
    }

    std::string endpoint_;
    bool requiresToken() const { return !shared_->token.empty(); }

private:
    // Beyond loopback anyone who reaches the address could read which pods hold which
    // devices: without a token the server stays off rather than serve that to the network.
    std::string loadToken() {
        const std::string howTo =
            "set status.listen (or --listen) to a loopback address such as 127.0.0.1:9797, or create "
            "the token file /etc/devlet/status-token owned by root with mode 0600 (systemd passes it as "
            "the credential status-token), e.g. sudo sh -c 'umask 077; head -c 32 /dev/urandom | base64 > "
            "/etc/devlet/status-token'; the status server stays off";
        if (options_.tokenFile.empty())
            return options_.listen + " is not a loopback address and no token file is set: " + howTo;
        struct stat st {};
        if (::stat(options_.tokenFile.c_str(), &st) != 0) {
            return options_.listen + " is not a loopback address and the token file " + options_.tokenFile +
                   " does not exist: " + howTo;
        }
        if ((st.st_mode & 077) != 0) {
            return "the status token file " + options_.tokenFile +
                   " is readable by group or others; chmod 600 it (the status server stays off)";
        }
        std::ifstream in(options_.tokenFile);
        std::stringstream text;
        text << in.rdbuf();
        std::string token = text.str();
        while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' '))
            token.pop_back();
        if (!in || token.empty())
            return "the status token file " + options_.tokenFile + " is empty or unreadable: " + howTo;
        shared_->token = std::move(token);
        return {};
    }

    void accept() {
        acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
            if (ec == asio::error::operation_aborted || shared_->stopped) return;
            if (!ec) {
                if (shared_->counters.connectionsOpen >= options_.maxConnections) {
                    ++shared_->counters.connectionsRefused;
                    beast::error_code ignored;
                    socket.close(ignored);
                } else {
                    ++shared_->counters.connectionsAccepted;
                    const std::uint64_t id = ++shared_->nextSession;
                    auto session = std::make_shared<Session>(std::move(socket), shared_, id);
                    shared_->sessions[id] = session;
                    session->start();
                }
            } else {
                // Out of descriptors and the like: try again a little later, not in a tight loop.
                log.debug() << "accept: " << ec.message();
                retry_.expires_after(std::chrono::milliseconds(100));
                retry_.async_wait([this](beast::error_code waited) {
                    if (!waited && !shared_->stopped) accept();
                });
                return;
            }
            accept();
        });
    }

    // Runs while live streams are open: sends each a new status document when the
    // snapshot changed, and a keep-alive comment when it was silent for long.
    void watchStreams() {
        if (watching_) return;
        // A stream starts with the current document: the others have it too, or get it next.
        lastStreamed_ = shared_->documents ? shared_->documents->snapshot() : nullptr;
        checkStreamsSoon();
    }

    void checkStreamsSoon() {
        watching_ = true;
        streamTimer_.expires_after(kStreamCheck);
        streamTimer_.async_wait([this](beast::error_code ec) {
            if (ec || shared_->stopped || shared_->streams.empty()) {
                watching_ = false;
                return;
            }
            shared_->fetch([this] { pushToStreams(); });
        });
    }

    void pushToStreams() {
        SnapshotDocuments& documents = *shared_->documents;
        DocumentParts status;
        if (documents.snapshot() != lastStreamed_) {
            status = documents.api("status", wallMs());
            lastStreamed_ = documents.snapshot();
        }
        const auto quietSince = std::chrono::steady_clock::now() - kStreamKeepAlive;
        const std::set<std::uint64_t> streams = shared_->streams;
        for (std::uint64_t id : streams) {
            auto it = shared_->sessions.find(id);
            auto session = it == shared_->sessions.end() ? nullptr : it->second.lock();
            if (!session) continue;
            if (!status.empty()) {
                session->push(status);
            } else if (session->lastPush() < quietSince) {
                session->push({});
            }
        }
        if (shared_->streams.empty()) {
            watching_ = false;
            return;
        }
        checkStreamsSoon();
    }

    Options options_;
    std::shared_ptr<ServerShared> shared_;
    // The server's own context and thread; declared before what runs on it, so it outlives it.
    asio::io_context io_;
    tcp::acceptor acceptor_;
    asio::steady_timer retry_;
    asio::steady_timer streamTimer_;
    asio::executor_work_guard<asio::io_context::executor_type> work_;
    bool watching_ = false;
    std::shared_ptr<const StatusSnapshot> lastStreamed_;  // the snapshot the streams have
    bool stopped_ = false;
    std::thread thread_;
};

StatusServer::StatusServer(asio::io_context& loop, StatusSource& source, Options options)
    : impl_(std::make_unique<Impl>(loop, source, std::move(options))) {}

StatusServer::~StatusServer() {
    impl_->stop();
}

std::string StatusServer::start() {
    impl_->checkLoopThread();
    return impl_->start();
}

void StatusServer::stop() {
    impl_->checkLoopThread();
    impl_->stop();
}

std::string StatusServer::endpoint() const {
    return impl_->endpoint_;
}

bool StatusServer::requiresToken() const {
    return impl_->requiresToken();
}

}  // namespace devlet::status
