// The udev handler under hotplug: the real `devlet run`, forked after a umockdev testbed
// exists, offers a Logitech C920 webcam's video node to the kubelet simulator. The benchmark
// unplugs and plugs the node through the testbed (a uevent plus the sysfs change) and times
// each change until the new ListAndWatch message arrives; then it leaves the daemon idle
// and counts its CPU time and wakeups; then it sends a storm of add/remove events. The same
// steps run a second time in Akri's way (no netlink monitor, a full rescan every 10 s), for
// the ratio. Must run under umockdev-wrapper.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sys/types.h>
#include <umockdev.h>
#include <unistd.h>

#include "bench/arrival_tracker.h"
#include "bench/command_line.h"
#include "bench/figures.h"
#include "tests/probes/usb/webcam_testbed.h"
#include "tests/support/daemon_process.h"
#include "tests/support/kubelet_simulator.h"
#include "tests/support/temp_dir.h"

namespace devlet::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr const char* kResource = "akri.sh/webcams";
constexpr const char* kVideo0 =
    "/devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.2/1-1.2:1.0/video4linux/video0";
constexpr const char* kVideo1 =
    "/devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.2/1-1.2:1.0/video4linux/video1";

struct Options {
    int cycles = 200;         // plug/unplug cycles with hotplug events
    int baselineEvents = 10;  // changes timed in the rescan-only mode (about 10 s each)
    int idleSeconds = 60;     // idle time per mode
    int storm = 1000;         // add/remove events in the storm
};

// Voluntary context switches per thread (a thread that blocks and is woken again counts
// one), keyed by "tid name".
std::map<std::string, long> wakeups(pid_t pid) {
    std::map<std::string, long> result;
    const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
    std::error_code error;
    for (const auto& task : std::filesystem::directory_iterator(tasks, error)) {
        std::ifstream status(task.path() / "status");
        std::string name;
        long switches = 0;
        for (std::string line; std::getline(status, line);) {
            if (line.rfind("Name:", 0) == 0) name = line.substr(line.find_first_not_of(" \t", 5));
            if (line.rfind("voluntary_ctxt_switches:", 0) == 0) switches = std::stol(line.substr(24));
        }
        result[task.path().filename().string() + " " + name] = switches;
    }
    return result;
}

std::string configuration(bool hotplugEvents) {
    return std::string(
               "apiVersion: akri.sh/v0\n"
               "kind: Configuration\n"
               "metadata:\n"
               "  name: webcams\n"
               "spec:\n"
               "  discoveryHandler:\n"
               "    name: udev\n"
               "    discoveryDetails: |\n"
               "      udevRules:\n"
               "        - 'SUBSYSTEM==\"video4linux\"'\n") +
           (hotplugEvents ? "" : "      hotplugEvents: false\n      rescanIntervalSeconds: 10\n") +
           "  capacity: 1\n"
           "  devlet:\n"
           // An unplugged node stays listed (Unhealthy): every change is one device list.
           "    removalGracePeriodSeconds: 3600\n";
}

struct ModeResult {
    std::string name;
    std::vector<double> unplug;       // ms, testbed call start -> Unhealthy at the kubelet
    std::vector<double> plug;         // ms, testbed call start -> Healthy at the kubelet
    std::vector<double> testbedCall;  // ms the testbed calls themselves took
    double idleSeconds = 0;
    double idleCpuMs = 0;
    long idleWakeups = 0;
    std::map<std::string, long> idleWakeupsByThread;
    double stormMs = 0;          // first storm event -> the last marker at the kubelet
    int stormMarkers = 0;        // marker events sent along
    double stormCpuMs = 0;       // devlet's CPU time meanwhile
    uint64_t stormMessages = 0;  // ListAndWatch messages of video0's instance resource meanwhile
};

class Bench {
public:
    Bench(const Options& options, UMockdevTestbed* testbed) : options_(options), testbed_(testbed) {
        video0_ = test::webcamDeviceTestbed();
        video0_ = video0_.substr(video0_.find(std::string("P: ") + kVideo0 + "\n"));
    }

