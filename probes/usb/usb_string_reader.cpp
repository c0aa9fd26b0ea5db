#include "probes/usb/usb_string_reader.h"

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
    stop();
}

void UsbStringReader::read(UsbStringRequest request) {
    if (!worker_.joinable()) {
        stopping_ = false;  // no worker runs: nobody else touches it
        alive_ = std::make_shared<bool>(true);
        worker_ = std::thread([this, alive = alive_] { work(alive); });
    }
    {
        std::lock_guard lock(mutex_);
        queue_.push_back(std::move(request));
    }
    wake_.notify_one();
}

void UsbStringReader::stop() {
    if (alive_) *alive_ = false;
    if (!worker_.joinable()) return;
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
        queue_.clear();
    }
    wake_.notify_one();
    worker_.join();
}

void UsbStringReader::work(std::shared_ptr<bool> alive) {
    for (;;) {
        UsbStringRequest request;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
            if (stopping_) return;
            request = std::move(queue_.front());
            queue_.pop_front();
        }
        UsbStrings strings = read_(request);
        // `alive` is only read on the loop: the probe may have stopped (and be gone) by then.
        boost::asio::post(
            loop_, [this, alive, request = std::move(request), strings = std::move(strings)]() mutable {
                if (*alive) onAnswer_(request, std::move(strings));
            });
    }
}

}  // namespace devlet::usb
