#pragma once
// Runs work on the thread that runs an io_context and returns its result: tests whose
// loop runs on a thread of its own touch loop-owned objects only this way.

#include <future>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

namespace devlet::test {

template <typename Work>
auto runOnLoop(boost::asio::io_context& loop, Work work) {
    std::packaged_task<decltype(work())()> task(std::move(work));
    auto result = task.get_future();
    boost::asio::post(loop, [&task] { task(); });
    return result.get();
}

}  // namespace devlet::test
