#include "cluster/api_client.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <random>
#include <tuple>
#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/json.hpp>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include "runtime/log.h"

namespace devlet::kube {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace json = boost::json;
using tcp = net::ip::tcp;

namespace {

constexpr Log log{"kube"};
constexpr std::uint64_t kBodyLimit = 64 * 1024 * 1024;
constexpr std::size_t kMaxWatchLine = 16 * 1024 * 1024;
constexpr std::size_t kMaxWatchErrorBody = 64 * 1024;

using Clock = std::chrono::steady_clock;

std::mt19937& randomSource() {
    static std::mt19937 generator{std::random_device{}()};
    return generator;
}

// Half the delay fixed, half random: spreads nodes that failed together.
std::chrono::milliseconds jittered(std::chrono::milliseconds delay) {
    std::uniform_int_distribution<long long> half(0, delay.count() / 2);
    return std::chrono::milliseconds(delay.count() - delay.count() / 2 + half(randomSource()));
}

std::chrono::milliseconds backoffDelay(const ClientOptions& options, int failures) {
    auto delay = options.backoffInitial;
    for (int i = 1; i < failures && delay < options.backoffMax; ++i) delay *= 2;
    return jittered(std::min(delay, options.backoffMax));
}

std::string transportMessage(const std::string& phase, const beast::error_code& ec) {
    if (ec == beast::error::timeout) return phase + " timed out";
    return phase + ": " + ec.message();
}

// A Status's reason and message, or the start of a body that is not one.
void readStatus(ApiResult& result, const std::string& text) {
    json::error_code ec;
    result.body = json::parse(text, ec);
    if (ec) {
        result.body = nullptr;
        if (!result.ok()) result.message = text.substr(0, 300);
        return;
    }
    if (const json::object* object = result.body.if_object()) {
        const json::value* kind = object->if_contains("kind");
        if (kind && kind->is_string() && kind->get_string() == "Status") {
            if (const json::value* reason = object->if_contains("reason"); reason && reason->is_string())
                result.reason = std::string(reason->get_string());
            if (const json::value* message = object->if_contains("message"); message && message->is_string())
                result.message = std::string(message->get_string());
        }
    }
}

ApiResult transportFailure(std::string message, int attempts = 1) {
    ApiResult result;
    result.message = std::move(message);
    result.attempts = attempts;
    return result;
}

// Every Retry-After, of any answer, calls and watches, is cut to `most`: a server (or a proxy
// in front of it) that asks for a day must not park the node for a day.
std::optional<std::chrono::milliseconds> retryAfter(const http::fields& headers,
                                                    std::chrono::milliseconds most) {
    auto it = headers.find(http::field::retry_after);
    if (it == headers.end()) return std::nullopt;
    const std::string value(it->value());
    if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;  // the HTTP-date form is not sent by the API server
    const long long seconds = value.size() > 9 ? 999'999'999LL : std::stoll(value);
    return std::min<std::chrono::milliseconds>(std::chrono::seconds(seconds), most);
}

// The API server answers a watch (or a list) from a resourceVersion newer than its cache
// with 504 and this cause; watching again from that version would get the same answer
// forever, so only a list (without a version) gets the informer going again.
bool resourceVersionTooLarge(const ApiResult& result) {
    if (result.code != 504) return false;
    if (result.message.find("Too large resource version") != std::string::npos) return true;
    const json::object* status = result.body.if_object();
    const json::value* details = status ? status->if_contains("details") : nullptr;
    const json::value* causes =
        details && details->is_object() ? details->get_object().if_contains("causes") : nullptr;
    if (!causes || !causes->is_array()) return false;
    for (const json::value& cause : causes->get_array()) {
        const json::value* reason = cause.is_object() ? cause.get_object().if_contains("reason") : nullptr;
        if (reason && reason->is_string() && reason->get_string() == "ResourceVersionTooLarge") return true;
    }
    return false;
}

// A dead peer (a node that lost power, a NAT that forgot the flow) sends no RST: without
// these a connection, a watch above all, would wait for the kernel's two hours of idle and
// fifteen retransmissions. 15 s idle + 3 probes 5 s apart, and at most 30 s for unacknowledged
// data, notice it in about 30 s, as client-go's HTTP/2 health check does.
void setKeepAlive(tcp::socket& socket) {
    struct Option {
        int level, name, value;
        const char* what;
    };
    static constexpr Option kOptions[] = {
        {SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE"},
        {IPPROTO_TCP, TCP_KEEPIDLE, 15, "TCP_KEEPIDLE"},
        {IPPROTO_TCP, TCP_KEEPINTVL, 5, "TCP_KEEPINTVL"},
        {IPPROTO_TCP, TCP_KEEPCNT, 3, "TCP_KEEPCNT"},
        {IPPROTO_TCP, TCP_USER_TIMEOUT, 30000, "TCP_USER_TIMEOUT"},
    };
    for (const Option& option : kOptions) {
        if (::setsockopt(socket.native_handle(), option.level, option.name, &option.value,
                         sizeof option.value) != 0)
            log.debug() << "cannot set " << option.what
                        << " on the connection to the API server: " << std::strerror(errno);
    }
}

// `limit`, or less when `deadline` comes sooner (at least 1 ms: 0 would mean "never").
std::chrono::milliseconds within(std::chrono::milliseconds limit, std::optional<Clock::time_point> deadline) {
    if (!deadline) return limit;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
    return std::clamp(left, std::chrono::milliseconds(1), limit);
}

std::string stringAt(const json::object& object, std::initializer_list<const char*> path) {
    const json::object* at = &object;
    const json::value* value = nullptr;
    for (const char* key : path) {
        if (!at) return "";
        value = at->if_contains(key);
        if (!value) return "";
        at = value->if_object();
    }
    return value && value->is_string() ? std::string(value->get_string()) : "";
}

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

// One HTTPS connection to the API server, opened on first use and kept while the server
// keeps it alive. One exchange at a time.
class Connection : public std::enable_shared_from_this<Connection> {
public:
    Connection(net::io_context& loop, ssl::context& tls, const Kubeconfig& config,
               const ClientOptions& options)
        : loop_(loop), tls_(tls), config_(config), options_(options), resolver_(loop) {}

    using Opened = std::function<void(std::string error)>;
    bool isOpen() const { return stream_ && open_; }

    // Connects and shakes hands, each within its timeout or by `deadline` (a call's).
    void open(Opened done, std::optional<Clock::time_point> deadline = std::nullopt) {
        close();
        stream_.emplace(loop_, tls_);
        // SNI for a host name; the certificate is checked against the name or the address.
        boost::system::error_code parseError;
        net::ip::make_address(config_.host, parseError);
        if (parseError) SSL_set_tlsext_host_name(stream_->native_handle(), config_.host.c_str());
        stream_->set_verify_callback(ssl::host_name_verification(config_.host));
        beast::get_lowest_layer(*stream_).expires_after(within(options_.connectTimeout, deadline));
        resolver_.async_resolve(
            config_.host, config_.port,
            [self = shared_from_this(), done, deadline](const beast::error_code& ec,
                                                        tcp::resolver::results_type results) {
                if (ec) return done(transportMessage("resolving the API server", ec));
                if (!self->stream_) return done("closed");
                beast::get_lowest_layer(*self->stream_)
                    .async_connect(results,
                                   [self, done, deadline](const beast::error_code& ec, const tcp::endpoint&) {
                                       if (ec)
                                           return done(transportMessage("connecting to the API server", ec));
                                       setKeepAlive(beast::get_lowest_layer(*self->stream_).socket());
                                       self->handshake(done, deadline);
                                   });
            });
    }

    // Sends `request` and reads the whole answer.
    void exchange(std::shared_ptr<Request> request, std::chrono::milliseconds timeout,
                  std::function<void(beast::error_code, Response)> done) {
        beast::get_lowest_layer(*stream_).expires_after(timeout);
        http::async_write(
            *stream_, *request,
            [self = shared_from_this(), request, done](const beast::error_code& ec, std::size_t) {
                if (ec) return done(ec, {});
                self->parser_.emplace();
                self->parser_->body_limit(kBodyLimit);
                http::async_read(*self->stream_, self->buffer_, *self->parser_,
                                 [self, done](const beast::error_code& ec, std::size_t) {
                                     if (ec) return done(ec, {});
                                     done(ec, self->parser_->release());
                                 });
            });
    }

    // Sends `request` and reads the answer as a stream: `header` once with the status,
    // `body` after each read with what has arrived and not been consumed (it erases what
    // it consumed), `end` once: success when the server ended the answer.
    void stream(std::shared_ptr<Request> request, std::chrono::milliseconds idle,
                std::function<void(int, const http::fields&)> header, std::function<bool(std::string&)> body,
                std::function<void(beast::error_code)> end) {
        beast::get_lowest_layer(*stream_).expires_after(options_.requestTimeout);
        http::async_write(*stream_, *request,
                          [self = shared_from_this(), request, idle, header, body, end](
                              const beast::error_code& ec, std::size_t) {
                              if (ec) return end(ec);
                              self->parser_.emplace();
                              self->parser_->body_limit(boost::none);
                              http::async_read_header(
                                  *self->stream_, self->buffer_, *self->parser_,
                                  [self, idle, header, body, end](const beast::error_code& ec, std::size_t) {
                                      if (ec) return end(ec);
                                      header(self->parser_->get().result_int(), self->parser_->get());
                                      self->readMore(idle, body, end);
                                  });
                          });
    }

    bool keepAlive() const { return parser_ && parser_->keep_alive(); }

    void close() {
        open_ = false;
        resolver_.cancel();
        if (stream_) {
            beast::error_code ignored;
            beast::get_lowest_layer(*stream_).socket().shutdown(tcp::socket::shutdown_both, ignored);
            beast::get_lowest_layer(*stream_).close();
        }
        // The stream stays until its handlers have run: they hold this object.
        buffer_.clear();
    }

private:
    void handshake(Opened done, std::optional<Clock::time_point> deadline) {
        beast::get_lowest_layer(*stream_).expires_after(within(options_.handshakeTimeout, deadline));
        stream_->async_handshake(
            ssl::stream_base::client, [self = shared_from_this(), done](const beast::error_code& ec) {
                if (ec) {
                    std::string message = transportMessage("TLS handshake with the API server", ec);
                    if (ec.category() == net::error::get_ssl_category()) {
                        const long verify = SSL_get_verify_result(self->stream_->native_handle());
                        if (verify != X509_V_OK)
                            message += " (" + std::string(X509_verify_cert_error_string(verify)) + ")";
                    }
                    return done(message);
                }
                self->open_ = true;
                beast::get_lowest_layer(*self->stream_).expires_never();
                done("");
            });
    }

    void readMore(std::chrono::milliseconds idle, std::function<bool(std::string&)> body,
                  std::function<void(beast::error_code)> end) {
        if (parser_->is_done()) return end({});
        beast::get_lowest_layer(*stream_).expires_after(idle);
        http::async_read_some(
            *stream_, buffer_, *parser_,
            [self = shared_from_this(), idle, body, end](const beast::error_code& ec, std::size_t) {
                if (ec) return end(ec);
                if (!body(self->parser_->get().body())) return;  // consumer stopped
                self->readMore(idle, body, end);
            });
    }

    net::io_context& loop_;
    ssl::context& tls_;
    const Kubeconfig& config_;
    const ClientOptions& options_;
    tcp::resolver resolver_;
    std::optional<beast::ssl_stream<beast::tcp_stream>> stream_;
    beast::flat_buffer buffer_;
    std::optional<http::response_parser<http::string_body>> parser_;
    bool open_ = false;
};

struct Call {
    http::verb verb;
    std::string target;
    std::string body;
    std::string contentType;
    bool idempotent = true;
    ResultHandler done;
    int maxAttempts = 0;  // 0: the client's
    std::optional<Clock::time_point> deadline;
    Clock::time_point queuedAt;  // first queued
    // Since when it waits for an answer: from being queued, and again from being queued once
    // more after an HTTP answer it is retried after; none while it waits to retry.
    std::optional<Clock::time_point> waitingSince;
    int attempts = 0;
    int failures = 0;
    bool freshRetried = false;
};

}  // namespace

std::string ApiResult::describe() const {
    if (code == 0) return message;
    std::string text = std::to_string(code);
    if (!reason.empty()) text += " " + reason;
    if (!message.empty()) text += ": " + message;
    return text;
}

std::string collectionPath(const std::string& groupVersion, const std::string& namespaceName,
                           const std::string& resource) {
    std::string path = groupVersion == "v1" ? "/api/v1" : "/apis/" + groupVersion;
    if (!namespaceName.empty()) path += "/namespaces/" + namespaceName;
    return path + "/" + resource;
}

std::string queryEscape(const std::string& value) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : value) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
            out.push_back(static_cast<char>(c));
        } else {
            out.push_back('%');
            out.push_back(kHex[c >> 4]);
            out.push_back(kHex[c & 15]);
        }
    }
    return out;
}

