#pragma once
// Value types shared by probes, the inventory and the plugins: no OS handles,
// comparable, so snapshots diff cleanly.

#include <map>
#include <optional>
#include <string>
#include <vector>

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

}  // namespace devlet
