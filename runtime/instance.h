#pragma once
// Value types shared by probes, the inventory and the plugins: no OS handles,
// comparable, so snapshots diff cleanly.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/slot.h"

namespace devlet {

struct DeviceNode {
    std::string hostPath;
    std::string containerPath;  // empty = same as hostPath
    std::string permissions = "rw";
    bool operator==(const DeviceNode&) const = default;
};

struct Mount {
    std::string hostPath;
    std::string containerPath;
    bool readOnly = false;
    bool operator==(const Mount&) const = default;
};

// One discovered device under one configuration, as a probe reports it.
struct Instance {
    std::string id;       // handler's stable id (devpath, uuid+url, PCI address, description)
    bool shared = false;  // visible from several nodes (network camera)
    std::vector<DeviceNode> nodes;
    std::vector<Mount> mounts;
    std::map<std::string, std::string> properties;  // become container environment
    std::optional<int> numaNode;
    bool operator==(const Instance&) const = default;
};

// The live file that describes a held slot to its container (docs/live-info.md).
struct LiveFileView {
    std::string path;  // on the host
    std::uint64_t generation = 0;
    std::string staleReason;  // why its last rewrite failed; empty when it is current
    bool operator==(const LiveFileView&) const = default;
};

// An instance as the inventory knows it: the device, whether it is seen and offered, and
// its slots with their holders. The status page's view of an instance derives from it.
struct InstanceView {
    std::string name;
    std::string configuration;
    Instance device;
    bool present = false;  // the probe sees it now
    bool offered = false;  // its resource is registered (present, or gone within grace)
    std::int64_t firstSeenMs = 0;
    std::int64_t lastSeenMs = 0;
    std::vector<Slot> slots;                        // every slot up to its count, held or free
    std::map<std::string, LiveFileView> liveFiles;  // by slot id: the held slots a live file describes
    // By slot id: free slots this node may not offer in cluster mode, and why (another
    // node holds them, or the cluster cannot be asked).
    std::map<std::string, std::string> heldElsewhere;
    // By slot id: held slots of a shared device whose hold the cluster has not confirmed
    // (this node cut off from the API), and why: their containers run, but another node
    // may take the slot over.
    std::map<std::string, std::string> unconfirmed;
};

}  // namespace devlet
