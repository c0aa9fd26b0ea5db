// The gpu probe from a udev event to its updated snapshot, on a umockdev testbed with 16
// GPUs: one card's driver is switched between xe and vfio-pci and a "bind" uevent sent;
// the time runs until the probe reports the changed snapshot (event delivery, a full sysfs
// pass of 16 cards and classification). Runs under umockdev-wrapper, whose preload library
// also slows every sysfs read. Figures only.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <umockdev.h>
#include <unistd.h>

#include "probes/gpu/gpu_handler.h"
#include "runtime/configuration.h"
#include "runtime/log.h"
#include "tests/probes/gpu/gpu_testbeds.h"

namespace {

using Clock = std::chrono::steady_clock;

class TimingSink : public devlet::ProbeSink {
public:
    void reportSnapshot(const std::string&, std::vector<devlet::Instance> instances) override {
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

}  // namespace

int main(int argc, char** argv) {
    const char* preload = std::getenv("LD_PRELOAD");
    if (!preload || std::string(preload).find("libumockdev-preload") == std::string::npos) {
        std::fprintf(stderr, "skipped: run under umockdev-wrapper\n");
        return 77;
    }
    devlet::setLogLevel(devlet::LogLevel::Warning);
    int rounds = 50;
    if (argc == 3 && std::string(argv[1]) == "--rounds") rounds = std::max(1, std::atoi(argv[2]));
    UMockdevTestbed* testbed = umockdev_testbed_new();
    for (int n = 0; n < 16; ++n) {
        char bus[16];
        std::snprintf(bus, sizeof bus, "%02x", 3 + n);
        const std::string port = "/devices/pci0000:00/0000:00:" + std::string(bus) + ".0";
        devlet::test::SyntheticGpu gpu;
        gpu.parent = port;
        gpu.address = "0000:" + std::string(bus) + ":00.0";
        gpu.card = n;
        gpu.numaNode = n % 2;
        gpu.tiles = 2;
        gpu.vramPerTile = 8589934592ull;
        const std::string text = devlet::test::pciePort(port) + devlet::test::gpuTestbed(gpu);
        GError* error = nullptr;
        if (!umockdev_testbed_add_from_string(testbed, text.c_str(), &error)) {
            std::fprintf(stderr, "testbed: %s\n", error ? error->message : "unknown error");
            return 1;
        }
    }
    boost::asio::io_context loop;
    TimingSink sink;
    devlet::gpu::SysfsRoots roots;
    roots.nfdFeatureDir.clear();
    devlet::gpu::GpuHandler handler(roots);
    devlet::Configuration configuration;
    configuration.name = "gpus";
    configuration.handler = "gpu";
    auto probe = handler.createProbe(configuration, loop, sink);
    probe->start();
    auto runUntil = [&](int snapshots) {
        const auto deadline = Clock::now() + std::chrono::seconds(10);
        while (sink.snapshots < snapshots && Clock::now() < deadline) {
            loop.run_one_for(std::chrono::milliseconds(100));
            if (loop.stopped()) loop.restart();
        }
        return sink.snapshots >= snapshots;
    };
    if (!runUntil(1) || sink.count != 16) {
        std::fprintf(stderr, "the probe did not offer 16 GPUs\n");
        return 1;
    }
    const std::string sys = umockdev_testbed_get_sys_dir(testbed);
    const std::string pci = "/devices/pci0000:00/0000:00:03.0/0000:03:00.0";
    std::vector<double> times;
    for (int round = 0; round < rounds; ++round) {
        const char* driver = round % 2 == 0 ? "vfio-pci" : "xe";
        ::unlink((sys + pci + "/driver").c_str());
        umockdev_testbed_set_attribute_link(testbed, ("/sys" + pci).c_str(), "driver",
                                            (std::string("../../../../bus/pci/drivers/") + driver).c_str());
        const auto start = Clock::now();
        umockdev_testbed_uevent(testbed, ("/sys" + pci).c_str(), "bind");
        if (!runUntil(sink.snapshots + 1)) {
            std::fprintf(stderr, "no snapshot after round %d\n", round);
            return 1;
        }
        times.push_back(std::chrono::duration<double, std::milli>(sink.at - start).count());
    }
    probe->stop();
    g_object_unref(testbed);
    std::sort(times.begin(), times.end());
    std::printf("gpu uevent to snapshot, 16 GPUs, %d rounds (under umockdev)\n", rounds);
    std::printf("  median %.2f ms, fastest %.2f ms, slowest %.2f ms (target < 10 ms)\n",
                times[times.size() / 2], times.front(), times.back());
    std::printf("{\"gpu_event_to_snapshot_ms\": %.2f}\n", times[times.size() / 2]);
    return 0;
}
