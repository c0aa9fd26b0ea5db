#include "tests/cluster/tls_api_server.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <sys/socket.h>

namespace devlet::test {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace json = boost::json;
using tcp = net::ip::tcp;

namespace {

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

void run(const std::string& command) {
    if (std::system((command + " >/dev/null 2>&1").c_str()) != 0)
        throw std::runtime_error("failed: " + command);
}

json::object status(int code, const std::string& reason, const std::string& message,
                    const std::string& cause = "") {
    json::object object{{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object{}},
                        {"status", "Failure"}, {"message", message}, {"reason", reason},
                        {"code", code}};
    if (!cause.empty())
        object["details"] = {{"causes", json::array{json::object{{"reason", cause}, {"message", message}}}}};
    return object;
}

std::string reasonFor(int code) {
    switch (code) {
        case 401:
            return "Unauthorized";
        case 404:
            return "NotFound";
        case 409:
            return "Conflict";
        case 410:
            return "Expired";
        case 429:
            return "TooManyRequests";
        case 500:
            return "InternalError";
        case 503:
            return "ServiceUnavailable";
        case 504:
            return "Timeout";
        default:
            return "Unknown";
    }
}

std::string queryValue(const std::string& query, const std::string& key) {
    std::size_t at = 0;
    while (at <= query.size()) {
        auto end = query.find('&', at);
        if (end == std::string::npos) end = query.size();
        std::string pair = query.substr(at, end - at);
        if (pair.rfind(key + "=", 0) == 0) return pair.substr(key.size() + 1);
        at = end + 1;
    }
    return "";
}

std::string versionOf(const json::object& object) {
    const json::value* metadata = object.if_contains("metadata");
    if (!metadata || !metadata->is_object()) return "";
    const json::value* version = metadata->get_object().if_contains("resourceVersion");
    return version && version->is_string() ? std::string(version->get_string()) : "";
}

}  // namespace

TestCertificates makeTestCertificates(const std::string& dir) {
    const std::string d = dir + "/";
    const std::string quiet = "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj ";
    run(quiet + "/CN=test-ca -keyout " + d + "ca.key -out " + d + "ca.pem");
    run(quiet + "/CN=other-ca -keyout " + d + "other.key -out " + d + "other.pem");
    std::ofstream(d + "san.cnf") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
    run("openssl req -newkey rsa:2048 -nodes -subj /CN=api -keyout " + d + "server.key -out " + d +
        "server.csr");
    run("openssl x509 -req -in " + d + "server.csr -CA " + d + "ca.pem -CAkey " + d +
        "ca.key -CAcreateserial -days 2 "
        "-extfile " +
        d + "san.cnf -out " + d + "server.pem");
    run("openssl req -newkey rsa:2048 -nodes -subj /CN=system:node:test -keyout " + d + "client.key -out " +
        d + "client.csr");
    run("openssl x509 -req -in " + d + "client.csr -CA " + d + "ca.pem -CAkey " + d +
        "ca.key -CAcreateserial -days 2 "
        "-out " +
        d + "client.pem");
    return {slurp(d + "ca.pem"), slurp(d + "other.pem"),  d + "server.pem",
            d + "server.key",    slurp(d + "client.pem"), slurp(d + "client.key")};
}

struct TlsApiServer::Tls {
    net::io_context io;
    ssl::context context{ssl::context::tls_server};
    tcp::acceptor acceptor{io};
};

TlsApiServer::TlsApiServer(const TestCertificates& certificates, std::set<std::string> tokens)
    : tokens_(std::move(tokens)), tls_(std::make_unique<Tls>()) {
    tls_->context.use_certificate_chain_file(certificates.certFile);
    tls_->context.use_private_key_file(certificates.keyFile, ssl::context::pem);
    // Client certificates are asked for, not required: tokens work too.
    tls_->context.set_verify_mode(ssl::verify_peer);
    tls_->context.add_certificate_authority(net::buffer(certificates.caPem));
    tls_->context.set_verify_callback([](bool, ssl::verify_context&) { return true; });
    tcp::endpoint endpoint(net::ip::make_address("127.0.0.1"), 0);
    tls_->acceptor.open(endpoint.protocol());
    tls_->acceptor.set_option(tcp::acceptor::reuse_address(true));
    tls_->acceptor.bind(endpoint);
    tls_->acceptor.listen();
    port_ = tls_->acceptor.local_endpoint().port();
    listenFd_ = tls_->acceptor.native_handle();
    acceptor_ = std::thread([this] { acceptLoop(); });
}

TlsApiServer::~TlsApiServer() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
        for (int fd : connections_) ::shutdown(fd, SHUT_RDWR);
    }
    changed_.notify_all();
    ::shutdown(listenFd_, SHUT_RDWR);
    acceptor_.join();
    for (auto& thread : threads_) thread.join();
}

