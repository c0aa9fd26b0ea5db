#include "runtime/grants.h"

#include <cctype>
#include <set>

namespace devlet {

namespace {
std::string upper(std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    return s;
}
}  // namespace

std::map<std::string, std::string> deviceEnvironment(const Configuration& configuration,
                                                     const std::string& instance, const Instance& device) {
    const std::string suffix = "_" + upper(instance.substr(instance.rfind('-') + 1));  // of KEY_<HASH>
    // A broker property wins over a device property of the same name, in both KEY and
    // KEY_<HASH>, as in Akri: its agent appends the Configuration's brokerProperties
    // after the device's own properties (agent/src/device_manager/in_memory.rs `get`,
    // and discovery_handler_registry.rs `device_to_instance` for the Instance), and
    // `cdi_device_to_car` (plugin_manager/device_plugin_instance_controller.rs) turns
    // that list into the env map, where the later entry stays.
    std::map<std::string, std::string> properties = configuration.brokerProperties;
    properties.insert(device.properties.begin(), device.properties.end());
    std::map<std::string, std::string> environment;
    for (const auto& [key, value] : properties) {
        environment.try_emplace(key,
                                value);  // a property named like another's KEY_<HASH> does not replace it
        environment[key + suffix] = value;
    }
    return environment;
}

std::vector<DeviceNode> containerNodes(const Instance& device) {
    std::vector<DeviceNode> nodes;
    for (DeviceNode node : device.nodes) {
        if (node.containerPath.empty()) node.containerPath = node.hostPath;
        nodes.push_back(std::move(node));
    }
    return nodes;
}

ContainerGrant grantFor(const Configuration& configuration, const std::vector<GrantedDevice>& devices) {
    ContainerGrant grant;
    std::string names;
    std::set<std::string> devicePaths;
    std::set<std::string> mountPaths;
    for (const GrantedDevice& granted : devices) {
        // The first device keeps the plain names; every device has its KEY_<HASH> names.
        for (const auto& [key, value] : deviceEnvironment(configuration, *granted.instance, *granted.device))
            grant.envs.try_emplace(key, value);
        for (DeviceNode& node : containerNodes(*granted.device)) {
            if (devicePaths.insert(node.containerPath).second) grant.devices.push_back(std::move(node));
        }
        for (const Mount& mount : granted.device->mounts) {
            if (mountPaths.insert(mount.containerPath).second) grant.mounts.push_back(mount);
        }
        names += (names.empty() ? "" : ",") + *granted.instance;
    }
    grant.envs["DEVLET_INSTANCES"] = names;
    return grant;
}

}  // namespace devlet
