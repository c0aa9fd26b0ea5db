#pragma once
// The gpu handler's hotplug source: the udev netlink monitor filtered to the `drm` and
// `pci` subsystems (a card appears or goes, a driver binds or unbinds, VFs are created or
// destroyed). Only says that something changed; the probe re-reads sysfs. Lives on the
// loop thread; no polling.

#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "probes/usb/udev_source.h"

namespace devlet::gpu {

class GpuEvents {
public:
    // Called once per wakeup that read at least one event, with the number read.
    using ChangedCallback = std::function<void(std::size_t events)>;
    using ErrorCallback = std::function<void(const std::string& message)>;

    explicit GpuEvents(boost::asio::io_context& loop);
    ~GpuEvents();
    GpuEvents(const GpuEvents&) = delete;
    GpuEvents& operator=(const GpuEvents&) = delete;

    // Arms the monitor, so that events during a following scan queue up. Returns an error
    // message, empty on success.
    std::string open();
    bool isOpen() const { return monitor_ != nullptr; }
    void watch(ChangedCallback onChanged, ErrorCallback onError);
    // Cancels the wait; no callback runs afterwards.
    void close();

private:
    void arm();

    usb::UdevHandle udev_;
    usb::UdevMonitorHandle monitor_;
    boost::asio::posix::stream_descriptor descriptor_;  // a dup of the monitor's socket
    ChangedCallback onChanged_;
    ErrorCallback onError_;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace devlet::gpu
