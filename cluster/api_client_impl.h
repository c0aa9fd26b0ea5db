#pragma once
// ApiClient's state, shared with the informers that watch through it: the call queue, the
// connection for requests, TLS, the token and what the calls saw (ClientState). Loop thread
// only. Internal to cluster/: only the client's .cpp files include it.

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http.hpp>

#include "cluster/api_client.h"
#include "cluster/api_connection.h"
#include "cluster/api_messages.h"
#include "cluster/kubeconfig.h"
#include "runtime/lifetime.h"

namespace devlet::kube {

// One call as it waits, is sent and is retried.
struct Call {
    boost::beast::http::verb verb = boost::beast::http::verb::unknown;
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

std::shared_ptr<Call> makeCall(boost::beast::http::verb verb, std::string target, std::string body,
                               std::string contentType, bool idempotent, ResultHandler done,
                               CallOptions options = {});

struct ApiClient::Impl {
    Impl(boost::asio::io_context& loop, Kubeconfig kubeconfig, ClientOptions clientOptions);

    // Returns why the TLS settings cannot be used, or empty.
    std::string setUpTls();

    // The request for `target` (below the kubeconfig's path), with the current token; null
    // with `error` set when there is no token to send.
    std::shared_ptr<Request> makeRequest(boost::beast::http::verb verb, const std::string& target,
                                         std::string body, const std::string& contentType,
                                         std::string& error);

    // Queues `call` (or fails it at once when maxQueued calls wait) and sends what is next.
    void enqueue(std::shared_ptr<Call> call);
    // Cancels every call; no callback runs afterwards.
    void stop();
    // When TLS cannot be used, answers `done` with why (posted, not at once) and returns true.
    bool refuseIfTlsUnusable(ResultHandler& done);

    void pump();
    void watchQueueDeadlines();
    // Both answer `call` and return false when its callback stopped or destroyed the client.
    bool expire(const std::shared_ptr<Call>& call);
    void updateWaiting();
    void send(const std::shared_ptr<Call>& call);
    void exchange(const std::shared_ptr<Call>& call, const std::shared_ptr<Request>& request, bool reused);
    void failed(const std::shared_ptr<Call>& call, const std::string& message, bool sent);
    void answered(const std::shared_ptr<Call>& call, Response response);
    bool mayRetry(const Call& call, std::chrono::milliseconds delay) const;
    void retryLater(const std::shared_ptr<Call>& call, std::chrono::milliseconds delay,
                    const std::string& why);
    bool finish(const std::shared_ptr<Call>& call, ApiResult result);

    boost::asio::io_context& loop;
    Kubeconfig config;
    ClientOptions options;
    boost::asio::ssl::context tls;
    BearerToken token;
    std::string tlsProblem;
    ClientState state;
    std::shared_ptr<Connection> connection;  // for requests
    std::deque<std::shared_ptr<Call>> queue;
    // Accepted and not yet answered: queued, in flight or waiting to retry.
    std::vector<std::shared_ptr<Call>> pending;
    boost::asio::steady_timer queueTimer{loop};  // the earliest deadline of a queued call
    std::vector<std::shared_ptr<boost::asio::steady_timer>> timers;
    bool busy = false;
    Lifetime lifetime;  // ended by stop(): no callback runs afterwards
};

}  // namespace devlet::kube
