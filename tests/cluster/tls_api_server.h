#pragma once
// A small Kubernetes API server for the client's tests: HTTPS with a test CA, bearer
// tokens, objects with resourceVersions in named collections (create, get, list, replace,
// merge patch, apply, delete with preconditions), watch streams with history, bookmarks
// and 410 after compaction, and injected trouble: answers (429 with Retry-After, 5xx, 504
// "Too large resource version" to watches), ERROR events, silent watches and requests left
// unanswered. One thread per connection; every method may be called from any thread.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

namespace devlet::test {

struct TestCertificates {
    std::string caPem;       // the CA the server's certificate chains to
    std::string otherCaPem;  // a CA that has signed nothing the server shows
    std::string certFile;    // server certificate (SAN IP:127.0.0.1, DNS:localhost)
    std::string keyFile;
    std::string clientCertPem;  // signed by the CA, for client-certificate tests
    std::string clientKeyPem;
};
// Made with the openssl command in `dir`.
TestCertificates makeTestCertificates(const std::string& dir);

struct RecordedRequest {
    std::string method, target, contentType, body;
};

class TlsApiServer {
public:
    TlsApiServer(const TestCertificates& certificates, std::set<std::string> tokens);
    ~TlsApiServer();

    unsigned short port() const { return port_; }
    void addCollection(const std::string& path);  // e.g. "/apis/coordination.k8s.io/v1/namespaces/ns/leases"

    // As a writer outside the client would: emits ADDED or MODIFIED / DELETED.
    void putObject(const std::string& collection, const std::string& name, boost::json::object object);
    void deleteObject(const std::string& collection, const std::string& name);
    std::string resourceVersionOf(const std::string& collection, const std::string& name);

    // The next `count` requests (watches included) are answered with `code` and a Status.
    void failNext(int code, int count, const std::string& retryAfter = "");
    // The next `count` watch requests (only they) are answered with `code` and a Status
    // with `message` and, when given, details.causes[0].reason `cause` (504, "Timeout: Too
    // large resource version: …", "ResourceVersionTooLarge" is what a real server says to a
    // watch from a version it has not reached).
    void failNextWatches(int code, int count, const std::string& retryAfter = "",
                         const std::string& message = "injected", const std::string& cause = "");
    // Every open watch gets an ERROR event with this Status, and its stream ends.
    void errorWatches(int code, const std::string& reason, const std::string& message,
                      const std::string& cause = "");
    // While set, a new watch gets its headers and then nothing at all (no event, no
    // BOOKMARK, no end) until endWatches(), closeConnections() or the server stops.
    void silenceWatches(bool silent);
    // While held, requests other than watches are recorded and wait before they are answered.
    void holdAnswers(bool held);
    void setTokens(std::set<std::string> tokens);
    // Every open watch gets a BOOKMARK with the current resourceVersion.
    void bookmark();
    // Every connection is closed, kept-alive idle ones included (a server restart, a
    // load balancer's idle timeout).
    void closeConnections();
    // Every open watch stream ends (the server's timeout, a restart).
    void endWatches();
    // While held, a new watch request waits before it is answered.
    void holdWatches(bool held);
    // Versions before now are gone: a watch from them gets 410 (as HTTP when `asHttp`,
    // else as an ERROR event in a 200 stream, as real servers do).
    void compact(bool asHttp);

    std::vector<RecordedRequest> requests();
    std::size_t openWatches();

private:
    struct Event {
        std::uint64_t version;
        std::string collection;
        std::string type;
        boost::json::object object;
    };
    void acceptLoop();
    struct Injected {
        int code;
        std::string retryAfter, message, cause;
    };
    std::string handle(const std::string& method, const std::string& target, const std::string& contentType,
                       const std::string& auth, const std::string& body, int& code, std::string& retryAfter,
                       bool& watch, std::uint64_t& watchFrom, std::string& watchCollection, bool& silent);
    void record(const std::string& collection, const std::string& type, const boost::json::object& object);

    std::mutex mutex_;  // guards everything below
    std::condition_variable changed_;
    std::set<std::string> tokens_;
    std::set<std::string> collections_;
    std::map<std::string, std::map<std::string, boost::json::object>> objects_;
    std::vector<Event> history_;
    std::uint64_t version_ = 100;
    std::uint64_t compactedBelow_ = 0;
    bool goneAsHttp_ = true;
    bool watchesHeld_ = false;
    bool watchesSilent_ = false;
    bool answersHeld_ = false;
    std::uint64_t watchGeneration_ = 0;  // bumped by endWatches()
    std::uint64_t errorGeneration_ = 0;  // bumped by errorWatches()
    boost::json::object watchError_;     // the Status errorWatches() sends
    std::size_t openWatches_ = 0;
    std::deque<std::pair<int, std::string>> failures_;
    std::deque<Injected> watchFailures_;
    std::vector<RecordedRequest> requests_;
    std::uint64_t uid_ = 0;
    bool stopping_ = false;

    struct Tls;
    std::unique_ptr<Tls> tls_;
    int listenFd_ = -1;
    unsigned short port_ = 0;
    std::set<int> connections_;
    std::vector<std::thread> threads_;
    std::thread acceptor_;
};

}  // namespace devlet::test
