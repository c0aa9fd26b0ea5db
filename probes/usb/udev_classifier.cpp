#include "probes/usb/udev_classifier.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
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
    std::string iommuGroup;  // of the device at devpath; empty: none
    // The number of the USB interface the device at devpath sits on (bInterfaceNumber);
    // nullopt: none (the USB device itself, or not USB).
    std::optional<unsigned> usbInterface;
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

// The interface of the nearest USB device at or above `level`: the kernel names USB
// interfaces <port path>:<configuration>.<interface> (1-1.2:1.0), in decimal, and USB
// devices without a colon. nullopt where the nearest is a USB device, or there is none.
std::optional<unsigned> usbInterfaceAt(const UdevObservation& observation, std::size_t level) {
    for (; level <= observation.parents.size(); ++level) {
        const UdevDevice& device = deviceAt(observation, level);
        if (device.subsystem != "usb") continue;
        const std::size_t colon = device.kernel.find(':');
        if (colon == std::string::npos) return std::nullopt;
        const std::size_t dot = device.kernel.find('.', colon);
        if (dot == std::string::npos) return std::nullopt;
        const std::string_view digits = std::string_view(device.kernel).substr(dot + 1);
        if (digits.empty() || digits.size() > 3 ||
            !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
            return std::nullopt;
        return static_cast<unsigned>(std::stoul(std::string(digits)));
    }
    return std::nullopt;
}

// Akri (#788): a device without a node is offered through its nearest ancestor that has one.
Member memberOf(const UdevObservation& observation) {
    for (std::size_t level = 0; level <= observation.parents.size(); ++level) {
        if (std::string devnode = devnodeAt(observation, level); !devnode.empty()) {
            const UdevDevice& device = deviceAt(observation, level);
            return {device.devpath, std::move(devnode), usbDeviceFrom(observation, level), device.iommuGroup,
                    usbInterfaceAt(observation, level)};
        }
    }
    return {observation.device.devpath,
            {},
            usbDeviceFrom(observation, 0),
            observation.device.iommuGroup,
            usbInterfaceAt(observation, 0)};
}

// Under stableIdentity: usb, which of its USB device's instances a member joins: "" for
// the device itself and its interface 0, "if<NN>" (bInterfaceNumber in hex, as udev's
// by-id links write it) for any other interface. The key depends on the device alone,
// never on which other nodes are matched or seen yet, so names cannot change as nodes
// come and go.
std::string usbFunctionKey(const Member& member) {
    if (!member.usbInterface || *member.usbInterface == 0) return {};
    char key[16];
    std::snprintf(key, sizeof key, "if%02x", *member.usbInterface);
    return key;
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

bool isPciAddress(std::string_view text) {
    // domain:bus:slot.function, each part hex and not empty, as Akri checks it.
    const std::size_t first = text.find(':');
    if (first == std::string_view::npos) return false;
    const std::size_t second = text.find(':', first + 1);
    if (second == std::string_view::npos) return false;
    const std::size_t dot = text.find('.', second + 1);
    if (dot == std::string_view::npos) return false;
    auto hex = [](std::string_view part) {
        return !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
            return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        });
    };
    return hex(text.substr(0, first)) && hex(text.substr(first + 1, second - first - 1)) &&
           hex(text.substr(second + 1, dot - second - 1)) && hex(text.substr(dot + 1));
}

std::vector<std::string_view> components(std::string_view devpath) {
    std::vector<std::string_view> parts;
    for (std::size_t start = 0; start <= devpath.size();) {
        std::size_t end = devpath.find('/', start);
        if (end == std::string_view::npos) end = devpath.size();
        parts.push_back(devpath.substr(start, end - start));
        start = end + 1;
    }
    return parts;
}

