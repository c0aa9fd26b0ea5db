#pragma once
// The udev handler's OS adapter, the only code that calls libudev: reads devices, their
// parents and udev database entries into plain UdevObservations, and watches the udev
// netlink monitor on the event loop. Lives on the loop thread.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "probes/usb/udev_rule.h"

struct udev;
struct udev_device;
struct udev_enumerate;
struct udev_monitor;

namespace devlet::usb {

struct UdevDeleter {
    void operator()(udev* handle) const;
    void operator()(udev_device* handle) const;
    void operator()(udev_enumerate* handle) const;
    void operator()(udev_monitor* handle) const;
};

using UdevHandle = std::unique_ptr<udev, UdevDeleter>;
using UdevDeviceHandle = std::unique_ptr<udev_device, UdevDeleter>;
using UdevEnumerateHandle = std::unique_ptr<udev_enumerate, UdevDeleter>;
using UdevMonitorHandle = std::unique_ptr<udev_monitor, UdevDeleter>;

// One uevent as the udev daemon forwarded it.
struct UdevEvent {
    std::string action;  // add, remove, change, bind, unbind, move, ...
    std::string devpath;
    // What the device looks like now; empty for remove (sysfs no longer has it).
    std::optional<UdevObservation> observation;
};

class UdevSource {
public:
    // Called with every batch of events read in one wakeup.
    using EventsCallback = std::function<void(std::vector<UdevEvent>)>;
    // Called once when the monitor breaks; the source stops watching.
    using ErrorCallback = std::function<void(const std::string& message)>;

    explicit UdevSource(boost::asio::io_context& loop);
    ~UdevSource();
    UdevSource(const UdevSource&) = delete;
    UdevSource& operator=(const UdevSource&) = delete;

    // Opens libudev and arms the netlink monitor, so that events that happen during a
    // following enumerate() are queued, not missed; without `withMonitor` only libudev (for
    // enumerate()). Returns an error message, empty on success.
    std::string open(bool withMonitor = true);
    bool isOpen() const { return udev_ != nullptr; }

    // Reads every device sysfs has now. Returns an error message, empty on success.
    std::string enumerate(std::vector<UdevObservation>& observations) const;

    // Waits for uevents without polling; callbacks run on the loop.
    void watch(EventsCallback onEvents, ErrorCallback onError);

    // Cancels the wait and closes the monitor; no callback runs afterwards.
    void close();

private:
    void arm();
    void readEvents();

    UdevHandle udev_;
    UdevMonitorHandle monitor_;
    // A dup of the monitor's socket: asio owns and closes its own descriptor.
    boost::asio::posix::stream_descriptor descriptor_;
    EventsCallback onEvents_;
    ErrorCallback onError_;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace devlet::usb
