#pragma once
// debugEcho devices for the benchmarks: a configuration of many descriptions whose
// availability file makes them come and go, and the timed change of that file.

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace devlet::bench {

inline std::string echoConfiguration(const std::string& name, const std::vector<std::string>& descriptions,
                                     int capacity, const std::filesystem::path& availability) {
    std::string list;
    for (const auto& description : descriptions) list += (list.empty() ? "" : ", ") + description;
    // A long grace period: a device that goes OFFLINE stays offered, Unhealthy, as a
    // flapping network device would; the toggles then change health, not registrations.
    return "apiVersion: akri.sh/v0\n"
           "kind: Configuration\n"
           "metadata:\n"
           "  name: " +
           name +
           "\n"
           "spec:\n"
           "  discoveryHandler:\n"
           "    name: debugEcho\n"
           "    discoveryDetails: |\n"
           "      descriptions: [" +
           list +
           "]\n"
           "      shared: false\n"
           "      availabilityFile: " +
           availability.string() +
           "\n"
           "  capacity: " +
           std::to_string(capacity) +
           "\n"
           "  devlet:\n"
           "    removalGracePeriodSeconds: 3600\n";
}

// Writes the file's new content to a temp file first; the device change is the rename,
// which is when the clock starts.
inline std::chrono::steady_clock::time_point changeAvailability(const std::filesystem::path& file,
                                                                bool offline) {
    const auto tmp = file.parent_path() / ("." + file.filename().string() + ".tmp");
    {
        std::ofstream out(tmp);
        out << (offline ? "OFFLINE\n" : "\n");
    }
    const auto start = std::chrono::steady_clock::now();
    std::filesystem::rename(tmp, file);
    return start;
}

}  // namespace devlet::bench