    ModeResult run(bool hotplugEvents) {
        ModeResult result;
        result.name =
            hotplugEvents ? "devlet (netlink monitor)" : "Akri-style (no monitor, rescan every 10 s)";
        test::TempDir dir;
        test::DaemonProcess daemon(dir.path());
        ArrivalTracker tracker;
        test::KubeletSimulator kubelet(daemon.devicePluginDir(), daemon.podResourcesSocket());
        kubelet.onListAndWatch(
            [&tracker](const std::string& resource, const v1beta1::ListAndWatchResponse& response,
                       Clock::time_point receivedAt) { tracker.observe(resource, response, receivedAt); });
        test::writeFile(daemon.confDir() / "webcams.yaml", configuration(hotplugEvents));
        if (!kubelet.start()) throw std::runtime_error("the kubelet simulator cannot listen");
        daemon.start({"--log-level", "info"});
        std::string instance;
        kubelet.waitFor(
            [&] {
                for (const std::string& resource : kubelet.resources()) {
                    if (resource.rfind(std::string(kResource) + "-", 0) == 0 &&
                        kubelet.devices(resource).size() == 1 &&
                        kubelet.devices(resource).begin()->second.health == "Healthy") {
                        instance = resource;
                    }
                }
                return !instance.empty();
            },
            30s);
        if (instance.empty()) throw std::runtime_error("the webcam was never offered:\n" + daemon.log());

        const int changes = hotplugEvents ? 2 * options_.cycles : options_.baselineEvents;
        const auto timeout = hotplugEvents ? 10s : 30s;
        std::mt19937 random(42);  // NOLINT(bugprone-random-generator-seed): the same changes every run
        std::uniform_int_distribution<int> phase(0, 9999);
        for (int i = 0; i < changes; ++i) {
            const bool unplug = i % 2 == 0;
            // Rescans tick every 10 s from the daemon's start; a change lands anywhere between two.
            if (!hotplugEvents) std::this_thread::sleep_for(std::chrono::milliseconds(phase(random)));
            const WantedState wanted{1, unplug ? 0u : 1u};
            const auto start = Clock::now();
            tracker.expect({{instance, wanted}, {kResource, wanted}}, start);
            if (hotplugEvents) {
                // The uevent alone, sysfs left as it is: the time is the daemon's, from the
                // uevent to the kubelet (an add makes it read the device from sysfs).
                umockdev_testbed_uevent(testbed_, (std::string("/sys") + kVideo0).c_str(),
                                        unplug ? "remove" : "add");
            } else {
                // Rescans only see sysfs: the node really goes and comes back.
                change(unplug);
            }
            result.testbedCall.push_back(ms(Clock::now() - start));
            const auto arrived = tracker.wait(timeout);
            if (!arrived)
                throw std::runtime_error("change " + std::to_string(i) + " never reached the kubelet");
            (unplug ? result.unplug : result.plug).push_back(ms(*arrived - start));
        }

        // Idle: plugged, nothing happens.
        measureIdle(daemon, result);

        // The storm: unplugs and plugs of video0 (ends plugged). umockdev hands each uevent
        // to a unix datagram socket that queues at most net.unix.max_dgram_qlen messages
        // (10 by default) and aborts a sender that gets further ahead of the reader, so with
        // the monitor on the storm goes in bursts of 8, each followed by a plug or unplug of
        // a second node (the marker) whose arrival at the kubelet shows that the daemon
        // handled everything before it. Without the monitor nobody reads the events: one
        // burst, one marker, and the next rescan.
        add(test::kWebcamVideo1Testbed);
        std::string marker;
        kubelet.waitFor(
            [&] {
                for (const std::string& resource : kubelet.resources()) {
                    if (resource.rfind(std::string(kResource) + "-", 0) == 0 && resource != instance)
                        marker = resource;
                }
                return !marker.empty() && kubelet.devices(marker).size() == 1;
            },
            30s);
        if (marker.empty()) throw std::runtime_error("the marker node was never offered");
        bool markerPlugged = true;
        const int burst = hotplugEvents ? 8 : options_.storm;
        const uint64_t messagesBefore = kubelet.listAndWatchMessages(instance);
        const double stormCpuBefore = cpuMs(daemon.pid());
        const auto stormStart = Clock::now();
        for (int sent = 0; sent < options_.storm;) {
            for (int i = 0; i < burst && sent < options_.storm; ++i, ++sent) change(sent % 2 == 0);
            const auto since = Clock::now();
            markerPlugged = !markerPlugged;
            tracker.expect({{marker, {1, markerPlugged ? 1u : 0u}}}, since);
            if (markerPlugged) {
                add(test::kWebcamVideo1Testbed);
            } else {
                remove(kVideo1);
            }
            if (!tracker.wait(30s)) throw std::runtime_error("a storm marker never reached the kubelet");
            ++result.stormMarkers;
        }
        result.stormMs = ms(Clock::now() - stormStart);
        result.stormCpuMs = cpuMs(daemon.pid()) - stormCpuBefore;
        result.stormMessages = kubelet.listAndWatchMessages(instance) - messagesBefore;
        if (markerPlugged) remove(kVideo1);

        daemon.stop();
        kubelet.stop();
        return result;
    }

