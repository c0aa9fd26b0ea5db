#include "tests/cluster/kube_double_fixture.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <boost/json.hpp>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace devlet::test {

namespace {

std::string fromEnvironment(const char* name) {
    const char* value = std::getenv(name);
    if (!value || !*value)
        throw std::runtime_error(std::string(name) + " is not set (meson sets kube_double_env)");
    return value;
}

struct Output {
    int exitCode = -1;
    std::string text;
};

// Runs argv to completion, stdout captured (stderr too when mergeErrors).
Output run(const std::vector<std::string>& args, bool mergeErrors = true) {
    // Close-on-exec: a curl another thread starts meanwhile must not inherit this pipe's
    // write end, or this read would wait for that curl to end (a paused request: 30 s).
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return {};
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        if (mergeErrors) dup2(fds[1], 2);
        ::close(fds[0]);
        execv(argv[0], argv.data());
        _exit(127);
    }
    ::close(fds[1]);
    Output out;
    char buffer[4096];
    for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) out.text.append(buffer, n);
    ::close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    out.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return out;
}

std::string readAll(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// A control body naming a user, or {} for every user.
std::string userBody(const std::string& user) {
    boost::json::object body;
    if (!user.empty()) body["user"] = user;
    return boost::json::serialize(body);
}

}  // namespace

KubeApiDouble::KubeApiDouble(std::filesystem::path dir) : KubeApiDouble(std::move(dir), Options{}) {}

KubeApiDouble::KubeApiDouble(std::filesystem::path dir, Options options)
    : dir_(std::move(dir)), options_(std::move(options)) {
    const Output pki = run({fromEnvironment("KUBE_TEST_PKI"), (dir_ / "pki").string()});
    if (pki.exitCode != 0) throw std::runtime_error("make-test-pki.sh failed: " + pki.text);
    std::ofstream tokens(tokensPath());
    for (const auto& line : options_.tokens) tokens << line << "\n";
    tokens.close();
    start(0);
}

KubeApiDouble::~KubeApiDouble() {
    stop();
}

std::string KubeApiDouble::token() const {
    if (options_.tokens.empty()) return "";
    const std::string& line = options_.tokens.front();
    return line.substr(0, line.find(' '));
}

std::string KubeApiDouble::log() const {
    return readAll(dir_ / "double.log");
}

void KubeApiDouble::start(int port) {
    const auto portFile = dir_ / "port";
    std::filesystem::remove(portFile);
    std::vector<std::string> args = {fromEnvironment("KUBE_API_DOUBLE"),
                                     "--cert",
                                     (dir_ / "pki" / "server.pem").string(),
                                     "--key",
                                     (dir_ / "pki" / "server.key").string(),
                                     "--token-file",
                                     tokensPath().string(),
                                     "--port-file",
                                     portFile.string(),
                                     "--listen",
                                     "127.0.0.1:" + std::to_string(port)};
    for (const auto& ns : options_.namespaces) {
        args.push_back("--namespace");
        args.push_back(ns);
    }
    if (options_.clientCertificates) {
        args.push_back("--client-ca");
        args.push_back(caPath().string());
    }
    args.insert(args.end(), options_.extraArgs.begin(), options_.extraArgs.end());
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const std::string logPath = (dir_ / "double.log").string();
    pid_ = fork();
    if (pid_ == 0) {
        const int fd = ::open(logPath.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execv(argv[0], argv.data());
        _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!std::filesystem::exists(portFile)) {
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            throw std::runtime_error("kube-api-double exited: " + log());
        }
        if (std::chrono::steady_clock::now() > deadline)
            throw std::runtime_error("kube-api-double wrote no port file: " + log());
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    port_ = std::stoi(readAll(portFile));
}

void KubeApiDouble::stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
}

void KubeApiDouble::restart() {
    stop();
    start(port_);
}

void KubeApiDouble::refuseConnections() {
    if (pid_ > 0) ::kill(pid_, SIGUSR1);
}

void KubeApiDouble::acceptConnections() {
    if (pid_ > 0) ::kill(pid_, SIGUSR2);
}

std::filesystem::path KubeApiDouble::writeKubeconfig(const std::filesystem::path& path,
                                                     const std::string& token, const std::string& ns) const {
    const Output out = run({fromEnvironment("KUBE_WRITE_KUBECONFIG"), path.string(), url(), caPath().string(),
                            "token", token, ns});
    if (out.exitCode != 0) throw std::runtime_error("write-kubeconfig.sh failed: " + out.text);
    return path;
}

KubeApiDouble::Response KubeApiDouble::request(const std::string& method, const std::string& path,
                                               const std::string& body,
                                               const std::string& contentType) const {
    return request(method, path, body, contentType, token());
}

KubeApiDouble::Response KubeApiDouble::request(const std::string& method, const std::string& path,
                                               const std::string& body, const std::string& contentType,
                                               const std::string& bearer) const {
    // The token goes in a header file, not on a command line other processes can read.
    // One file per request: a test may have several in flight from its threads.
    static std::atomic<unsigned> serial{0};
    const auto header = dir_ / ("curl-header-" + std::to_string(++serial));
    {
        std::ofstream h(header);
        h << "Authorization: Bearer " << bearer << "\n";
        if (!body.empty()) h << "Content-Type: " << contentType << "\n";
    }
    std::vector<std::string> args = {
        "/usr/bin/curl",       "-sS", "--max-time", "30", "--cacert",      caPath().string(), "-H",
        "@" + header.string(), "-X",  method,       "-w", "\n%{http_code}"};
    if (!body.empty()) {
        args.push_back("--data-binary");
        args.push_back(body);
    }
    args.push_back(url() + path);
    const Output out = run(args, false);
    std::filesystem::remove(header);
    Response response;
    const auto newline = out.text.rfind('\n');
    if (newline == std::string::npos) return response;
    response.body = out.text.substr(0, newline);
    try {
        response.status = std::stoi(out.text.substr(newline + 1));
    } catch (const std::exception&) {
        response.status = 0;
    }
    return response;
}

