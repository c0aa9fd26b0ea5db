// ThreadBound: a loop-owned object used from another thread stops a build with
// assertions at the call, naming the caller; the same use from its own thread passes.

#include <thread>

#include <gtest/gtest.h>

#include "runtime/thread_bound.h"

namespace devlet {
namespace {

class LoopOwned {
public:
    void touch() { loopThread_.check(); }
    ~LoopOwned() { loopThread_.release(); }

private:
    ThreadBound loopThread_;
};

TEST(ThreadBound, UseOnTheFirstThreadPasses) {
    LoopOwned owned;
    owned.touch();
    owned.touch();
}

TEST(ThreadBound, BindsToTheThreadThatUsesItFirstNotTheOneThatBuiltIt) {
    LoopOwned owned;
    std::thread([&] {
        owned.touch();
        owned.touch();
    }).join();
}

TEST(ThreadBound, DestructionOnAnotherThreadOnceTheLoopIsDone) {
    auto owned = std::make_unique<LoopOwned>();
    std::thread([&] { owned->touch(); }).join();
    owned.reset();
}

#ifdef NDEBUG
TEST(ThreadBound, UseOffItsThreadAborts) {
    GTEST_SKIP() << "built with NDEBUG: the check compiles to nothing";
}
#else
TEST(ThreadBound, UseOffItsThreadAborts) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(
        {
            LoopOwned owned;
            owned.touch();
            std::thread([&] { owned.touch(); }).join();
        },
        "touch.*called off its thread");
}
#endif

}  // namespace
}  // namespace devlet
