// devlet's core capability under load: the real daemon offers N debugEcho instances with
// capacity C each, in one or more configurations (N instance-level resources + one
// configuration-level resource per configuration), to the kubelet simulator over real
// unix-socket gRPC. Prints the time from daemon start to every
// plugin registered, Allocate latency, device change to ListAndWatch latency and to the
// holding container's live file, kubelet restart to every plugin registered again, and the
// daemon's peak RSS. Figures only: it
// never fails because a figure misses its target.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench/arrival_tracker.h"
#include "bench/command_line.h"
#include "bench/echo_devices.h"
#include "bench/figures.h"
#include "runtime/naming.h"
#include "tests/support/daemon_process.h"
#include "tests/support/kubelet_simulator.h"

namespace devlet::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr const char* kDomain = "akri.sh";
constexpr const char* kNode = "test-node";  // DaemonProcess runs devlet with this node name
constexpr const char* kBig = "bench";       // the N instances' configuration, or their name prefix
constexpr const char* kToggle = "toggle";   // one instance whose availability is toggled
// A phase that takes longer than 30 s, plus 10 ms per plugin for large nodes, has failed.
std::chrono::milliseconds phaseLimit(std::size_t plugins) {
    return 30s + std::chrono::milliseconds(10 * plugins);
}

// When a new document is renamed into a live-file directory, as a container's reader
// would learn of it (inotify, moved_to), timed on a thread of its own.
class LiveFileWatch {
public:
    explicit LiveFileWatch(const std::filesystem::path& directory) : fd_(::inotify_init1(IN_CLOEXEC)) {
        if (fd_ < 0 || ::inotify_add_watch(fd_, directory.c_str(), IN_MOVED_TO) < 0)
            throw std::runtime_error("cannot watch " + directory.string());
        thread_ = std::thread([this] { run(); });
    }
    ~LiveFileWatch() {
        done_ = true;
        thread_.join();
        ::close(fd_);
    }
    std::size_t count() const {
        std::lock_guard lock(mutex_);
        return times_.size();
    }
    // When the k-th document (from 0) arrived; waits for it up to `limit`.
    std::optional<Clock::time_point> arrival(std::size_t k, std::chrono::milliseconds limit) const {
        const auto deadline = Clock::now() + limit;
        while (Clock::now() < deadline) {
            {
                std::lock_guard lock(mutex_);
                if (k < times_.size()) return times_[k];
            }
            std::this_thread::sleep_for(100us);
        }
        return std::nullopt;
    }

private:
    void run() {
        alignas(inotify_event) char buffer[4096];
        while (!done_) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0) continue;
            const ssize_t n = ::read(fd_, buffer, sizeof buffer);
            const auto now = Clock::now();
            for (ssize_t at = 0; at < n;) {
                const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
                if (event->len && std::string_view(event->name) == "devices.json") {
                    std::lock_guard lock(mutex_);
                    times_.push_back(now);
                }
                at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
            }
        }
    }
    int fd_;
    std::atomic<bool> done_{false};
    mutable std::mutex mutex_;
    std::vector<Clock::time_point> times_;
    std::thread thread_;
};

struct Options {
    int instances = 1000;
    int configurations = 1;  // the N instances spread over this many configurations
    int capacity = 4;
    int allocations = 500;  // this many through instance resources, as many through the CL one
    int toggles = 200;
    int bursts = 5;
    int runs = 1;
};

// One measured figure of one run.
struct Figure {
    std::string name;
    double value = 0;
    std::string unit;
    std::optional<double> below;  // the target: value < below
};

// CPU time of the benchmark itself: the kubelet simulator's gRPC threads and this one.
double ownCpuMs() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    auto msOf = [](const timeval& t) {
        return static_cast<double>(t.tv_sec) * 1000 + static_cast<double>(t.tv_usec) / 1000.0;
    };
    return msOf(usage.ru_utime) + msOf(usage.ru_stime);
}

// CPU time all processes used so far (from /proc/stat), and time stolen by the hypervisor.
struct MachineCpu {
    double busyMs = 0;
    double stealMs = 0;
};
MachineCpu machineCpu() {
    std::ifstream in("/proc/stat");
    std::string cpu;
    double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
    const double tick = 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
    return {(user + nice + system + irq + softirq) * tick, steal * tick};
}