// Akri's udev discoveryProperties: USB_RESOURCE_<NAME> per usbfs node (suffixed like its
// UDEV_DEVNODE), PCI_RESOURCE_<NAME> for a device below a PCI address and no USB bus, and
// with vfioPassthrough that device's VFIO group and the VFIO container node.
void addResourceProperties(const std::vector<Member>& members, bool indexed, const UdevDetails& details,
                           Instance& instance) {
    if (!details.devicePluginResourceName) return;
    const std::string& resourceName = *details.devicePluginResourceName;
    std::size_t index = 0;
    for (const Member& member : members) {
        if (member.devnode.empty()) continue;
        const std::string suffix = indexed ? "_" + std::to_string(index) : "";
        ++index;
        if (std::optional<std::string> address = usbAddress(member.devnode))
            instance.properties[resourceVariable("USB_RESOURCE", resourceName) + suffix] = *address;
    }
    const Member& top = members.front();
    const auto parts = components(top.devpath);
    if (std::any_of(parts.begin(), parts.end(),
                    [](std::string_view part) { return part.starts_with("usb"); }))
        return;
    const std::optional<std::string> pci = pciAddress(top.devpath);
    if (!pci) return;
    instance.properties[resourceVariable("PCI_RESOURCE", resourceName)] = *pci;
    // A device without an IOMMU group (not bound to vfio-pci, or no IOMMU) gets no VFIO nodes.
    if (!details.vfioPassthrough || top.iommuGroup.empty()) return;
    const std::string group = "/dev/vfio/" + top.iommuGroup;
    instance.nodes.push_back({group, group, "rwm"});
    instance.nodes.push_back({"/dev/vfio/vfio", "/dev/vfio/vfio", "rwm"});
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
    addResourceProperties(members, indexed, details, instance);
    return instance;
}

}  // namespace

std::string resourceVariable(std::string_view prefix, std::string_view resourceName) {
    std::string variable(prefix);
    variable += '_';
    for (char c : resourceName) {
        variable +=
            (c == '.' || c == '/') ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    return variable;
}

std::optional<std::string> usbAddress(std::string_view devnode) {
    constexpr std::string_view kUsbfs = "/dev/bus/usb/";
    if (!devnode.starts_with(kUsbfs)) return std::nullopt;
    const auto parts = components(devnode);
    if (parts.size() < 2) return std::nullopt;
    // Decimal numbers that fit 32 bits, leading zeros dropped: "001" -> "1".
    auto number = [](std::string_view text) -> std::optional<std::string> {
        if (text.empty() || text.size() > 10) return std::nullopt;
        unsigned long long value = 0;
        for (char c : text) {
            if (c < '0' || c > '9') return std::nullopt;
            value = value * 10 + static_cast<unsigned>(c - '0');
        }
        if (value > 0xffffffffULL) return std::nullopt;
        return std::to_string(value);
    };
    auto bus = number(parts[parts.size() - 2]);
    auto device = number(parts.back());
    if (!bus || !device) return std::nullopt;
    return *bus + ":" + *device;
}

std::optional<std::string> pciAddress(std::string_view devpath) {
    std::optional<std::string> last;
    for (std::string_view part : components(devpath)) {
        if (isPciAddress(part)) last = std::string(part);
    }
    return last;
}

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
    // Under stableIdentity: usb: the USB device's devpath, then its function (see
    // usbFunctionKey; one group for the whole device with groupRecursive).
    std::map<std::string, std::map<std::string, std::vector<Member>>> byUsbDevice;
    for (auto& [devpath, member] : members) {
        if (details.stableIdentity == StableIdentity::Usb && member.usb) {
            const std::string function = details.groupRecursive ? std::string() : usbFunctionKey(member);
            byUsbDevice[member.usb->devpath][function].push_back(std::move(member));
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
    for (const auto& [usbDevpath, functions] : byUsbDevice) {
        const UsbDevice& usb = *functions.begin()->second.front().usb;
        if (std::string key = serialKey(usb); !key.empty()) ++serialUses[key];
    }
    for (const auto& [usbDevpath, functions] : byUsbDevice) {
        const UsbDevice& usb = *functions.begin()->second.front().usb;
        std::string device = serialKey(usb);
        if (device.empty() || serialUses[device] > 1) device = portKey(usb);
        for (const auto& [function, group] : functions) {
            const auto devnodes =
                std::count_if(group.begin(), group.end(), [](const Member& m) { return !m.devnode.empty(); });
            const bool indexed = details.groupRecursive || devnodes > 1;
            instances.push_back(
                instanceOf(function.empty() ? device : std::string(device).append(":").append(function),
                           group, indexed, details));
        }
    }

    std::sort(instances.begin(), instances.end(),
              [](const Instance& a, const Instance& b) { return a.id < b.id; });
    return instances;
}

}  // namespace devlet::usb
