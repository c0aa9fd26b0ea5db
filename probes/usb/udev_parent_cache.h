#pragma once
// The devices above observed devices (hubs, USB controllers, PCI bridges), read once and
// kept between udev events: reading a plugged device's parents with all their attributes
// is most of what a plug costs, and they rarely change. An event on a device drops it (for
// add, remove and move also everything below it); a full scan starts the cache afresh, so
// an attribute that changed without an event is stale at most until the next rescan.
// Pure; lives on the loop thread.

#include <cstddef>
#include <map>
#include <string>

#include "probes/usb/udev_rule.h"

namespace devlet::usb {

class UdevParentCache {
public:
    // nullptr when the device is not kept.
    const UdevDevice* find(const std::string& devpath) const;
    const UdevDevice& remember(UdevDevice device);
    // What a uevent for `devpath` makes stale.
    void forget(const std::string& action, const std::string& devpath);
    void clear() { devices_.clear(); }
    std::size_t size() const { return devices_.size(); }

private:
    std::map<std::string, UdevDevice> devices_;  // by devpath
};

}  // namespace devlet::usb
