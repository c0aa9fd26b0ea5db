// The worker that keeps libusb's blocking string reads off the event loop: answers come
// back on the loop thread in order, the loop handles other events while a read blocks, and
// stop() never waits for the worker, drops what is queued and lets no answer through
// afterwards. The read itself is a function the test controls
// (libusb's is tested on the recorded camera in test_usb_descriptors).

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <gtest/gtest.h>

#include "probes/usb/usb_string_reader.h"

namespace devlet::usb {
namespace {

using namespace std::chrono_literals;

UsbStringRequest request(int devnum, std::uint64_t ticket) {
    UsbStringRequest r;
    r.devpath = "/devices/pci0000:00/0000:00:1a.0/usb1/1-" + std::to_string(devnum);
    r.busnum = 1;
    r.devnum = devnum;
    r.names = {"serial"};
    r.ticket = ticket;
    return r;
}

struct Answer {
    std::uint64_t ticket = 0;
    std::string serial;
    std::thread::id thread;
};

class UsbStringReaderTest : public ::testing::Test {
protected:
    // Runs the loop until `count` answers came, or a generous deadline passed.
    bool runUntilAnswers(std::size_t count) {
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (answers_.size() < count && std::chrono::steady_clock::now() < deadline) {
            loop_.run_one_for(50ms);
            if (loop_.stopped()) loop_.restart();
        }
        return answers_.size() >= count;
    }

    UsbStringReader::AnswerCallback record() {
        return [this](const UsbStringRequest& request, UsbStrings strings) {
            answers_.push_back({request.ticket, strings.strings["serial"], std::this_thread::get_id()});
        };
    }

    boost::asio::io_context loop_;
    std::vector<Answer> answers_;
};

TEST_F(UsbStringReaderTest, AnswersComeBackOnTheLoopThreadInOrder) {
    std::atomic<std::thread::id> readOn{};
    UsbStringReader reader(loop_, record(), [&](const UsbStringRequest& r) {
        readOn = std::this_thread::get_id();
        UsbStrings strings;
        strings.found = true;
        strings.strings["serial"] = "S" + std::to_string(r.devnum);
        return strings;
    });
    reader.read(request(5, 1));
    reader.read(request(6, 2));
    reader.read(request(7, 3));
    ASSERT_TRUE(runUntilAnswers(3));
    EXPECT_EQ(answers_[0].ticket, 1u);
    EXPECT_EQ(answers_[1].serial, "S6");
    EXPECT_EQ(answers_[2].ticket, 3u);
    for (const Answer& answer : answers_) EXPECT_EQ(answer.thread, std::this_thread::get_id());
    EXPECT_NE(readOn.load(), std::this_thread::get_id());
}

// A read that blocks until the test lets it go (a device that takes its time to refuse).
// Shared with the worker, which may outlive the reader.
struct BlockedRead {
    std::promise<void> started;
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    std::promise<void> finished;
    std::atomic<int> reads = 0;
};

UsbStringReader::ReadFunction blockingFirstRead(std::shared_ptr<BlockedRead> blocked) {
    return [blocked = std::move(blocked)](const UsbStringRequest&) {
        if (blocked->reads++ == 0) {
            blocked->started.set_value();
            blocked->released.wait();
            blocked->finished.set_value();
        }
        UsbStrings strings;
        strings.strings["serial"] = "late";
        return strings;
    };
}

TEST_F(UsbStringReaderTest, LoopHandlesOtherEventsWhileAReadIsPending) {
    auto blocked = std::make_shared<BlockedRead>();
    UsbStringReader reader(loop_, record(), blockingFirstRead(blocked));
    reader.read(request(5, 1));
    blocked->started.get_future().wait();
    // The read is stuck in the worker; an event that arrives now is handled at once.
    bool handled = false;
    boost::asio::post(loop_, [&] { handled = true; });
    loop_.run_one();
    EXPECT_TRUE(handled);
    EXPECT_TRUE(answers_.empty());
    blocked->release.set_value();
    ASSERT_TRUE(runUntilAnswers(1));
    EXPECT_EQ(answers_[0].serial, "late");
}

TEST_F(UsbStringReaderTest, StopDoesNotWaitForTheReadInFlightAndDropsEveryAnswer) {
    auto blocked = std::make_shared<BlockedRead>();
    auto reader = std::make_unique<UsbStringReader>(loop_, record(), blockingFirstRead(blocked));
    reader->read(request(5, 1));
    reader->read(request(6, 2));  // queued behind it
    blocked->started.get_future().wait();
    // The read is released only after stop() returned and the reader is gone: were stop()
    // to wait for it, this would never return.
    reader->stop();
    reader.reset();
    blocked->release.set_value();
    blocked->finished.get_future().wait();
    loop_.poll();
    EXPECT_TRUE(answers_.empty());
    EXPECT_EQ(blocked->reads.load(), 1);  // the queued read was dropped
}

TEST_F(UsbStringReaderTest, ReadAfterStopStartsTheWorkerAgain) {
    UsbStringReader reader(loop_, record(), [](const UsbStringRequest&) { return UsbStrings{}; });
    reader.read(request(5, 1));
    ASSERT_TRUE(runUntilAnswers(1));
    reader.stop();
    reader.read(request(6, 2));
    ASSERT_TRUE(runUntilAnswers(2));
    EXPECT_EQ(answers_[1].ticket, 2u);
}

TEST_F(UsbStringReaderTest, DestroyingAnIdleReaderStartsNoThread) {
    // Most devices have their strings in sysfs: no read, no thread, nothing to join.
    UsbStringReader reader(loop_, record());
    reader.stop();
    EXPECT_TRUE(answers_.empty());
}

}  // namespace
}  // namespace devlet::usb
