// The status server under load: the real `devlet run` offers N debugEcho instances to the
// kubelet simulator, and Debian's wrk asks its status server for /api/v1/instances and
// /metrics as fast as it can (requests per second, latency p50 and p99), then hammers the
// page's document (/api/v1/status) while a device comes and goes, to show whether the
// plugins slow down meanwhile (device change -> ListAndWatch, with and without wrk). The
// memory the server adds is the daemon's RSS before the first request and after the last.
// Figures only: it never fails because a figure misses its target.

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/arrival_tracker.h"
#include "bench/command_line.h"
#include "bench/echo_devices.h"
#include "bench/figures.h"
#include "runtime/naming.h"
#include "tests/support/daemon_process.h"
#include "tests/support/kubelet_simulator.h"
#include "tests/support/temp_dir.h"

namespace devlet::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr const char* kDomain = "akri.sh";
constexpr const char* kNode = "test-node";  // DaemonProcess runs devlet with this node name
constexpr const char* kBig = "bench";
constexpr const char* kToggle = "toggle";
constexpr auto kWait = 60s;

struct Options {
    int instances = 1000;
    int capacity = 2;
    int seconds = 10;     // each wrk run
    int connections = 8;  // the throughput runs (the latency runs use one)
    int toggles = 100;    // device changes timed without and with wrk
};

// The running daemon and wrk, for the signal handler: Ctrl-C leaves neither behind.
std::atomic<pid_t> runningDaemon{-1};
std::atomic<pid_t> runningWrk{-1};
std::atomic<const char*> runningTree{nullptr};

void cleanUpAndExit(int signal) {
    for (pid_t pid : {runningDaemon.load(), runningWrk.load()}) {
        if (pid > 0) ::kill(pid, SIGKILL);
    }
    if (const char* tree = runningTree.load(); tree && ::fork() == 0) {
        ::execl("/bin/rm", "rm", "-rf", "--", tree, static_cast<char*>(nullptr));
        _exit(127);
    }
    _exit(128 + signal);
}

unsigned short freePort() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
        ::close(fd);
        throw std::runtime_error("cannot bind a loopback socket to find a free port");
    }
    socklen_t length = sizeof address;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
    ::close(fd);
    return ntohs(address.sin_port);
}

std::string wrkBinary() {
    for (const char* path : {"/usr/bin/wrk", "/usr/local/bin/wrk"}) {
        if (::access(path, X_OK) == 0) return path;
    }
    return {};
}

// What wrk printed about one run.
struct WrkResult {
    double requestsPerSecond = NAN;
    double p50Ms = NAN;
    double p99Ms = NAN;
    long requests = 0;
    long errors = 0;  // socket errors and non-2xx answers
    std::string output;
};

double toMs(const std::string& number, const std::string& unit) {
    const double value = std::stod(number);
    if (unit == "us") return value / 1000.0;
    if (unit == "ms") return value;
    if (unit == "s") return value * 1000.0;
    if (unit == "m") return value * 60000.0;
    return NAN;
}

WrkResult parseWrk(const std::string& output) {
    WrkResult r;
    r.output = output;
    std::smatch m;
    static const std::regex rps(R"(Requests/sec:\s+([0-9.]+))");
    static const std::regex p50(R"(\n\s+50%\s+([0-9.]+)(us|ms|s|m)\b)");
    static const std::regex p99(R"(\n\s+99%\s+([0-9.]+)(us|ms|s|m)\b)");
    static const std::regex total(R"((\d+) requests in)");
    static const std::regex non2xx(R"(Non-2xx or 3xx responses: (\d+))");
    static const std::regex socket(R"(Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+))");
    if (std::regex_search(output, m, rps)) r.requestsPerSecond = std::stod(m[1]);
    if (std::regex_search(output, m, p50)) r.p50Ms = toMs(m[1], m[2]);
    if (std::regex_search(output, m, p99)) r.p99Ms = toMs(m[1], m[2]);
    if (std::regex_search(output, m, total)) r.requests = std::stol(m[1]);
    if (std::regex_search(output, m, non2xx)) r.errors += std::stol(m[1]);
    if (std::regex_search(output, m, socket))
        r.errors += std::stol(m[1]) + std::stol(m[2]) + std::stol(m[3]) + std::stol(m[4]);
    return r;
}