// The running daemon and its temp tree, for the signal handler: Ctrl-C or meson's timeout
// leaves neither behind.
std::atomic<pid_t> runningDaemon{-1};
std::atomic<const char*> runningTree{nullptr};

void cleanUpAndExit(int signal) {
    const pid_t pid = runningDaemon.load();
    if (pid > 0) ::kill(pid, SIGKILL);
    // Only async-signal-safe calls here: rm does the recursive removal.
    if (const char* tree = runningTree.load(); tree && ::fork() == 0) {
        ::execl("/bin/rm", "rm", "-rf", "--", tree, static_cast<char*>(nullptr));
        _exit(127);
    }
    _exit(128 + signal);
}

// One run: a fresh temp tree, simulator and daemon.
class Run {
public:
    explicit Run(const Options& options)
        : options_(options),
          daemon_(dir_.path()),
          kubelet_(daemon_.devicePluginDir(), daemon_.podResourcesSocket()) {
        // The kubelet writes its device checkpoint in its own process; here the simulator
        // shares devlet's two CPUs, and at 1,000 resources each write is hundreds of
        // kilobytes on every list and allocation. Nothing in these figures reads it.
        kubelet_.setWritesCheckpoint(false);
        kubelet_.onListAndWatch(
            [this](const std::string& resource, const v1beta1::ListAndWatchResponse& response,
                   Clock::time_point receivedAt) { tracker_.observe(resource, response, receivedAt); });
        for (int c = 0; c < options_.configurations; ++c) {
            configurationNames_.push_back(options_.configurations == 1
                                              ? std::string(kBig)
                                              : std::string(kBig) + "-" + std::to_string(c));
        }
        descriptions_.resize(configurationNames_.size());
        for (int i = 0; i < options_.instances; ++i) {
            char description[32];
            std::snprintf(description, sizeof description, "dev-%04d", i);
            const auto c = static_cast<std::size_t>(i % options_.configurations);
            descriptions_[c].push_back(description);
            instances_.push_back(
                instanceName(configurationNames_[c], instanceHash(description, kNode, false)));
            configurationOf_.push_back(configurationNames_[c]);
        }
        toggleInstance_ = instanceName(kToggle, instanceHash("toggle-device", kNode, false));
        tree_ = dir_.path().string();
        runningTree = tree_.c_str();
        // The model of what each resource lists; updated as the benchmark allocates.
        const auto cap = static_cast<std::size_t>(options_.capacity);
        for (std::size_t i = 0; i < instances_.size(); ++i) {
            model_[resourceOf(instances_[i])] = {cap, cap};
            model_[resourceOf(configurationOf_[i])].devices += cap;
            model_[resourceOf(configurationOf_[i])].healthy += cap;
        }
    }

    ~Run() {
        // The daemon goes first (it would otherwise see the kubelet vanish and wait for it).
        if (daemon_.running()) daemon_.stop(SIGKILL);
        runningDaemon = -1;
        runningTree = nullptr;
    }

    // The targets with nghttp2's own allocator: 35 MiB at 1,000 instances, 12 MiB at 50;
    // other sizes have none.
    std::optional<double> peakRssTarget() const {
        if (options_.instances == 1000) return 35;
        if (options_.instances == 50) return 12;
        return std::nullopt;
    }

