#include "status/status_server.h"

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <sys/stat.h>

#include "runtime/log.h"
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
constexpr std::size_t kEventsInStatus = 50;
constexpr std::size_t kEventsInEvents = 200;

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

bool splitListen(const std::string& listen, std::string& address, unsigned short& port) {
    std::string portText;
    if (!listen.empty() && listen.front() == '[') {
        const auto close = listen.find(']');
        if (close == std::string::npos || close + 1 >= listen.size() || listen[close + 1] != ':')
            return false;
        address = listen.substr(1, close - 1);
        portText = listen.substr(close + 2);
    } else {
        const auto colon = listen.rfind(':');
        if (colon == std::string::npos) return false;
        address = listen.substr(0, colon);
        portText = listen.substr(colon + 1);
    }
    if (address.empty() || portText.empty() || portText.size() > 5) return false;
    unsigned value = 0;
    for (char c : portText) {
        if (c < '0' || c > '9') return false;
        value = value * 10 + static_cast<unsigned>(c - '0');
    }
    if (value > 65535) return false;
    port = static_cast<unsigned short>(value);
    return true;
}

// ---------------------------------------------------------------------------

class Session;

// What connections share with the server; outlives the server while a connection's
// handlers are still queued on the loop.
struct ServerShared {
    StatusSource* source = nullptr;  // null once stopped
    std::string token;               // empty = no authentication
    std::chrono::milliseconds requestTimeout{15000};
    ServerCounters counters;
    std::uint64_t nextSession = 0;
    std::map<std::uint64_t, std::weak_ptr<Session>> sessions;
};

class Session : public std::enable_shared_from_this<Session> {
public:
    Session(tcp::socket socket, std::shared_ptr<ServerShared> shared, std::uint64_t id)
        : stream_(std::move(socket)), shared_(std::move(shared)), id_(id), buffer_(kBufferLimit) {
        ++shared_->counters.connectionsOpen;
    }
    ~Session() {
        --shared_->counters.connectionsOpen;
        shared_->sessions.erase(id_);
    }

