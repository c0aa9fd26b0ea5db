#include "probes/usb/udev_source.h"

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include <libudev.h>
#include <unistd.h>

#include "runtime/log.h"

namespace devlet::usb {

namespace {
constexpr Log log{"usb"};

std::string text(const char* value) {
    return value ? std::string(value) : std::string();
}

std::string systemError(std::string_view what, int error) {
    return std::string(what) + ": " + std::strerror(error);
}

// Attributes no rule matches on: binary (USB descriptors, PCI config space, option ROMs),
// large, write-only triggers, or the uevent file the device fields already reflect. Reading
// some of them also wakes or resets hardware.
bool skippedAttribute(std::string_view name) {
    static const std::set<std::string_view> kSkipped = {
        "bind",   "config", "descriptors", "edid",   "new_id", "remove", "remove_id",
        "rescan", "reset",  "rom",         "uevent", "unbind", "vpd",
    };
    return kSkipped.contains(name) || name.starts_with("resource");
}

// Which strings a USB device's device descriptor (the first 18 bytes of sysfs's binary
// `descriptors`) names. The kernel leaves `serial` out of sysfs both when the device has
// none and when reading it failed; only the second is worth asking the device again.
std::optional<std::set<std::string>> namedStrings(udev_device* device) {
    const char* syspath = udev_device_get_syspath(device);
    if (!syspath) return std::nullopt;
    std::ifstream in(std::string(syspath) + "/descriptors", std::ios::binary);
    char descriptor[18];
    if (!in.read(descriptor, sizeof descriptor)) return std::nullopt;
    // bLength, bDescriptorType DEVICE; iManufacturer, iProduct, iSerialNumber at 14..16.
    if (static_cast<unsigned char>(descriptor[0]) < sizeof descriptor || descriptor[1] != 1)
        return std::nullopt;
    std::set<std::string> named;
    if (descriptor[14] != 0) named.insert("manufacturer");
    if (descriptor[15] != 0) named.insert("product");
    if (descriptor[16] != 0) named.insert("serial");
    return named;
}

// The group a PCI device's IOMMU puts it in: /sys/kernel/iommu_groups/<group>, linked from
// the device as `iommu_group`. Only PCI devices are read: Akri passes VFIO groups through
// for PCI devices only, and a readlink per device would cost every other one a syscall.
std::string iommuGroup(udev_device* device) {
    const char* subsystem = udev_device_get_subsystem(device);
    const char* syspath = udev_device_get_syspath(device);
    if (!subsystem || !syspath || std::string_view(subsystem) != "pci") return {};
    char target[PATH_MAX];
    const std::string link = std::string(syspath) + "/iommu_group";
    const ssize_t length = ::readlink(link.c_str(), target, sizeof target - 1);
    if (length <= 0) return {};  // no IOMMU, or the IOMMU is off
    const std::string_view path(target, static_cast<std::size_t>(length));
    const std::size_t slash = path.rfind('/');
    return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// What the classifier reads of a USB device (the one with idVendor and idProduct) for its
// instance's properties and libusb's string reads, whatever the rules name.
const std::set<std::string>& usbAttributeNames() {
    static const std::set<std::string> kNames = {"idVendor", "idProduct", "serial", "manufacturer", "product",
                                                 "busnum",   "devnum",    "speed",  "bDeviceClass"};
    return kNames;
}

void readAttribute(udev_device* device, const std::string& name, UdevDevice& into) {
    if (skippedAttribute(name)) return;
    if (const char* value = udev_device_get_sysattr_value(device, name.c_str()))
        into.attributes[name] = value;
}

// `names`: the attributes to read; nullptr for every one sysfs lists (`devlet probe usb`
// shows them all).
UdevDevice readDevice(udev_device* device, const std::set<std::string>* names) {
    UdevDevice read;
    read.devpath = text(udev_device_get_devpath(device));
    read.subsystem = text(udev_device_get_subsystem(device));
    read.kernel = text(udev_device_get_sysname(device));
    read.driver = text(udev_device_get_driver(device));
    read.devnode = text(udev_device_get_devnode(device));
    read.iommuGroup = iommuGroup(device);
    udev_list_entry* entry = nullptr;
    if (names) {
        for (const std::string& name : *names) readAttribute(device, name, read);
    } else {
        udev_list_entry_foreach(entry, udev_device_get_sysattr_list_entry(device)) {
            const char* name = udev_list_entry_get_name(entry);
            if (!name || skippedAttribute(name)) continue;
            if (const char* value = udev_device_get_sysattr_value(device, name))
                read.attributes[name] = value;
        }
    }
    udev_list_entry_foreach(entry, udev_device_get_tags_list_entry(device)) {
        if (const char* tag = udev_list_entry_get_name(entry)) read.tags.insert(tag);
    }
    if (read.attributes.contains("idVendor") && read.attributes.contains("idProduct")) {
        read.namedStrings = namedStrings(device);
    }
    return read;
}

// Reads the device's own attributes filter by filter, in rule order, while the filters
// before hold: a device the first filters rule out costs no further sysfs read. Parents
// come with every attribute a rule's ATTRS names (read once, then cached).
void readAttributesForRules(udev_device* device, const std::vector<UdevRule>& rules,
                            UdevObservation& observation) {
    std::set<std::string> tried;
    for (const UdevRule& rule : rules) {
        const std::vector<UdevFilter>& filters = rule.filters();
        bool holds = true;
        for (std::size_t i = 0; i < filters.size() && holds; ++i) {
            const UdevFilter& filter = filters[i];
            if ((filter.key == UdevKey::Attr || filter.key == UdevKey::Attrs) &&
                tried.insert(filter.name).second)
                readAttribute(device, filter.name, observation.device);
            holds = rule.prefixMatches(observation, i + 1);
        }
        if (!holds) continue;
        // Matched: the classifier wants the USB device's attributes if it is one.
        for (const std::string& name : usbAttributeNames()) {
            if (tried.insert(name).second) readAttribute(device, name, observation.device);
        }
        if (observation.device.attributes.contains("idVendor") &&
            observation.device.attributes.contains("idProduct")) {
            observation.device.namedStrings = namedStrings(device);
        }
        return;
    }
}
}  // namespace

// The devices above come from `parents` when it has them: a hub or a PCI bridge is the
// parent of many devices, and the parent of every device plugged in below it.
UdevObservation UdevSource::readObservation(udev_device* device) {
    UdevObservation observation;
    const bool lazy = rules_ != nullptr;
    static const std::set<std::string> kNone;
    observation.device = readDevice(device, lazy ? &kNone : nullptr);
    observation.devnode = std::move(observation.device.devnode);
    observation.device.devnode.clear();
    udev_list_entry* entry = nullptr;
    udev_list_entry_foreach(entry, udev_device_get_properties_list_entry(device)) {
        const char* name = udev_list_entry_get_name(entry);
        if (name && (!lazy || propertyNames_.contains(name)))
            observation.properties[name] = text(udev_list_entry_get_value(entry));
    }
    // udev_device_get_parent returns a reference owned by the child.
    for (udev_device* parent = udev_device_get_parent(device); parent;
         parent = udev_device_get_parent(parent)) {
        const UdevDevice* known = parents_.find(text(udev_device_get_devpath(parent)));
        observation.parents.push_back(
            known ? *known : parents_.remember(readDevice(parent, lazy ? &parentAttributeNames_ : nullptr)));
    }
    if (lazy) readAttributesForRules(device, *rules_, observation);
    return observation;
}

UdevSource::UdevSource(boost::asio::io_context& loop, const std::vector<UdevRule>* rules)
    : rules_(rules), monitor_(loop, log) {
    if (!rules_) return;
    parentAttributeNames_ = usbAttributeNames();
    for (const UdevRule& rule : *rules_) {
        for (const UdevFilter& filter : rule.filters()) {
            if (filter.key == UdevKey::Attrs) parentAttributeNames_.insert(filter.name);
            if (filter.key == UdevKey::Env) propertyNames_.insert(filter.name);
        }
    }
}

UdevSource::~UdevSource() {
    loopThread_.release();
    close();
}

std::string UdevSource::open(bool withMonitor) {
    loopThread_.check();
    close();
    errno = 0;
    udev::UdevHandle handle(udev_new());
    if (!handle) return systemError("cannot open libudev", errno ? errno : ENOMEM);
    if (withMonitor) {
        std::vector<std::string> subsystems;
        if (rules_) {
            if (const auto named = ruleSubsystems(*rules_)) {
                // The parents' cache follows the USB devices' own add and remove events: a
                // device plugged into the same port again is another device.
                subsystems.assign(named->begin(), named->end());
                if (!named->contains("usb")) subsystems.push_back("usb");
            } else {
                log.debug() << "a rule in udevRules names no SUBSYSTEM==\"...\" without wildcards: the udev "
                               "monitor cannot be filtered and receives every uevent";
            }
        }
        if (std::string error = monitor_.open(subsystems); !error.empty()) return error;
    }
    udev_ = std::move(handle);
    return {};
}

std::string UdevSource::enumerate(std::vector<UdevObservation>& observations) {
    loopThread_.check();
    observations.clear();
    if (!udev_) return "libudev is not open";
    udev::UdevEnumerateHandle enumeration(udev_enumerate_new(udev_.get()));
    if (!enumeration) return systemError("cannot enumerate udev devices", errno ? errno : ENOMEM);
    if (const int error = udev_enumerate_scan_devices(enumeration.get()); error < 0) {
        return systemError("cannot scan sysfs for devices", -error);
    }
    // Everything is read again: parents that changed without an event are current again.
    parents_.clear();
    udev_list_entry* entry = nullptr;
    udev_list_entry_foreach(entry, udev_enumerate_get_list_entry(enumeration.get())) {
        const char* syspath = udev_list_entry_get_name(entry);
        if (!syspath) continue;
        // A device removed since the scan is simply gone; its remove event follows.
        udev::UdevDeviceHandle device(udev_device_new_from_syspath(udev_.get(), syspath));
        if (!device) continue;
        observations.push_back(readObservation(device.get()));
    }
    return {};
}

void UdevSource::watch(EventsCallback onEvents, ErrorCallback onError) {
    loopThread_.check();
    monitor_.watch(
        [this, onEvents = std::move(onEvents)](const std::vector<udev::UdevDeviceHandle>& devices) {
            loopThread_.check();
            std::vector<UdevEvent> events;
            events.reserve(devices.size());
            for (const udev::UdevDeviceHandle& device : devices) {
                UdevEvent event;
                event.action = text(udev_device_get_action(device.get()));
                event.devpath = text(udev_device_get_devpath(device.get()));
                parents_.forget(event.action, event.devpath);
                if (event.action != "remove") event.observation = readObservation(device.get());
                events.push_back(std::move(event));
            }
            onEvents(std::move(events));
        },
        // The whole source closes with its monitor, so that the next open() arms a new one.
        [this, onError = std::move(onError)](const std::string& message) {
            loopThread_.check();
            udev_.reset();
            onError(message);
        });
}

void UdevSource::close() {
    loopThread_.check();
    monitor_.close();
    udev_.reset();
    parents_.clear();
}

}  // namespace devlet::usb
