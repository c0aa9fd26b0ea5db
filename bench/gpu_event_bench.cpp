// The gpu handler under hotplug, on a umockdev testbed with 16 GPUs: one card's driver is
// switched between xe and vfio-pci (a card handed to a VM and back) and a "bind" uevent
// sent. Two figures:
// - probe alone: the gpu probe in this process, from the uevent to its changed snapshot
//   (event delivery, a read of the card the event names, classification of all 16), and
//   how many cards it read per event;
// - end to end: the real `devlet run`, forked after the testbed exists, from the uevent to
//   the updated ListAndWatch messages at the kubelet simulator (the card's instance-level
//   resource and the configuration-level one).
// Runs under umockdev-wrapper, whose preload library also slows every sysfs read. Prints
// figures only; never fails on them.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <umockdev.h>
#include <unistd.h>

#include "bench/arrival_tracker.h"
#include "bench/command_line.h"
#include "bench/figures.h"
#include "probes/gpu/gpu_handler.h"
#include "runtime/configuration.h"
#include "runtime/log.h"
#include "tests/probes/gpu/gpu_testbeds.h"
#include "tests/support/daemon_process.h"
#include "tests/support/kubelet_simulator.h"
#include "tests/support/temp_dir.h"

namespace devlet::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr int kGpus = 16;
constexpr const char* kResource = "akri.sh/gpus";
// The card whose driver changes: the first of the 16.
constexpr const char* kSwitchedGpu = "/devices/pci0000:00/0000:00:03.0/0000:03:00.0";

struct Options {
    int rounds = 50;   // probe alone
    int events = 200;  // end to end, half unbinds and half binds
};

class TimingSink : public ProbeSink {
public:
    void reportSnapshot(const std::string&, std::vector<Instance> instances) override {
        at = Clock::now();
        count = instances.size();
        ++snapshots;
    }
    void reportProbeError(const std::string&, const std::string& message) override {
        if (!message.empty()) std::fprintf(stderr, "probe error: %s\n", message.c_str());
    }
    Clock::time_point at;
    std::size_t count = 0;
    int snapshots = 0;
};

void print(const char* name, double value, const char* unit) {
    std::printf("  %-52s %10.2f %s\n", name, value, unit);
}

class Bench {
public:
    explicit Bench(UMockdevTestbed* testbed)
        : testbed_(testbed), sys_(umockdev_testbed_get_sys_dir(testbed)) {
        for (int n = 0; n < kGpus; ++n) {
            char bus[16];
            std::snprintf(bus, sizeof bus, "%02x", 3 + n);
            const std::string port = "/devices/pci0000:00/0000:00:" + std::string(bus) + ".0";
            test::SyntheticGpu gpu;
            gpu.parent = port;
            gpu.address = "0000:" + std::string(bus) + ":00.0";
            gpu.card = n;
            gpu.numaNode = n % 2;
            gpu.tiles = 2;
            gpu.vramPerTile = 8589934592ull;
            const std::string text = test::pciePort(port) + test::gpuTestbed(gpu);
            GError* error = nullptr;
            if (!umockdev_testbed_add_from_string(testbed_, text.c_str(), &error)) {
                throw std::runtime_error(std::string("testbed: ") +
                                         (error ? error->message : "unknown error"));
            }
        }
    }

    // The card handed to vfio-pci (unbound from the GPU drivers) or back to xe: the driver
    // link changes in sysfs, untimed; the returned time is just before the uevent.
    Clock::time_point rebind(bool toVfio) {
        const std::string link = sys_ + kSwitchedGpu + "/driver";
        ::unlink(link.c_str());
        umockdev_testbed_set_attribute_link(
            testbed_, (std::string("/sys") + kSwitchedGpu).c_str(), "driver",
            (std::string("../../../../bus/pci/drivers/") + (toVfio ? "vfio-pci" : "xe")).c_str());
        const Clock::time_point start = Clock::now();
        umockdev_testbed_uevent(testbed_, (std::string("/sys") + kSwitchedGpu).c_str(), "bind");
        return start;
    }