void TlsApiServer::acceptLoop() {
    for (;;) {
        auto socket = std::make_shared<tcp::socket>(tls_->io);
        beast::error_code ec;
        tls_->acceptor.accept(*socket, ec);
        std::lock_guard lock(mutex_);
        if (stopping_) return;
        if (ec) continue;
        connections_.insert(socket->native_handle());
        threads_.emplace_back([this, socket] {
            ssl::stream<tcp::socket&> stream(*socket, tls_->context);
            beast::error_code ignored;
            try {
                stream.handshake(ssl::stream_base::server, ignored);
                if (ignored) throw beast::system_error(ignored);
                beast::flat_buffer buffer;
                for (;;) {
                    http::request<http::string_body> request;
                    http::read(stream, buffer, request);
                    int code = 200;
                    std::string retryAfter, watchCollection;
                    bool watch = false, silent = false;
                    std::uint64_t from = 0;
                    std::string auth(request[http::field::authorization]);
                    std::string body =
                        handle(std::string(request.method_string()), std::string(request.target()),
                               std::string(request[http::field::content_type]), auth, request.body(), code,
                               retryAfter, watch, from, watchCollection, silent);
                    if (!watch) {
                        http::response<http::string_body> response(static_cast<http::status>(code), 11);
                        response.set(http::field::content_type, "application/json");
                        if (!retryAfter.empty()) response.set(http::field::retry_after, retryAfter);
                        response.body() = body;
                        response.keep_alive(request.keep_alive());
                        response.prepare_payload();
                        http::write(stream, response);
                        if (!request.keep_alive()) break;
                        continue;
                    }
                    // A watch: a chunked stream of events, one JSON object per line.
                    http::response<http::empty_body> response(http::status::ok, 11);
                    response.set(http::field::content_type, "application/json");
                    response.chunked(true);
                    http::response_serializer<http::empty_body> serializer(response);
                    http::write_header(stream, serializer);
                    std::unique_lock lock(mutex_);
                    ++openWatches_;
                    const std::uint64_t generation = watchGeneration_;
                    const std::uint64_t errors = errorGeneration_;
                    std::size_t next = 0;
                    auto send = [&](const json::object& event) {
                        std::string line = json::serialize(event) + "\n";
                        lock.unlock();
                        net::write(stream, http::make_chunk(net::buffer(line)));
                        lock.lock();
                    };
                    if (from < compactedBelow_ && !goneAsHttp_) {
                        send({{"type", "ERROR"},
                              {"object", status(410, "Expired", "too old resource version")}});
                    } else {
                        // An ended stream sends nothing more, as a server that went away.
                        auto ended = [&] { return stopping_ || generation != watchGeneration_; };
                        // A silent stream sends nothing at all, an ERROR event included.
                        auto erred = [&] { return !silent && errors != errorGeneration_; };
                        while (!ended()) {
                            if (erred()) {
                                send({{"type", "ERROR"}, {"object", watchError_}});
                                break;
                            }
                            while (!silent && next < history_.size() && !ended()) {
                                Event event = history_[next++];
                                if (event.version <= from) continue;
                                if (event.collection != watchCollection && event.collection != "*") continue;
                                send({{"type", event.type}, {"object", event.object}});
                            }
                            if (!ended() && !erred()) changed_.wait(lock);
                        }
                    }
                    --openWatches_;
                    lock.unlock();
                    net::write(stream, http::make_chunk_last());
                }
            } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch)
                // The client went away or the server stops.
            }
            std::lock_guard lock(mutex_);
            connections_.erase(socket->native_handle());
            ::shutdown(socket->native_handle(), SHUT_RDWR);
        });
    }
}

void TlsApiServer::record(const std::string& collection, const std::string& type,
                          const json::object& object) {
    history_.push_back({version_, collection, type, object});
    changed_.notify_all();
}

