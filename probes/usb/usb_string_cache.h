#pragma once
// The answers of libusb string descriptor reads, per USB device, and the devices held back
// from snapshots while their read is in flight. With `stableIdentity: usb` a serial that
// arrived after the device was offered would rename its instance, so a device is offered
// only once its read has finished (or failed, or run out of time: then with what sysfs
// has), and its instance name is decided once. Pure: no libusb, no clock of its own; lives
// on the loop thread.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "probes/usb/udev_rule.h"

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

// The sysfs attribute names whose strings libusb can read again.
inline const std::set<std::string>& usbStringNames() {
    static const std::set<std::string> kNames = {"manufacturer", "product", "serial"};
    return kNames;
}

// One read of a USB device's string descriptors.
struct UsbStringRequest {
    std::string devpath;  // the USB device's (the one with idVendor and idProduct)
    int busnum = 0;       // /dev/bus/usb/<busnum>/<devnum>
    int devnum = 0;
    std::set<std::string> names;  // those sysfs lacks
    std::uint64_t ticket = 0;     // set by UsbStringCache; answers name it

    // Identifies the device: a re-enumerated device (new device number) is read again.
    std::string key() const { return devpath + " " + std::to_string(busnum) + ":" + std::to_string(devnum); }
};

// The read the USB device at or above `observation` needs: nullopt when there is no USB
// device there, sysfs has every string its device descriptor names (all three when the
// descriptor is unknown), or its bus or device number is unknown.
std::optional<UsbStringRequest> usbStringsWanted(const UdevObservation& observation);

// Gives the USB device at or above `observation` the strings libusb read (the classifier
// uses them where sysfs has none). Does nothing when there is no USB device there.
void addUsbStrings(UdevObservation& observation, const std::map<std::string, std::string>& strings);

class UsbStringCache {
public:
    using Clock = std::chrono::steady_clock;

    // A read that has not answered within `holdLimit` is given up: its device is offered
    // with what sysfs has, and the late answer is dropped.
    explicit UsbStringCache(std::chrono::milliseconds holdLimit) : holdLimit_(holdLimit) {}

    struct Resolution {
        bool held = false;                        // leave the observation out of the snapshot
        std::optional<UsbStringRequest> request;  // a read to start now (the first time)
    };
    // Copies a finished read's strings into the observation's USB device; otherwise says
    // that the observation waits, and the first time hands out the read to start.
    Resolution resolve(UdevObservation& observation, Clock::time_point now);

    // A read answered. True when a device waited for it (a snapshot is due); false for an
    // answer nobody waits for any more (the device went, or the read ran out of time).
    bool complete(std::uint64_t ticket, UsbStrings strings);
    // Gives up on reads older than the hold limit. True when any device was released.
    bool expire(Clock::time_point now);
    // When the oldest read in flight runs out of time; nullopt when none is in flight.
    std::optional<Clock::time_point> nextExpiry() const;

    // Drops the devices at and below `devpath` (a remove event); their reads' answers are
    // dropped when they come.
    void forgetBelow(const std::string& devpath);
    // Keeps only the devices whose key is in `keys` (after a full scan).
    void retain(const std::set<std::string>& keys);

    std::size_t inFlight() const;

private:
    struct Entry {
        std::uint64_t ticket = 0;
        bool done = false;
        Clock::time_point deadline{};                // while in flight
        std::map<std::string, std::string> strings;  // once done
    };

    std::chrono::milliseconds holdLimit_;
    std::uint64_t nextTicket_ = 1;
    std::map<std::string, Entry> entries_;  // by UsbStringRequest::key()
};

}  // namespace devlet::usb