struct ApiClient::Impl : std::enable_shared_from_this<ApiClient::Impl> {
    Impl(net::io_context& loop, Kubeconfig kubeconfig, ClientOptions clientOptions)
        : loop(loop),
          config(std::move(kubeconfig)),
          options(std::move(clientOptions)),
          tls(ssl::context::tls_client),
          token(config) {}

    // Returns why the TLS settings cannot be used, or empty.
    std::string setUpTls() {
        try {
            tls.set_verify_mode(ssl::verify_peer);
            tls.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                            ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
            if (config.caPem.empty()) {
                tls.set_default_verify_paths();
            } else {
                tls.add_certificate_authority(net::buffer(config.caPem));
            }
        } catch (const boost::system::system_error& e) {
            return config.file + ": the certificate authority cannot be used: " + e.code().message();
        }
        try {
            if (!config.clientCertificatePem.empty()) {
                tls.use_certificate_chain(net::buffer(config.clientCertificatePem));
                tls.use_private_key(net::buffer(config.clientKeyPem), ssl::context::pem);
            }
        } catch (const boost::system::system_error& e) {
            return config.file + ": the client certificate or key cannot be used: " + e.code().message();
        }
        return "";
    }

    std::shared_ptr<Request> makeRequest(http::verb verb, const std::string& target, std::string body,
                                         const std::string& contentType, std::string& error) {
        auto bearer = token.current(error);
        if (!bearer) return nullptr;
        auto request = std::make_shared<Request>(verb, config.pathPrefix + target, 11);
        const bool ipv6 = config.host.find(':') != std::string::npos;
        request->set(http::field::host, (ipv6 ? "[" + config.host + "]" : config.host) + ":" + config.port);
        request->set(http::field::user_agent, options.userAgent);
        request->set(http::field::accept, "application/json");
        if (!bearer->empty()) request->set(http::field::authorization, "Bearer " + *bearer);
        if (!contentType.empty()) request->set(http::field::content_type, contentType);
        if (!body.empty() || verb == http::verb::post || verb == http::verb::put ||
            verb == http::verb::patch) {
            request->body() = std::move(body);
            request->prepare_payload();
        }
        request->keep_alive(true);
        return request;
    }