std::string TlsApiServer::handle(const std::string& method, const std::string& target,
                                 const std::string& contentType, const std::string& auth,
                                 const std::string& body, int& code, std::string& retryAfter, bool& watch,
                                 std::uint64_t& watchFrom, std::string& watchCollection, bool& silent) {
    std::unique_lock lock(mutex_);
    requests_.push_back({method, target, contentType, body});
    auto answer = [&](int with, const std::string& message) {
        code = with;
        return json::serialize(status(with, reasonFor(with), message));
    };
    const auto question = target.find('?');
    const std::string path = target.substr(0, question);
    const std::string query = question == std::string::npos ? "" : target.substr(question + 1);
    const bool watchRequest = queryValue(query, "watch") == "1";
    if (!watchRequest) changed_.wait(lock, [this] { return !answersHeld_ || stopping_; });
    if (watchRequest && !watchFailures_.empty()) {
        Injected injected = watchFailures_.front();
        watchFailures_.pop_front();
        retryAfter = injected.retryAfter;
        code = injected.code;
        return json::serialize(status(code, reasonFor(code), injected.message, injected.cause));
    }
    if (!failures_.empty()) {
        auto [failCode, after] = failures_.front();
        failures_.pop_front();
        retryAfter = after;
        return answer(failCode, "injected");
    }
    if (auth.rfind("Bearer ", 0) != 0 || !tokens_.contains(auth.substr(7)))
        return answer(401, "Unauthorized");
    std::string collection = path, name;
    if (!collections_.contains(path)) {
        const auto slash = path.rfind('/');
        collection = path.substr(0, slash);
        name = path.substr(slash + 1);
        if (!collections_.contains(collection)) return answer(404, "no such resource");
    }
    auto& objects = objects_[collection];
    json::error_code ec;
    json::value parsed = body.empty() ? json::value() : json::parse(body, ec);
    if (ec) return answer(400, "bad JSON");

    auto stampNew = [&](json::object object, const std::string& objectName) {
        json::object& metadata = object["metadata"].is_object() ? object["metadata"].get_object()
                                                                : object["metadata"].emplace_object();
        metadata["name"] = objectName;
        metadata["resourceVersion"] = std::to_string(++version_);
        if (!metadata.contains("uid")) metadata["uid"] = "uid-" + std::to_string(++uid_);
        return object;
    };

    if (method == "GET" && name.empty()) {
        if (watchRequest) {
            changed_.wait(lock, [this] { return !watchesHeld_ || stopping_; });
            const std::string from = queryValue(query, "resourceVersion");
            watchFrom = from.empty() ? 0 : std::stoull(from);
            if (watchFrom < compactedBelow_ && goneAsHttp_) return answer(410, "too old resource version");
            watch = true;
            silent = watchesSilent_;
            watchCollection = collection;
            return "";
        }
        json::array items;
        for (auto& [key, object] : objects) items.push_back(object);
        return json::serialize(json::object{{"kind", "List"},
                                            {"apiVersion", "v1"},
                                            {"metadata", {{"resourceVersion", std::to_string(version_)}}},
                                            {"items", std::move(items)}});
    }
    if (method == "POST" && name.empty()) {
        if (!parsed.is_object()) return answer(400, "no object");
        std::string objectName;
        if (auto* m = parsed.get_object().if_contains("metadata"); m && m->is_object())
            if (auto* n = m->get_object().if_contains("name"); n && n->is_string())
                objectName = n->get_string();
        if (objectName.empty()) return answer(422, "no name");
        if (objects.contains(objectName)) {
            code = 409;
            return json::serialize(status(409, "AlreadyExists", "\"" + objectName + "\" already exists"));
        }
        auto object = stampNew(parsed.get_object(), objectName);
        objects[objectName] = object;
        record(collection, "ADDED", object);
        code = 201;
        return json::serialize(object);
    }
    auto it = objects.find(name);
    if (method == "GET") {
        if (it == objects.end()) return answer(404, "\"" + name + "\" not found");
        return json::serialize(it->second);
    }
    if (method == "PUT") {
        if (!parsed.is_object()) return answer(400, "no object");
        if (it == objects.end()) return answer(404, "\"" + name + "\" not found");
        const std::string wanted = versionOf(parsed.get_object());
        if (!wanted.empty() && wanted != versionOf(it->second))
            return answer(409,
                          "the object has been modified; please apply your changes to the latest version");
        json::object object = parsed.get_object();
        object["metadata"].get_object()["uid"] = it->second["metadata"].get_object()["uid"];
        it->second = stampNew(object, name);
        record(collection, "MODIFIED", it->second);
        return json::serialize(it->second);
    }
    if (method == "PATCH") {
        if (!parsed.is_object()) return answer(400, "no object");
        const bool apply = contentType == "application/apply-patch+yaml";
        if (apply && queryValue(query, "fieldManager").empty())
            return answer(400, "fieldManager is required");
        if (it == objects.end()) {
            if (!apply) return answer(404, "\"" + name + "\" not found");
            auto object = stampNew(parsed.get_object(), name);
            objects[name] = object;
            record(collection, "ADDED", object);
            code = 201;
            return json::serialize(object);
        }
        json::object merged = it->second;
        for (auto& [key, value] : parsed.get_object()) {
            if (key == "metadata") continue;
            merged[key] = value;
        }
        it->second = stampNew(merged, name);
        record(collection, "MODIFIED", it->second);
        return json::serialize(it->second);
    }
    if (method == "DELETE") {
        if (it == objects.end()) return answer(404, "\"" + name + "\" not found");
        if (parsed.is_object()) {
            if (auto* p = parsed.get_object().if_contains("preconditions"); p && p->is_object()) {
                if (auto* v = p->get_object().if_contains("resourceVersion");
                    v && v->is_string() && v->get_string() != versionOf(it->second))
                    return answer(409, "precondition failed: resourceVersion");
            }
        }
        json::object gone = it->second;
        objects.erase(it);
        ++version_;
        gone["metadata"].get_object()["resourceVersion"] = std::to_string(version_);
        record(collection, "DELETED", gone);
        return json::serialize(gone);
    }
    return answer(405, "method not allowed");
}

