// devlet under continuous churn for a long time: the real daemon, the kubelet simulator,
// pods allocating and ending without pause, devices coming and going, a configuration
// edited and removed and brought back, the kubelet restarting now and then. Every sample
// prints the daemon's RSS, open descriptors, threads and CPU use; the end says whether
// memory and descriptors grew, and checks that what the kubelet holds and sees still
// agree. Figures only: it never fails because of them (it does exit 1 when the daemon
// dies or the final state disagrees).
//
//   TMPDIR=/dev/shm build/bench/soak_bench --minutes 60

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench/command_line.h"
#include "bench/figures.h"
#include "tests/integration/fault_support.h"
#include "tests/support/daemon_process.h"
#include "tests/support/kubelet_simulator.h"

namespace devlet::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

struct Options {
    int minutes = 60;
    int sampleSeconds = 30;
    int instances = 1000;      // idle instances in 10 configurations: the node's size
    int flappers = 50;         // instances of the configuration whose devices come and go
    int toggleMs = 2000;       // how often they go or come back
    int editSeconds = 60;      // how often the edited configuration changes
    int restartSeconds = 300;  // how often the kubelet restarts
};

std::string echoConfiguration(const std::string& name, const std::string& prefix, int count, int capacity,
                              const fs::path& availability = {}) {
    std::string list;
    for (int i = 0; i < count; ++i) list += (i ? ", " : "") + prefix + std::to_string(i);
    return "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: " + name +
           "\nspec:\n  discoveryHandler:\n    name: debugEcho\n    discoveryDetails: |\n      descriptions: "
           "[" +
           list + "]\n" +
           (availability.empty() ? "" : "      availabilityFile: " + availability.string() + "\n") +
           "  capacity: " + std::to_string(capacity) + "\n";
}

struct Sample {
    double minutes = 0;
    double rssMiB = 0;
    double hwmMiB = 0;
    int fds = 0;
    int threads = 0;
    double cpuPercent = 0;  // of one CPU, since the previous sample
};

double statusValue(pid_t pid, const std::string& key) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(status, line);) {
        if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1));
    }
    return NAN;
}

int openDescriptors(pid_t pid) {
    std::error_code ec;
    int count = 0;
    for (auto it = fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
         !ec && it != fs::directory_iterator(); it.increment(ec))
        ++count;
    return count;
}

// Least-squares slope of y over x.
double slope(const std::vector<double>& x, const std::vector<double>& y) {
    const double n = static_cast<double>(x.size());
    if (n < 2) return NAN;
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        sx += x[i];
        sy += y[i];
        sxx += x[i] * x[i];
        sxy += x[i] * y[i];
    }
    const double d = n * sxx - sx * sx;
    return d == 0 ? NAN : (n * sxy - sx * sy) / d;
}

std::atomic<pid_t> runningDaemon{-1};
void killDaemonAndExit(int signal) {
    if (const pid_t pid = runningDaemon.load(); pid > 0) ::kill(pid, SIGKILL);
    _exit(128 + signal);
}

