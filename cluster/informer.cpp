#include <algorithm>
#include <map>
#include <random>
#include <tuple>
#include <utility>

#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include "cluster/api_client.h"
#include "cluster/api_client_impl.h"
#include "runtime/log.h"

namespace devlet::kube {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace json = boost::json;

namespace {

constexpr Log log{"kube"};
constexpr std::size_t kMaxWatchLine = 16 * 1024 * 1024;
constexpr std::size_t kMaxWatchErrorBody = 64 * 1024;

// The version in an object's metadata (the cache holds objects, JSON Pointers need a value).
std::string versionOf(const json::object& object) {
    const json::value* metadata = object.if_contains("metadata");
    return metadata ? stringAt(*metadata, "/resourceVersion") : "";
}

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

struct Informer::Impl {
    Impl(std::shared_ptr<ApiClient::Impl> client, std::string collection, Handlers handlers, Options options)
        : client(std::move(client)),
          collection(std::move(collection)),
          handlers(std::move(handlers)),
          options(std::move(options)),
          timer(this->client->loop) {}

    enum class Next { Watch, List };

    std::string selectors() const {
        std::string query;
        if (!options.labelSelector.empty()) query += "&labelSelector=" + queryEscape(options.labelSelector);
        if (!options.fieldSelector.empty()) query += "&fieldSelector=" + queryEscape(options.fieldSelector);
        return query;
    }

    // Whether work begun as attempt `mine` goes on: not stopped, and no newer list or watch
    // replaced it. After a handler ran, a token taken before it is read first: the handler
    // may have destroyed the informer.
    bool current(std::uint64_t mine) const { return !lifetime.ended() && mine == attempt; }

    // A list from the start. Lists carry no resourceVersion: the server answers from etcd, so
    // a list is never "too large" and always gets a version a watch can start from; a list
    // that fails (504 included, after the client's own retries) is done again after backoff.
    void startList() {
        if (lifetime.ended()) return;
        listPage(++attempt, "", std::make_shared<std::map<std::string, json::object>>(), "");
    }

    void listPage(std::uint64_t mine, const std::string& continueToken,
                  std::shared_ptr<std::map<std::string, json::object>> pages, std::string listVersion) {
        listing = true;
        std::string query = "limit=500" + selectors();
        if (!continueToken.empty()) query += "&continue=" + queryEscape(continueToken);
        auto call = makeCall(
            http::verb::get, collection + "?" + query, "", "", true,
            lifetime.guard([this, mine, pages = std::move(pages), listVersion](ApiResult result) mutable {
                if (!current(mine)) return;
                ++state.lists;
                state.connected = result.code != 0;
                if (!result.ok())
                    return failed("listing " + collection + ": " + result.describe(), Next::List);
                const json::object* body = result.body.if_object();
                const json::value* items = body ? body->if_contains("items") : nullptr;
                if (!items || !items->is_array())
                    return failed("listing " + collection + ": no items", Next::List);
                for (const json::value& item : items->get_array()) {
                    if (!item.is_object()) continue;
                    std::string name = stringAt(item, "/metadata/name");
                    if (!name.empty()) (*pages)[name] = item.get_object();
                }
                if (listVersion.empty()) listVersion = stringAt(result.body, "/metadata/resourceVersion");
                std::string next = stringAt(result.body, "/metadata/continue");
                if (!next.empty()) return listPage(mine, next, pages, listVersion);
                listed(*pages, listVersion);
            }));
        client->enqueue(call);
    }

    // What changed against the cache is reported as events, so a relist neither repeats
    // what was known nor loses what happened while no watch was open. Each difference goes
    // into the cache as it is reported: a handler that relists or stops leaves a cache that
    // says exactly what was reported.
    void listed(const std::map<std::string, json::object>& now, const std::string& version) {
        const std::uint64_t mine = attempt;
        const Lifetime::Token alive = lifetime.token();
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
            if (alive.expired() || !current(mine)) return;
        }
        for (const auto& [name, object] : now) {
            auto it = cache.find(name);
            const bool known = it != cache.end();
            const bool changed = known && versionOf(it->second) != versionOf(object);
            cache[name] = object;
            state.objects = cache.size();
            if (!known) {
                if (handlers.added) handlers.added(object);
            } else if (changed) {
                if (handlers.modified) handlers.modified(object);
            }
            if (alive.expired() || !current(mine)) return;
        }
        if (handlers.synced) handlers.synced();
        if (alive.expired() || !current(mine)) return;
        notify();
        if (!alive.expired() && current(mine)) watch();
    }

