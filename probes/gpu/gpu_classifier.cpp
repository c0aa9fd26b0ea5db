#include "probes/gpu/gpu_classifier.h"

#include <algorithm>

namespace devlet::gpu {

namespace {

std::string joinedSet(const std::set<std::string>& names) {
    std::string text;
    for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
    return text;
}

// Why a card is not offered, or empty.
std::string exclusion(const GpuObservation& gpu, const GpuDetails& details) {
    const std::string device = normalisedPciId(gpu.device);
    if (!details.vendors.empty() && !details.vendors.contains(normalisedPciId(gpu.vendor)))
        return "vendor " + gpu.vendor + " is not in vendors (" + joinedSet(details.vendors) + ")";
    if (gpu.driver.empty()) return "no kernel driver is bound";
    if (!details.drivers.empty() && !details.drivers.contains(gpu.driver))
        return "driver " + gpu.driver + " is not in drivers (" + joinedSet(details.drivers) + ")";
    if (!details.allowIds.empty() && !details.allowIds.contains(device))
        return "device id " + gpu.device + " is not in allowIds";
    if (details.denyIds.contains(device)) return "device id " + gpu.device + " is in denyIds";
    if (details.type == GpuType::Integrated && isDiscrete(gpu))
        return "a discrete GPU, and type is integrated";
    if (details.type == GpuType::Discrete && !isDiscrete(gpu))
        return "an integrated GPU, and type is discrete";
    // Intel's rule: a physical function that has handed itself out as virtual functions is
    // not offered; the VFs (cards of their own) are.
    if (gpu.sriovNumVfs > 0)
        return "SR-IOV physical function with " + std::to_string(gpu.sriovNumVfs) +
               " virtual functions enabled: its virtual functions are offered instead";
    if (details.deviceNodes == DeviceNodes::Render) {
        if (gpu.renderNode.empty()) return "no render node, and deviceNodes is render";
        if (!gpu.renderNodePresent) return "render node " + gpu.renderNode + " is missing under /dev";
    } else if (!gpu.cardNodePresent && !gpu.renderNodePresent) {
        return "no device node for " + gpu.card + " under /dev/dri";
    }
    return {};
}

Instance instanceFor(const GpuObservation& gpu, const GpuDetails& details) {
    Instance instance;
    instance.id = gpu.pciAddress;
    if (details.deviceNodes == DeviceNodes::All && gpu.cardNodePresent)
        instance.nodes.push_back({gpu.cardNode, "", "rw"});
    // Even reading a GPU's metrics needs its node writable.
    if (gpu.renderNodePresent) instance.nodes.push_back({gpu.renderNode, "", "rw"});
    // Symlinks cannot travel as device nodes (they arrive as device files without the PCI
    // address in their name), so by-path names are bind-mounted, as Intel's plugin does.
    if (details.byPath == ByPath::Single) {
        for (const std::string& link : gpu.byPathLinks) instance.mounts.push_back({link, link, true});
    } else if (details.byPath == ByPath::All && !gpu.byPathLinks.empty()) {
        instance.mounts.push_back({"/dev/dri/by-path", "/dev/dri/by-path", true});
    }
    auto& p = instance.properties;
    p[kPropertyPciAddress] = gpu.pciAddress;
    p[kPropertyVendorId] = gpu.vendor;
    p[kPropertyDeviceId] = gpu.device;
    p[kPropertyDriver] = gpu.driver;
    p[kPropertyType] = isDiscrete(gpu) ? "discrete" : "integrated";
    if (!gpu.pciRoot.empty()) p[kPropertyPciRoot] = gpu.pciRoot;
    if (details.deviceNodes == DeviceNodes::All && gpu.cardNodePresent) p[kPropertyCardNode] = gpu.cardNode;
    if (gpu.renderNodePresent) p[kPropertyRenderNode] = gpu.renderNode;
    if (gpu.localMemoryBytes) p[kPropertyMemory] = std::to_string(*gpu.localMemoryBytes);
    if (gpu.tiles > 0) p[kPropertyTiles] = std::to_string(gpu.tiles);
    if (gpu.numaNode) p[kPropertyNumaNode] = std::to_string(*gpu.numaNode);
    if (!gpu.physicalFunction.empty()) p[kPropertyPhysicalFunction] = gpu.physicalFunction;
    instance.numaNode = gpu.numaNode;
    return instance;
}

}  // namespace

bool isDiscrete(const GpuObservation& gpu) {
    // Integrated GPUs sit on the root bus (0000:00:02.0, their VFs beside them) and have no
    // memory of their own; discrete cards sit behind a PCIe port or publish VRAM.
    return gpu.pciDepth > 1 || (gpu.localMemoryBytes && *gpu.localMemoryBytes > 0);
}

std::vector<GpuVerdict> judgeGpus(const std::vector<GpuObservation>& observations,
                                  const GpuDetails& details) {
    std::vector<GpuVerdict> verdicts;
    verdicts.reserve(observations.size());
    for (const GpuObservation& gpu : observations) {
        GpuVerdict verdict;
        verdict.observation = gpu;
        verdict.reason = exclusion(gpu, details);
        verdict.offered = verdict.reason.empty();
        if (verdict.offered) verdict.instance = instanceFor(gpu, details);
        verdicts.push_back(std::move(verdict));
    }
    return verdicts;
}

std::vector<Instance> classifyGpus(const std::vector<GpuObservation>& observations,
                                   const GpuDetails& details) {
    std::vector<Instance> instances;
    for (GpuVerdict& verdict : judgeGpus(observations, details)) {
        if (verdict.offered) instances.push_back(std::move(verdict.instance));
    }
    std::sort(instances.begin(), instances.end(),
              [](const Instance& a, const Instance& b) { return a.id < b.id; });
    // Two DRM cards of one PCI device (rare; a driver that registers twice) are one GPU.
    instances.erase(std::unique(instances.begin(), instances.end(),
                                [](const Instance& a, const Instance& b) { return a.id == b.id; }),
                    instances.end());
    return instances;
}

}  // namespace devlet::gpu
