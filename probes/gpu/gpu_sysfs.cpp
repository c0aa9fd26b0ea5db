#include "probes/gpu/gpu_sysfs.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace devlet::gpu {

namespace fs = std::filesystem;

namespace {

// Name patterns, matched by hand: std::regex made a scan of 16 cards several times slower.
using NamePattern = bool (*)(std::string_view);

// `prefix` followed by one or more digits: card0, renderD128, tile1, gt0.
bool numbered(std::string_view name, std::string_view prefix) {
    if (!name.starts_with(prefix) || name.size() == prefix.size()) return false;
    return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(prefix.size()), name.end(),
                       [](unsigned char c) { return std::isdigit(c); });
}
bool isCardName(std::string_view name) {
    return numbered(name, "card");
}
bool isRenderName(std::string_view name) {
    return numbered(name, "renderD");
}
bool isDrmNodeName(std::string_view name) {
    return isCardName(name) || isRenderName(name);
}
bool isTileName(std::string_view name) {
    return numbered(name, "tile");
}
bool isGtName(std::string_view name) {
    return numbered(name, "gt");
}
// dddd:bb:dd.f in lower-case hex, as sysfs names PCI functions.
bool isPciAddress(std::string_view name) {
    if (name.size() != 12 || name[4] != ':' || name[7] != ':' || name[10] != '.') return false;
    for (std::size_t i : {0u, 1u, 2u, 3u, 5u, 6u, 8u, 9u, 11u}) {
        const char c = name[i];
        if (!std::isdigit(static_cast<unsigned char>(c)) && !(c >= 'a' && c <= 'f')) return false;
    }
    return true;
}

// The i915 query uapi (include/uapi/drm/i915_drm.h), declared here because bookworm's
// kernel headers do not ship the DRM driver headers. The layout is kernel ABI.
struct I915QueryItem {
    std::uint64_t queryId;
    std::int32_t length;
    std::uint32_t flags;
    std::uint64_t dataPtr;
};
struct I915Query {
    std::uint32_t numItems;
    std::uint32_t flags;
    std::uint64_t itemsPtr;
};
struct I915MemoryRegionInfo {
    std::uint16_t memoryClass;
    std::uint16_t memoryInstance;
    std::uint32_t rsvd0;
    std::uint64_t probedSize;
    std::uint64_t unallocatedSize;
    std::uint64_t rsvd1[8];
};
struct I915QueryMemoryRegions {
    std::uint32_t numRegions;
    std::uint32_t rsvd[3];
    // I915MemoryRegionInfo regions[numRegions] follow.
};
static_assert(sizeof(I915QueryItem) == 24 && sizeof(I915Query) == 16);
static_assert(sizeof(I915MemoryRegionInfo) == 88 && sizeof(I915QueryMemoryRegions) == 16);
constexpr std::uint64_t kI915QueryMemoryRegions = 4;
constexpr std::uint16_t kI915MemoryClassDevice = 1;
// DRM_IOWR(DRM_COMMAND_BASE + DRM_I915_QUERY, struct drm_i915_query)
constexpr unsigned long kIoctlI915Query = _IOWR('d', 0x40 + 0x39, I915Query);

std::string trimmed(std::string text) {
    const auto notSpace = [](unsigned char c) { return !std::isspace(c); };
    text.erase(std::find_if(text.rbegin(), text.rend(), notSpace).base(), text.end());
    text.erase(text.begin(), std::find_if(text.begin(), text.end(), notSpace));
    return text;
}

