#pragma once
// The udev netlink monitor on the event loop, for every probe that follows hotplug
// (probes/usb, probes/gpu): opened before a probe's first scan so that events during the
// scan queue up, optionally filtered to some subsystems, with a receive buffer large
// enough for bursts; its socket is waited on without polling and each wakeup's devices go
// to one callback. Lives on the loop thread.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "probes/udev/udev_handles.h"
#include "runtime/lifetime.h"
#include "runtime/log.h"
#include "runtime/thread_bound.h"

namespace devlet::udev {

// What one event names, as plain values, for a probe that only needs to know which devices
// an event concerns (the gpu handler re-reads those).
struct UdevEventFacts {
    std::string action;     // add, remove, change, bind, unbind, move, ...; empty if unknown
    std::string subsystem;  // drm, pci, ...
    std::string devpath;    // without /sys
};
UdevEventFacts eventFacts(const UdevDeviceHandle& device);

class UdevMonitor {
public:
    // Every device read in one wakeup, in the order udev sent them (never empty).
    using DevicesCallback = std::function<void(std::vector<UdevDeviceHandle> devices)>;
    // Called once when the monitor breaks; it is closed by then.
    using ErrorCallback = std::function<void(const std::string& message)>;

    // `log` is the owning probe's category; each event is logged there at debug level.
    UdevMonitor(boost::asio::io_context& loop, const Log& log);
    ~UdevMonitor();
    UdevMonitor(const UdevMonitor&) = delete;
    UdevMonitor& operator=(const UdevMonitor&) = delete;

    // Starts receiving the udev daemon's events (only those of `subsystems` when any are
    // given); they queue on the socket until watch(). Returns an error message, empty on
    // success.
    std::string open(const std::vector<std::string>& subsystems = {});
    bool isOpen() const {
        loopThread_.check();
        return monitor_ != nullptr;
    }

    // Waits for events; the callbacks run on the loop.
    void watch(DevicesCallback onDevices, ErrorCallback onError);

    // Cancels the wait and closes the monitor; no callback runs afterwards.
    void close();

private:
    void arm() REQUIRES(loopThread_);
    void read() REQUIRES(loopThread_);

    Log log_;
    UdevHandle udev_ GUARDED_BY(loopThread_);
    UdevMonitorHandle monitor_ GUARDED_BY(loopThread_);
    // A dup of the monitor's socket: asio owns and closes its own descriptor.
    boost::asio::posix::stream_descriptor descriptor_ GUARDED_BY(loopThread_);
    DevicesCallback onDevices_ GUARDED_BY(loopThread_);
    ErrorCallback onError_ GUARDED_BY(loopThread_);
    Lifetime lifetime_ GUARDED_BY(loopThread_);  // renewed by open(), ended by close()
    ThreadBound loopThread_;
};

}  // namespace devlet::udev
