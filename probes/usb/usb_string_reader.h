#pragma once
// Reads USB string descriptors off the event loop: a libusb read blocks for up to 200 ms
// per transfer on a device that does not answer, which would stall every other probe and
// plugin on the loop. One worker thread, started by the first read, runs the reads in
// order and posts each answer back to the loop. Owned by one udev probe on the loop
// thread; stop() (or destruction) joins the worker.

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include <boost/asio/io_context.hpp>

#include "probes/usb/usb_string_cache.h"

namespace devlet::usb {

class UsbStringReader {
public:
    // Runs on the worker thread; readUsbStrings() unless a test gives another.
    using ReadFunction = std::function<UsbStrings(const UsbStringRequest&)>;
    // Runs on the loop thread with the request and what was read.
    using AnswerCallback = std::function<void(const UsbStringRequest& request, UsbStrings strings)>;

    UsbStringReader(boost::asio::io_context& loop, AnswerCallback onAnswer, ReadFunction read = {});
    ~UsbStringReader();
    UsbStringReader(const UsbStringReader&) = delete;
    UsbStringReader& operator=(const UsbStringReader&) = delete;

    // Queues a read; its answer is posted to the loop when it is done.
    void read(UsbStringRequest request);

    // Drops the queued reads and waits for the one in flight (bounded by libusb's transfer
    // timeouts); no answer callback runs afterwards. read() starts the worker again.
    void stop();

private:
    void work(std::shared_ptr<bool> alive);

    boost::asio::io_context& loop_;
    AnswerCallback onAnswer_;
    ReadFunction read_;
    // False once stop() ran; read and written on the loop thread only (answers check it there).
    std::shared_ptr<bool> alive_;

    std::mutex mutex_;  // guards queue_ and stopping_, shared with the worker
    std::condition_variable wake_;
    std::deque<UsbStringRequest> queue_;
    bool stopping_ = false;
    std::thread worker_;
};

}  // namespace devlet::usb