    struct ProbeAlone {
        std::vector<double> times;  // ms, uevent -> snapshot
        double cardReadsPerEvent = 0;
    };

    ProbeAlone probeAlone(int rounds) {
        setLogLevel(LogLevel::Warning);
        boost::asio::io_context loop;
        TimingSink sink;
        gpu::SysfsRoots roots;
        roots.nfdFeatureDir.clear();
        int cardReads = 0;
        roots.cardRead = [&cardReads](const std::string&) { ++cardReads; };
        gpu::GpuHandler handler(roots);
        Configuration configuration;
        configuration.name = "gpus";
        configuration.handler = "gpu";
        auto probe = handler.createProbe(configuration, loop, sink);
        probe->start();
        auto runUntil = [&](int snapshots) {
            const auto deadline = Clock::now() + 10s;
            while (sink.snapshots < snapshots && Clock::now() < deadline) {
                loop.run_one_for(100ms);
                if (loop.stopped()) loop.restart();
            }
            return sink.snapshots >= snapshots;
        };
        if (!runUntil(1) || sink.count != kGpus) throw std::runtime_error("the probe did not offer 16 GPUs");
        ProbeAlone result;
        cardReads = 0;
        for (int round = 0; round < rounds; ++round) {
            const Clock::time_point start = rebind(round % 2 == 0);
            if (!runUntil(sink.snapshots + 1)) throw std::runtime_error("no snapshot after a rebind");
            result.times.push_back(ms(sink.at - start));
        }
        result.cardReadsPerEvent = static_cast<double>(cardReads) / rounds;
        // Leave the card bound to xe for the next part.
        if (rounds % 2 == 1) {
            rebind(false);
            runUntil(sink.snapshots + 1);
        }
        probe->stop();
        return result;
    }

    struct EndToEnd {
        std::vector<double> unbind;  // ms, uevent -> Unhealthy on both resources
        std::vector<double> bind;    // ms, uevent -> Healthy on both resources
        double cpuMsPerEvent = 0;
    };

    EndToEnd throughDaemon(int events) {
        EndToEnd result;
        test::TempDir dir;
        test::DaemonProcess daemon(dir.path());
        ArrivalTracker tracker;
        test::KubeletSimulator kubelet(daemon.devicePluginDir(), daemon.podResourcesSocket());
        kubelet.onListAndWatch(
            [&tracker](const std::string& resource, const v1beta1::ListAndWatchResponse& response,
                       Clock::time_point receivedAt) { tracker.observe(resource, response, receivedAt); });
        test::writeFile(daemon.confDir() / "gpus.yaml",
                        "apiVersion: akri.sh/v0\n"
                        "kind: Configuration\n"
                        "metadata:\n"
                        "  name: gpus\n"
                        "spec:\n"
                        "  discoveryHandler:\n"
                        "    name: gpu\n"
                        "    discoveryDetails: ''\n"
                        "  capacity: 1\n"
                        "  devlet:\n"
                        // An unbound card stays listed (Unhealthy): every change is one device list.
                        "    removalGracePeriodSeconds: 3600\n");
        if (!kubelet.start()) throw std::runtime_error("the kubelet simulator cannot listen");
        daemon.start({"--log-level", "info"});
        auto healthy = [&](const std::string& resource) {
            std::size_t count = 0;
            for (const auto& [id, state] : kubelet.devices(resource)) count += state.health == "Healthy";
            return count;
        };
        if (!kubelet.waitFor([&] { return healthy(kResource) == kGpus; }, 30s)) {
            throw std::runtime_error("the 16 GPUs were never offered:\n" + daemon.log());
        }
        // Which instance-level resource is the switched card's: the one that goes Unhealthy.
        rebind(true);
        std::string instance;
        kubelet.waitFor(
            [&] {
                for (const std::string& resource : kubelet.resources()) {
                    if (resource.rfind(std::string(kResource) + "-", 0) == 0 &&
                        kubelet.devices(resource).size() == 1 && healthy(resource) == 0) {
                        instance = resource;
                    }
                }
                return !instance.empty();
            },
            30s);
        if (instance.empty())
            throw std::runtime_error("the unbound card never went Unhealthy:\n" + daemon.log());
        rebind(false);
        if (!kubelet.waitFor([&] { return healthy(kResource) == kGpus && healthy(instance) == 1; }, 30s)) {
            throw std::runtime_error("the rebound card never came back:\n" + daemon.log());
        }

        const double cpuBefore = cpuMs(daemon.pid());
        for (int i = 0; i < events; ++i) {
            const bool unbind = i % 2 == 0;
            tracker.expect({{instance, {1, unbind ? 0u : 1u}},
                            {kResource, {static_cast<std::size_t>(kGpus), kGpus - (unbind ? 1u : 0u)}}},
                           Clock::now());
            const Clock::time_point start = rebind(unbind);
            const auto arrived = tracker.wait(10s);
            if (!arrived)
                throw std::runtime_error("event " + std::to_string(i) + " never reached the kubelet");
            (unbind ? result.unbind : result.bind).push_back(ms(*arrived - start));
        }
        result.cpuMsPerEvent = (cpuMs(daemon.pid()) - cpuBefore) / std::max(events, 1);
        daemon.stop();
        kubelet.stop();
        return result;
    }

private:
    UMockdevTestbed* testbed_;
    std::string sys_;
};

