// Callbacks guarded by a Lifetime do nothing once their owner has stopped or is gone.

#include <functional>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/lifetime.h"

namespace devlet {
namespace {

TEST(Lifetime, GuardedCallbackRunsWhileTheOwnerLives) {
    Lifetime lifetime;
    int calls = 0;
    auto callback = lifetime.guard([&calls](int step) { calls += step; });
    callback(2);
    callback(3);
    EXPECT_EQ(calls, 5);
}

TEST(Lifetime, GuardedCallbackDoesNothingAfterTheOwnerIsDestroyed) {
    auto lifetime = std::make_unique<Lifetime>();
    int calls = 0;
    std::function<void()> callback = lifetime->guard([&calls] { ++calls; });
    lifetime.reset();
    callback();
    EXPECT_EQ(calls, 0);
}

TEST(Lifetime, EndExpiresEveryTokenUntilRenewed) {
    Lifetime lifetime;
    const Lifetime::Token before = lifetime.token();
    lifetime.end();
    EXPECT_TRUE(before.expired());
    int calls = 0;
    auto whileEnded = lifetime.guard([&calls] { ++calls; });
    whileEnded();
    EXPECT_EQ(calls, 0);

    lifetime.renew();
    whileEnded();
    EXPECT_EQ(calls, 0);  // made while ended: stays dead
    lifetime.guard([&calls] { ++calls; })();
    EXPECT_EQ(calls, 1);
    EXPECT_TRUE(before.expired());
    EXPECT_FALSE(lifetime.token().expired());
}

TEST(Lifetime, RenewExpiresTheTokensOfTheLastRun) {
    Lifetime lifetime;
    int calls = 0;
    auto firstRun = lifetime.guard([&calls] { ++calls; });
    lifetime.renew();  // a stop() and start() in between
    firstRun();
    EXPECT_EQ(calls, 0);
}

TEST(Lifetime, TokenCanBeReadOnAnotherThread) {
    Lifetime lifetime;
    const Lifetime::Token token = lifetime.token();
    bool expiredThere = true;
    std::thread([&] { expiredThere = token.expired(); }).join();
    EXPECT_FALSE(expiredThere);
    lifetime.end();
    std::thread([&] { expiredThere = token.expired(); }).join();
    EXPECT_TRUE(expiredThere);
}

TEST(Lifetime, DefaultTokenIsExpired) {
    EXPECT_TRUE(Lifetime::Token().expired());
}

}  // namespace
}  // namespace devlet