    void watch() {
        if (lifetime.ended()) return;
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
        auto go = [this, request, mine] {
            ++state.watches;
            ++client->state.requests;
            streamStarted = Clock::now();
            // Bookmarks come about once a minute: a stream silent for idleTimeout is dead, or
            // blind, whatever TCP says.
            connection->stream(
                request, options.idleTimeout,
                lifetime.guard([this, mine](int code, const http::fields& headers) {
                    if (!current(mine)) return;
                    answered();
                    state.connected = true;
                    watchCode = code;
                    if (code == 200) {
                        state.watchCurrent = true;
                        state.lastError.clear();
                        failures = 0;
                        notify();
                    } else {
                        watchRetryAfter = retryAfter(headers, client->options.retryAfterMax);
                    }
                }),
                [this, alive = lifetime.token(), mine](std::string& body) {
                    if (alive.expired() || !current(mine)) return false;
                    answered();
                    if (watchCode != 200) {
                        // The whole error answer (a Status) first; its start is enough.
                        const std::size_t room =
                            kMaxWatchErrorBody - std::min(kMaxWatchErrorBody, watchBody.size());
                        watchBody.append(body, 0, std::min(room, body.size()));
                        body.clear();
                        return true;
                    }
                    return consume(body, mine);
                },
                lifetime.guard([this, mine](beast::error_code ec) {
                    if (current(mine)) streamEnded(ec);
                }));
        };
        if (connection->isOpen()) return go();
        connection->open(lifetime.guard([this, go, mine](const std::string& error) {
            if (!current(mine)) return;
            if (!error.empty()) {
                dropConnection();
                state.connected = false;
                client->state.reachable = false;
                return watchEnded({}, "watch of " + collection + ": " + error);
            }
            go();
        }));
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
        const Lifetime::Token alive = lifetime.token();
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
        const std::string version = stringAt(*objectValue, "/metadata/resourceVersion");
        if (!version.empty()) state.resourceVersion = version;
        if (type == "BOOKMARK") return true;
        const std::string name = stringAt(*objectValue, "/metadata/name");
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
        return !alive.expired() && current(mine);
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
        const Lifetime::Token alive = lifetime.token();
        state.watchCurrent = false;
        switch (afterWatch(end)) {
            case AfterWatch::WatchAgain:
                notify();
                if (alive.expired() || !current(mine)) return;
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
                if (!alive.expired() && current(mine)) startList();
                return;
            case AfterWatch::ListAgainLater:
                return failed(error, Next::List, watchRetryAfter);
        }
    }

    // Counted as failed; the next try after `delay` (a capped Retry-After) or backoff.
    void failed(const std::string& error, Next next, std::optional<std::chrono::milliseconds> delay = {}) {
        const std::uint64_t mine = attempt;
        const Lifetime::Token alive = lifetime.token();
        state.watchCurrent = false;
        if (error != state.lastError) log.debug() << error;
        state.lastError = error;
        const auto backoff = backoffDelay(client->options, ++failures);
        notify();
        if (alive.expired() || !current(mine)) return;
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
        timer.async_wait([this, alive = lifetime.token(), next = std::move(next),
                          mine = attempt](const beast::error_code& ec) {
            if (ec || alive.expired() || !current(mine)) return;
            next();
        });
    }

    // Tells the owner when what State shows about the connection changed.
    void notify() {
        auto now = std::tie(state.connected, state.watchCurrent, state.lastError);
        if (lifetime.ended() || (notified && now == *notified)) return;
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
        if (!started || lifetime.ended()) return;
        const std::uint64_t mine = ++attempt;  // the stream, list or timer under way is dropped
        const Lifetime::Token alive = lifetime.token();
        timer.cancel();
        dropConnection();
        state.watchCurrent = false;
        notify();
        if (!alive.expired() && current(mine)) startList();
    }

    void stop() {
        lifetime.end();
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
    Lifetime lifetime;  // ended by stop(): no handler runs afterwards
};

Informer::Informer(ApiClient& client, std::string collection, Handlers handlers, Options options)
    : impl_(std::make_unique<Impl>(client.impl_, std::move(collection), std::move(handlers),
                                   std::move(options))) {}

Informer::~Informer() {
    impl_->stop();
}

void Informer::start() {
    loopThread_.check();
    if (!impl_->client->tlsProblem.empty()) {
        impl_->state.lastError = impl_->client->tlsProblem;
        return;
    }
    if (impl_->started) return;
    impl_->started = true;
    impl_->startList();
}

void Informer::stop() {
    loopThread_.check();
    impl_->stop();
}
void Informer::relist() {
    loopThread_.check();
    impl_->relist();
}
const Informer::State& Informer::state() const {
    loopThread_.check();
    return impl_->state;
}
const std::map<std::string, json::object>& Informer::objects() const {
    loopThread_.check();
    return impl_->cache;
}

}  // namespace devlet::kube