// A sysfs attribute's text without the trailing newline; nullopt where it cannot be read.
std::optional<std::string> readAttribute(const fs::path& path) {
    // Plain read(2): a stream per attribute cost more than the sysfs read itself. Sysfs
    // attributes are at most a page.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    char buffer[4096];
    std::string text;
    ssize_t got = 0;
    while ((got = ::read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(got));
    ::close(fd);
    if (got < 0) return std::nullopt;
    return trimmed(std::move(text));
}

std::string attribute(const fs::path& path) {
    return readAttribute(path).value_or("");
}

std::optional<long long> number(const std::string& text) {
    if (text.empty()) return std::nullopt;
    try {
        std::size_t used = 0;
        const long long value = std::stoll(text, &used, 0);
        if (used != text.size()) return std::nullopt;
        return value;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

std::string linkTarget(const fs::path& link) {
    std::error_code error;
    const fs::path target = fs::read_symlink(link, error);
    return error ? std::string() : target.string();
}

// The names in a directory that match, sorted; empty where it cannot be read. readdir(3)
// rather than directory_iterator, which builds a full path per entry.
std::vector<std::string> entries(const fs::path& dir, NamePattern pattern) {
    std::vector<std::string> names;
    DIR* handle = ::opendir(dir.c_str());
    if (!handle) return names;
    while (const dirent* entry = ::readdir(handle)) {
        const std::string_view name = entry->d_name;
        if (pattern(name)) names.emplace_back(name);
    }
    ::closedir(handle);
    std::sort(names.begin(), names.end());
    return names;
}

bool isByPathName(std::string_view name) {
    return name.starts_with("pci-");
}

bool nodeExists(const fs::path& path) {
    std::error_code error;
    return fs::exists(path, error);
}

std::string systemError(const std::string& what, int error) {
    return what + ": " + std::strerror(error);
}

// Sums the device-local regions a mainline i915 reports; sets `why` where it cannot.
std::optional<std::uint64_t> queryI915Memory(const fs::path& node, const std::string& hostPath,
                                             std::string& why) {
    const int fd = ::open(node.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        why = systemError("unknown (cannot open " + hostPath + " for the i915 memory query", errno) + ")";
        return std::nullopt;
    }
    auto query = [&](I915QueryItem& item) {
        I915Query request{1, 0, reinterpret_cast<std::uintptr_t>(&item)};
        return ::ioctl(fd, kIoctlI915Query, &request);
    };
    // First call: the kernel says how long the answer is; second: it writes it.
    I915QueryItem item{kI915QueryMemoryRegions, 0, 0, 0};
    std::optional<std::uint64_t> total;
    if (query(item) != 0 || item.length <= 0) {
        const int error = item.length < 0 ? -item.length : errno;
        why = systemError("unknown (the i915 memory query on " + hostPath + " failed", error) + ")";
    } else if (static_cast<std::size_t>(item.length) < sizeof(I915QueryMemoryRegions)) {
        why = "unknown (the i915 memory query on " + hostPath + " answered too little)";
    } else {
        std::vector<std::uint64_t> buffer((static_cast<std::size_t>(item.length) + 7) / 8, 0);
        item.dataPtr = reinterpret_cast<std::uintptr_t>(buffer.data());
        if (query(item) != 0 || item.length <= 0) {
            why = systemError("unknown (the i915 memory query on " + hostPath + " failed", errno) + ")";
        } else {
            const auto* header = reinterpret_cast<const I915QueryMemoryRegions*>(buffer.data());
            const std::size_t room =
                (static_cast<std::size_t>(item.length) - sizeof(I915QueryMemoryRegions)) /
                sizeof(I915MemoryRegionInfo);
            const auto* regions = reinterpret_cast<const I915MemoryRegionInfo*>(header + 1);
            std::uint64_t sum = 0;
            for (std::size_t i = 0; i < std::min<std::size_t>(header->numRegions, room); ++i) {
                // probed_size is -1 where the driver does not know it.
                if (regions[i].memoryClass == kI915MemoryClassDevice && regions[i].probedSize != ~0ull)
                    sum += regions[i].probedSize;
            }
            total = sum;
            why = "i915 memory query";
        }
    }
    ::close(fd);
    return total;
}

void readMemoryAndTiles(const SysfsRoots& roots, const fs::path& cardDir, const fs::path& pciDir,
                        GpuObservation& gpu) {
    if (gpu.driver == "xe") {
        // xe: one tileN kobject per tile under the PCI device, each with its VRAM size.
        const std::vector<std::string> tiles = entries(pciDir, isTileName);
        gpu.tiles = static_cast<int>(tiles.size());
        std::uint64_t sum = 0;
        bool any = false;
        for (const std::string& tile : tiles) {
            if (auto bytes = number(attribute(pciDir / tile / "physical_vram_size_bytes"));
                bytes && *bytes > 0) {
                sum += static_cast<std::uint64_t>(*bytes);
                any = true;
            }
        }
        if (any) {
            gpu.localMemoryBytes = sum;
            gpu.memorySource = "xe tile physical_vram_size_bytes";
        } else if (!tiles.empty()) {
            // An integrated xe GPU has tiles but no VRAM.
            gpu.localMemoryBytes = 0;
            gpu.memorySource = "xe tiles publish no VRAM";
        } else {
            gpu.memorySource = "unknown (xe published no tiles)";
        }
        return;
    }
    // i915: one gtN per tile under the card.
    gpu.tiles = static_cast<int>(entries(cardDir / "gt", isGtName).size());
    // Intel's out-of-tree i915 publishes lmem per tile.
    if (auto bytes = number(attribute(cardDir / "lmem_total_bytes")); bytes && *bytes > 0) {
        gpu.localMemoryBytes = static_cast<std::uint64_t>(*bytes) * std::max(1, gpu.tiles);
        gpu.memorySource = "i915 lmem_total_bytes";
        return;
    }
    if (gpu.driver != "i915") {
        gpu.memorySource =
            "unknown (not published by " + (gpu.driver.empty() ? "an unbound device" : gpu.driver) + ")";
        return;
    }
    if (!roots.queryMemory) {
        gpu.memorySource = "unknown (memory query not enabled)";
        return;
    }
    const std::string& hostPath = gpu.renderNodePresent ? gpu.renderNode : gpu.cardNode;
    if (hostPath.empty() || !(gpu.renderNodePresent || gpu.cardNodePresent)) {
        gpu.memorySource = "unknown (no device node for the i915 memory query)";
        return;
    }
    const fs::path node = fs::path(roots.dev) / fs::path(hostPath).lexically_relative("/dev");
    gpu.localMemoryBytes = queryI915Memory(node, hostPath, gpu.memorySource);
}

// `byPath`: the names in /dev/dri/by-path, read once per scan. nullopt with an empty
// `problem`: the card is gone.
std::optional<GpuObservation> readCard(const SysfsRoots& roots, const std::vector<std::string>& byPath,
                                       const std::string& card, std::string& problem) {
    const fs::path sys(roots.sys);
    const fs::path dev(roots.dev);
    GpuObservation gpu;
    gpu.card = card;
    if (roots.cardRead) roots.cardRead(card);
    // /sys/class/drm/cardN -> ../../devices/pci0000:00/0000:00:02.0/drm/cardN
    const fs::path classEntry = sys / "class/drm" / card;
    const std::string classLink = linkTarget(classEntry);
    std::error_code missing;
    if (classLink.empty() && !fs::exists(fs::symlink_status(classEntry, missing)))
        return std::nullopt;  // gone
    const std::size_t devices = classLink.find("/devices/");
    if (devices == std::string::npos) {
        problem = "/sys/class/drm/" + card + " does not link into /sys/devices";
        return std::nullopt;
    }
    gpu.devpath = fs::path(classLink.substr(devices)).lexically_normal().string();
    const fs::path cardDir = sys / fs::path(gpu.devpath).relative_path();
    const std::string deviceLink = linkTarget(cardDir / "device");
    if (deviceLink.empty()) {
        problem = card + " has no parent device";
        return std::nullopt;
    }
    fs::path pciDevpath = (fs::path(gpu.devpath) / deviceLink).lexically_normal();
    // "a/b/.." normalises to "a/" (an empty last element).
    if (!pciDevpath.has_filename()) pciDevpath = pciDevpath.parent_path();
    gpu.pciAddress = pciDevpath.filename().string();
    if (!isPciAddress(gpu.pciAddress)) {
        problem = card + " is not a PCI device (its parent is " + pciDevpath.string() + ")";
        return std::nullopt;
    }
    for (auto it = pciDevpath.begin(); it != pciDevpath.end(); ++it) {
        const std::string part = it->string();
        if (part.starts_with("pci") && gpu.pciRoot.empty()) gpu.pciRoot = part;
        if (isPciAddress(part)) ++gpu.pciDepth;
    }
    const fs::path pciDir = sys / pciDevpath.relative_path();
    gpu.vendor = attribute(pciDir / "vendor");
    gpu.device = attribute(pciDir / "device");
    gpu.subsystemVendor = attribute(pciDir / "subsystem_vendor");
    gpu.subsystemDevice = attribute(pciDir / "subsystem_device");
    gpu.pciClass = attribute(pciDir / "class");
    gpu.driver = fs::path(linkTarget(pciDir / "driver")).filename().string();

    for (const std::string& name : entries(pciDir / "drm", isDrmNodeName)) {
        const bool exists = nodeExists(dev / "dri" / name);
        if (isRenderName(name)) {
            gpu.renderNode = "/dev/dri/" + name;
            gpu.renderNodePresent = exists;
        } else if (name == card || gpu.cardNode.empty()) {
            gpu.cardNode = "/dev/dri/" + name;
            gpu.cardNodePresent = exists;
        }
    }
    if (gpu.cardNode.empty()) {
        gpu.cardNode = "/dev/dri/" + card;
        gpu.cardNodePresent = nodeExists(dev / "dri" / card);
    }
    const std::string prefix = "pci-" + gpu.pciAddress + "-";
    for (const std::string& name : byPath) {
        if (name.starts_with(prefix)) gpu.byPathLinks.push_back("/dev/dri/by-path/" + name);
    }
    std::sort(gpu.byPathLinks.begin(), gpu.byPathLinks.end());

    if (auto numa = number(attribute(pciDir / "numa_node")); numa && *numa >= 0)
        gpu.numaNode = static_cast<int>(*numa);
    gpu.localCpus = attribute(pciDir / "local_cpulist");
    gpu.sriovNumVfs = static_cast<int>(number(attribute(pciDir / "sriov_numvfs")).value_or(0));
    gpu.sriovTotalVfs = static_cast<int>(number(attribute(pciDir / "sriov_totalvfs")).value_or(0));
    if (std::string physfn = linkTarget(pciDir / "physfn"); !physfn.empty())
        gpu.physicalFunction = fs::path(physfn).filename().string();
    readMemoryAndTiles(roots, cardDir, pciDir, gpu);
    return gpu;
}

}  // namespace

bool scanGpus(const SysfsRoots& roots, std::vector<GpuObservation>& observations,
              std::vector<GpuScanProblem>& problems, std::string& error) {
    observations.clear();
    problems.clear();
    const fs::path drm = fs::path(roots.sys) / "class/drm";
    std::error_code code;
    fs::directory_iterator it(drm, code);
    if (code) {
        // No DRM driver loaded at all: nothing to offer, not an error.
        if (code == std::errc::no_such_file_or_directory) return true;
        error = "cannot read /sys/class/drm: " + code.message();
        return false;
    }
    std::vector<std::string> cards = entries(drm, isCardName);
    std::sort(cards.begin(), cards.end(), CardOrder());
    readGpus(roots, cards, observations, problems);
    return true;
}

void readGpus(const SysfsRoots& roots, const std::vector<std::string>& cards,
              std::vector<GpuObservation>& observations, std::vector<GpuScanProblem>& problems) {
    if (cards.empty()) return;
    const std::vector<std::string> byPath = entries(fs::path(roots.dev) / "dri/by-path", isByPathName);
    for (const std::string& card : cards) {
        std::string problem;
        if (auto gpu = readCard(roots, byPath, card, problem)) {
            observations.push_back(std::move(*gpu));
        } else if (!problem.empty()) {
            problems.push_back({card, std::move(problem)});
        }
    }
}

std::vector<std::string> cardsOfDevice(const SysfsRoots& roots, const std::string& devpath) {
    return entries(fs::path(roots.sys) / fs::path(devpath).relative_path() / "drm", isCardName);
}

}  // namespace devlet::gpu
