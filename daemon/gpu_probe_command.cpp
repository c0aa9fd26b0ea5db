#include "daemon/gpu_probe_command.h"

#include <fstream>
#include <ostream>
#include <sstream>

#include "probes/gpu/gpu_classifier.h"
#include "probes/gpu/gpu_details.h"

namespace devlet::gpu {

namespace {

std::string orNone(const std::string& text) {
    return text.empty() ? "none" : text;
}

std::string node(const std::string& path, bool present) {
    if (path.empty()) return "none";
    return present ? path : path + " (missing under /dev)";
}

std::string bytes(std::uint64_t value) {
    std::ostringstream text;
    text << value;
    if (value >= (1ull << 30)) text << " (" << value / (1ull << 30) << " GiB)";
    return text.str();
}

}  // namespace

int probeGpuCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                    const SysfsRoots& roots) {
    std::string detailsText;
    bool anyVendor = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--details" && i + 1 < args.size()) {
            std::ifstream in(args[++i]);
            if (!in) {
                err << "devlet: cannot read " << args[i] << "\n";
                return 2;
            }
            std::ostringstream text;
            text << in.rdbuf();
            detailsText = text.str();
        } else if (args[i] == "--any-vendor") {
            anyVendor = true;
        } else {
            err << "devlet: unknown option for probe gpu: " << args[i] << "\n";
            return 2;
        }
    }
    std::vector<DetailsProblem> problems;
    GpuDetails details = parseGpuDetails(detailsText, problems);
    if (!problems.empty()) {
        for (const DetailsProblem& problem : problems)
            err << "devlet: discoveryDetails:" << problem.line << ": " << problem.message << "\n";
        return 2;
    }
    if (anyVendor) details.vendors.clear();
    SysfsRoots scanRoots = roots;
    scanRoots.queryMemory = details.queryMemory;
    std::vector<GpuObservation> observations;
    std::vector<GpuScanProblem> scanProblems;
    std::string error;
    if (!scanGpus(scanRoots, observations, scanProblems, error)) {
        err << "devlet: " << error << "\n";
        return 1;
    }
    for (const GpuScanProblem& problem : scanProblems)
        out << problem.card << ": not read: " << problem.message << "\n";
    if (observations.empty()) {
        out << "no DRM cards in /sys/class/drm\n";
        return 0;
    }
    std::size_t offered = 0;
    for (const GpuVerdict& verdict : judgeGpus(observations, details)) {
        const GpuObservation& gpu = verdict.observation;
        out << gpu.card << ": " << gpu.pciAddress << " vendor " << gpu.vendor << " device " << gpu.device
            << " subsystem " << gpu.subsystemVendor << ":" << gpu.subsystemDevice << " class " << gpu.pciClass
            << "\n";
        out << "  driver:   " << orNone(gpu.driver) << ", " << (isDiscrete(gpu) ? "discrete" : "integrated")
            << ", below " << gpu.pciRoot << "\n";
        out << "  nodes:    card " << node(gpu.cardNode, gpu.cardNodePresent) << ", render "
            << node(gpu.renderNode, gpu.renderNodePresent) << "\n";
        for (const std::string& link : gpu.byPathLinks) out << "  by-path:  " << link << "\n";
        out << "  numa:     " << (gpu.numaNode ? std::to_string(*gpu.numaNode) : std::string("none"))
            << ", cpus " << orNone(gpu.localCpus) << "\n";
        out << "  memory:   "
            << (gpu.localMemoryBytes ? bytes(*gpu.localMemoryBytes) + " from " + gpu.memorySource
                                     : gpu.memorySource)
            << "\n";
        out << "  tiles:    " << gpu.tiles << "\n";
        if (gpu.sriovTotalVfs > 0 || gpu.sriovNumVfs > 0)
            out << "  sr-iov:   physical function, " << gpu.sriovNumVfs << " of " << gpu.sriovTotalVfs
                << " virtual functions enabled\n";
        if (!gpu.physicalFunction.empty())
            out << "  sr-iov:   virtual function of " << gpu.physicalFunction << "\n";
        if (verdict.offered) {
            ++offered;
            out << "  offered:  yes, instance id " << verdict.instance.id << "\n";
        } else {
            out << "  offered:  no, " << verdict.reason << "\n";
        }
    }
    out << offered << " of " << observations.size() << " card" << (observations.size() == 1 ? "" : "s")
        << " offered\n";
    return 0;
}

}  // namespace devlet::gpu
