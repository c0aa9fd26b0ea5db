#include "runtime/file_watch.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include <sys/inotify.h>
#include <unistd.h>

#include "runtime/log.h"

namespace devlet {

namespace {
constexpr Log log{"watch"};

// The nearest existing ancestor of a missing path, or "/" at worst.
std::string existingAncestor(const std::string& path) {
    std::filesystem::path p(path);
    std::error_code ec;
    while (p.has_parent_path() && p != p.root_path()) {
        p = p.parent_path();
        if (std::filesystem::is_directory(p, ec)) return p.string();
    }
    return "/";
}
}  // namespace

FileWatch::FileWatch(boost::asio::io_context& loop) : fd_(loop) {
    const int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) {
        log.error() << "inotify unavailable: " << std::strerror(errno) << "; changes are seen only on SIGHUP";
        return;
    }
    fd_.assign(fd);
    readEvents();
}

FileWatch::~FileWatch() {
    boost::system::error_code ignored;
    fd_.close(ignored);
}

int FileWatch::watchDirectory(const std::string& dir, std::uint32_t mask, Callback callback) {
    loopThread_.check();
    const int handle = nextHandle_++;
    Watch& watch = watches_[handle];
    watch.dir = dir;
    watch.mask = mask;
    watch.callback = std::move(callback);
    arm(watch);
    return handle;
}

void FileWatch::remove(int handle) {
    loopThread_.check();
    auto it = watches_.find(handle);
    if (it == watches_.end()) return;
    const int wd = it->second.wd;
    watches_.erase(it);
    if (wd < 0 || !fd_.is_open()) return;
    // Several handles may share one kernel watch (same directory); keep it while one is left.
    for (const auto& [h, w] : watches_) {
        if (w.wd == wd) return;
    }
    inotify_rm_watch(fd_.native_handle(), wd);
}

void FileWatch::arm(Watch& watch) {
    if (!fd_.is_open()) return;
    const int wd = inotify_add_watch(fd_.native_handle(), watch.dir.c_str(),
                                     watch.mask | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_MASK_ADD);
    if (wd >= 0) {
        watch.wd = wd;
        watch.waiting = false;
        return;
    }
    const std::string ancestor = existingAncestor(watch.dir);
    watch.wd =
        inotify_add_watch(fd_.native_handle(), ancestor.c_str(), IN_CREATE | IN_MOVED_TO | IN_MASK_ADD);
    watch.waiting = true;
    log.debug() << watch.dir << " does not exist yet; waiting for it in " << ancestor;
}

void FileWatch::readEvents() {
    fd_.async_wait(boost::asio::posix::stream_descriptor::wait_read, [this](boost::system::error_code ec) {
        if (ec) return;
        for (;;) {
            const ssize_t n = ::read(fd_.native_handle(), buffer_, sizeof buffer_);
            if (n <= 0) break;
            // Collect first: callbacks may add or remove watches.
            std::vector<std::tuple<int, std::uint32_t, std::string>> events;
            for (ssize_t off = 0; off < n;) {
                const auto* ev = reinterpret_cast<const inotify_event*>(buffer_ + off);
                events.emplace_back(ev->wd, ev->mask, ev->len ? std::string(ev->name) : std::string());
                off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
            }
            for (const auto& [wd, mask, name] : events) {
                if (mask & IN_Q_OVERFLOW) {
                    overflowed();
                } else {
                    dispatch(wd, mask, name);
                }
            }
        }
        readEvents();
    });
}

void FileWatch::overflowed() {
    log.warning() << "inotify's queue overflowed and events were lost; looking at " << watches_.size()
                  << " watched director" << (watches_.size() == 1 ? "y" : "ies") << " afresh";
    std::vector<int> handles;
    handles.reserve(watches_.size());
    for (const auto& [handle, watch] : watches_) handles.push_back(handle);
    for (const int handle : handles) {
        auto it = watches_.find(handle);
        if (it == watches_.end()) continue;  // removed by an earlier callback
        Watch& watch = it->second;
        // The lost events may have removed or replaced a directory, or created a missing one:
        // the same directory keeps its watch (IN_MASK_ADD), another gets a new one.
        const bool wasWaiting = watch.waiting;
        arm(watch);
        if (wasWaiting && watch.waiting) continue;
        watch.callback("", wasWaiting ? IN_CREATE : IN_Q_OVERFLOW);
    }
}

void FileWatch::dispatch(int wd, std::uint32_t mask, const std::string& name) {
    if (wd < 0) return;
    std::vector<int> handles;
    for (const auto& [handle, watch] : watches_) {
        if (watch.wd == wd) handles.push_back(handle);
    }
    for (const int handle : handles) {
        auto it = watches_.find(handle);
        if (it == watches_.end()) continue;
        Watch& watch = it->second;
        if (watch.waiting) {
            // Something appeared on the way to the directory: try again from there.
            arm(watch);
            if (!watch.waiting) watch.callback("", IN_CREATE);
            continue;
        }
        if (mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
            watch.wd = -1;
            arm(watch);
            watch.callback("", IN_DELETE_SELF);
            continue;
        }
        if (mask & watch.mask) watch.callback(name, mask);
    }
}

}  // namespace devlet
