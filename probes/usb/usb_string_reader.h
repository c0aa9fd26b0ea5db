#pragma once
// Reads USB string descriptors off the event loop: a libusb read blocks for up to 200 ms
// per transfer on a device that does not answer, which would stall every other probe and
// plugin on the loop. One worker thread, started by the first read, runs the reads in
// order and posts each answer back to the loop. Owned by one udev probe on the loop
// thread. Nothing on the loop ever waits for the worker: stop() (or destruction) drops
// the queue and lets the read in flight finish on its own; the worker then ends without
// touching the reader or the loop again.

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

#include <boost/asio/io_context.hpp>

#include "probes/usb/usb_string_cache.h"
#include "runtime/thread_bound.h"

namespace devlet::usb {

class UsbStringReader {
public:
    // Runs on the worker thread; readUsbStrings() unless a test gives another. It may
    // still run after stop() for the read that was in flight, so it must own (or outlive
    // the worker in) whatever it uses.
    using ReadFunction = std::function<UsbStrings(const UsbStringRequest&)>;
    // Runs on the loop thread with the request and what was read.
    using AnswerCallback = std::function<void(const UsbStringRequest& request, UsbStrings strings)>;

    UsbStringReader(boost::asio::io_context& loop, AnswerCallback onAnswer, ReadFunction read = {});
    ~UsbStringReader();
    UsbStringReader(const UsbStringReader&) = delete;
    UsbStringReader& operator=(const UsbStringReader&) = delete;

    // Queues a read; its answer is posted to the loop when it is done.
    void read(UsbStringRequest request);

    // Drops the queued reads and returns at once, without waiting for the one in flight;
    // no answer callback runs afterwards and nothing is posted to the loop any more.
    // read() starts a new worker.
    void stop();

private:
    // Shared by the reader and its worker, so that a worker still in libusb after stop()
    // (or after the reader is gone) only ever touches this.
    struct Worker {
        Worker(boost::asio::io_context& loop, AnswerCallback onAnswer, ReadFunction read)
            : loop(loop), onAnswer(std::move(onAnswer)), read(std::move(read)) {}
        boost::asio::io_context& loop;  // posted to only while !stopping (under mutex)
        AnswerCallback onAnswer;        // called on the loop only while alive
        ReadFunction read;
        bool alive = true;  // loop thread only: false once stop() ran
        std::mutex mutex;   // guards queue and stopping, shared with the thread
        std::condition_variable wake;
        std::deque<UsbStringRequest> queue;
        bool stopping = false;
    };
    static void work(std::shared_ptr<Worker> worker);

    boost::asio::io_context& loop_;
    AnswerCallback onAnswer_;
    ReadFunction read_;
    std::shared_ptr<Worker> worker_ GUARDED_BY(loopThread_);  // the running worker's, null while none runs
    ThreadBound loopThread_;
};

}  // namespace devlet::usb
