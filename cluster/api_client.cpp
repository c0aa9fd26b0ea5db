#include "cluster/api_client.h"

#include <algorithm>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include "cluster/api_client_impl.h"
#include "runtime/log.h"

namespace devlet::kube {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace json = boost::json;

namespace {

constexpr Log log{"kube"};

}  // namespace

ApiClient::Impl::Impl(net::io_context& loop, Kubeconfig kubeconfig, ClientOptions clientOptions)
    : loop(loop),
      config(std::move(kubeconfig)),
      options(std::move(clientOptions)),
      tls(ssl::context::tls_client),
      token(config) {}

std::string ApiClient::Impl::setUpTls() {
    try {
        tls.set_verify_mode(ssl::verify_peer);
        tls.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                        ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
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

std::shared_ptr<Request> ApiClient::Impl::makeRequest(http::verb verb, const std::string& target,
                                                      std::string body, const std::string& contentType,
                                                      std::string& error) {
    auto bearer = token.current(error);
    if (!bearer) return nullptr;
    auto request = std::make_shared<Request>(verb, config.pathPrefix + target, 11);
    const bool ipv6 = config.host.find(':') != std::string::npos;
    request->set(http::field::host, (ipv6 ? "[" + config.host + "]" : config.host) + ":" + config.port);
    request->set(http::field::user_agent, options.userAgent);
    request->set(http::field::accept, "application/json");
    if (!bearer->empty()) request->set(http::field::authorization, "Bearer " + *bearer);
    if (!contentType.empty()) request->set(http::field::content_type, contentType);
    if (!body.empty() || verb == http::verb::post || verb == http::verb::put || verb == http::verb::patch) {
        request->body() = std::move(body);
        request->prepare_payload();
    }
    request->keep_alive(true);
    return request;
}

void ApiClient::Impl::enqueue(std::shared_ptr<Call> call) {
    if (lifetime.ended()) return;
    if (pending.size() >= options.maxQueued) {
        // Bounded: behind an API server that does not answer, new work fails at once
        // instead of piling up (and being sent, long stale, when it answers again).
        auto failure =
            transportFailure(std::to_string(pending.size()) + " calls already wait for the API server");
        net::post(loop, lifetime.guard([call, failure = std::move(failure)]() mutable {
            if (call->done) call->done(std::move(failure));
        }));
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

void ApiClient::Impl::pump() {
    if (busy || queue.empty() || lifetime.ended()) return;
    busy = true;
    auto call = queue.front();
    queue.pop_front();
    if (call->deadline && Clock::now() >= *call->deadline) {
        busy = false;
        if (expire(call)) pump();
        return;
    }
    send(call);
}

// A queued call is answered at its deadline, not when the call ahead of it ends.
void ApiClient::Impl::watchQueueDeadlines() {
    std::optional<Clock::time_point> earliest;
    for (const auto& call : queue)
        if (call->deadline && (!earliest || *call->deadline < *earliest)) earliest = call->deadline;
    if (!earliest) {
        queueTimer.cancel();
        return;
    }
    queueTimer.expires_at(*earliest);
    queueTimer.async_wait([this, alive = lifetime.token()](const beast::error_code& ec) {
        if (ec || alive.expired()) return;
        const auto now = Clock::now();
        std::vector<std::shared_ptr<Call>> expired;
        std::erase_if(queue, [&](const std::shared_ptr<Call>& call) {
            if (!call->deadline || now < *call->deadline) return false;
            expired.push_back(call);
            return true;
        });
        for (auto& call : expired) {
            if (!expire(call)) return;
        }
        watchQueueDeadlines();
    });
}

bool ApiClient::Impl::expire(const std::shared_ptr<Call>& call) {
    // Timed out without an answer: unreachable, unless the server answered something
    // meanwhile (it is slow on the call ahead, not gone).
    if (state.lastAnswer < call->queuedAt) state.reachable = false;
    return finish(call, transportFailure("no answer from the API server before the call's deadline",
                                         std::max(call->attempts, 1)));
}

void ApiClient::Impl::updateWaiting() {
    state.waitingSince.reset();
    for (const auto& call : pending)
        if (call->waitingSince && (!state.waitingSince || *call->waitingSince < *state.waitingSince))
            state.waitingSince = call->waitingSince;
}

void ApiClient::Impl::send(const std::shared_ptr<Call>& call) {
    ++call->attempts;
    std::string error;
    auto request = makeRequest(call->verb, call->target, call->body, call->contentType, error);
    if (!request) {
        busy = false;
        if (finish(call, transportFailure(error))) pump();
        return;
    }
    if (!connection) connection = std::make_shared<Connection>(loop, tls, config, options);
    if (connection->isOpen()) return exchange(call, request, /*reused=*/true);
    connection->open(lifetime.guard([this, call, request](const std::string& error) {
        if (!error.empty()) return failed(call, error, /*sent=*/false);
        exchange(call, request, false);
    }),
                     call->deadline);
}

void ApiClient::Impl::exchange(const std::shared_ptr<Call>& call, const std::shared_ptr<Request>& request,
                               bool reused) {
    ++state.requests;
    const auto timeout = within(options.requestTimeout, call->deadline);
    auto answer = [this, call, reused](beast::error_code ec, Response response) {
        if (ec) {
            connection->close();
            // The server may close a kept-alive connection just as a request goes out:
            // that one request is sent again at once on a new connection.
            if (reused && !call->freshRetried &&
                (ec == http::error::end_of_stream || ec == net::error::connection_reset ||
                 ec == net::error::eof || ec == net::error::broken_pipe ||
                 ec == net::ssl::error::stream_truncated)) {
                call->freshRetried = true;
                --call->attempts;
                return send(call);
            }
            return failed(call, transportMessage("request to the API server", ec), /*sent=*/true);
        }
        if (!response.keep_alive()) connection->close();
        answered(call, std::move(response));
    };
    connection->exchange(request, timeout, lifetime.guard(std::move(answer)));
}

void ApiClient::Impl::failed(const std::shared_ptr<Call>& call, const std::string& message, bool sent) {
    busy = false;
    state.reachable = false;
    // What was never sent is safe to send again; what was sent only when idempotent.
    const auto delay = backoffDelay(options, call->failures + 1);
    if ((call->idempotent || !sent) && mayRetry(*call, delay)) {
        ++call->failures;
        retryLater(call, delay, message);
    } else {
        if (!finish(call, transportFailure(message, std::max(call->attempts, 1)))) return;
    }
    pump();
}

void ApiClient::Impl::answered(const std::shared_ptr<Call>& call, Response response) {
    busy = false;
    state.reachable = true;
    state.lastAnswer = Clock::now();
    call->waitingSince.reset();
    updateWaiting();
    ApiResult result;
    result.code = static_cast<int>(response.result_int());
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
        if (!finish(call, std::move(result))) return;
    }
    pump();
}

// Whether another attempt after `delay` fits the call's attempts and deadline.
bool ApiClient::Impl::mayRetry(const Call& call, std::chrono::milliseconds delay) const {
    const int most = call.maxAttempts > 0 ? call.maxAttempts : options.maxAttempts;
    if (call.attempts >= most) return false;
    return !call.deadline || Clock::now() + delay < *call.deadline;
}

void ApiClient::Impl::retryLater(const std::shared_ptr<Call>& call, std::chrono::milliseconds delay,
                                 const std::string& why) {
    ++state.retries;
    log.debug() << call->verb << " " << call->target << ": " << why << "; again in " << delay.count()
                << " ms";
    auto timer = std::make_shared<net::steady_timer>(loop, delay);
    timers.push_back(timer);
    timer->async_wait([this, alive = lifetime.token(), call, timer](const beast::error_code& ec) {
        if (alive.expired()) return;
        std::erase(timers, timer);
        if (ec) return;
        if (!call->waitingSince) call->waitingSince = Clock::now();
        updateWaiting();
        queue.push_front(call);
        watchQueueDeadlines();
        pump();
    });
}

bool ApiClient::Impl::finish(const std::shared_ptr<Call>& call, ApiResult result) {
    std::erase(pending, call);
    updateWaiting();
    if (result.code == 0 || result.code >= 500 || result.code == 401 || result.code == 403 ||
        result.code == 429)
        state.lastError = result.describe();
    else
        state.lastError.clear();
    // The callback may stop or destroy the client: nothing of this object is touched after it
    // unless it is still alive.
    const Lifetime::Token alive = lifetime.token();
    if (call->done) call->done(std::move(result));
    return !alive.expired();
}

void ApiClient::Impl::stop() {
    lifetime.end();
    queue.clear();
    pending.clear();
    state.waitingSince.reset();
    queueTimer.cancel();
    for (auto& timer : timers) timer->cancel();
    timers.clear();
    if (connection) connection->close();
}

std::shared_ptr<Call> makeCall(http::verb verb, std::string target, std::string body, std::string contentType,
                               bool idempotent, ResultHandler done, CallOptions options) {
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

void ApiClient::useToken(const std::string& token) {
    loopThread_.check();
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

bool ApiClient::Impl::refuseIfTlsUnusable(ResultHandler& done) {
    if (tlsProblem.empty()) return false;
    auto refuse = [this, done = std::move(done)] {
        if (done) done(transportFailure(tlsProblem));
    };
    net::post(loop, lifetime.guard(std::move(refuse)));
    return true;
}

void ApiClient::get(const std::string& path, ResultHandler done, CallOptions options) {
    loopThread_.check();
    list(path, "", std::move(done), options);
}

void ApiClient::list(const std::string& path, const std::string& query, ResultHandler done,
                     CallOptions options) {
    loopThread_.check();
    if (impl_->refuseIfTlsUnusable(done)) return;
    impl_->enqueue(makeCall(http::verb::get, query.empty() ? path : path + "?" + query, "", "", true,
                            std::move(done), options));
}

void ApiClient::create(const std::string& collection, const json::value& object, ResultHandler done,
                       CallOptions options) {
    loopThread_.check();
    if (impl_->refuseIfTlsUnusable(done)) return;
    // Not idempotent: a create that reached the server before the connection broke would
    // come back as AlreadyExists, and the caller must decide what that means.
    impl_->enqueue(makeCall(http::verb::post, collection, json::serialize(object), "application/json", false,
                            std::move(done), options));
}

void ApiClient::replace(const std::string& path, const json::value& object, ResultHandler done,
                        CallOptions options) {
    loopThread_.check();
    if (impl_->refuseIfTlsUnusable(done)) return;
    impl_->enqueue(makeCall(http::verb::put, path, json::serialize(object), "application/json", true,
                            std::move(done), options));
}

void ApiClient::apply(const std::string& path, const json::value& object, const std::string& fieldManager,
                      bool force, ResultHandler done, CallOptions options) {
    loopThread_.check();
    if (impl_->refuseIfTlsUnusable(done)) return;
    // Strict: a field the API server does not know fails the request instead of being dropped
    // (Kubernetes 1.27 and later; older servers ignore the parameter).
    std::string target = path + "?fieldManager=" + queryEscape(fieldManager) + (force ? "&force=true" : "") +
                         "&fieldValidation=Strict";
    impl_->enqueue(makeCall(http::verb::patch, std::move(target), json::serialize(object),
                            "application/apply-patch+yaml", true, std::move(done), options));
}

void ApiClient::remove(const std::string& path, const DeletePreconditions& preconditions, ResultHandler done,
                       CallOptions call) {
    loopThread_.check();
    if (impl_->refuseIfTlsUnusable(done)) return;
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

void ApiClient::stop() {
    loopThread_.check();
    impl_->stop();
}
const ClientState& ApiClient::state() const {
    loopThread_.check();
    return impl_->state;
}
const Kubeconfig& ApiClient::config() const {
    loopThread_.check();
    return impl_->config;
}
const std::string& ApiClient::problem() const {
    loopThread_.check();
    return impl_->tlsProblem;
}

}  // namespace devlet::kube