    std::vector<Figure> execute() {
        const MachineCpu machine = machineCpu();
        const double ownCpu = ownCpuMs();
        startup();
        allocations();
        kubeletRestart();
        toggles();
        if (options_.bursts > 0) bursts();
        figures_.push_back({"peak RSS (VmHWM)", statusMiB(daemon_.pid(), "VmHWM"), "MiB", peakRssTarget()});
        figures_.push_back({"RSS at the end (VmRSS)", statusMiB(daemon_.pid(), "VmRSS"), "MiB", {}});
        // Other processes on the machine compete for the same CPUs: say how much they took.
        const MachineCpu now = machineCpu();
        figures_.push_back(
            {"CPU time of other processes during the run",
             std::max(0.0, now.busyMs - machine.busyMs - cpuMs(daemon_.pid()) - (ownCpuMs() - ownCpu)),
             "ms",
             {}});
        figures_.push_back(
            {"CPU time stolen by the hypervisor during the run", now.stealMs - machine.stealMs, "ms", {}});
        const auto stopping = Clock::now();
        const int status = daemon_.stop(SIGTERM);
        runningDaemon = -1;
        figures_.push_back({"SIGTERM -> daemon exited", ms(Clock::now() - stopping), "ms", {}});
        if (status != 0) fail("devlet exited with status " + std::to_string(status) + " on SIGTERM");
        return figures_;
    }

private:
    static std::string resourceOf(const std::string& name) { return std::string(kDomain) + "/" + name; }

    [[noreturn]] void fail(const std::string& what) {
        std::string log = daemon_.log();
        if (log.size() > 4000) log = "...\n" + log.substr(log.size() - 4000);
        throw std::runtime_error(what + "\n--- end of the devlet log ---\n" + log);
    }

    // When the last expected device list arrived.
    Clock::time_point waitArrivals(const std::string& what) {
        auto last = tracker_.wait(phaseLimit(model_.size()));
        if (!last)
            fail(what + ": " + std::to_string(tracker_.missing()) + " resource(s) never showed their state");
        return *last;
    }

    std::map<std::string, WantedState> bigModel() const { return model_; }

    // Daemon start -> every plugin registered, and -> every device list received.
    void startup() {
        for (std::size_t c = 0; c < configurationNames_.size(); ++c) {
            test::writeFile(daemon_.confDir() / (configurationNames_[c] + ".yaml"),
                            echoConfiguration(configurationNames_[c], descriptions_[c], options_.capacity,
                                              dir_.path() / "bench-available"));
        }
        if (!kubelet_.start()) fail("the kubelet simulator cannot listen");
        tracker_.expect(bigModel(), Clock::now());
        const std::size_t plugins = model_.size();
        const double ownCpu = ownCpuMs();
        const auto start = Clock::now();
        daemon_.start({"--log-level", "info"});
        runningDaemon = daemon_.pid();
        // Polled every millisecond: waking on each of the simulator's ~3,000 state changes
        // would cost the daemon CPU time on a small machine.
        while (kubelet_.resourceCount() < plugins) {
            if (Clock::now() - start > phaseLimit(plugins)) fail("not every plugin registered");
            std::this_thread::sleep_for(1ms);
        }
        const auto registered = Clock::now();
        const auto listed = waitArrivals("first device lists");
        figures_.push_back({"daemon start -> " + std::to_string(plugins) + " plugins registered",
                            ms(registered - start), "ms", 2000});
        figures_.push_back(
            {"daemon start -> every device list at the kubelet", ms(listed - start), "ms", {}});
        figures_.push_back({"  CPU time of devlet meanwhile", cpuMs(daemon_.pid()), "ms", {}});
        figures_.push_back({"  CPU time of the kubelet simulator meanwhile", ownCpuMs() - ownCpu, "ms", {}});
        figures_.push_back({"RSS after start (VmRSS)", statusMiB(daemon_.pid(), "VmRSS"), "MiB", {}});
    }

