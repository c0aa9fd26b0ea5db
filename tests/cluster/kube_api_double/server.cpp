// kube-api-double: a Kubernetes API server double for tests (README.md beside this file).
// One io_context on the main thread owns the store, the connections and the watches;
// every connection is a coroutine on it.

#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "tests/cluster/kube_api_double/store.h"

namespace devlet::kubedouble {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using asio::awaitable;
using asio::use_awaitable;
constexpr auto noThrow = asio::as_tuple(use_awaitable);
using Stream = beast::ssl_stream<beast::tcp_stream>;
using Request = http::request<http::string_body>;

struct Options {
    std::string cert, key, tokenFile, portFile, clientCa;
    std::string listen = "127.0.0.1:0";
    int bookmarkSeconds = 60;             // as the API server's watch cache, about once a minute
    std::vector<std::string> namespaces;  // created at start, beside default and kube-*
};

// ---- tokens and rules ----

struct Rule {
    bool allow = true;
    // Empty or "*": any. `namespaces` as a Role's (its namespace) or a ClusterRole's (any,
    // and the only way to reach cluster-scoped objects, whose namespace is "").
    std::set<std::string> resources, verbs, names, namespaces;
    bool matches(const std::string& resource, const std::string& verb, const std::string& name,
                 const std::string& ns) const {
        auto any = [](const std::set<std::string>& s, const std::string& v) {
            return s.empty() || s.contains("*") || s.contains(v);
        };
        if (!any(namespaces, ns)) return false;
        // As RBAC's resourceNames: a rule naming objects never covers create, nor a list or
        // watch that does not select one of those names by metadata.name.
        return any(resources, resource) && any(verbs, verb) &&
               (names.empty() || names.contains("*") || (!name.empty() && names.contains(name)));
    }
};

struct Identity {
    std::string user;
    std::vector<Rule> rules;
    bool permits(const std::string& resource, const std::string& verb, const std::string& name,
                 const std::string& ns) const {
        bool anyAllow = false, allowed = false;
        for (const auto& r : rules) {
            if (!r.allow && r.matches(resource, verb, name, ns)) return false;
            if (r.allow) {
                anyAllow = true;
                allowed = allowed || r.matches(resource, verb, name, ns);
            }
        }
        return !anyAllow || allowed;
    }
};

std::set<std::string> splitSet(const std::string& s) {
    std::set<std::string> out;
    std::stringstream in(s);
    for (std::string part; std::getline(in, part, ',');)
        if (!part.empty()) out.insert(part);
    return out;
}

// The tokens file, re-read when it changes so a test can revoke or add a token.
class Tokens {
public:
    explicit Tokens(std::string path) : path_(std::move(path)) {}
    // An error message, or "" when loaded.
    std::string reload() {
        struct stat st {};
        if (::stat(path_.c_str(), &st) != 0) return "cannot read the tokens file " + path_;
        const auto stamp = std::make_pair(st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
        if (loaded_ && stamp == stamp_ && st.st_size == size_) return "";
        std::ifstream in(path_);
        if (!in) return "cannot read the tokens file " + path_;
        std::map<std::string, Identity> tokens;
        std::string line;
        for (int number = 1; std::getline(in, line); ++number) {
            std::stringstream words(line);
            std::string token, word;
            if (!(words >> token) || token[0] == '#') continue;
            Identity id{"user-" + std::to_string(number), {}};
            bool named = false;
            while (words >> word) {
                const bool allow = word.starts_with("allow=");
                if (!allow && !word.starts_with("deny=")) {
                    if (named)
                        return path_ + ":" + std::to_string(number) + ": unknown word \"" + word + "\"";
                    id.user = word;
                    named = true;
                    continue;
                }
                std::string spec = word.substr(allow ? 6 : 5);
                std::vector<std::string> fields;
                std::stringstream parts(spec);
                for (std::string f; std::getline(parts, f, ':');) fields.push_back(f);
                if (fields.empty() || fields.size() > 4)
                    return path_ + ":" + std::to_string(number) +
                           ": a rule is RESOURCES[:VERBS[:NAMES[:NAMESPACES]]]";
                Rule r;
                r.allow = allow;
                r.resources = splitSet(fields[0]);
                if (fields.size() > 1) r.verbs = splitSet(fields[1]);
                if (fields.size() > 2) r.names = splitSet(fields[2]);
                if (fields.size() > 3) r.namespaces = splitSet(fields[3]);
                id.rules.push_back(std::move(r));
            }
            tokens[token] = std::move(id);
        }
        tokens_ = std::move(tokens);
        stamp_ = stamp;
        size_ = st.st_size;
        loaded_ = true;
        return "";
    }
    const Identity* find(const std::string& token) const {
        auto it = tokens_.find(token);
        return it == tokens_.end() ? nullptr : &it->second;
    }
    // The first line's identity for `user`: the rules a token issued to it has.
    const Identity* findUser(const std::string& user) const {
        for (const auto& [token, identity] : tokens_)
            if (identity.user == user) return &identity;
        return nullptr;
    }

private:
    std::string path_;
    std::map<std::string, Identity> tokens_;
    std::pair<long, long> stamp_{};
    off_t size_ = 0;
    bool loaded_ = false;
};

// ---- HTTP helpers ----

std::string urlDecode(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '+') {
            out += ' ';
        } else if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(s[i + 1]) && std::isxdigit(s[i + 2])) {
            out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

struct Target {
    std::string path;
    std::map<std::string, std::string> query;
    std::vector<std::string> segments;
    std::string param(const std::string& k) const {
        auto it = query.find(k);
        return it == query.end() ? "" : it->second;
    }
    bool flag(const std::string& k) const {
        // As Go's strconv.ParseBool, which the API server uses (Python's client sends "True").
        const std::string v = param(k);
        return v == "1" || v == "t" || v == "T" || v == "true" || v == "TRUE" || v == "True";
    }
};

Target parseTarget(std::string_view target) {
    Target t;
    const auto q = target.find('?');
    t.path = urlDecode(target.substr(0, q));
    if (q != std::string_view::npos) {
        std::string_view rest = target.substr(q + 1);
        while (!rest.empty()) {
            const auto amp = rest.find('&');
            std::string_view pair = rest.substr(0, amp);
            const auto eq = pair.find('=');
            t.query[urlDecode(pair.substr(0, eq))] =
                eq == std::string_view::npos ? "" : urlDecode(pair.substr(eq + 1));
            if (amp == std::string_view::npos) break;
            rest = rest.substr(amp + 1);
        }
    }
    std::stringstream in(t.path);
    for (std::string s; std::getline(in, s, '/');)
        if (!s.empty()) t.segments.push_back(s);
    return t;
}

// What a request is, in the API's terms.
struct Route {
    enum class Kind { Discovery, Version, OpenApi, Resource, Control, Unknown } kind = Kind::Unknown;
    json::value discovery;
    const ResourceType* type = nullptr;
    std::string ns, name, subresource;
    std::string verb;  // RBAC verb: get list watch create update patch delete deletecollection
    std::string countKey() const {
        switch (kind) {
            case Kind::Discovery:
                return "get discovery";
            case Kind::Version:
                return "get version";
            case Kind::OpenApi:
                return "get openapi";
            case Kind::Resource:
                return verb + " " + type->resource + (subresource.empty() ? "" : "/" + subresource);
            default:
                return "other";
        }
    }
};

json::object resourceList(const std::string& group, const std::string& version) {
    json::array resources;
    const json::array verbs{"create", "delete", "deletecollection", "get",
                            "list",   "patch",  "update",           "watch"};
    for (const auto& t : resourceTypes()) {
        if (t.group != group || t.version != version) continue;
        json::array shortNames;
        for (const auto& s : t.shortNames) shortNames.push_back(json::string(s));
        json::object r{{"name", t.resource},
                       {"singularName", t.singular},
                       {"namespaced", t.namespaced},
                       {"kind", t.kind},
                       {"verbs", verbs},
                       {"shortNames", shortNames}};
        if (t.resource == "pods" || t.resource == "services" || t.resource == "jobs")
            r["categories"] = json::array{"all"};
        resources.push_back(std::move(r));
        if (t.resource == "serviceaccounts")
            resources.push_back({{"name", "serviceaccounts/token"},
                                 {"singularName", ""},
                                 {"namespaced", true},
                                 {"group", "authentication.k8s.io"},
                                 {"version", "v1"},
                                 {"kind", "TokenRequest"},
                                 {"verbs", json::array{"create"}}});
        if (t.resource != "leases" && t.resource != "secrets" && t.resource != "serviceaccounts")
            resources.push_back({{"name", t.resource + "/status"},
                                 {"singularName", ""},
                                 {"namespaced", t.namespaced},
                                 {"kind", t.kind},
                                 {"verbs", json::array{"get", "patch", "update"}}});
    }
    return {{"kind", "APIResourceList"},
            {"apiVersion", "v1"},
            {"groupVersion", group.empty() ? version : group + "/" + version},
            {"resources", std::move(resources)}};
}

json::object apiGroup(const std::string& name) {
    json::object v{{"groupVersion", name + "/v1"}, {"version", "v1"}};
    return {{"name", name}, {"versions", json::array{v}}, {"preferredVersion", v}};
}

Route route(http::verb method, const Target& t) {
    Route r;
    const auto& s = t.segments;
    if (!s.empty() && s[0] == "_double") {
        r.kind = Route::Kind::Control;
        return r;
    }
    if (t.path == "/version" || t.path == "/version/") {
        r.kind = Route::Kind::Version;
        return r;
    }
    if (!s.empty() && s[0] == "openapi") {
        r.kind = Route::Kind::OpenApi;
        return r;
    }
    std::string group, version;
    std::size_t i = 0;
    if (!s.empty() && s[0] == "api") {
        if (s.size() == 1) {
            r.kind = Route::Kind::Discovery;
            r.discovery =
                json::object{{"kind", "APIVersions"},
                             {"versions", json::array{"v1"}},
                             {"serverAddressByClientCIDRs",
                              json::array{{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", "127.0.0.1"}}}}};
            return r;
        }
        if (s[1] != "v1") return r;
        version = "v1";
        i = 2;
    } else if (!s.empty() && s[0] == "apis") {
        if (s.size() == 1) {
            r.kind = Route::Kind::Discovery;
            r.discovery =
                json::object{{"kind", "APIGroupList"},
                             {"apiVersion", "v1"},
                             {"groups", json::array{apiGroup("coordination.k8s.io"), apiGroup("batch")}}};
            return r;
        }
        group = s[1];
        if (group != "coordination.k8s.io" && group != "batch") return r;
        if (s.size() == 2) {
            r.kind = Route::Kind::Discovery;
            json::object g = apiGroup(group);
            g["kind"] = "APIGroup";
            g["apiVersion"] = "v1";
            r.discovery = g;
            return r;
        }
        if (s[2] != "v1") return r;
        version = "v1";
        i = 3;
    } else {
        return r;
    }
    if (s.size() == i) {
        r.kind = Route::Kind::Discovery;
        r.discovery = resourceList(group, version);
        return r;
    }
    // [namespaces/NS/]RESOURCE[/NAME[/SUBRESOURCE]]
    std::vector<std::string> rest(s.begin() + static_cast<std::ptrdiff_t>(i), s.end());
    if (rest.size() >= 3 && rest[0] == "namespaces") {
        const ResourceType* inner = findResource(group, version, rest[2]);
        if (inner && inner->namespaced) {
            r.ns = rest[1];
            rest.erase(rest.begin(), rest.begin() + 2);
        }
    }
    r.type = findResource(group, version, rest[0]);
    if (!r.type || rest.size() > 3) return r;
    if (r.type->namespaced && r.ns.empty() && rest.size() > 1)
        return r;  // a named object needs its namespace
    if (rest.size() > 1) r.name = rest[1];
    if (rest.size() > 2) {
        r.subresource = rest[2];
        // TokenRequest: POST serviceaccounts/NAME/token, the only subresource besides status.
        const bool tokenRequest = r.subresource == "token" && r.type->resource == "serviceaccounts";
        if (r.subresource != "status" && !tokenRequest) return r;
        if (tokenRequest) {
            if (method != http::verb::post) return r;
            r.kind = Route::Kind::Resource;
            r.verb = "create";
            return r;
        }
    }
    r.kind = Route::Kind::Resource;
    const bool named = !r.name.empty();
    switch (method) {
        case http::verb::get:
            r.verb = named ? "get" : (t.flag("watch") ? "watch" : "list");
            break;
        case http::verb::post:
            r.verb = named ? "" : "create";
            break;
        case http::verb::put:
            r.verb = named ? "update" : "";
            break;
        case http::verb::patch:
            r.verb = named ? "patch" : "";
            break;
        case http::verb::delete_:
            r.verb = named ? "delete" : "deletecollection";
            break;
        default:
            break;
    }
    if (r.verb.empty()) r.kind = Route::Kind::Unknown;
    if (r.type->namespaced && r.ns.empty() && r.verb != "list" && r.verb != "watch")
        r.kind = Route::Kind::Unknown;
    return r;
}

std::string nowText() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return text;
}

// ---- the server ----

struct Watcher {
    explicit Watcher(const asio::any_io_executor& ex) : wake(ex) {}
    const ResourceType* type = nullptr;
    std::string ns;    // "" for all
    std::string user;  // who opened it (partition and silence-watches pick by user)
    Selector selector;
    std::deque<std::pair<std::string, std::shared_ptr<const json::object>>> queue;
    asio::steady_timer wake;
    bool closed = false;
    // Forgotten by the server (a partition, silence-watches): delivers nothing more, not even
    // the end of the stream, and stays open until the client closes it.
    bool silent = false;
    std::optional<json::object> error;  // sent as an ERROR event, then the watch ends

    void offer(const Event& e) {
        if (e.type != type || (!ns.empty() && e.ns != ns)) return;
        const bool now = selector.matches(*e.object);
        if (e.kind == "MODIFIED" && e.previous) {
            const bool before = selector.matches(*e.previous);
            if (now)
                queue.emplace_back(before ? "MODIFIED" : "ADDED", e.object);
            else if (before)
                queue.emplace_back("DELETED", e.object);
        } else if (now) {
            queue.emplace_back(e.kind, e.object);
        }
        wake.cancel();
    }
};

struct Injection {
    int remaining = 0;
    int code = 0;
    int retryAfter = 1;
    std::string verb, resource;  // "" for any
};

// A request of a partitioned user, waiting for a heal.
struct HeldRequest {
    std::string user;
    bool released = false;
    std::function<void()> wake;  // cancels the wait on the connection's socket
};

// What the client's end of a connection shows, looked at without reading (MSG_PEEK): a
// client that gave up while its request was held has closed or reset it.
enum class Peer { Open, Closed, Readable };
Peer peekPeer(tcp::socket& socket) {
    if (!socket.is_open()) return Peer::Closed;
    char byte = 0;
    const ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return Peer::Readable;
    if (n == 0) return Peer::Closed;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? Peer::Open : Peer::Closed;
}

std::optional<std::uint64_t> versionNumber(const std::string& text) {
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
    return v;
}

class Server {
public:
    Server(asio::io_context& io, ssl::context& tls, Options options)
        : io_(io),
          tls_(tls),
          options_(std::move(options)),
          tokens_(options_.tokenFile),
          acceptor_(io),
          resumed_(io) {
        resumed_.expires_at(asio::steady_timer::time_point::max());
        store_.onEvent = [this](const Event& e) {
            for (const auto& w : watchers_) w->offer(e);
            for (auto* waiter : versionWaiters_) waiter->cancel();
        };
    }

    std::string start() {
        if (std::string error = tokens_.reload(); !error.empty()) return error;
        for (const auto& ns : options_.namespaces) {
            const Outcome created =
                store_.create(*findResource("", "v1", "namespaces"), "",
                              json::object{{"metadata", {{"name", ns}}}}, {"kube-api-double"});
            if (created.code != 201) return "--namespace " + ns + ": " + json::serialize(created.body);
        }
        const auto colon = options_.listen.rfind(':');
        if (colon == std::string::npos) return "--listen wants HOST:PORT, not " + options_.listen;
        std::string host = options_.listen.substr(0, colon);
        if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
        boost::system::error_code ec;
        const auto address = asio::ip::make_address(host, ec);
        if (ec) return "--listen: " + host + " is not an IP address";
        std::string notPort = "--listen: the port in " + options_.listen + " is not a port number";
        int port = -1;
        try {
            port = std::stoi(options_.listen.substr(colon + 1));
        } catch (const std::exception&) {
            return notPort;
        }
        if (port < 0 || port > 65535) return notPort;
        endpoint_ = tcp::endpoint(address, static_cast<unsigned short>(port));
        if (std::string error = listen(); !error.empty()) return error;
        endpoint_ = acceptor_.local_endpoint();
        const std::string temp = options_.portFile + ".tmp";
        {
            std::ofstream out(temp);
            out << endpoint_.port() << "\n";
            if (!out) return "cannot write " + temp;
        }
        if (std::rename(temp.c_str(), options_.portFile.c_str()) != 0)
            return "cannot write " + options_.portFile;
        return "";
    }

    // SIGUSR1: stop accepting and drop every connection (clients see "connection refused", as
    // from an API server that is down); SIGUSR2: accept again on the same port. Objects stay.
    void refuse() {
        boost::system::error_code ec;
        acceptor_.close(ec);
        closeAll(0);
    }
    void accept() {
        if (!acceptor_.is_open()) {
            if (std::string error = listen(); !error.empty())
                std::cerr << "kube-api-double: " << error << "\n";
        }
    }
    void shutdown() {
        boost::system::error_code ec;
        acceptor_.close(ec);
        closeAll(0);
    }

private:
    std::string listen() {
        boost::system::error_code ec;
        acceptor_.open(endpoint_.protocol(), ec);
        if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
        if (!ec) acceptor_.bind(endpoint_, ec);
        if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
        if (ec) return "cannot listen on " + options_.listen + ": " + ec.message();
        asio::co_spawn(io_, acceptLoop(), asio::detached);
        return "";
    }

    awaitable<void> acceptLoop() {
        while (acceptor_.is_open()) {
            auto [ec, socket] = co_await acceptor_.async_accept(noThrow);
            if (ec) {
                if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
                continue;
            }
            asio::co_spawn(io_, session(std::move(socket)), [](const std::exception_ptr&) {});
        }
    }

    void closeAll(std::uint64_t except) {
        for (auto& w : watchers_) {
            w->closed = true;
            w->wake.cancel();
        }
        for (auto& [id, close] : connections_)
            if (id != except) close();
    }

    std::string peerUser(Stream& stream) {
        if (options_.clientCa.empty()) return "";
        X509* cert = SSL_get1_peer_certificate(stream.native_handle());
        if (!cert) return "";
        std::string user;
        if (SSL_get_verify_result(stream.native_handle()) == X509_V_OK) {
            char cn[256] = {};
            if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn) > 0)
                user = cn;
        }
        X509_free(cert);
        return user;
    }

    awaitable<void> session(tcp::socket socket) {
        auto stream = std::make_shared<Stream>(std::move(socket), tls_);
        const std::uint64_t id = ++nextConnection_;
        connections_[id] = [weak = std::weak_ptr<Stream>(stream)] {
            if (auto s = weak.lock()) {
                boost::system::error_code ec;
                beast::get_lowest_layer(*s).socket().shutdown(tcp::socket::shutdown_both, ec);
                beast::get_lowest_layer(*s).close();
            }
        };
        struct Unregister {
            Server* server;
            std::uint64_t id;
            ~Unregister() { server->connections_.erase(id); }
        } unregister{this, id};
        beast::get_lowest_layer(*stream).expires_after(std::chrono::seconds(30));
        co_await stream->async_handshake(ssl::stream_base::server, use_awaitable);
        const std::string certUser = peerUser(*stream);
        beast::flat_buffer buffer;
        for (;;) {
            beast::get_lowest_layer(*stream).expires_never();
            http::request_parser<http::string_body> parser;
            parser.body_limit(64 * 1024 * 1024);
            co_await http::async_read(*stream, buffer, parser, use_awaitable);
            Request request = parser.release();
            if (!co_await handle(*stream, buffer, request, id, certUser)) break;
        }
        boost::system::error_code ec;
        beast::get_lowest_layer(*stream).socket().shutdown(tcp::socket::shutdown_both, ec);
    }

    awaitable<void> respond(Stream& stream, const Request& req, int code, const json::value& body,
                            int retryAfter = 0, std::vector<std::string> warnings = {}) {
        http::response<http::string_body> res{static_cast<http::status>(code), req.version()};
        res.set(http::field::content_type, "application/json");
        res.set(http::field::cache_control, "no-cache, private");
        if (retryAfter > 0) res.set(http::field::retry_after, std::to_string(retryAfter));
        for (const std::string& warning : warnings)
            res.insert(http::field::warning, "299 - " + quoted(warning));
        res.keep_alive(req.keep_alive());
        res.body() = json::serialize(body) + "\n";
        res.prepare_payload();
        co_await http::async_write(stream, res, use_awaitable);
    }

    void record(const Route& r, const std::string& user, int code) {
        ++total_;
        ++counts_[r.countKey()];
        if (!user.empty()) ++userCounts_[user][r.countKey()];
        json::object entry{{"verb", r.verb.empty() ? "get" : r.verb},
                           {"key", r.countKey()},
                           {"namespace", r.ns},
                           {"name", r.name},
                           {"user", user},
                           {"code", code}};
        recent_.push_back(std::move(entry));
        // One line per request on stderr, for reading a failed test's log (never a token).
        std::cerr << r.countKey() << " " << (r.ns.empty() ? "" : r.ns + "/") << r.name << " user=" << user
                  << " " << code << "\n";
        if (recent_.size() > 1000) recent_.pop_front();
    }

    // Holds a partitioned user's request until a heal releases it: true then, false when the
    // client closed its end meanwhile (the request is dropped unprocessed). The socket is
    // watched all along, so a client that gives up is noticed at once; bytes it sends (a
    // pipelined request, a TLS alert) go through TLS into the session's buffer.
    awaitable<bool> holdWhilePartitioned(Stream& stream, beast::flat_buffer& buffer,
                                         const std::string& user) {
        auto held = std::make_shared<HeldRequest>();
        held->user = user;
        tcp::socket& socket = beast::get_lowest_layer(stream).socket();
        held->wake = [&socket] {
            boost::system::error_code ec;
            socket.cancel(ec);
        };
        const std::uint64_t ticket = ++nextHeld_;
        partitionHeld_[ticket] = held;
        ++held_;
        struct Unhold {
            Server* server;
            std::uint64_t ticket;
            ~Unhold() {
                server->partitionHeld_.erase(ticket);
                --server->held_;
            }
        } unhold{this, ticket};
        for (;;) {
            const Peer peer = peekPeer(socket);
            if (peer == Peer::Closed) co_return false;
            if (peer == Peer::Readable) {
                auto [ec, n] = co_await stream.async_read_some(buffer.prepare(16 * 1024), noThrow);
                if (ec && !(ec == asio::error::operation_aborted && held->released)) co_return false;
                buffer.commit(n);
                continue;
            }
            if (held->released) co_return true;
            auto [ec] = co_await socket.async_wait(tcp::socket::wait_read, noThrow);
            if (ec && ec != asio::error::operation_aborted) co_return false;
        }
    }

    // As the watch cache: a get, list or watch from a resourceVersion the server has not
    // reached is given a while (upstream 3 s, here 1 s) for it to appear, then refused with
    // 504 "Too large resource version" (as after an etcd restore), so the client lists again.
    awaitable<std::optional<Outcome>> waitForVersion(const std::string& text) {
        const std::optional<std::uint64_t> wanted = versionNumber(text);
        if (!wanted || *wanted == 0 || *wanted <= store_.resourceVersion()) co_return std::nullopt;
        asio::steady_timer timer(io_);
        timer.expires_after(std::chrono::seconds(1));
        versionWaiters_.insert(&timer);
        struct Unwait {
            Server* server;
            asio::steady_timer* timer;
            ~Unwait() { server->versionWaiters_.erase(timer); }
        } unwait{this, &timer};
        while (*wanted > store_.resourceVersion()) {
            auto [ec] = co_await timer.async_wait(noThrow);
            if (!ec) break;  // expired; a cancel is a write: look again
        }
        if (*wanted <= store_.resourceVersion()) co_return std::nullopt;
        co_return failure(504, "Timeout",
                          "Timeout: Too large resource version: " + std::to_string(*wanted) +
                              ", current: " + std::to_string(store_.resourceVersion()),
                          {{"causes", json::array{{{"reason", "ResourceVersionTooLarge"},
                                                   {"message", "Too large resource version"}}}},
                           {"retryAfterSeconds", 1}});
    }

    // Returns whether the connection stays open for the next request.
    awaitable<bool> handle(Stream& stream, beast::flat_buffer& buffer, Request& req, std::uint64_t connection,
                           const std::string& certUser) {
        const Target target = parseTarget(req.target());
        Route r = route(req.method(), target);
        std::string user = certUser;
        if (std::string error = tokens_.reload(); !error.empty())
            std::cerr << "kube-api-double: " << error << "\n";
        const Identity* identity = nullptr;
        const std::string auth(req[http::field::authorization]);
        if (auth.starts_with("Bearer ")) {
            identity = tokens_.find(auth.substr(7));
            if (identity) user = identity->user;
            // A token the double issued (TokenRequest) until a minute after it expires (the
            // API server validates exp with go-jose's leeway of one minute), with the rules of
            // its ServiceAccount's line in the tokens file (none: every right).
            if (auto it = issued_.find(auth.substr(7)); !identity && it != issued_.end()) {
                if (std::chrono::system_clock::now() < it->second.expires + std::chrono::minutes(1)) {
                    user = it->second.user;
                    identity = tokens_.findUser(user);
                    if (!identity) identity = &it->second.identity;
                } else {
                    issued_.erase(it);
                }
            }
        }
        const bool anonymousAllowed = r.kind == Route::Kind::Version;
        if (user.empty() && !anonymousAllowed) {
            if (r.kind != Route::Kind::Control) record(r, "", 401);
            co_await respond(stream, req, 401, statusObject(401, "Unauthorized", "Unauthorized"));
            co_return req.keep_alive();
        }
        if (r.kind == Route::Kind::Control) co_return co_await control(stream, req, target, connection);

        // Held while its user is partitioned or the double paused, whichever comes (again).
        for (;;) {
            if (partitioned_.contains(user) && !co_await holdWhilePartitioned(stream, buffer, user)) {
                std::cerr << r.countKey() << " " << (r.ns.empty() ? "" : r.ns + "/") << r.name
                          << " user=" << user
                          << " dropped: the client closed its connection while partitioned\n";
                co_return false;
            }
            if (!paused_) break;
            ++held_;
            while (paused_) co_await resumed_.async_wait(noThrow);
            --held_;
        }

        Outcome out;
        std::vector<std::string> warnings;
        if (injection_.remaining > 0 && (injection_.verb.empty() || injection_.verb == r.verb) &&
            (injection_.resource.empty() || (r.type && injection_.resource == r.type->resource))) {
            --injection_.remaining;
            const int code = injection_.code;
            const std::string reason = code == 429   ? "TooManyRequests"
                                       : code == 503 ? "ServiceUnavailable"
                                       : code == 504 ? "Timeout"
                                                     : "InternalError";
            record(r, user, code);
            co_await respond(
                stream, req, code,
                statusObject(code, reason,
                             code == 429 ? "the server has received too many requests and has asked "
                                           "us to try again later"
                                         : "the server is unable to handle the request (injected)"),
                code == 429 || code == 503 ? injection_.retryAfter : 0);
            co_return req.keep_alive();
        }
        switch (r.kind) {
            case Route::Kind::Version:
                out = {200, json::object{{"major", "1"},
                                         {"minor", "27"},
                                         {"gitVersion", "v1.27.0"},
                                         {"gitCommit", "0000000000000000000000000000000000000000"},
                                         {"gitTreeState", "clean"},
                                         {"buildDate", "2023-04-11T00:00:00Z"},
                                         {"goVersion", "go1.20"},
                                         {"compiler", "gc"},
                                         {"platform", "linux/amd64"}}};
                break;
            case Route::Kind::Discovery:
                out = {200, r.discovery};
                break;
            case Route::Kind::OpenApi:
                out = failure(404, "NotFound", "the double serves no OpenAPI schema (use --validate=false)");
                break;
            case Route::Kind::Unknown:
                out = failure(404, "NotFound", "the server could not find the requested resource");
                break;
            default:
                break;
        }
        // As RBAC: a list or watch selecting one name by metadata.name is authorized as a
        // request for that name, so resourceNames can grant it.
        std::string authorizedName = r.name;
        if (r.kind == Route::Kind::Resource && r.name.empty() && (r.verb == "list" || r.verb == "watch")) {
            std::string selector = target.param("fieldSelector");
            for (const char* prefix : {"metadata.name==", "metadata.name="}) {
                if (selector.starts_with(prefix) && selector.find(',') == std::string::npos) {
                    authorizedName = selector.substr(std::string(prefix).size());
                    break;
                }
            }
        }
        if (r.kind == Route::Kind::Resource && identity &&
            !identity->permits(rbacResource(r), r.verb, authorizedName, r.ns)) {
            std::string where = r.ns.empty() ? " at the cluster scope" : " in the namespace \"" + r.ns + "\"";
            out = failure(403, "Forbidden",
                          r.type->qualified() + (r.name.empty() ? "" : " \"" + r.name + "\"") +
                              " is forbidden: User \"" + user + "\" cannot " + r.verb + " resource \"" +
                              rbacResource(r) + "\" in API group \"" + r.type->group + "\"" + where,
                          {{"name", r.name}, {"group", r.type->group}, {"kind", r.type->resource}});
        } else if (r.kind == Route::Kind::Resource) {
            if (r.verb == "get" || r.verb == "list" || r.verb == "watch") {
                std::optional<Outcome> tooLarge = co_await waitForVersion(target.param("resourceVersion"));
                if (tooLarge) {
                    record(r, user, tooLarge->code);
                    co_await respond(stream, req, tooLarge->code, tooLarge->body, 1);
                    co_return req.keep_alive();
                }
            }
            if (r.verb == "watch") {
                co_return co_await watch(stream, req, target, r, user);
            }
            try {
                out = execute(req, target, r, warnings);
            } catch (const std::exception& e) {
                // A body the double cannot make sense of is the client's problem, not a crash.
                out =
                    failure(400, "BadRequest", std::string("the request could not be handled: ") + e.what());
            }
        }
        record(r, user, out.code);
        if (out.code >= 300) warnings.clear();
        co_await respond(stream, req, out.code, out.body, 0, std::move(warnings));
        co_return req.keep_alive();
    }

    // As RBAC names it: "serviceaccounts/token" for a TokenRequest, else the resource.
    static std::string rbacResource(const Route& r) {
        return r.subresource == "token" ? r.type->resource + "/token" : r.type->resource;
    }

    static std::string base64Url(const std::string& bytes) {
        static constexpr char kAlphabet[] =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        std::string out;
        unsigned bits = 0;
        int count = 0;
        for (unsigned char c : bytes) {
            bits = (bits << 8) | c;
            count += 8;
            while (count >= 6) {
                out += kAlphabet[(bits >> (count - 6)) & 63];
                count -= 6;
            }
        }
        if (count > 0) out += kAlphabet[(bits << (6 - count)) & 63];
        return out;
    }

    // POST /api/v1/namespaces/NS/serviceaccounts/NAME/token as the API server answers it: a
    // signed-looking JWT for the ServiceAccount, its lifetime cut to the maximum
    // (--service-account-max-token-expiration, here the token-lifetime control).
    Outcome tokenRequest(const Route& r, const json::object& request) {
        Outcome account = store_.get(*r.type, r.ns, r.name);
        if (account.code != 200) return account;
        std::int64_t lifetime = 3600;
        json::array audiences{"https://kubernetes.default.svc.cluster.local"};
        if (const json::value* spec = request.if_contains("spec"); spec && spec->is_object()) {
            const json::object& sp = spec->as_object();
            if (const json::value* e = sp.if_contains("expirationSeconds"); e && !e->is_null()) {
                if (!e->is_int64() && !e->is_uint64())
                    return failure(400, "BadRequest", "spec.expirationSeconds is not an integer");
                lifetime = e->to_number<std::int64_t>();
            }
            if (const json::value* a = sp.if_contains("audiences");
                a && a->is_array() && !a->as_array().empty())
                audiences = a->as_array();
        }
        if (lifetime < 600)
            return failure(
                422, "Invalid",
                "TokenRequest.authentication.k8s.io \"" + r.name +
                    "\" is invalid: spec.expirationSeconds: Invalid value: " + std::to_string(lifetime) +
                    ": may not specify a duration less than 10 minutes");
        if (lifetime > (std::int64_t{1} << 32))
            return failure(
                422, "Invalid",
                "TokenRequest.authentication.k8s.io \"" + r.name +
                    "\" is invalid: spec.expirationSeconds: Invalid value: " + std::to_string(lifetime) +
                    ": may not specify a duration larger than 2^32 seconds");
        if (maxTokenSeconds_ > 0) lifetime = std::min(lifetime, maxTokenSeconds_);
        const auto now = std::chrono::system_clock::now();
        const std::int64_t iat =
            std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
        const std::string user = "system:serviceaccount:" + r.ns + ":" + r.name;
        const json::object& metadata = account.body.as_object().at("metadata").as_object();
        json::object claims{
            {"aud", audiences},
            {"exp", iat + lifetime},
            {"iat", iat},
            {"nbf", iat},
            {"iss", "https://kubernetes.default.svc.cluster.local"},
            {"sub", user},
            {"kubernetes.io",
             {{"namespace", r.ns}, {"serviceaccount", {{"name", r.name}, {"uid", metadata.at("uid")}}}}}};
        std::string signature(32, '\0');
        for (char& c : signature) c = static_cast<char>(signatureBytes_());
        const std::string token = base64Url(R"({"alg":"RS256","kid":"kube-api-double"})") + "." +
                                  base64Url(json::serialize(claims)) + "." + base64Url(signature);
        issued_[token] = {user, now + std::chrono::seconds(lifetime), Identity{user, {}}};
        json::object spec{
            {"audiences", audiences}, {"expirationSeconds", lifetime}, {"boundObjectRef", nullptr}};
        return {201,
                json::object{
                    {"kind", "TokenRequest"},
                    {"apiVersion", "authentication.k8s.io/v1"},
                    {"metadata", {{"name", r.name}, {"namespace", r.ns}, {"creationTimestamp", nullptr}}},
                    {"spec", std::move(spec)},
                    {"status", {{"token", token}, {"expirationTimestamp", timeText(iat + lifetime)}}}}};
    }

    static std::string timeText(std::int64_t seconds) {
        const std::time_t t = static_cast<std::time_t>(seconds);
        std::tm tm{};
        ::gmtime_r(&t, &tm);
        char text[32];
        std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
        return text;
    }

    // A Warning header's text: in double quotes, '"' and '\\' escaped.
    static std::string quoted(const std::string& text) {
        std::string out = "\"";
        for (char c : text) {
            if (c == '"' || c == '\\') out += '\\';
            out += c;
        }
        return out + "\"";
    }

    // Unknown fields in a create, update or merge patch, as upstream (1.27): Strict refuses
    // the request (400), Warn (the default) drops them with a Warning header each, Ignore
    // drops them. A server-side apply refuses them whatever fieldValidation says: its typed
    // conversion knows no field outside the schema.
    static std::optional<Outcome> checkFields(const ResourceType& type, const std::string& validation,
                                              json::value& body, std::vector<std::string>& warnings) {
        if (!body.is_object()) return std::nullopt;
        const std::vector<UnknownFieldPath> unknown = unknownFields(type, body.as_object());
        if (unknown.empty()) return std::nullopt;
        std::string listed;
        for (const UnknownFieldPath& field : unknown) {
            const std::string one = "unknown field \"" + field.path + "\"";
            listed += (listed.empty() ? "" : ", ") + one;
            if (validation != "Ignore" && validation != "Strict") warnings.push_back(one);
        }
        if (validation == "Strict") {
            return failure(400, "BadRequest",
                           type.kind + " in version \"" + type.version + "\" cannot be handled as a " +
                               type.kind + ": strict decoding error: " + listed);
        }
        dropUnknownFields(type, body.as_object());
        return std::nullopt;
    }

    static std::optional<Outcome> checkApplyFields(const ResourceType& type, const std::string& ns,
                                                   const std::string& name, const json::value& body) {
        if (!body.is_object()) return std::nullopt;
        const std::vector<UnknownFieldPath> unknown =
            unknownFields(type, body.as_object(), kube_schema::Report::AsApply);
        if (unknown.empty()) return std::nullopt;
        std::string errors;
        for (const UnknownFieldPath& field : unknown) {
            errors += (unknown.size() > 1 ? "\n  ." : ".") + field.keyPath + ": field not declared in schema";
        }
        if (unknown.size() > 1) errors = "errors:" + errors;
        const std::string message = "failed to create typed patch object (" + ns + "/" + name + "; " +
                                    type.group + "/" + type.version + ", Kind=" + type.kind + "): " + errors;
        return failure(500, "InternalError", "Internal error occurred: " + message,
                       {{"causes", json::array{json::object{{"message", message}}}}});
    }

    // `warnings`: the Warning headers of a successful answer.
    Outcome execute(const Request& req, const Target& target, const Route& r,
                    std::vector<std::string>& warnings) {
        WriteOptions o;
        o.fieldManager = target.param("fieldManager");
        if (o.fieldManager.empty() && r.verb != "patch") {
            const std::string agent(req[http::field::user_agent]);
            o.fieldManager = agent.substr(0, agent.find('/'));
        }
        o.force = target.flag("force");
        o.dryRun = target.param("dryRun") == "All";
        o.statusOnly = r.subresource == "status";
        const std::string contentType(req[http::field::content_type]);
        auto body = [&]() -> std::optional<json::value> {
            boost::system::error_code ec;
            json::value v = json::parse(req.body(), ec);
            if (ec) return std::nullopt;
            return v;
        };
        std::string error;
        if (r.subresource == "token") {
            auto v = body();
            if (!v || !v->is_object())
                return failure(400, "BadRequest", "the body of the request is not JSON");
            return tokenRequest(r, v->as_object());
        }
        if (r.verb == "get") return store_.get(*r.type, r.ns, r.name);
        if (r.verb == "list" || r.verb == "deletecollection") {
            auto selector =
                Selector::parse(target.param("labelSelector"), target.param("fieldSelector"), *r.type, error);
            if (!selector) return failure(400, "BadRequest", error);
            if (r.verb == "deletecollection") return store_.removeCollection(*r.type, r.ns, *selector);
            std::size_t limit = 0;
            try {
                if (!target.param("limit").empty()) limit = std::stoul(target.param("limit"));
            } catch (const std::exception&) {
                return failure(400, "BadRequest", "limit is not a number");
            }
            return store_.list(*r.type, r.ns, *selector, limit, target.param("continue"),
                               target.param("resourceVersion"), target.param("resourceVersionMatch"));
        }
        const std::string validation = target.param("fieldValidation");
        if (!validation.empty() && validation != "Strict" && validation != "Warn" && validation != "Ignore" &&
            (r.verb == "create" || r.verb == "update" || r.verb == "patch"))
            return failure(400, "BadRequest",
                           "fieldValidation: Unsupported value: \"" + validation +
                               "\": supported values: \"Ignore\", \"Strict\", \"Warn\"");
        if (r.verb == "create" || r.verb == "update") {
            if (!contentType.empty() && !contentType.starts_with("application/json") &&
                !contentType.starts_with("*/*"))
                return failure(415, "UnsupportedMediaType", "the double reads application/json bodies only");
            auto v = body();
            if (!v) return failure(400, "BadRequest", "the body of the request is not JSON");
            if (auto refused = checkFields(*r.type, validation, *v, warnings)) return *refused;
            if (r.verb == "create") return store_.create(*r.type, r.ns, std::move(*v), o);
            return store_.replace(*r.type, r.ns, r.name, std::move(*v), o);
        }
        if (r.verb == "patch") {
            const bool apply = contentType.starts_with("application/apply-patch+yaml");
            if (o.fieldManager.empty() && !apply) {
                const std::string agent(req[http::field::user_agent]);
                o.fieldManager = agent.substr(0, agent.find('/'));
            }
            o.operation = apply ? "Apply" : "Update";
            std::string patch = req.body();
            if (auto v = body()) {
                if (apply) {
                    if (auto refused = checkApplyFields(*r.type, r.ns, r.name, *v)) return *refused;
                } else if (contentType.starts_with("application/merge-patch+json")) {
                    if (auto refused = checkFields(*r.type, validation, *v, warnings)) return *refused;
                    patch = json::serialize(*v);
                }
            }
            return store_.patch(*r.type, r.ns, r.name, contentType, patch, o);
        }
        if (r.verb == "delete") return store_.remove(*r.type, r.ns, r.name, req.body());
        return failure(405, "MethodNotAllowed",
                       "the server does not allow this method on the requested resource");
    }

    static std::string eventLine(const std::string& type, const json::value& object) {
        return json::serialize(json::object{{"type", type}, {"object", object}}) + "\n";
    }

    awaitable<void> writeChunk(Stream& stream, const std::string& data) {
        co_await asio::async_write(stream, http::make_chunk(asio::buffer(data)), use_awaitable);
    }

    awaitable<bool> watch(Stream& stream, Request& req, const Target& target, const Route& r,
                          const std::string& user) {
        std::string error;
        auto selector =
            Selector::parse(target.param("labelSelector"), target.param("fieldSelector"), *r.type, error);
        if (!selector) {
            record(r, user, 400);
            co_await respond(stream, req, 400, statusObject(400, "BadRequest", error));
            co_return req.keep_alive();
        }
        std::vector<Event> replayed;
        std::optional<Outcome> expired =
            store_.replay(*r.type, r.ns, target.param("resourceVersion"), replayed);
        if (expired && expired->code != 410) {
            record(r, user, expired->code);
            co_await respond(stream, req, expired->code, expired->body);
            co_return req.keep_alive();
        }
        record(r, user, 200);
        auto w = std::make_shared<Watcher>(io_.get_executor());
        w->type = r.type;
        w->ns = r.ns;
        w->user = user;
        w->selector = *selector;
        // As the API server does, an expired version is an ERROR event in a 200 stream.
        if (expired) w->error = expired->body.as_object();
        for (const Event& e : replayed) w->offer(e);
        watchers_.insert(w);
        struct Unregister {
            Server* server;
            std::shared_ptr<Watcher> w;
            ~Unregister() { server->watchers_.erase(w); }
        } unregister{this, w};

        http::response<http::empty_body> res{http::status::ok, req.version()};
        res.set(http::field::content_type, "application/json");
        res.set(http::field::cache_control, "no-cache, private");
        res.chunked(true);
        res.keep_alive(req.keep_alive());
        http::response_serializer<http::empty_body> serializer{res};
        co_await http::async_write_header(stream, serializer, use_awaitable);

        using Clock = std::chrono::steady_clock;
        const bool bookmarks = target.flag("allowWatchBookmarks");
        int timeout = 1800;
        try {
            if (!target.param("timeoutSeconds").empty()) timeout = std::stoi(target.param("timeoutSeconds"));
        } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch)
            // Not a number: the default, as when none is given.
        }
        const auto deadline = Clock::now() + std::chrono::seconds(std::max(timeout, 0));
        const auto interval = std::chrono::seconds(std::max(options_.bookmarkSeconds, 1));
        auto nextBookmark = Clock::now() + interval;
        bool ended = false;
        for (;;) {
            if (w->silent) co_return co_await stayForgotten(stream, w);
            if (!paused_) {
                while (!w->queue.empty() && !w->silent) {
                    auto [type, object] = w->queue.front();
                    w->queue.pop_front();
                    co_await writeChunk(stream, eventLine(type, *object));
                }
                if (w->silent) continue;
                if (w->error) {
                    co_await writeChunk(stream, eventLine("ERROR", *w->error));
                    break;
                }
            }
            if (w->closed) {
                ended = true;
                break;
            }
            const auto now = Clock::now();
            if (now >= deadline) break;
            if (bookmarks && now >= nextBookmark && !paused_) {
                json::object bookmark{
                    {"kind", r.type->kind},
                    {"apiVersion", r.type->apiVersion()},
                    {"metadata", {{"resourceVersion", std::to_string(store_.resourceVersion())}}}};
                co_await writeChunk(stream, eventLine("BOOKMARK", bookmark));
                nextBookmark = now + interval;
            }
            w->wake.expires_at(bookmarks ? std::min(deadline, nextBookmark) : deadline);
            co_await w->wake.async_wait(noThrow);
        }
        if (ended) co_return false;  // closed by the control endpoint: the socket is gone
        co_await asio::async_write(stream, http::make_chunk_last(), use_awaitable);
        co_return req.keep_alive();
    }

    // A watch the server forgot (a partition, silence-watches): half-open. Nothing more is
    // written, not even the end of the stream, whatever its timeoutSeconds; the connection
    // stays until the client closes it (or /_double/close, SIGUSR1, a stop).
    awaitable<bool> stayForgotten(Stream& stream, const std::shared_ptr<Watcher>& w) {
        watchers_.erase(w);
        w->queue.clear();
        ++silentWatches_;
        struct Uncount {
            Server* server;
            ~Uncount() { --server->silentWatches_; }
        } uncount{this};
        std::array<char, 4096> discarded{};
        for (;;) {
            auto [ec, n] = co_await stream.async_read_some(asio::buffer(discarded), noThrow);
            if (ec) break;
        }
        co_return false;
    }

    awaitable<bool> control(Stream& stream, Request& req, const Target& target, std::uint64_t connection) {
        const std::string what = target.segments.size() > 1 ? target.segments[1] : "";
        boost::system::error_code ec;
        json::value body = req.body().empty() ? json::value(json::object{}) : json::parse(req.body(), ec);
        if (ec || !body.is_object()) {
            co_await respond(stream, req, 400,
                             statusObject(400, "BadRequest", "control bodies are JSON objects"));
            co_return req.keep_alive();
        }
        const json::object& args = body.as_object();
        auto integer = [&](const char* key, int fallback) {
            const json::value* v = args.if_contains(key);
            return v && (v->is_int64() || v->is_uint64()) ? static_cast<int>(v->to_number<double>())
                                                          : fallback;
        };
        auto text = [&](const char* key) {
            const json::value* v = args.if_contains(key);
            return v && v->is_string() ? std::string(v->as_string()) : std::string();
        };
        const auto method = req.method();
        json::object answer{{"ok", true}};
        bool closeAfter = false;
        if (what == "requests" && method == http::verb::get) {
            json::object counts;
            for (const auto& [k, n] : counts_) counts[k] = n;
            json::object users;
            for (const auto& [who, perKey] : userCounts_) {
                json::object mine;
                for (const auto& [k, n] : perKey) mine[k] = n;
                users[who] = std::move(mine);
            }
            json::array partitioned;
            for (const auto& who : partitioned_) partitioned.push_back(json::string(who));
            json::array recent(recent_.begin(), recent_.end());
            answer = {{"total", total_},
                      {"counts", std::move(counts)},
                      {"recent", std::move(recent)},
                      {"activeWatches", watchers_.size()},
                      {"connections", connections_.size()},
                      {"paused", paused_},
                      {"heldRequests", held_},
                      {"partitioned", std::move(partitioned)},
                      {"silentWatches", silentWatches_},
                      {"users", std::move(users)},
                      {"resourceVersion", std::to_string(store_.resourceVersion())},
                      {"since", since_}};
        } else if (what == "requests" && method == http::verb::delete_) {
            counts_.clear();
            userCounts_.clear();
            recent_.clear();
            total_ = 0;
            since_ = nowText();
        } else if (what == "fail" && method == http::verb::post) {
            const int code = integer("code", 429);
            if (code != 429 && code != 500 && code != 503 && code != 504) {
                co_await respond(stream, req, 400,
                                 statusObject(400, "BadRequest", "code is 429, 500, 503 or 504"));
                co_return req.keep_alive();
            }
            injection_ = {integer("count", 1), code, integer("retryAfter", 1), text("verb"),
                          text("resource")};
        } else if (what == "token-lifetime" && method == http::verb::post) {
            maxTokenSeconds_ = integer("maxExpirationSeconds", 0);
            answer["maxExpirationSeconds"] = maxTokenSeconds_;
        } else if (what == "close" && method == http::verb::post) {
            closeAll(connection);
            closeAfter = true;
        } else if (what == "compact" && method == http::verb::post) {
            store_.compact();
            const json::value* expire = args.if_contains("expireWatches");
            if (expire && expire->is_bool() && expire->as_bool()) {
                for (auto& w : watchers_) {
                    w->error = statusObject(410, "Expired",
                                            "too old resource version: the watch cache was compacted");
                    w->wake.cancel();
                }
            }
            answer["resourceVersion"] = std::to_string(store_.resourceVersion());
        } else if (what == "pause" && method == http::verb::post) {
            paused_ = true;
        } else if (what == "resume" && method == http::verb::post) {
            paused_ = false;
            resumed_.cancel();
            for (auto& w : watchers_) w->wake.cancel();
        } else if (what == "partition" && method == http::verb::post) {
            const std::string who = text("user");
            if (who.empty()) {
                co_await respond(
                    stream, req, 400,
                    statusObject(400, "BadRequest", "a partition names its user: {\"user\":USER}"));
                co_return req.keep_alive();
            }
            partitioned_.insert(who);
            silence(who);
        } else if (what == "heal" && method == http::verb::post) {
            const std::string who = text("user");  // "": every user
            if (who.empty())
                partitioned_.clear();
            else
                partitioned_.erase(who);
            // In the order they came: each resumes and is processed before the next.
            for (auto& [ticket, held] : partitionHeld_) {
                if (!who.empty() && held->user != who) continue;
                held->released = true;
                held->wake();
            }
        } else if (what == "silence-watches" && method == http::verb::post) {
            silence(text("user"));
        } else {
            co_await respond(stream, req, 404, statusObject(404, "NotFound", "no such control endpoint"));
            co_return req.keep_alive();
        }
        co_await respond(stream, req, 200, answer);
        co_return req.keep_alive() && !closeAfter;
    }

    // Every watch of `user` ("": of everyone) open now goes silent (see stayForgotten).
    void silence(const std::string& user) {
        for (auto& w : watchers_) {
            if (!user.empty() && w->user != user) continue;
            w->silent = true;
            w->wake.cancel();
        }
    }

    asio::io_context& io_;
    ssl::context& tls_;
    Options options_;
    Tokens tokens_;
    // Tokens issued by TokenRequest: the ServiceAccount's user, until when they authenticate.
    struct IssuedToken {
        std::string user;
        std::chrono::system_clock::time_point expires;
        Identity identity;  // no rules: used when the tokens file has no line for the user
    };
    std::map<std::string, IssuedToken> issued_;
    std::int64_t maxTokenSeconds_ = 0;  // 0: no cap (token-lifetime control)
    std::mt19937_64 signatureBytes_{std::random_device{}()};
    Store store_;
    tcp::acceptor acceptor_;
    tcp::endpoint endpoint_;
    std::set<std::shared_ptr<Watcher>> watchers_;
    std::map<std::uint64_t, std::function<void()>> connections_;
    std::uint64_t nextConnection_ = 0;
    bool paused_ = false;
    std::size_t held_ = 0;               // requests waiting for a resume or a heal
    asio::steady_timer resumed_;         // cancelled on resume: wakes every paused request
    std::set<std::string> partitioned_;  // users whose requests are held
    // A partitioned user's held requests, by arrival: a heal answers them in this order.
    std::map<std::uint64_t, std::shared_ptr<HeldRequest>> partitionHeld_;
    std::uint64_t nextHeld_ = 0;
    std::size_t silentWatches_ = 0;  // forgotten watches whose clients have not closed them
    // Requests waiting for a resourceVersion to appear; every write cancels their timers.
    std::set<asio::steady_timer*> versionWaiters_;
    Injection injection_;
    std::map<std::string, std::uint64_t> counts_;
    std::map<std::string, std::map<std::string, std::uint64_t>> userCounts_;  // by user, then key
    std::uint64_t total_ = 0;
    std::deque<json::object> recent_;
    std::string since_ = nowText();
};

int usage(const std::string& error) {
    std::cerr << "kube-api-double: " << error
              << "\nusage: kube-api-double --cert SERVER.pem --key SERVER.key --token-file TOKENS "
                 "--port-file FILE [--listen 127.0.0.1:0] [--client-ca CA.pem] [--bookmark-interval SECONDS] "
                 "[--namespace NAME]...\n";
    return 2;
}

}  // namespace
}  // namespace devlet::kubedouble

