#include "probes/gpu/gpu_nfd.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <system_error>

#include "probes/gpu/gpu_classifier.h"

namespace devlet::gpu {

namespace fs = std::filesystem;

std::string nfdFeatures(const std::string& configuration, const std::vector<Instance>& offered) {
    const std::string prefix = "devlet-gpu." + configuration + ".";
    std::uint64_t memory = 0;
    long tiles = 0;
    std::map<int, std::string> numa;  // node -> "0.1"
    int index = 0;
    for (const Instance& gpu : offered) {
        if (auto it = gpu.properties.find(kPropertyMemory); it != gpu.properties.end()) {
            memory += std::strtoull(it->second.c_str(), nullptr, 10);
        }
        auto it = gpu.properties.find(kPropertyTiles);
        tiles += it != gpu.properties.end() ? std::strtol(it->second.c_str(), nullptr, 10) : 1;
        if (gpu.numaNode) {
            std::string& list = numa[*gpu.numaNode];
            list += (list.empty() ? "" : ".") + std::to_string(index);
        }
        ++index;
    }
    std::string text = prefix + "count=" + std::to_string(offered.size()) + "\n";
    text += prefix + "memory=" + std::to_string(memory) + "\n";
    text += prefix + "tiles=" + std::to_string(tiles) + "\n";
    if (!numa.empty()) {
        std::string map;
        for (const auto& [node, gpus] : numa)
            map += (map.empty() ? "" : "_") + std::to_string(node) + "-" + gpus;
        text += prefix + "numa-gpu-map=" + map + "\n";
    }
    return text;
}

std::string nfdFeatureFile(const std::string& dir, const std::string& configuration) {
    return (fs::path(dir) / ("devlet-gpu-" + configuration)).string();
}

std::string writeNfdFeatures(const std::string& dir, const std::string& configuration,
                             const std::string& text) {
    std::error_code error;
    if (!fs::is_directory(dir, error)) return {};
    const std::string file = nfdFeatureFile(dir, configuration);
    if (text.empty()) {
        fs::remove(file, error);
        return error ? "cannot remove " + file + ": " + error.message() : std::string();
    }
    const std::string temp = fs::path(dir) / (".devlet-gpu-" + configuration + ".tmp");
    {
        std::ofstream out(temp, std::ios::trunc);
        out << text;
        out.flush();
        if (!out) return "cannot write " + temp + ": " + std::strerror(errno);
    }
    // NFD reads the directory on its own schedule: it must never see half a file.
    fs::rename(temp, file, error);
    if (error) {
        fs::remove(temp, error);
        return "cannot write " + file + ": " + error.message();
    }
    return {};
}

}  // namespace devlet::gpu