    // Allocate through instance resources (slot 0 of instance i) and through the
    // configuration resource (slot 1 of instance i), a fresh slot each time: the holder is
    // written to SQLite and both resources publish their new device lists. One pod at a
    // time, like the kubelet: the next Allocate starts once the other resource lists the
    // slot as Unhealthy.
    void allocations() {
        if (options_.capacity < 2) fail("--capacity must be at least 2 (slot 0 via IL, slot 1 via CL)");
        const int count = std::min(options_.allocations, options_.instances);
        std::vector<double> il, cl, shown;
        const double daemonCpu = cpuMs(daemon_.pid());
        auto allocate = [&](const std::string& pod, const std::string& resource, const std::string& slot,
                            const std::string& other, std::vector<double>& samples) {
            model_[other].healthy--;
            tracker_.expect({{other, model_[other]}}, Clock::now());
            const auto start = Clock::now();
            auto result = kubelet_.allocateIds("bench", pod, "main", resource, {slot});
            samples.push_back(ms(Clock::now() - start));
            if (!result.ok) fail("Allocate " + slot + " through " + resource + ": " + result.error);
            shown.push_back(ms(waitArrivals("slot " + slot + " Unhealthy in " + other) - start));
        };
        for (int i = 0; i < count; ++i) {
            const std::string& instance = instances_[static_cast<std::size_t>(i)];
            const std::string ilResource = resourceOf(instance);
            const std::string clResource = resourceOf(configurationOf_[static_cast<std::size_t>(i)]);
            allocate("il-" + std::to_string(i), ilResource, slotId(instance, 0), clResource, il);
            allocate("cl-" + std::to_string(i), clResource, slotId(instance, 1), ilResource, cl);
        }
        std::vector<double> all = il;
        all.insert(all.end(), cl.begin(), cl.end());
        figures_.push_back(
            {"Allocate p50 (" + std::to_string(all.size()) + " calls)", percentile(all, 50), "ms", {}});
        figures_.push_back({"Allocate p99", percentile(all, 99), "ms", 2});
        figures_.push_back({"  CPU time of devlet per Allocate",
                            (cpuMs(daemon_.pid()) - daemonCpu) / static_cast<double>(all.size()),
                            "ms",
                            {}});
        figures_.push_back({"  p99 via instance resources", percentile(il, 99), "ms", {}});
        figures_.push_back({"  p99 via the configuration resource", percentile(cl, 99), "ms", {}});
        figures_.push_back(
            {"Allocate -> slot Unhealthy in the other resource, p99", percentile(shown, 99), "ms", {}});
    }

    // The kubelet restarts (wiping every socket); devlet registers every plugin again.
    void kubeletRestart() {
        std::vector<std::string> resources;
        resources.reserve(model_.size());
        for (const auto& [resource, state] : model_) resources.push_back(resource);
        const double daemonCpu = cpuMs(daemon_.pid());
        const double ownCpu = ownCpuMs();
        const auto start = Clock::now();
        tracker_.expect(bigModel(), start);
        if (!kubelet_.restart()) fail("the kubelet simulator cannot listen after its restart");
        // restart() returns once kubelet.sock is served again (it is bound just before).
        const auto back = Clock::now();
        std::size_t next = 0;  // resources before it are registered again
        while (next < resources.size()) {
            if (!kubelet_.endpoint(resources[next]).empty()) {
                ++next;
                continue;
            }
            if (Clock::now() - start > phaseLimit(resources.size()))
                fail("not every plugin registered again after a kubelet restart");
            std::this_thread::sleep_for(1ms);
        }
        const auto registered = Clock::now();
        const auto listed = waitArrivals("device lists after a kubelet restart");
        figures_.push_back(
            {"kubelet restart begins -> every plugin registered again", ms(registered - start), "ms", {}});
        figures_.push_back(
            {"kubelet.sock back -> every plugin registered again", ms(registered - back), "ms", 1000});
        figures_.push_back(
            {"kubelet.sock back -> every device list at the kubelet", ms(listed - back), "ms", {}});
        figures_.push_back({"  CPU time of devlet meanwhile", cpuMs(daemon_.pid()) - daemonCpu, "ms", {}});
        figures_.push_back({"  CPU time of the kubelet simulator meanwhile", ownCpuMs() - ownCpu, "ms", {}});
    }

