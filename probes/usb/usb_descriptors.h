#pragma once
// The udev handler's second OS adapter, the only code that calls libusb: reads a USB
// device's string descriptors (manufacturer, product, serial) from the device itself when
// sysfs has none, which happens when the kernel's read at enumeration failed. Every read
// may fail (the device refuses, is gone, or the node cannot be opened); a failed string is
// left out, never an error. Blocking (short USB timeouts); lives on the loop thread.

#include <map>
#include <set>
#include <string>
#include <vector>

namespace devlet::usb {

// What libusb read from one device.
struct UsbStrings {
    bool found = false;               // libusb lists a device with this bus and device number
    std::string vendorId, productId;  // from its device descriptor, "04a9"
    // The strings read, by sysfs attribute name: "manufacturer", "product", "serial".
    std::map<std::string, std::string> strings;
    // Why the others are missing ("serial: the device has none", "product: I/O error").
    std::vector<std::string> problems;
};

// The sysfs attribute names readUsbStrings() knows.
inline const std::set<std::string>& usbStringNames() {
    static const std::set<std::string> kNames = {"manufacturer", "product", "serial"};
    return kNames;
}

// Reads `wanted` (a subset of usbStringNames()) from the device at
// /dev/bus/usb/<busnum>/<devnum>. Never throws.
UsbStrings readUsbStrings(int busnum, int devnum, const std::set<std::string>& wanted);

}  // namespace devlet::usb
