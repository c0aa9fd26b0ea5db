#include "probes/usb/udev_classifier.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace devlet::usb {

namespace {

// The USB device (subsystem usb, devtype usb_device) a node belongs to, as sysfs reads it.
struct UsbDevice {
    std::string devpath;
    std::string portPath;                           // its kernel name: 1-1.2
    std::map<std::string, std::string> attributes;  // trimmed, empty ones left out
};

// A matched device reduced to what Akri keeps: the devpath that names it and its node.
struct Member {
    std::string devpath;
    std::string devnode;  // empty: none on it or any ancestor
    std::optional<UsbDevice> usb;
};

std::string trimmed(std::string_view value) {
    constexpr std::string_view kBlank = " \t\n\r";
    const auto first = value.find_first_not_of(kBlank);
    if (first == std::string_view::npos) return {};
    const auto last = value.find_last_not_of(kBlank);
    return std::string(value.substr(first, last - first + 1));
}

const UdevDevice& deviceAt(const UdevObservation& observation, std::size_t level) {
    return level == 0 ? observation.device : observation.parents[level - 1];
}

std::string devnodeAt(const UdevObservation& observation, std::size_t level) {
    return level == 0 ? observation.devnode : observation.parents[level - 1].devnode;
}

// Only USB devices carry idVendor and idProduct (interfaces and hubs' ports do not).
std::optional<UsbDevice> usbDeviceFrom(const UdevObservation& observation, std::size_t level) {
    for (; level <= observation.parents.size(); ++level) {
        const UdevDevice& device = deviceAt(observation, level);
        if (!device.attributes.contains("idVendor") || !device.attributes.contains("idProduct")) continue;
        UsbDevice usb{device.devpath, device.kernel, {}};
        for (const auto& [name, value] : device.attributes) {
            if (std::string clean = trimmed(value); !clean.empty()) usb.attributes[name] = std::move(clean);
        }
        // sysfs first; libusb's reads only where the kernel's failed.
        for (const auto& [name, value] : device.descriptorStrings) {
            if (std::string clean = trimmed(value); !clean.empty())
                usb.attributes.try_emplace(name, std::move(clean));
        }
        return usb;
    }
    return std::nullopt;
}

// Akri (#788): a device without a node is offered through its nearest ancestor that has one.
Member memberOf(const UdevObservation& observation) {
    for (std::size_t level = 0; level <= observation.parents.size(); ++level) {
        if (std::string devnode = devnodeAt(observation, level); !devnode.empty()) {
            return {deviceAt(observation, level).devpath, std::move(devnode),
                    usbDeviceFrom(observation, level)};
        }
    }
    return {observation.device.devpath, {}, usbDeviceFrom(observation, 0)};
}

// The nearest devpath among `tops` that is `devpath` or one of its ancestors, by whole
// path components: /video1 does not absorb /video10 (Akri compares plain prefixes).
const std::string* enclosingTop(const std::string& devpath,
                                const std::map<std::string, std::vector<Member>>& tops) {
    for (std::size_t end = devpath.find('/', 1);; end = devpath.find('/', end + 1)) {
        const std::string prefix = devpath.substr(0, end);
        if (auto it = tops.find(prefix); it != tops.end()) return &it->first;
        if (end == std::string::npos) return nullptr;
    }
}

std::string usbAttribute(const UsbDevice& usb, const std::string& name) {
    auto it = usb.attributes.find(name);
    return it == usb.attributes.end() ? std::string() : it->second;
}

std::string serialKey(const UsbDevice& usb) {
    const std::string serial = usbAttribute(usb, "serial");
    if (serial.empty()) return {};
    return "usb:" + usbAttribute(usb, "idVendor") + ":" + usbAttribute(usb, "idProduct") + ":" + serial;
}

std::string portKey(const UsbDevice& usb) {
    return "usb:" + usbAttribute(usb, "idVendor") + ":" + usbAttribute(usb, "idProduct") +
           ":port:" + usb.portPath;
}

void addUsbProperties(const UsbDevice& usb, std::map<std::string, std::string>& properties) {
    static const std::pair<const char*, const char*> kAttributes[] = {
        {"USB_VENDOR_ID", "idVendor"}, {"USB_PRODUCT_ID", "idProduct"},
        {"USB_SERIAL", "serial"},      {"USB_MANUFACTURER", "manufacturer"},
        {"USB_PRODUCT", "product"},    {"USB_BUSNUM", "busnum"},
        {"USB_DEVNUM", "devnum"},      {"USB_SPEED", "speed"},
        {"USB_CLASS", "bDeviceClass"},
    };
    for (const auto& [property, attribute] : kAttributes) {
        if (std::string value = usbAttribute(usb, attribute); !value.empty()) properties[property] = value;
    }
    if (!usb.portPath.empty()) properties["USB_PORT_PATH"] = usb.portPath;
}

// `members` sorted by devpath; the first names UDEV_DEVPATH (the top-most when grouped).
Instance instanceOf(std::string id, const std::vector<Member>& members, bool indexed,
                    const UdevDetails& details) {
    Instance instance;
    instance.id = std::move(id);
    instance.shared = false;
    std::size_t index = 0;
    for (const Member& member : members) {
        if (member.devnode.empty()) continue;
        const std::string name = indexed ? "UDEV_DEVNODE_" + std::to_string(index++) : "UDEV_DEVNODE";
        instance.properties[name] = member.devnode;
        instance.nodes.push_back({member.devnode, member.devnode, details.permissions});
    }
    instance.properties["UDEV_DEVPATH"] = members.front().devpath;
    if (members.front().usb) addUsbProperties(*members.front().usb, instance.properties);
    return instance;
}

}  // namespace