    void start() { readRequest(); }
    void close() {
        beast::error_code ec;
        stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
        stream_.close();
    }

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
        if (!shared_->source) return;  // stopped
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
        http::response<http::string_body> response;
        try {
            response = answer(request);
        } catch (const std::exception& e) {
            // No exception leaves a handler: a failure here is the server's, and it says so.
            log.error() << "answering " << request.target() << " failed: " << e.what();
            response = plain(http::status::internal_server_error, "internal error\n", request.keep_alive(),
                             request.version());
        }
        send(std::move(response), request.keep_alive());
    }

    static http::response<http::string_body> plain(http::status status, std::string body, bool keepAlive,
                                                   unsigned version) {
        http::response<http::string_body> r{status, version};
        r.set(http::field::content_type, "text/plain; charset=utf-8");
        r.body() = std::move(body);
        r.keep_alive(keepAlive);
        return r;
    }

    http::response<http::string_body> answer(const http::request<http::string_body>& request) {
        const bool keepAlive = request.keep_alive();
        const unsigned version = request.version();
        if (request.method() != http::verb::get && request.method() != http::verb::head) {
            auto r = plain(http::status::method_not_allowed,
                           "only GET and HEAD: this server changes nothing\n", keepAlive, version);
            r.set(http::field::allow, "GET, HEAD");
            return r;
        }
        std::string_view target = request.target();
        if (target.empty() || target.front() != '/') {
            return plain(http::status::bad_request, "the target must be a path\n", keepAlive, version);
        }
        const std::string_view path = target.substr(0, target.find_first_of("?#"));

        if (path == "/healthz") {
            // Answered from the loop thread, so an answer means the loop runs.
            return plain(http::status::ok, "ok\n", keepAlive, version);
        }
        if (!shared_->token.empty()) {
            const std::string_view authorization = request[http::field::authorization];
            constexpr std::string_view kBearer = "Bearer ";
            if (path != "/readyz" && (authorization.substr(0, kBearer.size()) != kBearer ||
                                      !sameSecret(authorization.substr(kBearer.size()), shared_->token))) {
                auto r = plain(http::status::unauthorized, "a bearer token is needed\n", keepAlive, version);
                r.set(http::field::www_authenticate, "Bearer realm=\"devlet\"");
                return r;
            }
        }

        StatusSource& source = *shared_->source;
        if (path == "/readyz") {
            const Readiness ready = readiness(*source.statusSnapshot());
            std::string body = ready.ready ? "ready\n" : "not ready:\n";
            for (const std::string& reason : ready.reasons) body += "- " + reason + "\n";
            return plain(ready.ready ? http::status::ok : http::status::service_unavailable, std::move(body),
                         keepAlive, version);
        }
        if (path == "/" || path == "/index.html") {
            http::response<http::string_body> r{http::status::ok, version};
            r.set(http::field::content_type, "text/html; charset=utf-8");
            r.set("Content-Security-Policy",
                  "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                  "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
                  "frame-ancestors 'none'");
            r.set("X-Frame-Options", "DENY");
            r.body() = std::string(statusPage());
            r.keep_alive(keepAlive);
            return r;
        }
        if (path == "/metrics") {
            auto r = plain(http::status::ok,
                           metricsText(*source.statusSnapshot(), shared_->counters, readProcessStats()),
                           keepAlive, version);
            r.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
            return r;
        }
        constexpr std::string_view kApi = "/api/v1/";
        if (path.substr(0, kApi.size()) == kApi) {
            const std::string_view what = path.substr(kApi.size());
            const bool withEvents = what == "status" || what == "events";
            const std::vector<StatusEvent> events =
                withEvents ? source.recentEvents(what == "events" ? kEventsInEvents : kEventsInStatus)
                           : std::vector<StatusEvent>{};
            std::string body = apiJson(what, *source.statusSnapshot(), events);
            if (!body.empty()) {
                http::response<http::string_body> r{http::status::ok, version};
                r.set(http::field::content_type, "application/json");
                r.body() = std::move(body);
                r.keep_alive(keepAlive);
                return r;
            }
        }
        return plain(http::status::not_found,
                     "not found; try /, /api/v1/status, /metrics, /healthz or /readyz\n", keepAlive, version);
    }

    void send(http::response<http::string_body> response, bool keepAlive) {
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
        if (ec || !keepAlive_ || !shared_->source) {
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
    http::response<http::string_body> response_;
    std::optional<http::response_serializer<http::string_body>> serializer_;
    bool keepAlive_ = false;
};

// ---------------------------------------------------------------------------

class StatusServer::Impl {
public:
    Impl(asio::io_context& loop, StatusSource& source, Options options)
        : acceptor_(loop),
          retry_(loop),
          options_(std::move(options)),
          shared_(std::make_shared<ServerShared>()) {
        shared_->source = &source;
        shared_->requestTimeout = options_.requestTimeout;
    }

    std::string start() {
        std::string address;
        unsigned short port = 0;
        if (!splitListen(options_.listen, address, port))
            return "\"" + options_.listen + "\" is not ADDRESS:PORT";
        beast::error_code ec;
        const asio::ip::address ip = asio::ip::make_address(address, ec);
        if (ec) return "\"" + address + "\" is not an IP address";
        if (!isLoopback(ip)) {
            if (std::string problem = loadToken(); !problem.empty()) return problem;
        }
        const tcp::endpoint endpoint(ip, port);
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
        if (!isLoopback(ip) && shared_->token.empty()) {
            log.warning() << "the status server listens on " << endpoint_
                          << " beyond loopback without a token (" << options_.tokenFile
                          << " does not exist); anyone who reaches it can read it";
        }
        accept();
        return {};
    }

    void stop() {
        beast::error_code ec;
        acceptor_.close(ec);
        retry_.cancel();
        shared_->source = nullptr;
        auto sessions = shared_->sessions;
        for (auto& [id, weak] : sessions) {
            if (auto session = weak.lock()) session->close();
        }
    }

    std::string endpoint_;
    bool requiresToken() const { return !shared_->token.empty(); }

private:
    std::string loadToken() {
        if (options_.tokenFile.empty()) return {};
        struct stat st {};
        if (::stat(options_.tokenFile.c_str(), &st) != 0) return {};  // no file: no token (warned)
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
            return "the status token file " + options_.tokenFile + " is empty or unreadable";
        shared_->token = std::move(token);
        return {};
    }

    void accept() {
        acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
            if (ec == asio::error::operation_aborted || !shared_->source) return;
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
                    if (!waited && shared_->source) accept();
                });
                return;
            }
            accept();
        });
    }

    tcp::acceptor acceptor_;
    asio::steady_timer retry_;
    Options options_;
    std::shared_ptr<ServerShared> shared_;
};

StatusServer::StatusServer(asio::io_context& loop, StatusSource& source, Options options)
    : impl_(std::make_unique<Impl>(loop, source, std::move(options))) {}

StatusServer::~StatusServer() {
    impl_->stop();
}

std::string StatusServer::start() {
    return impl_->start();
}

void StatusServer::stop() {
    impl_->stop();
}

std::string StatusServer::endpoint() const {
    return impl_->endpoint_;
}

bool StatusServer::requiresToken() const {
    return impl_->requiresToken();
}

}  // namespace devlet::status