void TlsApiServer::addCollection(const std::string& path) {
    std::lock_guard lock(mutex_);
    collections_.insert(path);
}

void TlsApiServer::putObject(const std::string& collection, const std::string& name, json::object object) {
    std::lock_guard lock(mutex_);
    auto& objects = objects_[collection];
    const bool exists = objects.contains(name);
    json::object& metadata = object["metadata"].is_object() ? object["metadata"].get_object()
                                                            : object["metadata"].emplace_object();
    metadata["name"] = name;
    metadata["resourceVersion"] = std::to_string(++version_);
    metadata["uid"] =
        exists ? objects[name]["metadata"].get_object()["uid"] : json::value("uid-" + std::to_string(++uid_));
    objects[name] = object;
    record(collection, exists ? "MODIFIED" : "ADDED", object);
}

void TlsApiServer::deleteObject(const std::string& collection, const std::string& name) {
    std::lock_guard lock(mutex_);
    auto& objects = objects_[collection];
    auto it = objects.find(name);
    if (it == objects.end()) return;
    json::object gone = it->second;
    objects.erase(it);
    gone["metadata"].get_object()["resourceVersion"] = std::to_string(++version_);
    record(collection, "DELETED", gone);
}

std::string TlsApiServer::resourceVersionOf(const std::string& collection, const std::string& name) {
    std::lock_guard lock(mutex_);
    auto& objects = objects_[collection];
    auto it = objects.find(name);
    return it == objects.end() ? "" : versionOf(it->second);
}

void TlsApiServer::failNext(int code, int count, const std::string& retryAfter) {
    std::lock_guard lock(mutex_);
    for (int i = 0; i < count; ++i) failures_.emplace_back(code, retryAfter);
}

void TlsApiServer::failNextWatches(int code, int count, const std::string& retryAfter,
                                   const std::string& message, const std::string& cause) {
    std::lock_guard lock(mutex_);
    for (int i = 0; i < count; ++i) watchFailures_.push_back({code, retryAfter, message, cause});
}

void TlsApiServer::errorWatches(int code, const std::string& reason, const std::string& message,
                                const std::string& cause) {
    std::lock_guard lock(mutex_);
    watchError_ = status(code, reason, message, cause);
    ++errorGeneration_;
    changed_.notify_all();
}

void TlsApiServer::silenceWatches(bool silent) {
    std::lock_guard lock(mutex_);
    watchesSilent_ = silent;
}

void TlsApiServer::holdAnswers(bool held) {
    std::lock_guard lock(mutex_);
    answersHeld_ = held;
    changed_.notify_all();
}

void TlsApiServer::setTokens(std::set<std::string> tokens) {
    std::lock_guard lock(mutex_);
    tokens_ = std::move(tokens);
}

void TlsApiServer::bookmark() {
    std::lock_guard lock(mutex_);
    history_.push_back({version_,
                        "*",
                        "BOOKMARK",
                        {{"kind", "Lease"}, {"metadata", {{"resourceVersion", std::to_string(version_)}}}}});
    changed_.notify_all();
}

void TlsApiServer::closeConnections() {
    std::lock_guard lock(mutex_);
    ++watchGeneration_;
    for (int fd : connections_) ::shutdown(fd, SHUT_RDWR);
    changed_.notify_all();
}

void TlsApiServer::endWatches() {
    std::lock_guard lock(mutex_);
    ++watchGeneration_;
    changed_.notify_all();
}

void TlsApiServer::holdWatches(bool held) {
    std::lock_guard lock(mutex_);
    watchesHeld_ = held;
    changed_.notify_all();
}

void TlsApiServer::compact(bool asHttp) {
    std::lock_guard lock(mutex_);
    compactedBelow_ = version_;
    goneAsHttp_ = asHttp;
}

std::vector<RecordedRequest> TlsApiServer::requests() {
    std::lock_guard lock(mutex_);
    return requests_;
}

std::size_t TlsApiServer::openWatches() {
    std::lock_guard lock(mutex_);
    return openWatches_;
}

}  // namespace devlet::test
