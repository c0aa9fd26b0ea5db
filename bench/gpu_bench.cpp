// The gpu handler's full scan: one sysfs pass and the classification, on a copy of the
// sysfs layout of N xe cards (two tiles each, behind PCIe ports, on two NUMA nodes) in a
// temp directory. Prints the median and the fastest of many passes for 1 and 16 cards, and
// what one card costs. Figures only: it never fails because a figure misses its target.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include "bench/command_line.h"
#include "probes/gpu/gpu_classifier.h"
#include "probes/gpu/gpu_sysfs.h"

namespace fs = std::filesystem;

namespace {

void write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text << "\n";
}

void link(const fs::path& at, const std::string& target) {
    fs::create_directories(at.parent_path());
    fs::create_symlink(target, at);
}

// The layout the kernel makes for one xe card `n` (see peers' sysfs facts), under root.
void addCard(const fs::path& root, int n) {
    char bus[16];
    std::snprintf(bus, sizeof bus, "%02x", 3 + n);
    const std::string host = n % 2 ? "pci0000:80" : "pci0000:00";
    const std::string port = host.substr(3) + ":" + std::string(bus) + ".0";  // the PCIe port above it
    const std::string address = "0000:" + std::string(bus) + ":00.0";
    const std::string devpath = "devices/" + host + "/" + port + "/" + address;
    const fs::path pci = root / "sys" / devpath;
    write(pci / "vendor", "0x8086");
    write(pci / "device", "0x56a0");
    write(pci / "subsystem_vendor", "0x8086");
    write(pci / "subsystem_device", "0x1020");
    write(pci / "class", "0x030000");
    write(pci / "numa_node", std::to_string(n % 2));
    write(pci / "local_cpulist", n % 2 ? "16-31" : "0-15");
    write(pci / "sriov_numvfs", "0");
    write(pci / "sriov_totalvfs", "7");
    link(pci / "driver", "../../../../bus/pci/drivers/xe");
    for (int t = 0; t < 2; ++t)
        write(pci / ("tile" + std::to_string(t)) / "physical_vram_size_bytes", "8589934592");
    const std::string card = "card" + std::to_string(n);
    const std::string render = "renderD" + std::to_string(128 + n);
    const std::string drm = "../../" + devpath + "/drm/";
    for (const std::string& name : {card, render}) {
        link(pci / "drm" / name / "device", "../..");
        write(pci / "drm" / name / "dev", "226:0");
        link(root / "sys/class/drm" / name, drm + name);
        write(root / "dev/dri" / name, "");
    }
    link(root / "dev/dri/by-path" / ("pci-" + address + "-card"), "../" + card);
    link(root / "dev/dri/by-path" / ("pci-" + address + "-render"), "../" + render);
}

struct Figures {
    double medianUs = 0;
    double fastestUs = 0;
};

Figures measure(int cards, int passes) {
    const fs::path root = fs::temp_directory_path() /
                          ("devlet-gpu-bench-" + std::to_string(::getpid()) + "-" + std::to_string(cards));
    fs::remove_all(root);
    for (int n = 0; n < cards; ++n) addCard(root, n);
    devlet::gpu::SysfsRoots roots{(root / "sys").string(), (root / "dev").string(), false};
    const devlet::gpu::GpuDetails details;
    std::vector<double> times;
    for (int i = 0; i < passes; ++i) {
        const auto start = std::chrono::steady_clock::now();
        std::vector<devlet::gpu::GpuObservation> observations;
        std::vector<devlet::gpu::GpuScanProblem> problems;
        std::string error;
        if (!devlet::gpu::scanGpus(roots, observations, problems, error) || !problems.empty()) {
            std::fprintf(stderr, "scan failed: %s\n", error.c_str());
            std::exit(1);
        }
        const std::vector<devlet::Instance> instances = devlet::gpu::classifyGpus(observations, details);
        times.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
        if (static_cast<int>(instances.size()) != cards) {
            std::fprintf(stderr, "expected %d instances, got %zu\n", cards, instances.size());
            std::exit(1);
        }
    }
    fs::remove_all(root);
    std::sort(times.begin(), times.end());
    return {times[times.size() / 2], times.front()};
}

}  // namespace

int main(int argc, char** argv) {
    int passes = 200;
    if (argc == 3 && std::string(argv[1]) == "--passes") {
        const std::optional<int> given = devlet::bench::parseInt(argv[2]);
        if (!given) {
            std::fprintf(stderr, "usage: gpu_bench [--passes N]\n");
            return 2;
        }
        passes = std::max(1, *given);
    }
    std::printf("gpu full scan (sysfs pass + classification), %d passes each\n", passes);
    const Figures one = measure(1, passes);
    const Figures sixteen = measure(16, passes);
    std::printf("  1 GPU:   median %8.1f us, fastest %8.1f us\n", one.medianUs, one.fastestUs);
    std::printf("  16 GPUs: median %8.1f us, fastest %8.1f us (target < 20000 us)\n", sixteen.medianUs,
                sixteen.fastestUs);
    std::printf("  ratio 16/1: %.1f\n", sixteen.medianUs / one.medianUs);
    std::printf("{\"gpu_scan_us\": {\"1\": %.1f, \"16\": %.1f}}\n", one.medianUs, sixteen.medianUs);
    return 0;
}
