#pragma once
// Encodes a resource's device list as a serialized ListAndWatchResponse, keeping each
// device's encoding between calls: a configuration-level list holds every slot of the
// configuration (thousands), and one allocation changes the health of one of them.
// Lives on the loop thread with the plugin it belongs to.

#include <string>
#include <vector>

#include "runtime/inventory.h"

namespace devlet::plugin {

class DeviceListEncoder {
public:
    // The wire form of ListAndWatchResponse{devices}; entries equal to the previous
    // call's are not encoded again.
    std::string encode(const std::vector<DeviceState>& devices);

private:
    struct Entry {
        DeviceState device;
        std::string bytes;  // field 1 of ListAndWatchResponse: tag, length, Device
    };
    std::vector<Entry> entries_;
};

}  // namespace devlet::plugin
