#pragma once
// The udev handler's OS adapter, the only code of probes/usb that calls libudev: reads
// devices, their parents and udev database entries into plain UdevObservations, and turns
// the events of the shared udev monitor (probes/udev) into them. Lives on the loop thread.

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "probes/udev/udev_handles.h"
#include "probes/udev/udev_monitor.h"
#include "probes/usb/udev_parent_cache.h"
#include "probes/usb/udev_rule.h"
#include "runtime/thread_bound.h"

struct udev_device;

namespace devlet::usb {

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

    // With `rules` (borrowed, outliving the source) a device's attributes are read only as
    // the rules need them, parents get only the attributes rules and the classifier name,
    // and the monitor receives only the subsystems the rules name (plus usb). Without, it
    // reads everything sysfs has (for `devlet probe usb`).
    explicit UdevSource(boost::asio::io_context& loop, const std::vector<UdevRule>* rules = nullptr);
    ~UdevSource();
    UdevSource(const UdevSource&) = delete;
    UdevSource& operator=(const UdevSource&) = delete;

    // Opens libudev and arms the netlink monitor, so that events that happen during a
    // following enumerate() are queued, not missed; without `withMonitor` only libudev (for
    // enumerate()). Returns an error message, empty on success.
    std::string open(bool withMonitor = true);
    bool isOpen() const {
        loopThread_.check();
        return udev_ != nullptr;
    }

    // Reads every device sysfs has now (and every parent afresh). Returns an error message,
    // empty on success.
    std::string enumerate(std::vector<UdevObservation>& observations);

    // Waits for uevents without polling; callbacks run on the loop.
    void watch(EventsCallback onEvents, ErrorCallback onError);

    // Cancels the wait and closes the monitor; no callback runs afterwards.
    void close();

private:
    UdevObservation readObservation(udev_device* device) REQUIRES(loopThread_);

    const std::vector<UdevRule>* rules_;
    std::set<std::string> parentAttributeNames_;     // ATTRS{} names and the classifier's USB ones
    std::set<std::string> propertyNames_;            // ENV{} names
    udev::UdevHandle udev_ GUARDED_BY(loopThread_);  // for enumerate(); the monitor holds its own
    // Parents read by the last scan or since, for the devices events bring.
    UdevParentCache parents_ GUARDED_BY(loopThread_);
    udev::UdevMonitor monitor_ GUARDED_BY(loopThread_);
    ThreadBound loopThread_;
};

}  // namespace devlet::usb