// wrk as a child whose output goes to a file; finish() stops it (SIGINT makes wrk print
// its figures) or waits for it.
class Wrk {
public:
    Wrk(const std::string& url, int connections, int seconds, const std::filesystem::path& output)
        : output_(output) {
        const std::vector<std::string> args = {wrkBinary(),
                                               "-t",
                                               std::to_string(connections > 1 ? 2 : 1),
                                               "-c",
                                               std::to_string(connections),
                                               "-d",
                                               std::to_string(seconds) + "s",
                                               "--latency",
                                               url};
        pid_ = ::fork();
        if (pid_ == 0) {
            const int fd = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            ::dup2(fd, 1);
            ::dup2(fd, 2);
            std::vector<char*> argv;
            argv.reserve(args.size() + 1);
            for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
            argv.push_back(nullptr);
            ::execv(argv[0], argv.data());
            _exit(127);
        }
        runningWrk = pid_;
    }
    ~Wrk() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        runningWrk = -1;
    }
    WrkResult finish(bool stopNow) {
        if (stopNow) ::kill(pid_, SIGINT);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
        runningWrk = -1;
        std::ifstream in(output_);
        std::stringstream text;
        text << in.rdbuf();
        return parseWrk(text.str());
    }

private:
    std::filesystem::path output_;
    pid_t pid_ = -1;
};

struct Figure {
    std::string name;
    double value = 0;
    std::string unit;
    std::optional<double> below;
};

class Run {
public:
    explicit Run(const Options& options)
        : options_(options),
          daemon_(dir_.path()),
          kubelet_(daemon_.devicePluginDir(), daemon_.podResourcesSocket()),
          port_(freePort()) {
        kubelet_.onListAndWatch(
            [this](const std::string& resource, const v1beta1::ListAndWatchResponse& response,
                   Clock::time_point receivedAt) { tracker_.observe(resource, response, receivedAt); });
        tree_ = dir_.path().string();
        runningTree = tree_.c_str();
    }
    ~Run() {
        if (daemon_.running()) daemon_.stop(SIGKILL);
        runningDaemon = -1;
        runningTree = nullptr;
    }

    std::vector<Figure> execute() {
        start();
        const pid_t pid = daemon_.pid();
        const double rssBefore = statusMiB(pid, "VmRSS");
        figures_.push_back({"devlet RSS before any request (VmRSS)", rssBefore, "MiB", {}});
        toggles("device change -> ListAndWatch", false);
        if (wrkBinary().empty()) {
            std::printf("wrk is not installed (apt-get install wrk): no HTTP figures\n");
            return figures_;
        }
        for (const char* path : {"/api/v1/instances", "/metrics"}) {
            hammer(path, 1);
            hammer(path, options_.connections);
        }
        toggles("device change -> ListAndWatch while wrk asks for /api/v1/status", true);
        const double rssAfter = statusMiB(pid, "VmRSS");
        figures_.push_back({"devlet RSS after the requests (VmRSS)", rssAfter, "MiB", {}});
        figures_.push_back({"  memory the status server added", rssAfter - rssBefore, "MiB", {}});
        figures_.push_back({"devlet peak RSS (VmHWM)", statusMiB(pid, "VmHWM"), "MiB", {}});
        return figures_;
    }

private:
    std::string url(const std::string& path) const {
        return "http://127.0.0.1:" + std::to_string(port_) + path;
    }
    std::string resourceOf(const std::string& name) const { return std::string(kDomain) + "/" + name; }

    [[noreturn]] void fail(const std::string& what) {
        std::string log = daemon_.log();
        if (log.size() > 4000) log = "...\n" + log.substr(log.size() - 4000);
        throw std::runtime_error(what + "\n--- end of the devlet log ---\n" + log);
    }

