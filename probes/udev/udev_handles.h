#pragma once
// Owning handles for libudev's reference-counted objects, for the probes that read udev
// (probes/usb, probes/gpu). The C types are only declared here; <libudev.h> stays in the
// .cpp files that call libudev.

#include <memory>

struct udev;
struct udev_device;
struct udev_enumerate;
struct udev_monitor;

namespace devlet::udev {

struct UdevDeleter {
    void operator()(::udev* handle) const;
    void operator()(udev_device* handle) const;
    void operator()(udev_enumerate* handle) const;
    void operator()(udev_monitor* handle) const;
};

using UdevHandle = std::unique_ptr<::udev, UdevDeleter>;
using UdevDeviceHandle = std::unique_ptr<udev_device, UdevDeleter>;
using UdevEnumerateHandle = std::unique_ptr<udev_enumerate, UdevDeleter>;
using UdevMonitorHandle = std::unique_ptr<udev_monitor, UdevDeleter>;

}  // namespace devlet::udev
