#include "probes/usb/usb_string_reader.h"

#include <thread>
#include <utility>

#include <boost/asio/post.hpp>

#include "probes/usb/usb_descriptors.h"

namespace devlet::usb {

UsbStringReader::UsbStringReader(boost::asio::io_context& loop, AnswerCallback onAnswer, ReadFunction read)
    : loop_(loop), onAnswer_(std::move(onAnswer)), read_(std::move(read)) {
    if (!read_) {
        read_ = [](const UsbStringRequest& request) {
            return readUsbStrings(request.busnum, request.devnum, request.names);
        };
    }
}

UsbStringReader::~UsbStringReader() {
    loopThread_.release();
    stop();
}

void UsbStringReader::read(UsbStringRequest request) {
    loopThread_.check();
    if (!worker_) {
        worker_ = std::make_shared<Worker>(loop_, onAnswer_, read_);
        // Detached: a read stuck in libusb must never hold the loop; the thread keeps its
        // Worker alive and ends after its read once stop() has run.
        std::thread(work, worker_).detach();
    }
    {
        std::lock_guard lock(worker_->mutex);
        worker_->queue.push_back(std::move(request));
    }
    worker_->wake.notify_one();
}

void UsbStringReader::stop() {
    loopThread_.check();
    if (!worker_) return;
    std::shared_ptr<Worker> worker = std::move(worker_);
    worker->alive = false;  // answers already posted are dropped on the loop
    {
        std::lock_guard lock(worker->mutex);
        worker->stopping = true;  // and none is posted from now on
        worker->queue.clear();
    }
    worker->wake.notify_one();
}

void UsbStringReader::work(std::shared_ptr<Worker> worker) {
    for (;;) {
        UsbStringRequest request;
        {
            std::unique_lock lock(worker->mutex);
            worker->wake.wait(lock, [&] { return worker->stopping || !worker->queue.empty(); });
            if (worker->stopping) return;
            request = std::move(worker->queue.front());
            worker->queue.pop_front();
        }
        UsbStrings strings = worker->read(request);
        // Posted under the lock: once stop() has set `stopping`, the loop (which may be
        // gone by then) is never touched again.
        std::lock_guard lock(worker->mutex);
        if (worker->stopping) return;
        boost::asio::post(worker->loop,
                          [worker, request = std::move(request), strings = std::move(strings)]() mutable {
                              if (worker->alive) worker->onAnswer(request, std::move(strings));
                          });
    }
}

}  // namespace devlet::usb
