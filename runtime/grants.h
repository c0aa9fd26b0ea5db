#pragma once
// What a container gets for the devices it was granted, as Akri gives it: each device's
// properties and its configuration's broker properties in the environment (KEY for the
// first device, KEY_<HASH> for every one), its device nodes and its mounts. Pure: the
// same words for Allocate's answer and for the live file.

#include <map>
#include <string>
#include <vector>

#include "runtime/configuration.h"
#include "runtime/discovery.h"

namespace devlet {

// What the container gets for an allocation.
struct ContainerGrant {
    std::map<std::string, std::string> envs;
    std::vector<DeviceNode> devices;
    std::vector<Mount> mounts;
};

// One granted device: its instance's name ("<configuration>-<hash>") and what the probe found.
struct GrantedDevice {
    const std::string* instance = nullptr;
    const Instance* device = nullptr;
};

// The environment of one device, KEY and KEY_<HASH>.
std::map<std::string, std::string> deviceEnvironment(const Configuration& configuration,
                                                     const std::string& instance, const Instance& device);
// The devices in request order; DEVLET_INSTANCES names them.
ContainerGrant grantFor(const Configuration& configuration, const std::vector<GrantedDevice>& devices);
// A device's nodes with the container's path filled in (the host's when none is given).
std::vector<DeviceNode> containerNodes(const Instance& device);

}  // namespace devlet
