#pragma once
// The live files of the containers that hold devices: one directory per allocation under
// `<stateDir>/pods/`, mounted read-only into the container, holding `devices.json`, which
// is replaced whole (written aside, flushed, renamed over it) each time something about a
// held device changes, with a generation one higher.
// Environment variables are frozen when a container starts; this file is not. Lives on the loop thread; the
// inventory says what to write (docs/live-info.md has the format).

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/instance.h"
#include "runtime/outcome.h"

namespace devlet {

// One held slot as its container's live file describes it.
struct LiveDevice {
    std::string slot;  // the slot's device id, "<instance>-<k>"
    std::string instance;
    std::string configuration;
    std::string resource;  // the resource that holds the slot
    bool present = false;  // false: the device is gone (its slot is Unhealthy)
    // The same names as the container's environment: KEY and KEY_<HASH>.
    std::map<std::string, std::string> properties;
    std::vector<DeviceNode> nodes;
    // Shared devices in cluster mode: the hold is the cluster's to confirm, and why it does
    // not now (empty: confirmed).
    bool clusterHeld = false;
    std::string clusterUnconfirmed;
    bool operator==(const LiveDevice&) const = default;
};

// An allocation's directory as found at start: the slots its file lists and the
// generation it had.
struct LiveAllocation {
    std::vector<std::string> slots;
    std::uint64_t generation = 0;  // 0: no readable file (the directory alone)
};

class LiveInfoWriter {
public:
    static constexpr int kSchemaVersion = 1;
    // Where a container finds its directory, and the file in it.
    static constexpr char kContainerDirectory[] = "/run/devlet/info";
    static constexpr char kContainerFile[] = "/run/devlet/info/devices.json";
    static constexpr char kEnvironmentVariable[] = "DEVLET_INFO_FILE";

    explicit LiveInfoWriter(const std::filesystem::path& stateDir);

    // The host directory of an allocation.
    std::filesystem::path directory(const std::string& allocation) const;
    // Writes the allocation's file anew, its generation one higher than the last one
    // written (1 for a new allocation). On failure the previous file stays as it was.
    Outcome write(const std::string& allocation, const std::vector<LiveDevice>& devices);
    // Writes several allocations' files with one flush of the disk for all of them; an
    // outcome per document, in order. A failed one keeps its previous file.
    using Document = std::pair<std::string, std::vector<LiveDevice>>;  // allocation, devices
    std::vector<Outcome> writeAll(const std::vector<Document>& documents);
    // Removes the allocation's directory and everything in it.
    Outcome remove(const std::string& allocation);
    // The allocations whose directories exist (after a restart), with what their files say.
    std::map<std::string, LiveAllocation> existing();
    // The generation last written; 0 when none.
    std::uint64_t generation(const std::string& allocation) const;
    // Why the allocation's file is stale (its last write failed); empty when it is current.
    std::string staleReason(const std::string& allocation) const;

    // The JSON document (exposed for tests and tools).
    static std::string render(const std::string& allocation, std::uint64_t generation, std::int64_t writtenMs,
                              const std::vector<LiveDevice>& devices);

private:
    std::filesystem::path pods_;
    std::map<std::string, std::uint64_t> generations_;
    std::map<std::string, std::string> stale_;
};

}  // namespace devlet
