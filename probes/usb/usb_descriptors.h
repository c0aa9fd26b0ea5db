#pragma once
// The udev handler's second OS adapter, the only code that calls libusb: reads a USB
// device's string descriptors (manufacturer, product, serial) from the device itself when
// sysfs has none, which happens when the kernel's read at enumeration failed. Every read
// may fail (the device refuses, is gone, or the node cannot be opened); a failed string is
// left out, never an error. Blocking (short USB timeouts): the daemon calls it on
// UsbStringReader's worker thread, `devlet probe usb` on its only thread. Any thread.

#include <set>
#include <string>

#include "probes/usb/usb_string_cache.h"

namespace devlet::usb {

// Reads `wanted` (a subset of usbStringNames()) from the device at
// /dev/bus/usb/<busnum>/<devnum>. Never throws.
UsbStrings readUsbStrings(int busnum, int devnum, const std::set<std::string>& wanted);

}  // namespace devlet::usb