int parse(int argc, char** argv, Options& options) {
    if (const std::string wrong =
            parseNumberFlags(argc, argv, {{"--rounds", &options.rounds}, {"--events", &options.events}});
        !wrong.empty()) {
        std::fprintf(stderr, "usage: umockdev-wrapper gpu_event_bench [--rounds N] [--events N] (at %s)\n",
                     wrong.c_str());
        return 2;
    }
    options.rounds = std::max(1, options.rounds);
    options.events = std::max(2, options.events + options.events % 2);  // as many binds as unbinds
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
        std::fprintf(stderr,
                     "skipped: run gpu_event_bench under umockdev-wrapper, which the testbed needs\n");
        return 77;
    }
    try {
        UMockdevTestbed* testbed = umockdev_testbed_new();
        Bench bench(testbed);
        std::printf("gpu hotplug benchmark: devlet %s, %ld CPU(s), %d GPUs (xe, 2 tiles each)\n",
                    devlet::test::DaemonProcess::binary().c_str(), sysconf(_SC_NPROCESSORS_ONLN), kGpus);

        const Bench::ProbeAlone alone = bench.probeAlone(options.rounds);
        const std::vector<double>& probe = alone.times;
        std::printf("\nprobe alone: uevent -> the probe's new snapshot, %zu rebinds\n", probe.size());
        print("p50", percentile(probe, 50), "ms");
        print("p99", percentile(probe, 99), "ms");
        print("max", percentile(probe, 100), "ms");
        print("cards read per event", alone.cardReadsPerEvent, "");

        const Bench::EndToEnd e2e = bench.throughDaemon(options.events);
        std::vector<double> all = e2e.unbind;
        all.insert(all.end(), e2e.bind.begin(), e2e.bind.end());
        std::printf(
            "\ndevlet run: uevent -> ListAndWatch at the kubelet simulator, %zu events "
            "(%zu unbinds, %zu binds)\n",
            all.size(), e2e.unbind.size(), e2e.bind.size());
        print("uevent -> ListAndWatch p50", percentile(all, 50), "ms");
        print("uevent -> ListAndWatch p99 (target < 10 ms)", percentile(all, 99), "ms");
        print("uevent -> ListAndWatch max", percentile(all, 100), "ms");
        print("unbind -> Unhealthy p50", percentile(e2e.unbind, 50), "ms");
        print("bind -> Healthy p50", percentile(e2e.bind, 50), "ms");
        print("devlet CPU time per event", e2e.cpuMsPerEvent, "ms");
        std::printf(
            "{\"gpu_event_to_snapshot_p50_ms\": %.2f, \"gpu_event_to_list_and_watch_p50_ms\": %.2f, "
            "\"gpu_event_to_list_and_watch_p99_ms\": %.2f}\n",
            percentile(probe, 50), percentile(all, 50), percentile(all, 99));
        g_object_unref(testbed);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gpu_event_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
