#pragma once
// The Kubernetes API double (kube-api-double) as a child process for C++ tests: a test PKI
// and a tokens file in a directory the test owns, the double on a free loopback port, a
// kubeconfig for it, and its control endpoints. Owns the child; stops it on destruction.
// Used from the test's thread. Meson passes the paths in the environment (kube_double_env).

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <sys/types.h>

namespace devlet::test {

class KubeApiDouble {
public:
    struct Options {
        // Lines of the tokens file: "TOKEN [USER] [allow=|deny=RESOURCES[:VERBS[:NAMES]]]...".
        std::vector<std::string> tokens = {"devlet-token devlet", "admin-token admin"};
        // e.g. {"--bookmark-interval", "1"}: bookmarks come every 60 s unless a test asks.
        std::vector<std::string> extraArgs;
        // Namespaces that exist from the start (--namespace), beside default and kube-*.
        std::vector<std::string> namespaces = {"devlet"};
        // Also accept client certificates signed by the test CA (user: the certificate's CN).
        bool clientCertificates = false;
    };
    struct Response {
        int status = 0;  // 0: no HTTP answer (connection refused, timeout)
        std::string body;
    };
    // A request left running (curl in the background, no time limit): a watch read as it
    // streams, or a request the double holds. Closing it, or destroying it, closes the
    // client's end of the connection, as a client that gives up does.
    class OpenRequest {
    public:
        OpenRequest(OpenRequest&& other) noexcept;
        OpenRequest& operator=(OpenRequest&&) = delete;
        ~OpenRequest();
        // The response's status once its header has arrived; 0 before.
        int status() const;
        // The body as far as it has arrived.
        std::string body() const;
        // Whether the client still waits: it has neither had its whole answer nor given up.
        bool running();
        // Waits up to `timeout` for the client to end (the answer complete, or a failure);
        // whether it did.
        bool wait(std::chrono::milliseconds timeout);
        // The client gives up: its end of the connection closes.
        void close();

    private:
        friend class KubeApiDouble;
        OpenRequest(pid_t pid, std::filesystem::path files);
        pid_t pid_ = -1;
        std::filesystem::path files_;  // FILES.headers, FILES.body, FILES.auth, FILES.log
    };

    // dir: an empty directory the test owns (pki/, tokens, port, double.log go there).
    // Starts the double; throws std::runtime_error when it cannot.
    explicit KubeApiDouble(std::filesystem::path dir);
    KubeApiDouble(std::filesystem::path dir, Options options);
    ~KubeApiDouble();
    KubeApiDouble(const KubeApiDouble&) = delete;
    KubeApiDouble& operator=(const KubeApiDouble&) = delete;

    std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }
    int port() const { return port_; }
    std::filesystem::path caPath() const { return dir_ / "pki" / "ca.pem"; }
    std::filesystem::path clientCertPath() const { return dir_ / "pki" / "client.pem"; }
    std::filesystem::path clientKeyPath() const { return dir_ / "pki" / "client.key"; }
    std::filesystem::path tokensPath() const { return dir_ / "tokens"; }
    // The first token of Options::tokens.
    std::string token() const;
    std::string log() const;
    pid_t pid() const { return pid_; }

    // Writes a kubeconfig (mode 0600) naming the test CA and a bearer token.
    std::filesystem::path writeKubeconfig(const std::filesystem::path& path, const std::string& token,
                                          const std::string& ns = "default") const;

    // One HTTPS request (curl) with a bearer token: path as "/api/v1/namespaces/default/pods".
    Response request(const std::string& method, const std::string& path, const std::string& body = "",
                     const std::string& contentType = "application/json") const;
    Response request(const std::string& method, const std::string& path, const std::string& body,
                     const std::string& contentType, const std::string& token) const;
    // The same request left running: see OpenRequest. A body is sent as application/json.
    OpenRequest startRequest(const std::string& method, const std::string& path, const std::string& token,
                             const std::string& body = "") const;
    // The control endpoints under /_double/ (README.md in kube_api_double/).
    Response control(const std::string& method, const std::string& what, const std::string& body = "") const;
    // How many requests of a kind it has answered ("delete services", "list leases"; the
    // keys of GET /_double/requests); -1 when it does not say.
    std::int64_t requestCount(const std::string& key) const;
    // The same for one user's requests (the tokens file's USER).
    std::int64_t requestCount(const std::string& key, const std::string& user) const;

    // A network partition of one client, known by its user: its requests hang (answered by
    // a heal unless it closed them meanwhile), its open watches go silent without closing
    // and never speak again. heal() with no user heals everyone. The control endpoints
    // answer whoever asks. These throw std::runtime_error when the double refuses.
    void partition(const std::string& user);
    void heal(const std::string& user = "");
    // Every watch of `user` (of everyone when "") open now delivers nothing more, not even
    // bookmarks, and stays open; new watches and everything else work.
    void silenceWatches(const std::string& user = "");
    // Every API request hangs and every watch holds its events until resume().
    void pause();
    void resume();

    // The API server "down" and back: stop accepting and drop every connection (clients see
    // connection refused), then accept again on the same port. Objects survive.
    void refuseConnections();
    void acceptConnections();
    // Stops the process (SIGTERM) and starts a fresh one on the same port: every object and
    // every resourceVersion is gone, as with a wiped etcd.
    void restart();
    void stop();

private:
    void start(int port);
    void controlOrThrow(const std::string& what, const std::string& body) const;

    std::filesystem::path dir_;
    Options options_;
    pid_t pid_ = -1;
    int port_ = 0;
};

}  // namespace devlet::test