int run(const Options& options) {
    test::TempDir dir;
    test::DaemonProcess daemon(dir.path());
    test::KubeletSimulator kubelet(daemon.devicePluginDir(), daemon.podResourcesSocket());
    test::writeFile(daemon.settingsFile(),
                    "kubelet:\n  podResourcesIntervalSeconds: 1\n  slotReleaseGraceSeconds: 2\n");
    const int staticConfigurations = 10;
    for (int c = 0; c < staticConfigurations; ++c) {
        test::writeFile(daemon.confDir() / ("static-" + std::to_string(c) + ".yaml"),
                        echoConfiguration("static-" + std::to_string(c), "s" + std::to_string(c) + "-",
                                          options.instances / staticConfigurations, 2));
    }
    test::writeFile(daemon.confDir() / "churn.yaml", echoConfiguration("churn", "c", 8, 2));
    const fs::path availability = dir.path() / "flap-available";
    test::writeFile(availability, "\n");
    test::writeFile(daemon.confDir() / "flap.yaml",
                    echoConfiguration("flap", "f", options.flappers, 2, availability));
    const fs::path edited = daemon.confDir() / "edited.yaml";
    test::writeFile(edited, echoConfiguration("edited", "e", 20, 1));

    if (!kubelet.start()) throw std::runtime_error("the kubelet simulator cannot listen");
    daemon.start({"--log-level", "info"});
    runningDaemon = daemon.pid();
    std::vector<std::string> churn;
    if (!kubelet.waitFor(
            [&] {
                churn.clear();
                for (const std::string& r : kubelet.resources()) {
                    if (r == "akri.sh/churn" || r.starts_with("akri.sh/churn-")) churn.push_back(r);
                }
                return churn.size() == 9 && test::allRegistered(kubelet, churn);
            },
            120s))
        throw std::runtime_error("the churn configuration was never offered\n" + daemon.log());
    std::vector<std::string> instances(churn.begin(), churn.end());
    std::erase(instances, std::string("akri.sh/churn"));
    test::AllocationStorm storm(kubelet, "akri.sh/churn", instances, 12345);
    storm.start();

    std::printf("%8s %9s %9s %6s %8s %7s %10s %9s %11s\n", "minutes", "RSS MiB", "HWM MiB", "fds", "threads",
                "CPU %", "allocated", "refused", "kubelet");
    std::fflush(stdout);
    std::vector<Sample> samples;
    const auto start = Clock::now();
    const auto end = start + std::chrono::minutes(options.minutes);
    auto nextSample = start;
    auto nextToggle = start + std::chrono::milliseconds(options.toggleMs);
    auto nextEdit = start + std::chrono::seconds(options.editSeconds);
    auto nextRestart = start + std::chrono::seconds(options.restartSeconds);
    double lastCpu = cpuMs(daemon.pid());
    auto lastCpuAt = start;
    bool online = true;
    int edits = 0, restarts = 0, toggles = 0;

    while (Clock::now() < end) {
        const auto now = Clock::now();
        if (::kill(daemon.pid(), 0) != 0) throw std::runtime_error("devlet died\n" + daemon.log());
        if (now >= nextToggle) {
            online = !online;
            test::writeFile(availability, online ? "\n" : "OFFLINE\n");
            ++toggles;
            nextToggle += std::chrono::milliseconds(options.toggleMs);
        }
        if (now >= nextEdit) {
            // Capacity 1, 3, removed, back at 1, ...
            switch (edits++ % 3) {
                case 0:
                    test::writeFile(edited, echoConfiguration("edited", "e", 20, 3));
                    break;
                case 1:
                    fs::remove(edited);
                    break;
                default:
                    test::writeFile(edited, echoConfiguration("edited", "e", 20, 1));
                    break;
            }
            nextEdit += std::chrono::seconds(options.editSeconds);
        }
        if (now >= nextRestart) {
            if (!kubelet.restart()) throw std::runtime_error("the kubelet simulator cannot listen again");
            ++restarts;
            nextRestart += std::chrono::seconds(options.restartSeconds);
        }
        if (now >= nextSample) {
            Sample s;
            s.minutes = std::chrono::duration<double>(now - start).count() / 60;
            s.rssMiB = statusValue(daemon.pid(), "VmRSS") / 1024;
            s.hwmMiB = statusValue(daemon.pid(), "VmHWM") / 1024;
            s.threads = static_cast<int>(statusValue(daemon.pid(), "Threads"));
            s.fds = openDescriptors(daemon.pid());
            const double cpu = cpuMs(daemon.pid());
            const double elapsed = ms(now - lastCpuAt);
            s.cpuPercent = elapsed > 0 ? 100 * (cpu - lastCpu) / elapsed : 0;
            lastCpu = cpu;
            lastCpuAt = now;
            samples.push_back(s);
            const auto counts = storm.counts();
            std::printf("%8.1f %9.2f %9.2f %6d %8d %7.1f %10llu %9llu %11d\n", s.minutes, s.rssMiB, s.hwmMiB,
                        s.fds, s.threads, s.cpuPercent, static_cast<unsigned long long>(counts.granted),
                        static_cast<unsigned long long>(counts.refused), restarts);
            std::fflush(stdout);
            nextSample += std::chrono::seconds(options.sampleSeconds);
        }
        std::this_thread::sleep_for(20ms);
    }
    storm.stop();

    // Settle: devices back, the edited configuration back, every pod gone.
    test::writeFile(availability, "\n");
    test::writeFile(edited, echoConfiguration("edited", "e", 20, 1));
    storm.endAllPods();
    const auto disagreements = test::waitForAgreement(kubelet, churn, test::Agreement::Exact, 60s);
    const bool adopted = daemon.log().find("was not recorded; adopted") != std::string::npos;

    // Memory and descriptors after the first fifth (warm-up: caches, the first restart).
    std::vector<double> x, rss, fds;
    for (const Sample& s : samples) {
        if (s.minutes < options.minutes / 5.0) continue;
        x.push_back(s.minutes);
        rss.push_back(s.rssMiB);
        fds.push_back(s.fds);
    }
    const auto counts = storm.counts();
    std::printf(
        "\nsoak: %d min, %zu samples; %llu allocations granted, %llu refused, %llu pods ended; "
        "%d device toggles, %d configuration edits, %d kubelet restarts\n",
        options.minutes, samples.size(), static_cast<unsigned long long>(counts.granted),
        static_cast<unsigned long long>(counts.refused), static_cast<unsigned long long>(counts.ended),
        toggles, edits, restarts);
    if (!rss.empty()) {
        const auto [rssMin, rssMax] = std::minmax_element(rss.begin(), rss.end());
        const auto [fdMin, fdMax] = std::minmax_element(fds.begin(), fds.end());
        std::printf(
            "after warm-up: RSS %.2f..%.2f MiB, slope %+.1f KiB/hour; descriptors %.0f..%.0f, slope "
            "%+.2f/hour; peak RSS (VmHWM) %.2f MiB\n",
            *rssMin, *rssMax, slope(x, rss) * 1024 * 60, *fdMin, *fdMax, slope(x, fds) * 60,
            samples.back().hwmMiB);
    }
    double cpuSum = 0;
    for (const Sample& s : samples) cpuSum += s.cpuPercent;
    std::printf("devlet CPU: %.1f %% of one CPU on average\n",
                samples.empty() ? 0 : cpuSum / static_cast<double>(samples.size()));
    std::printf("final state: %s%s\n",
                disagreements.empty() ? "the kubelet sees exactly what it holds"
                                      : ("DISAGREES: " + disagreements.front()).c_str(),
                adopted ? "; a held slot was missing from devlet's state (adopted)" : "");
    const int status = daemon.stop(SIGTERM);
    runningDaemon = -1;
    std::printf("SIGTERM: exit status %d\n", status);
    return disagreements.empty() && !adopted && status == 0 ? 0 : 1;
}

}  // namespace
}  // namespace devlet::bench