    void enqueue(std::shared_ptr<Call> call) {
        if (stopped) return;
        if (pending.size() >= options.maxQueued) {
            // Bounded: behind an API server that does not answer, new work fails at once
            // instead of piling up (and being sent, long stale, when it answers again).
            auto failure =
                transportFailure(std::to_string(pending.size()) + " calls already wait for the API server");
            net::post(loop, [self = shared_from_this(), call, failure = std::move(failure)]() mutable {
                if (!self->stopped && call->done) call->done(std::move(failure));
            });
            return;
        }
        call->queuedAt = Clock::now();
        call->waitingSince = call->queuedAt;
        pending.push_back(call);
        queue.push_back(std::move(call));
        updateWaiting();
        watchQueueDeadlines();
        pump();
    }

    void pump() {
        if (busy || queue.empty() || stopped) return;
        busy = true;
        auto call = queue.front();
        queue.pop_front();
        if (call->deadline && Clock::now() >= *call->deadline) {
            busy = false;
            expire(call);
            return pump();
        }
        send(call);
    }

    // A queued call is answered at its deadline, not when the call ahead of it ends.
    void watchQueueDeadlines() {
        std::optional<Clock::time_point> earliest;
        for (const auto& call : queue)
            if (call->deadline && (!earliest || *call->deadline < *earliest)) earliest = call->deadline;
        if (!earliest) {
            queueTimer.cancel();
            return;
        }
        queueTimer.expires_at(*earliest);
        queueTimer.async_wait([self = shared_from_this()](const beast::error_code& ec) {
            if (ec || self->stopped) return;
            const auto now = Clock::now();
            std::vector<std::shared_ptr<Call>> expired;
            std::erase_if(self->queue, [&](const std::shared_ptr<Call>& call) {
                if (!call->deadline || now < *call->deadline) return false;
                expired.push_back(call);
                return true;
            });
            for (auto& call : expired) {
                if (self->stopped) return;
                self->expire(call);
            }
            self->watchQueueDeadlines();
        });
    }

