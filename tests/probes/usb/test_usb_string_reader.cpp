// The worker that keeps libusb's blocking string reads off the event loop: answers come
// back on the loop thread in order, and stop() joins the worker, drops what is queued and
// lets no answer through afterwards. The read itself is a function the test controls
// (libusb's is tested on the recorded camera in test_usb_descriptors).

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
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

TEST_F(UsbStringReaderTest, StopWaitsForTheReadInFlightAndDropsEveryAnswer) {
    std::promise<void> started;
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    std::atomic<int> reads = 0;
    std::atomic<bool> firstFinished = false;
    UsbStringReader reader(loop_, record(), [&](const UsbStringRequest&) {
        if (reads++ == 0) {
            started.set_value();
            released.wait();  // a device that takes its time to refuse
            firstFinished = true;
        }
        return UsbStrings{};
    });
    reader.read(request(5, 1));
    reader.read(request(6, 2));  // queued behind it
    started.get_future().wait();
    // Released only once stop() is under way: stop() must wait for the read, not abandon it.
    std::atomic<bool> stopping = false;
    std::thread releaser([&] {
        while (!stopping) std::this_thread::yield();
        release.set_value();
    });
    stopping = true;
    reader.stop();
    EXPECT_TRUE(firstFinished);
    releaser.join();
    loop_.poll();
    EXPECT_TRUE(answers_.empty());
    EXPECT_LE(reads.load(), 2);
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
