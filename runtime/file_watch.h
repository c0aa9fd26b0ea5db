#pragma once
// inotify on the event loop: calls back with the names that changed in a
// directory. A directory that does not exist yet is waited for by watching its
// nearest existing ancestor, so nothing polls. Lives on the loop thread.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "runtime/thread_bound.h"

namespace devlet {

class FileWatch {
public:
    // name: the entry inside the directory that changed (empty for the directory itself);
    // mask: inotify bits. A directory that appeared later is reported once with name "".
    // When the kernel's queue overflowed (a burst while the loop was busy), events were
    // lost: every watch is called once with name "" and mask IN_Q_OVERFLOW and must look
    // at its directory afresh.
    using Callback = std::function<void(const std::string& name, std::uint32_t mask)>;

    explicit FileWatch(boost::asio::io_context& loop);
    ~FileWatch();
    FileWatch(const FileWatch&) = delete;
    FileWatch& operator=(const FileWatch&) = delete;

    // Watches `dir` for `mask` events; returns a handle for remove(). Never fails:
    // a missing directory is watched for and reported when it appears.
    int watchDirectory(const std::string& dir, std::uint32_t mask, Callback callback);
    void remove(int handle);

private:
    struct Watch {
        std::string dir;
        std::uint32_t mask = 0;
        Callback callback;
        int wd = -1;           // watch on dir itself, or on the ancestor while waiting
        bool waiting = false;  // dir does not exist yet
    };

    void arm(Watch& watch);
    void readEvents();
    void dispatch(int wd, std::uint32_t mask, const std::string& name);
    void overflowed();

    boost::asio::posix::stream_descriptor fd_;
    std::map<int, Watch> watches_;  // by handle
    int nextHandle_ = 1;
    alignas(8) char buffer_[16384]{};
    ThreadBound loopThread_;
};

}  // namespace devlet