    void start() {
        std::vector<std::string> descriptions;
        std::map<std::string, WantedState> wanted;
        const auto cap = static_cast<std::size_t>(options_.capacity);
        for (int i = 0; i < options_.instances; ++i) {
            char description[32];
            std::snprintf(description, sizeof description, "dev-%04d", i);
            descriptions.push_back(description);
            wanted[resourceOf(instanceName(kBig, instanceHash(description, kNode, false)))] = {cap, cap};
        }
        wanted[resourceOf(kBig)] = {cap * descriptions.size(), cap * descriptions.size()};
        const std::string toggleInstance = instanceName(kToggle, instanceHash("toggle-device", kNode, false));
        wanted[resourceOf(toggleInstance)] = {cap, cap};
        wanted[resourceOf(kToggle)] = {cap, cap};
        toggleResources_ = {resourceOf(toggleInstance), resourceOf(kToggle)};
        test::writeFile(
            daemon_.confDir() / "bench.yaml",
            echoConfiguration(kBig, descriptions, options_.capacity, dir_.path() / "bench-available"));
        test::writeFile(daemon_.confDir() / "toggle.yaml",
                        echoConfiguration(kToggle, {"toggle-device"}, options_.capacity, availability()));
        if (!kubelet_.start()) fail("the kubelet simulator cannot listen");
        tracker_.expect(wanted, Clock::now());
        daemon_.start({"--log-level", "info", "--listen", "127.0.0.1:" + std::to_string(port_)});
        runningDaemon = daemon_.pid();
        if (!tracker_.wait(kWait)) fail(std::to_string(tracker_.missing()) + " resource(s) never listed");
        if (!daemon_.waitForLog("status page at", kWait)) fail("the status server did not start");
        std::this_thread::sleep_for(500ms);  // the first pass's publishing has settled
    }

    std::filesystem::path availability() const { return dir_.path() / "toggle-available"; }

    // wrk against one path for options_.seconds: one connection for latency, several for
    // throughput.
    void hammer(const std::string& path, int connections) {
        const double cpuBefore = cpuMs(daemon_.pid());
        Wrk wrk(url(path), connections, options_.seconds, dir_.path() / "wrk.txt");
        const WrkResult r = wrk.finish(false);
        const double cpu = cpuMs(daemon_.pid()) - cpuBefore;
        if (r.requests == 0) fail("wrk made no request to " + path + ":\n" + r.output);
        const std::string what =
            path + ", " + std::to_string(connections) + " connection" + (connections == 1 ? "" : "s");
        figures_.push_back({what + ": requests/s", r.requestsPerSecond, "1/s", {}});
        std::optional<double> target;
        if (path == "/api/v1/instances" && connections == 1) target = 1.0;
        figures_.push_back({"  latency p50", r.p50Ms, "ms", target});
        figures_.push_back({"  latency p99", r.p99Ms, "ms", {}});
        figures_.push_back(
            {"  devlet CPU time per request", cpu / static_cast<double>(r.requests), "ms", {}});
        if (r.errors)
            figures_.push_back({"  errors (socket, non-2xx)", static_cast<double>(r.errors), "", {}});
    }