    // The daemon with no configuration at all: what the core wakes up for by itself.
    ModeResult idleCore() {
        ModeResult result;
        result.name = "devlet core alone (no configuration)";
        test::TempDir dir;
        test::DaemonProcess daemon(dir.path());
        test::KubeletSimulator kubelet(daemon.devicePluginDir(), daemon.podResourcesSocket());
        if (!kubelet.start()) throw std::runtime_error("the kubelet simulator cannot listen");
        daemon.start({"--log-level", "info"});
        if (!daemon.waitForLog(" on node ", 30s))
            throw std::runtime_error("devlet never got ready:\n" + daemon.log());
        measureIdle(daemon, result);
        daemon.stop();
        kubelet.stop();
        return result;
    }

private:
    void measureIdle(test::DaemonProcess& daemon, ModeResult& result) {
        std::this_thread::sleep_for(1s);
        const auto idleStart = Clock::now();
        const double cpuBefore = cpuMs(daemon.pid());
        const auto wakeupsBefore = wakeups(daemon.pid());
        std::this_thread::sleep_for(std::chrono::seconds(options_.idleSeconds));
        result.idleCpuMs = cpuMs(daemon.pid()) - cpuBefore;
        result.idleSeconds = ms(Clock::now() - idleStart) / 1000;
        for (const auto& [thread, count] : wakeups(daemon.pid())) {
            auto before = wakeupsBefore.find(thread);
            const long delta = count - (before == wakeupsBefore.end() ? 0 : before->second);
            result.idleWakeups += delta;
            if (delta > 0) result.idleWakeupsByThread[thread] = delta;
        }
    }

    void change(bool unplug) {
        if (unplug) {
            remove(kVideo0);
        } else {
            add(video0_);
        }
    }
    // An unplug: the remove uevent, then the device leaves sysfs.
    void remove(const char* devpath) {
        const std::string syspath = std::string("/sys") + devpath;
        umockdev_testbed_uevent(testbed_, syspath.c_str(), "remove");
        umockdev_testbed_remove_device(testbed_, syspath.c_str());
    }
    void add(const std::string& description) {
        GError* error = nullptr;
        if (!umockdev_testbed_add_from_string(testbed_, description.c_str(), &error)) {
            throw std::runtime_error(std::string("cannot plug the webcam: ") +
                                     (error ? error->message : "unknown error"));
        }
    }

    Options options_;
    UMockdevTestbed* testbed_;
    std::string video0_;
};

void print(const char* name, double value, const char* unit) {
    std::printf("  %-52s %10.2f %s\n", name, value, unit);
}

void printIdle(const ModeResult& r) {
    std::printf("  idle for %.1f s:\n", r.idleSeconds);
    print("devlet CPU time", r.idleCpuMs, "ms");
    print("devlet wakeups (voluntary context switches)", static_cast<double>(r.idleWakeups), "");
    for (const auto& [thread, count] : r.idleWakeupsByThread) {
        std::printf("    thread %-40s %8ld\n", thread.c_str(), count);
    }
}