int main(int argc, char** argv) {
    using namespace devlet::bench;
    useThisBuildsDevlet();
    signal(SIGINT, killDaemonAndExit);
    signal(SIGTERM, killDaemonAndExit);
    Options options;
    const std::map<std::string, int*> flags = {
        {"--minutes", &options.minutes},
        {"--sample-seconds", &options.sampleSeconds},
        {"--instances", &options.instances},
        {"--flappers", &options.flappers},
        {"--toggle-ms", &options.toggleMs},
        {"--edit-seconds", &options.editSeconds},
        {"--restart-seconds", &options.restartSeconds},
    };
    if (const std::string wrong = parseNumberFlags(argc, argv, flags); !wrong.empty()) {
        std::fprintf(stderr,
                     "usage: soak_bench [--minutes N] [--sample-seconds N] [--instances N] [--flappers N] "
                     "[--toggle-ms N] [--edit-seconds N] [--restart-seconds N] (at %s)\n",
                     wrong.c_str());
        return 2;
    }
    for (const auto& [name, value] : flags) {
        if (*value <= 0) {
            std::fprintf(stderr, "soak_bench: %s must be positive\n", name.c_str());
            return 2;
        }
    }
    rlimit files{};
    getrlimit(RLIMIT_NOFILE, &files);
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
    std::printf(
        "devlet soak: %d min; %d idle instances, 8 churned by pods, %d flapping every %d ms, a "
        "configuration edited every %d s, the kubelet restarted every %d s\n",
        options.minutes, options.instances, options.flappers, options.toggleMs, options.editSeconds,
        options.restartSeconds);
    std::fflush(stdout);
    try {
        return run(options);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "soak_bench: %s\n", e.what());
        return 1;
    }
}
