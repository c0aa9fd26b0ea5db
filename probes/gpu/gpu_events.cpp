#include "probes/gpu/gpu_events.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <libudev.h>
#include <unistd.h>

#include "runtime/log.h"

namespace devlet::gpu {

namespace {
constexpr Log log{"gpu"};

std::string systemError(const std::string& what, int error) {
    return what + ": " + std::strerror(error);
}
}  // namespace

GpuEvents::GpuEvents(boost::asio::io_context& loop) : descriptor_(loop) {}

GpuEvents::~GpuEvents() {
    close();
}

std::string GpuEvents::open() {
    close();
    alive_ = std::make_shared<bool>(true);
    errno = 0;
    udev_.reset(udev_new());
    if (!udev_) return systemError("cannot open libudev", errno ? errno : ENOMEM);
    usb::UdevMonitorHandle monitor(udev_monitor_new_from_netlink(udev_.get(), "udev"));
    if (!monitor) {
        return systemError("cannot open the udev netlink monitor (is systemd-udevd running?)",
                           errno ? errno : EPROTO);
    }
    for (const char* subsystem : {"drm", "pci"}) {
        if (const int error =
                udev_monitor_filter_add_match_subsystem_devtype(monitor.get(), subsystem, nullptr);
            error < 0) {
            return systemError(std::string("cannot filter udev events for ") + subsystem, -error);
        }
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
    monitor_ = std::move(monitor);
    return {};
}

void GpuEvents::watch(ChangedCallback onChanged, ErrorCallback onError) {
    onChanged_ = std::move(onChanged);
    onError_ = std::move(onError);
    arm();
}

void GpuEvents::close() {
    *alive_ = false;
    boost::system::error_code ignored;
    descriptor_.cancel(ignored);
    descriptor_.close(ignored);
    monitor_.reset();
    udev_.reset();
}

void GpuEvents::arm() {
    if (!monitor_) return;
    descriptor_.async_wait(
        boost::asio::posix::stream_descriptor::wait_read,
        [this, alive = alive_](const boost::system::error_code& error) {
            if (!*alive || error == boost::asio::error::operation_aborted) return;
            if (error) {
                const std::string message = "the udev netlink monitor failed: " + error.message();
                close();
                if (onError_) onError_(message);
                return;
            }
            std::size_t count = 0;
            // Non-blocking socket: NULL means drained.
            while (usb::UdevDeviceHandle device{udev_monitor_receive_device(monitor_.get())}) {
                const char* action = udev_device_get_action(device.get());
                const char* devpath = udev_device_get_devpath(device.get());
                log.debug() << (action ? action : "?") << " " << (devpath ? devpath : "?");
                ++count;
            }
            if (count > 0 && onChanged_) onChanged_(count);
            if (*alive) arm();
        });
}

}  // namespace devlet::gpu