void print(const ModeResult& r) {
    std::vector<double> all = r.unplug;
    all.insert(all.end(), r.plug.begin(), r.plug.end());
    std::printf("\n%s: %zu changes\n", r.name.c_str(), all.size());
    print("uevent -> ListAndWatch p50", percentile(all, 50), "ms");
    print("uevent -> ListAndWatch p99", percentile(all, 99), "ms");
    print("uevent -> ListAndWatch max", percentile(all, 100), "ms");
    print("unplug -> Unhealthy p50", percentile(r.unplug, 50), "ms");
    print("plug -> Healthy p50", percentile(r.plug, 50), "ms");
    print("testbed call itself p50 (included above)", percentile(r.testbedCall, 50), "ms");
    print("testbed call itself max", percentile(r.testbedCall, 100), "ms");
    printIdle(r);
    print("storm: first event -> last marker at the kubelet", r.stormMs, "ms");
    print("storm: marker events sent along", static_cast<double>(r.stormMarkers), "");
    print("storm: devlet CPU time", r.stormCpuMs, "ms");
    print("storm: ListAndWatch messages of video0's resource", static_cast<double>(r.stormMessages), "");
}

int parse(int argc, char** argv, Options& options) {
    const std::string wrong = parseNumberFlags(argc, argv,
                                               {{"--cycles", &options.cycles},
                                                {"--baseline-events", &options.baselineEvents},
                                                {"--idle-seconds", &options.idleSeconds},
                                                {"--storm", &options.storm}});
    if (!wrong.empty()) {
        std::fprintf(stderr,
                     "usage: umockdev-wrapper udev_bench [--cycles N] [--baseline-events N] "
                     "[--idle-seconds N] [--storm N] (at %s)\n",
                     wrong.c_str());
        return 2;
    }
    options.storm += options.storm % 2;  // an even storm ends plugged
    return 0;
}

}  // namespace
}  // namespace devlet::bench

int main(int argc, char** argv) {
    using namespace devlet::bench;
    useThisBuildsDevlet();
    Options options;
    if (int status = parse(argc, argv, options); status != 0) return status;
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    if (!underUmockdevWrapper()) {
        std::fprintf(stderr, "udev_bench: run it under umockdev-wrapper, which the udev testbed needs\n");
        return 2;
    }
    try {
        UMockdevTestbed* testbed = umockdev_testbed_new();
        GError* error = nullptr;
        const std::string everything =
            devlet::test::webcamHostTestbed() + devlet::test::webcamDeviceTestbed();
        if (!umockdev_testbed_add_from_string(testbed, everything.c_str(), &error)) {
            throw std::runtime_error(std::string("cannot build the testbed: ") +
                                     (error ? error->message : "unknown error"));
        }
        std::printf(
            "udev benchmark: devlet %s, %ld CPU(s); %d plug/unplug cycles, %d s idle, storm of %d events\n",
            devlet::test::DaemonProcess::binary().c_str(), sysconf(_SC_NPROCESSORS_ONLN), options.cycles,
            options.idleSeconds, options.storm);
        Bench bench(options, testbed);
        const ModeResult devlet = bench.run(true);
        print(devlet);
        const ModeResult akri = bench.run(false);
        print(akri);
        const ModeResult core = bench.idleCore();
        std::printf("\n%s:\n", core.name.c_str());
        printIdle(core);
        std::vector<double> fast = devlet.unplug, slow = akri.unplug;
        fast.insert(fast.end(), devlet.plug.begin(), devlet.plug.end());
        slow.insert(slow.end(), akri.plug.begin(), akri.plug.end());
        std::printf("\nratio Akri-style / devlet:\n");
        print("uevent -> ListAndWatch p50", percentile(slow, 50) / percentile(fast, 50), "x");
        print("idle CPU time", akri.idleCpuMs / std::max(devlet.idleCpuMs, 0.01), "x");
        std::printf("  %-52s %10ld vs %ld\n", "idle wakeups (Akri-style vs devlet)", akri.idleWakeups,
                    devlet.idleWakeups);
        g_object_unref(testbed);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "udev_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
