#include "probes/udev/udev_handles.h"

#include <libudev.h>

namespace devlet::udev {

void UdevDeleter::operator()(::udev* handle) const {
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

}  // namespace devlet::udev