    void expire(std::shared_ptr<Call> call) {
        // Timed out without an answer: unreachable, unless the server answered something
        // meanwhile (it is slow on the call ahead, not gone).
        if (state.lastAnswer < call->queuedAt) state.reachable = false;
        finish(call, transportFailure("no answer from the API server before the call's deadline",
                                      std::max(call->attempts, 1)));
    }

    void updateWaiting() {
        state.waitingSince.reset();
        for (const auto& call : pending)
            if (call->waitingSince && (!state.waitingSince || *call->waitingSince < *state.waitingSince))
                state.waitingSince = call->waitingSince;
    }

    void send(std::shared_ptr<Call> call) {
        ++call->attempts;
        std::string error;
        auto request = makeRequest(call->verb, call->target, call->body, call->contentType, error);
        if (!request) {
            busy = false;
            finish(call, transportFailure(error));
            return pump();
        }
        auto self = shared_from_this();
        if (!connection) connection = std::make_shared<Connection>(loop, tls, config, options);
        if (connection->isOpen()) return exchange(call, request, /*reused=*/true);
        connection->open(
            [self, call, request](std::string error) {
                if (self->stopped) return;
                if (!error.empty()) return self->failed(call, error, /*sent=*/false);
                self->exchange(call, request, false);
            },
            call->deadline);
    }

    void exchange(std::shared_ptr<Call> call, std::shared_ptr<Request> request, bool reused) {
        ++state.requests;
        auto self = shared_from_this();
        const auto timeout = within(options.requestTimeout, call->deadline);
        connection->exchange(request, timeout, [self, call, reused](beast::error_code ec, Response response) {
            if (self->stopped) return;
            if (ec) {
                self->connection->close();
                // The server may close a kept-alive connection just as a request goes out:
                // that one request is sent again at once on a new connection.
                if (reused && !call->freshRetried &&
                    (ec == http::error::end_of_stream || ec == net::error::connection_reset ||
                     ec == net::error::eof || ec == net::error::broken_pipe ||
                     ec == net::ssl::error::stream_truncated)) {
                    call->freshRetried = true;
                    --call->attempts;
                    return self->send(call);
                }
                return self->failed(call, transportMessage("request to the API server", ec), /*sent=*/true);
            }
            if (!response.keep_alive()) self->connection->close();
            self->answered(call, std::move(response));
        });
    }

    void failed(std::shared_ptr<Call> call, const std::string& message, bool sent) {
        busy = false;
        state.reachable = false;
        // What was never sent is safe to send again; what was sent only when idempotent.
        const auto delay = backoffDelay(options, call->failures + 1);
        if ((call->idempotent || !sent) && mayRetry(*call, delay)) {
            ++call->failures;
            retryLater(call, delay, message);
        } else {
            finish(call, transportFailure(message, std::max(call->attempts, 1)));
        }
        pump();
    }

    void answered(std::shared_ptr<Call> call, Response response) {
        busy = false;
        state.reachable = true;
        state.lastAnswer = Clock::now();
        call->waitingSince.reset();
        updateWaiting();
        ApiResult result;
        result.code = response.result_int();
        result.attempts = call->attempts;
        readStatus(result, response.body());
        if (result.code == 401) token.invalidate();  // a rotated token is read again
        std::optional<std::chrono::milliseconds> delay;
        if (result.code == 429 || (result.code >= 500 && call->idempotent)) {
            // A 429 was refused by priority and fairness before any work: any call may go
            // again; a 5xx only when sending it twice is harmless.
            delay = retryAfter(response, options.retryAfterMax);
            if (!delay) delay = backoffDelay(options, ++call->failures);
        }
        if (delay && mayRetry(*call, *delay)) {
            retryLater(call, *delay, result.describe());
        } else {
            finish(call, std::move(result));
        }
        pump();
    }

    // Whether another attempt after `delay` fits the call's attempts and deadline.
    bool mayRetry(const Call& call, std::chrono::milliseconds delay) const {
        const int most = call.maxAttempts > 0 ? call.maxAttempts : options.maxAttempts;
        if (call.attempts >= most) return false;
        return !call.deadline || Clock::now() + delay < *call.deadline;
    }

    void retryLater(std::shared_ptr<Call> call, std::chrono::milliseconds delay, const std::string& why) {
        ++state.retries;
        log.debug() << call->verb << " " << call->target << ": " << why << "; again in " << delay.count()
                    << " ms";
        auto timer = std::make_shared<net::steady_timer>(loop, delay);
        timers.push_back(timer);
        timer->async_wait([self = shared_from_this(), call, timer](const beast::error_code& ec) {
            std::erase(self->timers, timer);
            if (ec || self->stopped) return;
            if (!call->waitingSince) call->waitingSince = Clock::now();
            self->updateWaiting();
            self->queue.push_front(call);
            self->watchQueueDeadlines();
            self->pump();
        });
    }

    void finish(std::shared_ptr<Call> call, ApiResult result) {
        std::erase(pending, call);
        updateWaiting();
        if (result.code == 0 || result.code >= 500 || result.code == 401 || result.code == 403 ||
            result.code == 429)
            state.lastError = result.describe();
        else
            state.lastError.clear();
        if (call->done) call->done(std::move(result));
    }

    void stop() {
        stopped = true;
        queue.clear();
        pending.clear();
        state.waitingSince.reset();
        queueTimer.cancel();
        for (auto& timer : timers) timer->cancel();
        timers.clear();
        if (connection) connection->close();
    }