    // The toggled device goes OFFLINE and comes back; each change timed until both of its
    // resources' new lists arrived. With `loaded`, wrk asks for the page's document all
    // the while (each change makes the server render it anew).
    void toggles(const std::string& what, bool loaded) {
        std::optional<Wrk> wrk;
        if (loaded) {
            wrk.emplace(url("/api/v1/status"), options_.connections, 3600, dir_.path() / "wrk-load.txt");
            std::this_thread::sleep_for(1s);  // wrk is connected and busy
        }
        const auto cap = static_cast<std::size_t>(options_.capacity);
        std::vector<double> samples;
        const double cpuBefore = cpuMs(daemon_.pid());
        for (int i = 0; i < options_.toggles; ++i) {
            const bool offline = i % 2 == 0;
            const WantedState state{cap, offline ? 0 : cap};
            tracker_.expect({{toggleResources_[0], state}, {toggleResources_[1], state}}, Clock::now());
            const auto start = changeAvailability(availability(), offline);
            const auto arrived = tracker_.wait(kWait);
            if (!arrived) fail(what + ": the change never reached the kubelet");
            samples.push_back(ms(*arrived - start));
            std::this_thread::sleep_for(20ms);  // changes apart, as devices change
        }
        const double cpu = cpuMs(daemon_.pid()) - cpuBefore;
        figures_.push_back({what + " p50 (" + std::to_string(samples.size()) + " changes)",
                            percentile(samples, 50),
                            "ms",
                            {}});
        figures_.push_back(
            {"  p99", percentile(samples, 99), "ms", loaded ? std::optional<double>(10) : std::nullopt});
        figures_.push_back({"  max", percentile(samples, 100), "ms", {}});
        figures_.push_back({"  devlet CPU time meanwhile", cpu, "ms", {}});
        if (wrk) {
            const WrkResult r = wrk->finish(true);
            figures_.push_back(
                {"  wrk meanwhile: /api/v1/status requests/s", r.requestsPerSecond, "1/s", {}});
            figures_.push_back({"  wrk meanwhile: latency p50", r.p50Ms, "ms", {}});
            figures_.push_back({"  wrk meanwhile: latency p99", r.p99Ms, "ms", {}});
        }
    }

    const Options& options_;
    ArrivalTracker tracker_;  // outlives the simulator that calls it
    test::TempDir dir_;
    test::DaemonProcess daemon_;
    test::KubeletSimulator kubelet_;
    unsigned short port_;
    std::string tree_;
    std::vector<std::string> toggleResources_;
    std::vector<Figure> figures_;
};

Options parseOptions(int argc, char** argv) {
    Options options;
    const std::map<std::string, int*> flags = {
        {"--instances", &options.instances}, {"--capacity", &options.capacity},
        {"--seconds", &options.seconds},     {"--connections", &options.connections},
        {"--toggles", &options.toggles},
    };
    if (std::string wrong = parseNumberFlags(argc, argv, flags); !wrong.empty()) {
        throw std::invalid_argument(
            "usage: status_bench [--instances N] [--capacity N] [--seconds N] "
            "[--connections N] [--toggles N] (at " +
            wrong + ")");
    }
    for (const auto& [name, value] : flags) {
        if (*value <= 0) throw std::invalid_argument(name + " must be positive");
    }
    return options;
}

}  // namespace
}  // namespace devlet::bench

int main(int argc, char** argv) {
    using namespace devlet::bench;
    useThisBuildsDevlet();
    signal(SIGINT, cleanUpAndExit);
    signal(SIGTERM, cleanUpAndExit);
    try {
        const Options options = parseOptions(argc, argv);
        rlimit files{};
        getrlimit(RLIMIT_NOFILE, &files);
        files.rlim_cur = files.rlim_max;
        setrlimit(RLIMIT_NOFILE, &files);
        double load[3] = {0, 0, 0};
        getloadavg(load, 3);
        std::printf("status server benchmark: %d debugEcho instances x capacity %d; wrk %d s per run\n",
                    options.instances, options.capacity, options.seconds);
        std::printf("devlet: %s; wrk: %s; %ld CPU(s); load average %.2f %.2f %.2f\n",
                    devlet::test::DaemonProcess::binary().c_str(),
                    wrkBinary().empty() ? "not installed" : wrkBinary().c_str(),
                    sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2]);
        std::fflush(stdout);
        const std::vector<Figure> figures = Run(options).execute();
        std::printf("\n%-72s %10s %10s\n", "figure", "value", "target");
        for (const Figure& f : figures) {
            std::string target, verdict;
            if (f.below) {
                char text[32];
                std::snprintf(text, sizeof text, "< %g %s", *f.below, f.unit.c_str());
                target = text;
                verdict = f.value < *f.below ? "met" : "MISSED";
            }
            std::printf("%-72s %8.3f %-4s %10s  %s\n", f.name.c_str(), f.value, f.unit.c_str(),
                        target.c_str(), verdict.c_str());
        }
        getloadavg(load, 3);
        std::printf("load average at the end: %.2f %.2f %.2f\n", load[0], load[1], load[2]);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "status_bench: %s\n", e.what());
        return 1;
    }
}