std::vector<Instance> classifyUdev(const std::vector<UdevObservation>& seen, const UdevDetails& details) {
    // Keyed by devpath: a device seen twice, or two node-less interfaces offered through
    // one parent, is one member.
    std::map<std::string, Member> members;
    for (const UdevObservation& observation : seen) {
        if (!firstMatchingRule(details.rules, observation)) continue;
        Member member = memberOf(observation);
        const std::string devpath = member.devpath;
        members.try_emplace(devpath, std::move(member));
    }

    // Devpath order is also ancestor-first order, which grouping relies on.
    std::map<std::string, std::vector<Member>> byDevpath;
    std::map<std::string, std::vector<Member>> byUsbDevice;  // key: the USB device's devpath
    for (auto& [devpath, member] : members) {
        if (details.stableIdentity == StableIdentity::Usb && member.usb) {
            byUsbDevice[member.usb->devpath].push_back(std::move(member));
        } else if (const std::string* top =
                       details.groupRecursive ? enclosingTop(devpath, byDevpath) : nullptr) {
            byDevpath[*top].push_back(std::move(member));
        } else {
            byDevpath[devpath].push_back(std::move(member));
        }
    }
    std::vector<Instance> instances;
    instances.reserve(byDevpath.size() + byUsbDevice.size());
    for (const auto& [id, group] : byDevpath) {
        instances.push_back(instanceOf(id, group, details.groupRecursive, details));
    }

    // Two different devices claiming one serial (cheap devices ship a constant one) would
    // share a name: both fall back to their port paths.
    std::map<std::string, int> serialUses;
    for (const auto& [usbDevpath, group] : byUsbDevice) {
        if (std::string key = serialKey(*group.front().usb); !key.empty()) ++serialUses[key];
    }
    for (const auto& [usbDevpath, group] : byUsbDevice) {
        const UsbDevice& usb = *group.front().usb;
        std::string id = serialKey(usb);
        if (id.empty() || serialUses[id] > 1) id = portKey(usb);
        const auto devnodes =
            std::count_if(group.begin(), group.end(), [](const Member& m) { return !m.devnode.empty(); });
        const bool indexed = details.groupRecursive || devnodes > 1;
        instances.push_back(instanceOf(std::move(id), group, indexed, details));
    }

    std::sort(instances.begin(), instances.end(),
              [](const Instance& a, const Instance& b) { return a.id < b.id; });
    return instances;
}

}  // namespace devlet::usb