    net::io_context& loop;
    Kubeconfig config;
    ClientOptions options;
    ssl::context tls;
    BearerToken token;
    std::string tlsProblem;
    ClientState state;
    std::shared_ptr<Connection> connection;  // for requests
    std::deque<std::shared_ptr<Call>> queue;
    // Accepted and not yet answered: queued, in flight or waiting to retry.
    std::vector<std::shared_ptr<Call>> pending;
    net::steady_timer queueTimer{loop};  // the earliest deadline of a queued call
    std::vector<std::shared_ptr<net::steady_timer>> timers;
    bool busy = false;
    bool stopped = false;
};

void ApiClient::useToken(const std::string& token) {
    impl_->config.token = token;
    impl_->token.replace(token);
}

ApiClient::ApiClient(net::io_context& loop, Kubeconfig config, ClientOptions options)
    : impl_(std::make_shared<Impl>(loop, std::move(config), std::move(options))) {
    impl_->tlsProblem = impl_->setUpTls();
    if (!impl_->tlsProblem.empty()) impl_->state.lastError = impl_->tlsProblem;
}

ApiClient::~ApiClient() {
    impl_->stop();
}

namespace {
std::shared_ptr<Call> makeCall(http::verb verb, std::string target, std::string body, std::string contentType,
                               bool idempotent, ResultHandler done, CallOptions options = {}) {
    auto call = std::make_shared<Call>();
    call->verb = verb;
    call->target = std::move(target);
    call->body = std::move(body);
    call->contentType = std::move(contentType);
    call->idempotent = idempotent;
    call->done = std::move(done);
    call->maxAttempts = options.maxAttempts;
    if (options.deadline.count() > 0) call->deadline = Clock::now() + options.deadline;
    return call;
}
}  // namespace

#define DEVLET_KUBE_REFUSE_IF_TLS_UNUSABLE(done)                                  \
    if (!impl_->tlsProblem.empty()) {                                             \
        net::post(impl_->loop, [impl = impl_, done = std::move(done)] {           \
            if (!impl->stopped && done) done(transportFailure(impl->tlsProblem)); \
        });                                                                       \
        return;                                                                   \
    }

void ApiClient::get(const std::string& path, ResultHandler done, CallOptions options) {
    list(path, "", std::move(done), options);
}

void ApiClient::list(const std::string& path, const std::string& query, ResultHandler done,
                     CallOptions options) {
    DEVLET_KUBE_REFUSE_IF_TLS_UNUSABLE(done);
    impl_->enqueue(makeCall(http::verb::get, query.empty() ? path : path + "?" + query, "", "", true,
                            std::move(done), options));
}

void ApiClient::create(const std::string& collection, const json::value& object, ResultHandler done,
                       CallOptions options) {
    DEVLET_KUBE_REFUSE_IF_TLS_UNUSABLE(done);
    // Not idempotent: a create that reached the server before the connection broke would
    // come back as AlreadyExists, and the caller must decide what that means.
    impl_->enqueue(makeCall(http::verb::post, collection, json::serialize(object), "application/json", false,
                            std::move(done), options));
}

void ApiClient::replace(const std::string& path, const json::value& object, ResultHandler done,
                        CallOptions options) {
    DEVLET_KUBE_REFUSE_IF_TLS_UNUSABLE(done);
    impl_->enqueue(makeCall(http::verb::put, path, json::serialize(object), "application/json", true,
                            std::move(done), options));
}

void ApiClient::apply(const std::string& path, const json::value& object, const std::string& fieldManager,
                      bool force, ResultHandler done, CallOptions options) {
    DEVLET_KUBE_REFUSE_IF_TLS_UNUSABLE(done);
    // Strict: a field the API server does not know fails the request instead of being dropped
    // (Kubernetes 1.27 and later; older servers ignore the parameter).
    std::string target = path + "?fieldManager=" + queryEscape(fieldManager) + (force ? "&force=true" : "") +
                         "&fieldValidation=Strict";
    impl_->enqueue(makeCall(http::verb::patch, std::move(target), json::serialize(object),
                            "application/apply-patch+yaml", true, std::move(done), options));
}

