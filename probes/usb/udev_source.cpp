#include "probes/usb/udev_source.h"

#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <string_view>
#include <utility>

#include <fcntl.h>
#include <libudev.h>
#include <unistd.h>

#include "runtime/log.h"

namespace devlet::usb {

void UdevDeleter::operator()(udev* handle) const {
    udev_unref(handle);
}
void UdevDeleter::operator()(udev_device* handle) const {
    udev_device_unref(handle);
}
void UdevDeleter::operator()(udev_enumerate* handle) const {
    udev_enumerate_unref(handle);
}
void UdevDeleter::operator()(udev_monitor* handle) const {
    udev_monitor_unref(handle);
}

namespace {
constexpr Log log{"usb"};

// Bursts of hotplug events (a hub with many devices, a storm) must not overflow the socket;
// the kernel caps this without CAP_NET_ADMIN, which is fine.
constexpr int kReceiveBufferBytes = 16 * 1024 * 1024;

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

UdevDevice readDevice(udev_device* device) {
    UdevDevice read;
    read.devpath = text(udev_device_get_devpath(device));
    read.subsystem = text(udev_device_get_subsystem(device));
    read.kernel = text(udev_device_get_sysname(device));
    read.driver = text(udev_device_get_driver(device));
    read.devnode = text(udev_device_get_devnode(device));
    udev_list_entry* entry = nullptr;
    udev_list_entry_foreach(entry, udev_device_get_sysattr_list_entry(device)) {
        const char* name = udev_list_entry_get_name(entry);
        if (!name || skippedAttribute(name)) continue;
        if (const char* value = udev_device_get_sysattr_value(device, name)) read.attributes[name] = value;
    }
    udev_list_entry_foreach(entry, udev_device_get_tags_list_entry(device)) {
        if (const char* tag = udev_list_entry_get_name(entry)) read.tags.insert(tag);
    }
    return read;
}

// `parents` caches the devices above, read once per enumeration: a hub or a PCI bridge is
// the parent of many devices.
UdevObservation readObservation(udev_device* device, std::map<std::string, UdevDevice>* parents) {
    UdevObservation observation;
    observation.device = readDevice(device);
    observation.devnode = std::move(observation.device.devnode);
    observation.device.devnode.clear();
    udev_list_entry* entry = nullptr;
    udev_list_entry_foreach(entry, udev_device_get_properties_list_entry(device)) {
        const char* name = udev_list_entry_get_name(entry);
        if (name) observation.properties[name] = text(udev_list_entry_get_value(entry));
    }
    // udev_device_get_parent returns a reference owned by the child.
    for (udev_device* parent = udev_device_get_parent(device); parent;
         parent = udev_device_get_parent(parent)) {
        const std::string devpath = text(udev_device_get_devpath(parent));
        if (parents) {
            auto it = parents->find(devpath);
            if (it == parents->end()) it = parents->emplace(devpath, readDevice(parent)).first;
            observation.parents.push_back(it->second);
        } else {
            observation.parents.push_back(readDevice(parent));
        }
    }
    return observation;
}
}  // namespace

UdevSource::UdevSource(boost::asio::io_context& loop) : descriptor_(loop) {}

UdevSource::~UdevSource() {
    close();
}

std::string UdevSource::open(bool withMonitor) {
    close();
    alive_ = std::make_shared<bool>(true);
    errno = 0;
    UdevHandle handle(udev_new());
    if (!handle) return systemError("cannot open libudev", errno ? errno : ENOMEM);
    if (withMonitor) {
        UdevMonitorHandle monitor(udev_monitor_new_from_netlink(handle.get(), "udev"));
        if (!monitor) {
            return systemError("cannot open the udev netlink monitor (is systemd-udevd running?)",
                               errno ? errno : EPROTO);
        }
        if (udev_monitor_set_receive_buffer_size(monitor.get(), kReceiveBufferBytes) < 0) {
            log.debug() << "cannot enlarge the udev monitor's receive buffer; keeping the default";
        }
        if (const int error = udev_monitor_enable_receiving(monitor.get()); error < 0) {
            return systemError("cannot receive from the udev netlink monitor", -error);
        }
        const int fd = fcntl(udev_monitor_get_fd(monitor.get()), F_DUPFD_CLOEXEC, 0);
        if (fd < 0) return systemError("cannot watch the udev netlink monitor", errno);
        boost::system::error_code error;
        descriptor_.assign(fd, error);
        if (error) {
            ::close(fd);
            return "cannot watch the udev netlink monitor: " + error.message();
        }
        monitor_ = std::move(monitor);
    }
    udev_ = std::move(handle);
    return {};
}

std::string UdevSource::enumerate(std::vector<UdevObservation>& observations) const {
    observations.clear();
    if (!udev_) return "libudev is not open";
    UdevEnumerateHandle enumeration(udev_enumerate_new(udev_.get()));
    if (!enumeration) return systemError("cannot enumerate udev devices", errno ? errno : ENOMEM);
    if (const int error = udev_enumerate_scan_devices(enumeration.get()); error < 0) {
        return systemError("cannot scan sysfs for devices", -error);
    }
    std::map<std::string, UdevDevice> parents;
    udev_list_entry* entry = nullptr;
    udev_list_entry_foreach(entry, udev_enumerate_get_list_entry(enumeration.get())) {
        const char* syspath = udev_list_entry_get_name(entry);
        if (!syspath) continue;
        // A device removed since the scan is simply gone; its remove event follows.
        UdevDeviceHandle device(udev_device_new_from_syspath(udev_.get(), syspath));
        if (!device) continue;
        observations.push_back(readObservation(device.get(), &parents));
    }
    return {};
}

void UdevSource::watch(EventsCallback onEvents, ErrorCallback onError) {
    onEvents_ = std::move(onEvents);
    onError_ = std::move(onError);
    arm();
}

void UdevSource::close() {
    *alive_ = false;
    boost::system::error_code ignored;
    descriptor_.cancel(ignored);
    descriptor_.close(ignored);
    monitor_.reset();
    udev_.reset();
}

void UdevSource::arm() {
    if (!monitor_) return;
    descriptor_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                           [this, alive = alive_](const boost::system::error_code& error) {
                               if (!*alive || error == boost::asio::error::operation_aborted) return;
                               if (error) {
                                   const std::string message =
                                       "the udev netlink monitor failed: " + error.message();
                                   close();
                                   if (onError_) onError_(message);
                                   return;
                               }
                               readEvents();
                           });
}

void UdevSource::readEvents() {
    std::vector<UdevEvent> events;
    // The socket is non-blocking: NULL means drained (or a message libudev dropped).
    while (UdevDeviceHandle device{udev_monitor_receive_device(monitor_.get())}) {
        UdevEvent event;
        event.action = text(udev_device_get_action(device.get()));
        event.devpath = text(udev_device_get_devpath(device.get()));
        if (event.action != "remove") event.observation = readObservation(device.get(), nullptr);
        log.debug() << event.action << " " << event.devpath;
        events.push_back(std::move(event));
    }
    const std::shared_ptr<bool> alive = alive_;
    if (!events.empty() && onEvents_) onEvents_(std::move(events));
    if (*alive) arm();
}

}  // namespace devlet::usb