    // One more instance, in a configuration of its own, goes OFFLINE and comes back: the
    // instance's resource and its configuration's resource each send one new device list,
    // and the live file of the container that holds one of its slots is rewritten.
    void toggles() {
        const auto availability = dir_.path() / "toggle-available";
        const std::string il = resourceOf(toggleInstance_);
        const std::string cl = resourceOf(kToggle);
        const auto cap = static_cast<std::size_t>(options_.capacity);
        tracker_.expect({{il, {cap, cap}}, {cl, {cap, cap}}}, Clock::time_point{});
        test::writeFile(daemon_.confDir() / "toggle.yaml",
                        echoConfiguration(kToggle, {"toggle-device"}, options_.capacity, availability));
        waitArrivals("the toggled configuration's first device lists");
        // A container holds one slot: the configuration's resource lists it Unhealthy.
        tracker_.expect({{il, {cap, cap}}, {cl, {cap, cap - 1}}}, Clock::time_point{});
        const test::AllocationResult held = kubelet_.allocate("bench", "toggle-holder", "main", il, 1);
        if (!held.ok) fail("the toggled instance's slot was not allocated: " + held.error);
        std::filesystem::path liveDirectory;
        for (const auto& mount : held.response.mounts()) {
            if (mount.container_path() == "/run/devlet/info") liveDirectory = mount.host_path();
        }
        if (liveDirectory.empty()) fail("the Allocate answer has no live-file mount");
        waitArrivals("the device lists after the allocation");
        std::this_thread::sleep_for(200ms);  // the reload's republishing has settled
        LiveFileWatch watch(liveDirectory);
        std::vector<double> samples;
        std::vector<double> fileSamples;
        for (int i = 0; i < options_.toggles; ++i) {
            const bool offline = i % 2 == 0;
            tracker_.expect({{il, {cap, offline ? 0 : cap}}, {cl, {cap, offline ? 0 : cap - 1}}},
                            Clock::now());
            const std::size_t documents = watch.count();
            const auto start = changeAvailability(availability, offline);
            samples.push_back(
                ms(waitArrivals(std::string("toggle to ") + (offline ? "OFFLINE" : "available")) - start));
            const auto written = watch.arrival(documents, 10s);
            if (!written) fail("the holder's live file was not rewritten");
            fileSamples.push_back(ms(*written - start));
        }
        figures_.push_back(
            {"device change -> ListAndWatch p50 (" + std::to_string(samples.size()) + " changes)",
             percentile(samples, 50),
             "ms",
             {}});
        figures_.push_back({"device change -> ListAndWatch p99", percentile(samples, 99), "ms", 10});
        figures_.push_back({"device change -> ListAndWatch max", percentile(samples, 100), "ms", {}});
        figures_.push_back(
            {"device change -> holder's live file rewritten p50", percentile(fileSamples, 50), "ms", {}});
        figures_.push_back(
            {"device change -> holder's live file rewritten p99", percentile(fileSamples, 99), "ms", {}});
    }

    // All N instances of the big configuration go OFFLINE at once and come back:
    // N + 1 resources each send a new device list.
    void bursts() {
        const auto availability = dir_.path() / "bench-available";
        std::map<std::string, WantedState> offline = bigModel();
        for (auto& [resource, state] : offline) state.healthy = 0;
        std::vector<double> samples;
        for (int i = 0; i < options_.bursts; ++i) {
            for (bool goingOffline : {true, false}) {
                tracker_.expect(goingOffline ? offline : bigModel(), Clock::now());
                const auto start = changeAvailability(availability, goingOffline);
                samples.push_back(
                    ms(waitArrivals(std::string("all instances ") + (goingOffline ? "OFFLINE" : "back")) -
                       start));
            }
        }
        figures_.push_back({"all " + std::to_string(options_.instances) + " instances change -> last of " +
                                std::to_string(model_.size()) + " lists, p50",
                            percentile(samples, 50),
                            "ms",
                            {}});
        figures_.push_back(
            {"  same, max of " + std::to_string(samples.size()), percentile(samples, 100), "ms", {}});
    }

    const Options& options_;
    ArrivalTracker tracker_;  // outlives the simulator that calls it
    test::TempDir dir_;
    test::DaemonProcess daemon_;
    test::KubeletSimulator kubelet_;
    std::vector<std::string> configurationNames_;
    std::vector<std::vector<std::string>> descriptions_;  // by configuration
    std::vector<std::string> instances_;
    std::vector<std::string> configurationOf_;  // by instance
    std::string toggleInstance_;
    std::string tree_;                          // dir_'s path, for the signal handler
    std::map<std::string, WantedState> model_;  // the big configuration's resources
    std::vector<Figure> figures_;
};

