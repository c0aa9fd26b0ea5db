// The state store alone, on the file system of $TMPDIR: what one slot hold and one release
// cost (each one transaction that Allocate or a release waits for), beside the floor that
// file system sets: a 4 KiB write plus fdatasync of a file in the same directory.
//   TMPDIR=/mnt/ext4 build/bench/store_bench --rounds 500 --runs 3

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "bench/command_line.h"
#include "bench/figures.h"
#include "runtime/store.h"
#include "tests/support/temp_dir.h"

namespace devlet::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Samples {
    std::vector<double> hold, release, floor;
};

Slot slot(int instance, int index) {
    Slot result;
    result.instance = "cams-" + std::to_string(100000 + instance);
    result.index = index;
    result.deviceId = result.instance + "-" + std::to_string(index);
    result.configuration = "cams";
    result.holderResource = "akri.sh/cams";
    result.sinceMs = 1000;
    return result;
}

Samples run(int rounds) {
    test::TempDir dir;
    std::string error;
    auto store = Store::open((dir.path() / "state").string(), error);
    if (!store) throw std::runtime_error(error);
    Samples samples;
    // As many rows as 1,000 instances with one pod each: the table Allocate writes into.
    std::vector<Slot> background;
    background.reserve(1000);
    for (int i = 0; i < 1000; ++i) background.push_back(slot(i, 0));
    if (auto outcome = store->holdSlots(background); !outcome) throw std::runtime_error(outcome.error());
    for (int i = 0; i < rounds; ++i) {
        Slot held = slot(i % 1000, 1 + i % 3);
        auto start = Clock::now();
        if (auto outcome = store->holdSlots({held}); !outcome) throw std::runtime_error(outcome.error());
        samples.hold.push_back(ms(Clock::now() - start));
        start = Clock::now();
        if (auto outcome = store->releaseSlots({held.deviceId}); !outcome)
            throw std::runtime_error(outcome.error());
        samples.release.push_back(ms(Clock::now() - start));
    }

    const std::string path = (dir.path() / "floor").string();
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) throw std::runtime_error("cannot create " + path);
    std::string page(4096, 'x');
    for (int i = 0; i < rounds; ++i) {
        auto start = Clock::now();
        bool ok = ::pwrite(fd, page.data(), page.size(), static_cast<off_t>(i % 64) * 4096) ==
                      static_cast<ssize_t>(page.size()) &&
                  ::fdatasync(fd) == 0;
        samples.floor.push_back(ms(Clock::now() - start));
        if (!ok) {
            ::close(fd);
            throw std::runtime_error("writing " + path + " failed");
        }
    }
    ::close(fd);
    return samples;
}

double median(std::vector<double> values) {
    return percentile(std::move(values), 50);
}

}  // namespace
}  // namespace devlet::bench

int main(int argc, char** argv) {
    using namespace devlet::bench;
    int rounds = 500;
    int runs = 3;
    if (std::string wrong = parseNumberFlags(argc, argv, {{"--rounds", &rounds}, {"--runs", &runs}});
        !wrong.empty() || rounds < 1 || runs < 1) {
        std::fprintf(stderr, "usage: store_bench [--rounds N] [--runs N] (at %s)\n", wrong.c_str());
        return 2;
    }
    const char* tmp = std::getenv("TMPDIR");
    std::printf("store_bench: %d rounds x %d runs in %s (TMPDIR)\n", rounds, runs, tmp ? tmp : "/tmp");
    try {
        std::vector<Samples> all;
        all.reserve(runs);
        for (int r = 0; r < runs; ++r) all.push_back(run(rounds));
        struct Row {
            const char* name;
            std::vector<double> Samples::*samples;
            double p;
        };
        const Row rows[] = {{"holdSlots (1 slot) p50", &Samples::hold, 50},
                            {"holdSlots (1 slot) p99", &Samples::hold, 99},
                            {"releaseSlots (1 slot) p50", &Samples::release, 50},
                            {"releaseSlots (1 slot) p99", &Samples::release, 99},
                            {"4 KiB pwrite + fdatasync p50 (the floor)", &Samples::floor, 50},
                            {"4 KiB pwrite + fdatasync p99", &Samples::floor, 99}};
        std::printf("\n%-44s %10s  %s\n", "figure", runs > 1 ? "median" : "value", "(runs)");
        for (const Row& row : rows) {
            std::vector<double> values;
            values.reserve(all.size());
            for (const Samples& s : all) values.push_back(percentile(s.*row.samples, row.p));
            std::printf("%-44s %7.3f ms  (", row.name, median(values));
            for (double v : values) std::printf(" %.3f", v);
            std::printf(" )\n");
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "store_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