int main(int argc, char** argv) {
    using namespace devlet::kubedouble;
    Options options;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (i + 1 >= argc) return usage("missing value after " + arg);
        const std::string value = argv[++i];
        if (arg == "--cert")
            options.cert = value;
        else if (arg == "--key")
            options.key = value;
        else if (arg == "--token-file")
            options.tokenFile = value;
        else if (arg == "--port-file")
            options.portFile = value;
        else if (arg == "--listen")
            options.listen = value;
        else if (arg == "--client-ca")
            options.clientCa = value;
        else if (arg == "--namespace")
            options.namespaces.push_back(value);
        else if (arg == "--bookmark-interval") {
            try {
                options.bookmarkSeconds = std::stoi(value);
            } catch (const std::exception&) {
                return usage("--bookmark-interval wants a number of seconds");
            }
        } else
            return usage("unknown option " + arg);
    }
    if (options.cert.empty() || options.key.empty() || options.tokenFile.empty() || options.portFile.empty())
        return usage("--cert, --key, --token-file and --port-file are required");

    asio::io_context io;
    ssl::context tls(ssl::context::tls_server);
    try {
        tls.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                        ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
        tls.use_certificate_chain_file(options.cert);
        tls.use_private_key_file(options.key, ssl::context::pem);
        if (!options.clientCa.empty()) {
            tls.load_verify_file(options.clientCa);
            // Ask for a certificate, accept a client without one (it then needs a token).
            tls.set_verify_mode(ssl::verify_peer);
            tls.set_verify_callback([](bool, ssl::verify_context&) { return true; });
        }
    } catch (const std::exception& e) {
        std::cerr << "kube-api-double: TLS setup failed: " << e.what() << "\n";
        return 1;
    }
    Server server(io, tls, options);
    if (std::string error = server.start(); !error.empty()) {
        std::cerr << "kube-api-double: " << error << "\n";
        return 1;
    }
    asio::signal_set stop(io, SIGTERM, SIGINT);
    stop.async_wait([&](const boost::system::error_code&, int) {
        server.shutdown();
        io.stop();
    });
    asio::signal_set toggle(io, SIGUSR1, SIGUSR2);
    std::function<void(const boost::system::error_code&, int)> onToggle =
        [&](const boost::system::error_code& ec, int signal) {
            if (ec) return;
            if (signal == SIGUSR1)
                server.refuse();
            else
                server.accept();
            toggle.async_wait(onToggle);
        };
    toggle.async_wait(onToggle);
    io.run();
    // Coroutines still suspended on the loop reference the server; unwinding them after it is
    // gone would touch freed memory, and a test double has nothing to flush.
    std::fflush(nullptr);
    std::_Exit(0);
}
