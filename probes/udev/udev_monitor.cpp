#include "probes/udev/udev_monitor.h"

#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include <fcntl.h>
#include <libudev.h>
#include <unistd.h>

namespace devlet::udev {

namespace {

// Bursts of hotplug events (a hub with many devices, a storm) must not overflow the socket;
// the kernel caps this without CAP_NET_ADMIN, which is fine.
constexpr int kReceiveBufferBytes = 16 * 1024 * 1024;

std::string systemError(std::string_view what, int error) {
    return std::string(what) + ": " + std::strerror(error);
}

const char* orUnknown(const char* text) {
    return text ? text : "?";
}

std::string textOf(const char* text) {
    return text ? text : "";
}

}  // namespace

UdevEventFacts eventFacts(const UdevDeviceHandle& device) {
    return {textOf(udev_device_get_action(device.get())), textOf(udev_device_get_subsystem(device.get())),
            textOf(udev_device_get_devpath(device.get()))};
}

UdevMonitor::UdevMonitor(boost::asio::io_context& loop, const Log& log) : log_(log), descriptor_(loop) {}

UdevMonitor::~UdevMonitor() {
    loopThread_.release();
    close();
}

std::string UdevMonitor::open(const std::vector<std::string>& subsystems) {
    loopThread_.check();
    close();
    lifetime_.renew();
    errno = 0;
    UdevHandle context(udev_new());
    if (!context) return systemError("cannot open libudev", errno ? errno : ENOMEM);
    UdevMonitorHandle monitor(udev_monitor_new_from_netlink(context.get(), "udev"));
    if (!monitor) {
        return systemError("cannot open the udev netlink monitor (is systemd-udevd running?)",
                           errno ? errno : EPROTO);
    }
    for (const std::string& subsystem : subsystems) {
        if (const int error =
                udev_monitor_filter_add_match_subsystem_devtype(monitor.get(), subsystem.c_str(), nullptr);
            error < 0) {
            return systemError("cannot filter udev events for " + subsystem, -error);
        }
    }
    if (udev_monitor_set_receive_buffer_size(monitor.get(), kReceiveBufferBytes) < 0) {
        log_.debug() << "cannot enlarge the udev monitor's receive buffer; keeping the default";
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
    udev_ = std::move(context);
    monitor_ = std::move(monitor);
    return {};
}

void UdevMonitor::watch(DevicesCallback onDevices, ErrorCallback onError) {
    loopThread_.check();
    onDevices_ = std::move(onDevices);
    onError_ = std::move(onError);
    arm();
}

void UdevMonitor::close() {
    loopThread_.check();
    lifetime_.end();
    boost::system::error_code ignored;
    descriptor_.cancel(ignored);
    descriptor_.close(ignored);
    monitor_.reset();
    udev_.reset();
}

void UdevMonitor::arm() {
    if (!monitor_) return;
    descriptor_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                           lifetime_.guard([this](const boost::system::error_code& error) {
                               loopThread_.check();
                               if (error == boost::asio::error::operation_aborted) return;
                               if (error) {
                                   const std::string message =
                                       "the udev netlink monitor failed: " + error.message();
                                   close();
                                   if (onError_) onError_(message);
                                   return;
                               }
                               read();
                           }));
}

void UdevMonitor::read() {
    std::vector<UdevDeviceHandle> devices;
    // The socket is non-blocking: NULL means drained (or a message libudev dropped).
    while (UdevDeviceHandle device{udev_monitor_receive_device(monitor_.get())}) {
        log_.debug() << orUnknown(udev_device_get_action(device.get())) << " "
                     << orUnknown(udev_device_get_devpath(device.get()));
        devices.push_back(std::move(device));
    }
    // The callback may close (or destroy) this monitor.
    const Lifetime::Token token = lifetime_.token();
    if (!devices.empty() && onDevices_) onDevices_(std::move(devices));
    if (!token.expired()) arm();
}

}  // namespace devlet::udev