void ApiClient::remove(const std::string& path, const DeletePreconditions& preconditions, ResultHandler done,
                       CallOptions call) {
    DEVLET_KUBE_REFUSE_IF_TLS_UNUSABLE(done);
    json::object options{
        {"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"propagationPolicy", "Background"}};
    json::object conditions;
    if (!preconditions.resourceVersion.empty()) conditions["resourceVersion"] = preconditions.resourceVersion;
    if (!preconditions.uid.empty()) conditions["uid"] = preconditions.uid;
    if (!conditions.empty()) options["preconditions"] = std::move(conditions);
    // With a precondition a repeated DELETE answers 404 or 409, never deletes a newer object.
    impl_->enqueue(makeCall(http::verb::delete_, path, json::serialize(options), "application/json", true,
                            std::move(done), call));
}

#undef DEVLET_KUBE_REFUSE_IF_TLS_UNUSABLE

void ApiClient::stop() {
    impl_->stop();
}
const ClientState& ApiClient::state() const {
    return impl_->state;
}
const Kubeconfig& ApiClient::config() const {
    return impl_->config;
}
const std::string& ApiClient::problem() const {
    return impl_->tlsProblem;
}

// ---------------------------------------------------------------------------------------

namespace {

// How a watch ended, as far as what comes next depends on it.
struct WatchEnd {
    enum class How {
        NotAnswered,  // refused, connect or TLS failed: no headers came
        Answered,     // the answer ended: `code` is its status (200: the server ended the stream)
        ErrorEvent,   // a 200 stream carried an ERROR event with `code`
        Broken,       // a 200 stream that cannot be trusted: malformed, oversized, silent
        Cut,          // a 200 stream the connection ended (reset, EOF) before its last chunk
    } how = How::NotAnswered;
    int code = 0;
    bool tooLarge = false;  // 504 "Too large resource version"
};

enum class AfterWatch {
    WatchAgain,       // from the last version, now
    WatchAgainLater,  // from the same version, after Retry-After or backoff
    ListAgain,        // now
    ListAgainLater,   // after Retry-After or backoff
};

// The one place that decides whether the version a watch started from is still good: a
// watch that never started, or whose connection was cut, keeps it (the server replays what
// followed it, as client-go's reflector relies on); one that may have missed events unseen
// (an ERROR, a stream malformed or silent past idleTimeout: a half-open connection) or that
// the server cannot serve lists again.
AfterWatch afterWatch(const WatchEnd& end) {
    using How = WatchEnd::How;
    if (end.how == How::NotAnswered || end.how == How::Cut) return AfterWatch::WatchAgainLater;
    if (end.code == 410) return AfterWatch::ListAgain;  // the version is gone
    // A watch from a version the server has not reached gets this answer forever.
    if (end.tooLarge || end.how != How::Answered) return AfterWatch::ListAgainLater;
    if (end.code == 200) return AfterWatch::WatchAgain;  // the server ended it (timeoutSeconds)
    if (end.code == 429) return AfterWatch::WatchAgainLater;
    return AfterWatch::ListAgainLater;
}

std::string describeDuration(std::chrono::milliseconds duration) {
    if (duration.count() % 1000 == 0) return std::to_string(duration.count() / 1000) + " s";
    return std::to_string(duration.count()) + " ms";
}

}  // namespace

struct Informer::Impl : std::enable_shared_from_this<Informer::Impl> {
    Impl(ApiClient::Impl& client, std::string collection, Handlers handlers, Options options)
        : client(client.shared_from_this()),
          collection(std::move(collection)),
          handlers(std::move(handlers)),
          options(std::move(options)),
          timer(client.loop) {}

    enum class Next { Watch, List };

    std::string selectors() const {
        std::string query;
        if (!options.labelSelector.empty()) query += "&labelSelector=" + queryEscape(options.labelSelector);
        if (!options.fieldSelector.empty()) query += "&fieldSelector=" + queryEscape(options.fieldSelector);
        return query;
    }

    bool current(std::uint64_t mine) const { return !stopped && mine == attempt; }

    // A list from the start. Lists carry no resourceVersion: the server answers from etcd, so
    // a list is never "too large" and always gets a version a watch can start from; a list
    // that fails (504 included, after the client's own retries) is done again after backoff.
    void startList() {
        if (stopped) return;
        listPage(++attempt, "", std::make_shared<std::map<std::string, json::object>>(), "");
    }

    void listPage(std::uint64_t mine, const std::string& continueToken,
                  std::shared_ptr<std::map<std::string, json::object>> pages, std::string listVersion) {
        listing = true;
        std::string query = "limit=500" + selectors();
        if (!continueToken.empty()) query += "&continue=" + queryEscape(continueToken);
        auto call = makeCall(
            http::verb::get, collection + "?" + query, "", "", true,
            [self = shared_from_this(), mine, pages, listVersion](ApiResult result) mutable {
                if (!self->current(mine)) return;
                ++self->state.lists;
                self->state.connected = result.code != 0;
                if (!result.ok())
                    return self->failed("listing " + self->collection + ": " + result.describe(), Next::List);
                const json::object* body = result.body.if_object();
                const json::value* items = body ? body->if_contains("items") : nullptr;
                if (!items || !items->is_array())
                    return self->failed("listing " + self->collection + ": no items", Next::List);
                for (const json::value& item : items->get_array()) {
                    if (!item.is_object()) continue;
                    std::string name = stringAt(item.get_object(), {"metadata", "name"});
                    if (!name.empty()) (*pages)[name] = item.get_object();
                }
                if (listVersion.empty()) listVersion = stringAt(*body, {"metadata", "resourceVersion"});
                std::string next = stringAt(*body, {"metadata", "continue"});
                if (!next.empty()) return self->listPage(mine, next, pages, listVersion);
                self->listed(std::move(*pages), listVersion);
            });
        client->enqueue(call);
    }

    // What changed against the cache is reported as events, so a relist neither repeats
    // what was known nor loses what happened while no watch was open. Each difference goes
    // into the cache as it is reported: a handler that relists or stops leaves a cache that
    // says exactly what was reported.
    void listed(std::map<std::string, json::object> now, const std::string& version) {
        const std::uint64_t mine = attempt;
        listing = false;
        state.resourceVersion = version;
        state.synced = true;
        state.lastError.clear();
        failures = 0;
        std::vector<std::string> gone;
        for (const auto& [name, object] : cache)
            if (!now.contains(name)) gone.push_back(name);
        for (const auto& name : gone) {
            auto node = cache.extract(name);
            state.objects = cache.size();
            if (handlers.vanished)
                handlers.vanished(node.mapped());
            else if (handlers.deleted)
                handlers.deleted(node.mapped());
            if (!current(mine)) return;
        }
        for (const auto& [name, object] : now) {
            auto it = cache.find(name);
            const bool known = it != cache.end();
            const bool changed = known && stringAt(it->second, {"metadata", "resourceVersion"}) !=
                                              stringAt(object, {"metadata", "resourceVersion"});
            cache[name] = object;
            state.objects = cache.size();
            if (!known) {
                if (handlers.added) handlers.added(object);
            } else if (changed) {
                if (handlers.modified) handlers.modified(object);
            }
            if (!current(mine)) return;
        }
        if (handlers.synced) handlers.synced();
        if (!current(mine)) return;
        notify();
        if (current(mine)) watch();
    }

    void watch() {
        if (stopped) return;
        const std::uint64_t mine = ++attempt;
        watchCode = 0;
        watchBody.clear();
        watchRetryAfter.reset();
        std::string error;
        std::uniform_int_distribution<long long> extra(0, options.watchTimeout.count());
        const auto seconds = options.watchTimeout.count() + extra(randomSource());
        std::string target = collection + "?watch=1&allowWatchBookmarks=true&resourceVersion=" +
                             queryEscape(state.resourceVersion) +
                             "&timeoutSeconds=" + std::to_string(seconds) + selectors();
        auto request = client->makeRequest(http::verb::get, target, "", "", error);
        if (!request) return failed(error, Next::Watch);
        if (!connection)
            connection =
                std::make_shared<Connection>(client->loop, client->tls, client->config, client->options);
        auto self = shared_from_this();
        auto go = [self, request, mine] {
            ++self->state.watches;
            ++self->client->state.requests;
            self->streamStarted = Clock::now();
            // Bookmarks come about once a minute: a stream silent for idleTimeout is dead, or
            // blind, whatever TCP says.
            self->connection->stream(
                request, self->options.idleTimeout,
                [self, mine](int code, const http::fields& headers) {
                    if (!self->current(mine)) return;
                    self->answered();
                    self->state.connected = true;
                    self->watchCode = code;
                    if (code == 200) {
                        self->state.watchCurrent = true;
                        self->state.lastError.clear();
                        self->failures = 0;
                        self->notify();
                    } else {
                        self->watchRetryAfter = retryAfter(headers, self->client->options.retryAfterMax);
                    }
                },
                [self, mine](std::string& body) {
                    if (!self->current(mine)) return false;
                    self->answered();
                    if (self->watchCode != 200) {
                        // The whole error answer (a Status) first; its start is enough.
                        const std::size_t room =
                            kMaxWatchErrorBody - std::min(kMaxWatchErrorBody, self->watchBody.size());
                        self->watchBody.append(body, 0, std::min(room, body.size()));
                        body.clear();
                        return true;
                    }
                    return self->consume(body, mine);
                },
                [self, mine](beast::error_code ec) {
                    if (self->current(mine)) self->streamEnded(ec);
                });
        };
        if (connection->isOpen()) return go();
        connection->open([self, go, mine](std::string error) {
            if (!self->current(mine)) return;
            if (!error.empty()) {
                self->dropConnection();
                self->state.connected = false;
                self->client->state.reachable = false;
                return self->watchEnded({}, "watch of " + self->collection + ": " + error);
            }
            go();
        });
    }

    // Any byte from the server is an answer: the API is there.
    void answered() {
        client->state.reachable = true;
        client->state.lastAnswer = Clock::now();
    }

    // Handles the complete lines in `body`; false when the stream is abandoned.
    bool consume(std::string& body, std::uint64_t mine) {
        std::size_t start = 0;
        for (;;) {
            const auto newline = body.find('\n', start);
            if (newline == std::string::npos) break;
            std::string_view line(body.data() + start, newline - start);
            start = newline + 1;
            if (line.find_first_not_of(" \r\t") == std::string_view::npos) continue;
            if (!event(line, mine)) {
                body.clear();
                return false;
            }
        }
        body.erase(0, start);
        if (body.size() > kMaxWatchLine) {
            streamBroke("an event larger than 16 MiB");
            return false;
        }
        return true;
    }

    // False when the stream is abandoned (an ERROR, a malformed event, or a handler that
    // relisted or stopped).
    bool event(std::string_view line, std::uint64_t mine) {
        json::error_code ec;
        json::value parsed = json::parse(line, ec);
        const json::object* event = parsed.if_object();
        const json::value* typeValue = event ? event->if_contains("type") : nullptr;
        const json::value* objectValue = event ? event->if_contains("object") : nullptr;
        if (ec || !typeValue || !typeValue->is_string() || !objectValue || !objectValue->is_object()) {
            streamBroke("a malformed event");
            return false;
        }
        const std::string type(typeValue->get_string());
        const json::object& object = objectValue->get_object();
        if (type == "ERROR") {
            ApiResult status;
            const json::value* code = object.if_contains("code");
            status.code = code && code->is_int64() ? static_cast<int>(code->get_int64()) : 500;
            readStatus(status, json::serialize(object));
            dropConnection();
            watchEnded({WatchEnd::How::ErrorEvent, status.code, resourceVersionTooLarge(status)},
                       "watch of " + collection + ": " + status.describe());
            return false;
        }
        const std::string version = stringAt(object, {"metadata", "resourceVersion"});
        if (!version.empty()) state.resourceVersion = version;
        if (type == "BOOKMARK") return true;
        const std::string name = stringAt(object, {"metadata", "name"});
        if (type == "ADDED" || type == "MODIFIED") {
            const bool known = cache.contains(name);
            cache[name] = object;
            state.objects = cache.size();
            // A relist may already have reported it.
            auto& handler = known ? handlers.modified : handlers.added;
            if (handler) handler(object);
        } else if (type == "DELETED") {
            if (cache.erase(name) && handlers.deleted) {
                state.objects = cache.size();
                handlers.deleted(object);
            }
        }
        return current(mine);
    }

    // A 200 stream that cannot go on: what it missed is unknown.
    void streamBroke(const std::string& why) {
        dropConnection();
        watchEnded({WatchEnd::How::Broken, 200, false}, "watch of " + collection + ": " + why);
    }

    void streamEnded(beast::error_code ec) {
        if (ec) {
            dropConnection();
            if (watchCode == 0 || watchCode == 200) {
                state.connected = false;
                client->state.reachable = false;
            }
            if (watchCode == 0) return watchEnded({}, transportMessage("watch of " + collection, ec));
            if (watchCode == 200) {
                if (ec == beast::error::timeout)
                    return streamBroke("nothing received for " + describeDuration(options.idleTimeout));
                return watchEnded({WatchEnd::How::Cut, 200, false},
                                  "watch of " + collection + ": " + transportMessage("stream", ec));
            }
            // An error answer cut short: its status decides.
        } else if (!connection->keepAlive()) {
            dropConnection();
        }
        if (watchCode == 200) return watchEnded({WatchEnd::How::Answered, 200, false}, "");
        ApiResult status;
        status.code = watchCode;
        readStatus(status, watchBody);
        if (watchCode == 401) client->token.invalidate();
        watchEnded({WatchEnd::How::Answered, watchCode, resourceVersionTooLarge(status)},
                   "watch of " + collection + ": " + status.describe());
    }

    void watchEnded(const WatchEnd& end, const std::string& error) {
        const std::uint64_t mine = attempt;
        state.watchCurrent = false;
        switch (afterWatch(end)) {
            case AfterWatch::WatchAgain:
                notify();
                if (!current(mine)) return;
                // A server that ends every stream at once is not asked again and again in a
                // tight loop.
                if (Clock::now() - streamStarted < std::chrono::seconds(1))
                    return later(backoffDelay(client->options, ++quickEnds), [this] { watch(); });
                quickEnds = 0;
                return watch();
            case AfterWatch::WatchAgainLater:
                return failed(error, Next::Watch, watchRetryAfter);
            case AfterWatch::ListAgain:
                log.debug() << "watch of " << collection << ": resourceVersion " << state.resourceVersion
                            << " is gone; listing again";
                notify();
                if (current(mine)) startList();
                return;
            case AfterWatch::ListAgainLater:
                return failed(error, Next::List, watchRetryAfter);
        }
    }

    // Counted as failed; the next try after `delay` (a capped Retry-After) or backoff.
    void failed(const std::string& error, Next next, std::optional<std::chrono::milliseconds> delay = {}) {
        const std::uint64_t mine = attempt;
        state.watchCurrent = false;
        if (error != state.lastError) log.debug() << error;
        state.lastError = error;
        const auto backoff = backoffDelay(client->options, ++failures);
        notify();
        if (!current(mine)) return;
        // Without a list there is no version to watch from; a list that failed halfway (after
        // a 410) must be done again whole.
        if (listing || state.resourceVersion.empty() || !state.synced) next = Next::List;
        if (next == Next::List) {
            later(delay.value_or(backoff), [this] { startList(); });
        } else {
            later(delay.value_or(backoff), [this] { watch(); });
        }
    }

    void later(std::chrono::milliseconds delay, std::function<void()> next) {
        timer.expires_after(delay);
        timer.async_wait([self = shared_from_this(), next, mine = attempt](const beast::error_code& ec) {
            if (ec || !self->current(mine)) return;
            next();
        });
    }

    // Tells the owner when what State shows about the connection changed.
    void notify() {
        auto now = std::tie(state.connected, state.watchCurrent, state.lastError);
        if (stopped || (notified && now == *notified)) return;
        notified = std::make_tuple(state.connected, state.watchCurrent, state.lastError);
        if (handlers.stateChanged) handlers.stateChanged();
    }

    // The stream's handlers keep the Connection alive until they have run; a new watch gets
    // a new one.
    void dropConnection() {
        if (!connection) return;
        connection->close();
        connection.reset();
    }

    void relist() {
        if (!started || stopped) return;
        const std::uint64_t mine = ++attempt;  // the stream, list or timer under way is dropped
        timer.cancel();
        dropConnection();
        state.watchCurrent = false;
        notify();
        if (current(mine)) startList();
    }

    void stop() {
        stopped = true;
        ++attempt;
        timer.cancel();
        dropConnection();
    }

    std::shared_ptr<ApiClient::Impl> client;
    std::string collection;
    Handlers handlers;
    Options options;
    State state;
    std::map<std::string, json::object> cache;
    std::shared_ptr<Connection> connection;  // this watch's own
    net::steady_timer timer;
    // Of the current list, watch or timer: what an earlier one reports is dropped.
    std::uint64_t attempt = 0;
    int watchCode = 0;      // of the current watch's answer; 0 before its headers
    std::string watchBody;  // a non-200 answer's Status
    std::optional<std::chrono::milliseconds> watchRetryAfter;
    std::optional<std::tuple<bool, bool, std::string>> notified;
    Clock::time_point streamStarted;
    int quickEnds = 0;     // streams in a row that the server ended within a second
    bool listing = false;  // a list is under way or failed; the next try lists
    int failures = 0;
    bool started = false;
    bool stopped = false;
};

Informer::Informer(ApiClient& client, std::string collection, Handlers handlers, Options options)
    : impl_(std::make_shared<Impl>(*client.impl_, std::move(collection), std::move(handlers),
                                   std::move(options))) {}

Informer::~Informer() {
    impl_->stop();
}

void Informer::start() {
    if (!impl_->client->tlsProblem.empty()) {
        impl_->state.lastError = impl_->client->tlsProblem;
        return;
    }
    if (impl_->started) return;
    impl_->started = true;
    impl_->startList();
}

void Informer::stop() {
    impl_->stop();
}
void Informer::relist() {
    impl_->relist();
}
const Informer::State& Informer::state() const {
    return impl_->state;
}
const std::map<std::string, json::object>& Informer::objects() const {
    return impl_->cache;
}

}  // namespace devlet::kube
