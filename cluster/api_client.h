#pragma once
// A Kubernetes API client on the daemon's event loop: HTTPS (the server checked against the
// kubeconfig's CA and host name), a bearer token or a client certificate, one kept-alive
// connection for requests and one per watch, each with TCP keepalive and a TCP user timeout
// so that a peer that vanished is noticed in about 30 s (as client-go notices a dead HTTP/2
// connection). Retries what is safe to retry (429 after Retry-After; 5xx and connection
// errors of idempotent calls, with backoff and jitter, or after a Retry-After, every one cut
// to ClientOptions::retryAfterMax) and answers everything else, 409 included, as it came.
// Bounded: at most ClientOptions::maxQueued calls wait, and a call's deadline holds while it
// is queued, connecting or waiting to retry. Everything runs on the loop thread; callbacks are
// called there, never after stop() or destruction.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/json/value.hpp>

#include "cluster/kubeconfig.h"
#include "runtime/thread_bound.h"

namespace devlet::kube {

// The answer to one call. `code` 0: no HTTP answer (connection, TLS or timeout), `message`
// says which.
struct ApiResult {
    int code = 0;
    std::string reason;       // a Status's reason: "Conflict", "AlreadyExists", "NotFound", "Expired", …
    std::string message;      // a Status's message, or the transport error
    boost::json::value body;  // the parsed JSON answer (the object, a list, or the Status); null if none
    int attempts = 1;         // requests sent, retries included

    bool ok() const { return code >= 200 && code < 300; }
    bool notFound() const { return code == 404; }
    // Both are 409: a stale resourceVersion or failed precondition, or a create of a name
    // that exists.
    bool conflict() const { return code == 409 && reason != "AlreadyExists"; }
    bool alreadyExists() const { return code == 409 && reason == "AlreadyExists"; }
    bool gone() const { return code == 410; }
    // "409 Conflict: the message" or "connection refused": for logs and the status page.
    std::string describe() const;
};

using ResultHandler = std::function<void(ApiResult)>;

struct ClientOptions {
    std::chrono::milliseconds connectTimeout{5000};    // resolve + TCP connect
    std::chrono::milliseconds handshakeTimeout{5000};  // TLS
    std::chrono::milliseconds requestTimeout{15000};   // write + whole answer
    int maxAttempts = 6;                               // retries of one call, the first included
    std::chrono::milliseconds backoffInitial{250};     // doubled per retry, with jitter
    std::chrono::milliseconds backoffMax{30000};
    // Any Retry-After (429 or 5xx, calls and watches) longer than this is cut to it; a call's
    // deadline still wins (the answer is returned rather than waited past the deadline).
    std::chrono::milliseconds retryAfterMax{60000};
    // Calls accepted and not yet answered (queued, in flight or waiting to retry). One more
    // fails at once, posted to the loop, with code 0 and "N calls already wait for the API
    // server", instead of growing the queue behind an API server that does not answer.
    std::size_t maxQueued = 256;
    std::string userAgent = "devlet";
};

// Per call: fewer attempts than the client's, or a deadline after which no attempt starts
// and a running one is cut off (an answer the kubelet waits for); a call still queued at its
// deadline is answered then with a failure. Zero: the client's.
struct CallOptions {
    int maxAttempts = 0;
    std::chrono::milliseconds deadline{0};
};

// Where an object lives on the API: built by the caller, e.g.
// "/apis/coordination.k8s.io/v1/namespaces/devlet/leases" (collection) + "/slot-0".
std::string collectionPath(const std::string& groupVersion, const std::string& namespaceName,
                           const std::string& resource);
// Percent-encodes a query value (selectors).
std::string queryEscape(const std::string& value);
// The string at `pointer` (a JSON Pointer, "/metadata/name") in an object the API answered
// with; "" where there is none, or something other than a string.
std::string stringAt(const boost::json::value& value, std::string_view pointer);

struct DeletePreconditions {
    std::string resourceVersion;  // empty: none
    std::string uid;              // empty: none
};

// Reachability as the last calls saw it. "Reachable" means "answered recently": an owner
// that must say "no answer for N s" while the API server hangs (a connection that neither
// answers nor breaks) compares waitingSince and lastAnswer with now.
struct ClientState {
    // The last call or watch got an HTTP answer (any code); false after a transport failure,
    // and after a call that timed out without an answer (its own request's timeout, or its
    // deadline while queued when nothing was answered since it was queued).
    bool reachable = false;
    std::string lastError;       // the last failed call's describe(); empty after a success
    std::uint64_t requests = 0;  // HTTP requests sent (retries and watches included)
    std::uint64_t retries = 0;
    // When the last HTTP answer of any code arrived: a call's answer, a watch's headers, and
    // every event, BOOKMARK or byte a watch stream delivers. Epoch (zero) before the first.
    std::chrono::steady_clock::time_point lastAnswer{};
    // When the oldest call still without an answer was queued (a call retried after an HTTP
    // answer waits anew from when it is queued again); nullopt when no call waits. Watches
    // are not calls: a watch that hangs shows as no lastAnswer.
    std::optional<std::chrono::steady_clock::time_point> waitingSince;
};

class ApiClient {
public:
    ApiClient(boost::asio::io_context& loop, Kubeconfig config, ClientOptions options = {});
    ~ApiClient();
    ApiClient(const ApiClient&) = delete;
    ApiClient& operator=(const ApiClient&) = delete;