KubeApiDouble::Response KubeApiDouble::control(const std::string& method, const std::string& what,
                                               const std::string& body) const {
    return request(method, "/_double/" + what, body);
}

std::int64_t KubeApiDouble::requestCount(const std::string& key, const std::string& user) const {
    boost::system::error_code ec;
    const boost::json::value answer = boost::json::parse(control("GET", "requests").body, ec);
    if (ec || !answer.is_object()) return -1;
    const boost::json::value* users = answer.as_object().if_contains("users");
    if (!users || !users->is_object()) return -1;
    const boost::json::value* counts = users->as_object().if_contains(user);
    if (!counts) return 0;
    const boost::json::value* count = counts->is_object() ? counts->as_object().if_contains(key) : nullptr;
    return count ? count->to_number<std::int64_t>() : 0;
}

void KubeApiDouble::controlOrThrow(const std::string& what, const std::string& body) const {
    const Response answer = control("POST", what, body);
    if (answer.status != 200)
        throw std::runtime_error("POST /_double/" + what + ": " + std::to_string(answer.status) + " " +
                                 answer.body);
}

void KubeApiDouble::partition(const std::string& user) {
    controlOrThrow("partition", userBody(user));
}

void KubeApiDouble::heal(const std::string& user) {
    controlOrThrow("heal", userBody(user));
}

void KubeApiDouble::silenceWatches(const std::string& user) {
    controlOrThrow("silence-watches", userBody(user));
}

void KubeApiDouble::pause() {
    controlOrThrow("pause", "");
}

void KubeApiDouble::resume() {
    controlOrThrow("resume", "");
}

KubeApiDouble::OpenRequest KubeApiDouble::startRequest(const std::string& method, const std::string& path,
                                                       const std::string& token,
                                                       const std::string& body) const {
    static std::atomic<unsigned> serial{0};
    const std::filesystem::path files = dir_ / ("open-request-" + std::to_string(++serial));
    const std::string auth = files.string() + ".auth";
    {
        // The token in a header file, not on a command line other processes can read.
        std::ofstream h(auth);
        h << "Authorization: Bearer " << token << "\n";
        if (!body.empty()) h << "Content-Type: application/json\n";
    }
    // -N: every piece of the body reaches the file as it arrives; -D: the header as soon as
    // it comes, so a test can tell a request still waiting for one.
    std::vector<std::string> args = {"/usr/bin/curl",
                                     "-sS",
                                     "-N",
                                     "--cacert",
                                     caPath().string(),
                                     "-H",
                                     "@" + auth,
                                     "-X",
                                     method,
                                     "-D",
                                     files.string() + ".headers",
                                     "-o",
                                     files.string() + ".body"};
    if (!body.empty()) {
        args.push_back("--data-binary");
        args.push_back(body);
    }
    args.push_back(url() + path);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const std::string logPath = files.string() + ".log";
    const pid_t pid = fork();
    if (pid == 0) {
        const int fd = ::open(logPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execv(argv[0], argv.data());
        _exit(127);
    }
    if (pid < 0) throw std::runtime_error("fork failed for curl");
    return OpenRequest(pid, files);
}

KubeApiDouble::OpenRequest::OpenRequest(pid_t pid, std::filesystem::path files)
    : pid_(pid), files_(std::move(files)) {}

KubeApiDouble::OpenRequest::OpenRequest(OpenRequest&& other) noexcept
    : pid_(other.pid_), files_(std::move(other.files_)) {
    other.pid_ = -1;
}

KubeApiDouble::OpenRequest::~OpenRequest() {
    close();
}

int KubeApiDouble::OpenRequest::status() const {
    // "HTTP/1.1 200 OK" once the header has come.
    const std::string headers = readAll(files_.string() + ".headers");
    const auto space = headers.find(' ');
    if (!headers.starts_with("HTTP/") || space == std::string::npos) return 0;
    try {
        return std::stoi(headers.substr(space + 1, 3));
    } catch (const std::exception&) {
        return 0;
    }
}

std::string KubeApiDouble::OpenRequest::body() const {
    return readAll(files_.string() + ".body");
}

bool KubeApiDouble::OpenRequest::running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) != pid_) return true;
    pid_ = -1;
    return false;
}

bool KubeApiDouble::OpenRequest::wait(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (running()) {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

void KubeApiDouble::OpenRequest::close() {
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);  // its sockets close with it
        int status = 0;
        waitpid(pid_, &status, 0);
        pid_ = -1;
    }
    if (!files_.empty()) {
        std::error_code ec;
        std::filesystem::remove(files_.string() + ".auth", ec);
    }
}

std::int64_t KubeApiDouble::requestCount(const std::string& key) const {
    boost::system::error_code ec;
    const boost::json::value answer = boost::json::parse(control("GET", "requests").body, ec);
    if (ec || !answer.is_object()) return -1;
    const boost::json::value* counts = answer.as_object().if_contains("counts");
    if (!counts || !counts->is_object()) return -1;
    const boost::json::value* count = counts->as_object().if_contains(key);
    return count ? count->to_number<std::int64_t>() : 0;
}

}  // namespace devlet::test
