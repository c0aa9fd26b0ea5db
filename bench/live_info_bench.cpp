// What the live files cost, with 1,000 held slots each described by its own file, on the
// file system of $TMPDIR: a held device's change reaching its rewritten file (the
// inventory's report, the publication to the plugins and the synced rewrite, beside the
// same report without live files), every held device changing in one report, and an
// Allocate with and without its file.
//   TMPDIR=/mnt/ext4 build/bench/live_info_bench --rounds 200 --slots 1000

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "bench/command_line.h"
#include "bench/figures.h"
#include "runtime/inventory.h"
#include "runtime/log.h"
#include "runtime/naming.h"
#include "runtime/store.h"
#include "tests/support/decide_now.h"
#include "tests/support/temp_dir.h"

namespace devlet::bench {
namespace {

using Clock = std::chrono::steady_clock;

class NullObserver : public InventoryObserver {
public:
    void resourceChanged(ResourceState) override {}
    void resourceWithdrawn(const std::string&) override {}
};

struct Samples {
    std::vector<double> change;     // one held device's property changes: report to file
    std::vector<double> allChange;  // every held device changes in one report
    std::vector<double> allocate;   // one Allocate of one slot
};

std::vector<Instance> devices(int count, int round, int changed) {
    std::vector<Instance> result;
    for (int i = 0; i < count; ++i) {
        Instance device;
        device.id = "camera-" + std::to_string(i);
        device.shared = true;
        device.properties["ONVIF_DEVICE_IP_ADDRESS"] =
            "10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250);
        const bool moved = changed < 0 || i == changed;
        device.properties["ONVIF_STREAM_URI"] =
            "rtsp://10.0.0.1/stream/" + std::to_string(moved ? round : 0) + "/" + std::to_string(i);
        result.push_back(std::move(device));
    }
    return result;
}

Samples run(int slots, int rounds, bool live) {
    test::TempDir dir;
    const std::string stateDir = (dir.path() / "state").string();
    Outcome why = Outcome::ok();
    auto store = Store::open(stateDir, StoreOptions{}, why);
    if (!store) throw std::runtime_error(why.error());
    NullObserver observer;
    Inventory inventory("node-a", "akri.sh", store.get(), observer);
    SlotArbiter arbiter(inventory);
    if (live) inventory.setLiveInfoDirectory(stateDir);
    Configuration configuration;
    configuration.name = "cams";
    configuration.handler = "onvif";
    configuration.capacity = 1;
    inventory.applyConfigurations({configuration}, {});
    inventory.reportSnapshot("cams", devices(slots, 0, -2));

    Samples samples;
    for (int i = 0; i < slots; ++i) {
        const std::string slot =
            slotId(instanceName("cams", instanceHash("camera-" + std::to_string(i), "node-a", true)), 0);
        const auto start = Clock::now();
        auto result = test::allocateNow(arbiter, "akri.sh/cams", {slot});
        samples.allocate.push_back(ms(Clock::now() - start));
        if (auto* refused = std::get_if<AllocationRefused>(&result))
            throw std::runtime_error(refused->message);
    }
    for (int round = 1; round <= rounds; ++round) {
        auto report = devices(slots, round, round % slots);
        const auto start = Clock::now();
        inventory.reportSnapshot("cams", std::move(report));
        samples.change.push_back(ms(Clock::now() - start));
    }
    for (int round = 1; round <= 3; ++round) {
        auto report = devices(slots, rounds + round, -1);
        const auto start = Clock::now();
        inventory.reportSnapshot("cams", std::move(report));
        samples.allChange.push_back(ms(Clock::now() - start));
    }
    return samples;
}

}  // namespace
}  // namespace devlet::bench

int main(int argc, char** argv) {
    using namespace devlet::bench;
    int rounds = 200;
    int slots = 1000;
    if (std::string wrong = parseNumberFlags(argc, argv, {{"--rounds", &rounds}, {"--slots", &slots}});
        !wrong.empty() || rounds < 1 || slots < 1) {
        std::fprintf(stderr, "usage: live_info_bench [--rounds N] [--slots N] (at %s)\n", wrong.c_str());
        return 2;
    }
    const char* tmp = std::getenv("TMPDIR");
    std::printf("live_info_bench: %d held slots, %d changes, in %s (TMPDIR)\n", slots, rounds,
                tmp ? tmp : "/tmp");
    devlet::setLogLevel(devlet::LogLevel::Warning);  // a line per device found would drown the figures
    try {
        const Samples without = run(slots, rounds, false);
        const Samples with = run(slots, rounds, true);
        std::printf("\n%-58s %10s %10s\n", "figure", "without", "with file");
        auto row = [](const char* name, const std::vector<double>& a, const std::vector<double>& b,
                      double p) {
            std::printf("%-58s %7.3f ms %7.3f ms\n", name, percentile(a, p), percentile(b, p));
        };
        row("one held device changes: report -> published (+file) p50", without.change, with.change, 50);
        row("one held device changes: report -> published (+file) p99", without.change, with.change, 99);
        row("every held device changes in one report (median of 3)", without.allChange, with.allChange, 50);
        row("Allocate of one slot p50", without.allocate, with.allocate, 50);
        row("Allocate of one slot p99", without.allocate, with.allocate, 99);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "live_info_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