    // `path` is the object's (or for list/create the collection's) path from the API root;
    // `query` without '?' (e.g. "labelSelector=a%3Db&limit=500").
    void get(const std::string& path, ResultHandler done, CallOptions call = {});
    void list(const std::string& path, const std::string& query, ResultHandler done, CallOptions call = {});
    void create(const std::string& collection, const boost::json::value& object, ResultHandler done,
                CallOptions call = {});
    // PUT; the object's metadata.resourceVersion makes it an optimistic update (409 Conflict
    // when stale).
    void replace(const std::string& path, const boost::json::value& object, ResultHandler done,
                 CallOptions call = {});
    // Server-side apply (JSON is YAML, so the body is sent as application/apply-patch+yaml).
    void apply(const std::string& path, const boost::json::value& object, const std::string& fieldManager,
               bool force, ResultHandler done, CallOptions call = {});
    void remove(const std::string& path, const DeletePreconditions& preconditions, ResultHandler done,
                CallOptions call = {});

    // Cancels every call and watch; no callback runs afterwards.
    void stop();
    // A renewed bearer token in place of the kubeconfig's inline one, for every request and
    // watch from now on (a watch already open goes on as the server authenticated it).
    void useToken(const std::string& token);

    const ClientState& state() const;
    // Why the kubeconfig's CA or client certificate cannot be used (every call fails
    // with it), or empty.
    const std::string& problem() const;
    const Kubeconfig& config() const;

    struct Impl;

private:
    friend class Informer;
    // Shared with the informers that watch through this client.
    std::shared_ptr<Impl> impl_;
    ThreadBound loopThread_;  // every public member is called on the loop thread
};

// Informer-style watch of one collection: lists, then watches from the list's
// resourceVersion with bookmarks. Whenever it lists again it reports the difference against
// what it had, so no event is lost or repeated. After a watch, as client-go's reflector:
//   the server ended the stream cleanly        -> watch again from the last version
//   no answer (refused, connect or TLS failed) -> watch again from the same version, backoff
//   429                                        -> watch again after Retry-After (or backoff)
//   410 (HTTP or an ERROR event)               -> list again now
//   any other answer or ERROR event (5xx, 504 "Too large resource version", 401, 403, ...)
//                                              -> list again after backoff (or Retry-After)
//   a stream that broke (reset, truncated, malformed, nothing for idleTimeout)
//                                              -> list again after backoff
// Lists carry no resourceVersion (the server answers from etcd), so a list is never "too
// large". Loop thread only.
class Informer {
public:
    struct Handlers {
        std::function<void(const boost::json::object&)> added;
        std::function<void(const boost::json::object&)> modified;
        std::function<void(const boost::json::object&)> deleted;  // the last state known
        // Missing from a fresh list, no DELETED event seen (deleted while no watch was open,
        // or an API server that lost its state); unset: `deleted` is called for these too.
        std::function<void(const boost::json::object&)> vanished;
        std::function<void()> synced;        // after each list's events: the cache is complete
        std::function<void()> stateChanged;  // connected, watchCurrent or lastError changed
    };
    struct Options {
        std::string labelSelector;
        std::string fieldSelector;
        // The server ends each watch after this many seconds (a random share is added so
        // that nodes do not re-watch in step).
        std::chrono::seconds watchTimeout{300};
        // A watch stream that delivers nothing at all (no event, no BOOKMARK, no byte) for
        // this long is closed, counted as failed, and the informer lists again. Watches always
        // ask for bookmarks, which the API server sends about once a minute: 90 s is that
        // interval plus margin.
        std::chrono::milliseconds idleTimeout{std::chrono::seconds(90)};
    };
    struct State {
        bool connected = false;       // the last list or watch reached the server
        bool synced = false;          // listed at least once
        bool watchCurrent = false;    // a watch stream is open now
        std::string lastError;        // empty after a success
        std::string resourceVersion;  // the last one seen
        std::uint64_t lists = 0;
        std::uint64_t watches = 0;
        std::size_t objects = 0;
    };

    Informer(ApiClient& client, std::string collection, Handlers handlers, Options options);
    ~Informer();
    Informer(const Informer&) = delete;
    Informer& operator=(const Informer&) = delete;

    void start();
    void stop();  // no handler runs afterwards
    // Closes the watch stream (if any), drops a list or retry under way and lists again now,
    // reporting the difference against the cache: for an owner that knows the watch is
    // blind (its own write did not show up on it). Nothing before start() or after stop().
    void relist();
    const State& state() const;
    // The objects known now, by name.
    const std::map<std::string, boost::json::object>& objects() const;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
    ThreadBound loopThread_;  // every public member is called on the loop thread
};

}  // namespace devlet::kube