Options parseOptions(int argc, char** argv) {
    Options options;
    const std::map<std::string, int*> flags = {
        {"--instances", &options.instances}, {"--configurations", &options.configurations},
        {"--capacity", &options.capacity},   {"--allocations", &options.allocations},
        {"--toggles", &options.toggles},     {"--bursts", &options.bursts},
        {"--runs", &options.runs},
    };
    if (const std::string wrong = parseNumberFlags(argc, argv, flags); !wrong.empty()) {
        throw std::invalid_argument(
            std::string("usage: devlet_bench [--instances N] [--configurations N] ") + "[--capacity N] " +
            "[--allocations N] [--toggles N] [--bursts N] [--runs N] (at " + wrong + ")");
    }
    for (const auto& [name, value] : flags) {
        if (*value < 0 || (name != "--bursts" && *value == 0))
            throw std::invalid_argument(name + " must be positive");
    }
    if (options.configurations > options.instances)
        throw std::invalid_argument("--configurations must not exceed --instances");
    return options;
}

void print(const std::vector<std::vector<Figure>>& runs) {
    std::printf("\n%-58s %10s %10s  %s\n", "figure", runs.size() > 1 ? "median" : "value", "target", "");
    for (std::size_t f = 0; f < runs.front().size(); ++f) {
        std::vector<double> values;
        values.reserve(runs.size());
        for (const auto& run : runs) values.push_back(run[f].value);
        const Figure& figure = runs.front()[f];
        const double median = percentile(values, 50);
        std::string target, verdict;
        if (figure.below) {
            char text[32];
            std::snprintf(text, sizeof text, "< %g %s", *figure.below, figure.unit.c_str());
            target = text;
            verdict = median < *figure.below ? "met" : "MISSED";
        }
        std::printf("%-58s %7.2f %-3s %10s  %s", figure.name.c_str(), median, figure.unit.c_str(),
                    target.c_str(), verdict.c_str());
        if (runs.size() > 1) {
            std::printf("  (runs:");
            for (double value : values) std::printf(" %.2f", value);
            std::printf(")");
        }
        std::printf("\n");
    }
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
        // devlet holds two descriptors per plugin (its listening socket and the kubelet's
        // connection) and can raise its soft limit only as far as the hard limit it inherits
        // from here; the simulator holds a descriptor per plugin too.
        const rlim_t needed = 2 * (static_cast<rlim_t>(options.instances + options.configurations) + 1) + 64;
        rlimit files{};
        getrlimit(RLIMIT_NOFILE, &files);
        if (files.rlim_max < 2 * needed) {
            // Root may raise the hard limit (10,000 plugins need more than many defaults).
            rlimit raised{2 * needed, 2 * needed};
            if (setrlimit(RLIMIT_NOFILE, &raised) == 0) files = raised;
        }
        if (files.rlim_cur < files.rlim_max) {
            files.rlim_cur = files.rlim_max;
            setrlimit(RLIMIT_NOFILE, &files);
        }
        std::printf(
            "devlet benchmark: %d debugEcho instances in %d configuration(s) x capacity %d, %d run(s)\n",
            options.instances, options.configurations, options.capacity, options.runs);
        std::printf("devlet: %s; %ld CPU(s); open-file limit %llu (hard %llu)\n",
                    devlet::test::DaemonProcess::binary().c_str(), sysconf(_SC_NPROCESSORS_ONLN),
                    static_cast<unsigned long long>(files.rlim_cur),
                    static_cast<unsigned long long>(files.rlim_max));
        if (files.rlim_cur < needed) {
            std::printf(
                "warning: an open-file limit of %llu is too low for %d plugins; devlet and the "
                "simulator will fail to serve some (ulimit -Hn %llu or more)\n",
                static_cast<unsigned long long>(files.rlim_cur), options.instances + options.configurations,
                static_cast<unsigned long long>(needed));
        }
        std::fflush(stdout);
        std::vector<std::vector<Figure>> runs;
        for (int r = 0; r < options.runs; ++r) {
            const auto start = Clock::now();
            runs.push_back(Run(options).execute());
            std::printf("run %d of %d: %.1f s\n", r + 1, options.runs, ms(Clock::now() - start) / 1000);
            std::fflush(stdout);
        }
        print(runs);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "devlet_bench: %s\n", e.what());
        return 1;
    }
}
