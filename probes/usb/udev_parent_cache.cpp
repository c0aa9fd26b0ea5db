#include "probes/usb/udev_parent_cache.h"

#include <iterator>
#include <utility>

namespace devlet::usb {

const UdevDevice* UdevParentCache::find(const std::string& devpath) const {
    auto it = devices_.find(devpath);
    return it == devices_.end() ? nullptr : &it->second;
}

const UdevDevice& UdevParentCache::remember(UdevDevice device) {
    std::string devpath = device.devpath;
    return devices_.insert_or_assign(std::move(devpath), std::move(device)).first->second;
}

void UdevParentCache::forget(const std::string& action, const std::string& devpath) {
    devices_.erase(devpath);
    // A device that went or came (or was renamed) takes what was below it along: a hub
    // plugged into the same port again is another hub.
    if (action != "add" && action != "remove" && action != "move") return;
    const std::string below = devpath + "/";
    for (auto it = devices_.lower_bound(below); it != devices_.end() && it->first.starts_with(below);) {
        it = devices_.erase(it);
    }
}

}  // namespace devlet::usb
