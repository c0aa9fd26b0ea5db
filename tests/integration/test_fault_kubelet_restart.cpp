// The kubelet restarts every few hundred milliseconds while pods come and go. Each restart
// wipes devlet's sockets; devlet registers every plugin again, and no slot is ever held
// twice or lost. DEVLET_FAULTS=long restarts it hundreds of times.

#include <cstdio>
#include <random>

#include "tests/integration/storm_fixture.h"

namespace devlet::test {
namespace {

class KubeletRestartTest : public CamsStormTest {};

TEST_F(KubeletRestartTest, RestartStormReregistersEveryPluginAndNeverGivesASlotTwice) {
    const int rounds = faultRounds(15, 300);
    const std::uint32_t seed = faultSeed();
    std::mt19937 random(seed);
    AllocationStorm storm(*kubelet_, kCl, instanceResources(), seed);
    std::chrono::milliseconds slowest{0};

    for (int round = 0; round < rounds; ++round) {
        SCOPED_TRACE("round " + std::to_string(round) + " of " + std::to_string(rounds) + ", seed " +
                     std::to_string(seed));
        storm.start();
        // Restarts in a burst, a few hundred milliseconds apart; some while devlet is still
        // registering after the one before.
        const int burst = std::uniform_int_distribution<int>(1, 4)(random);
        for (int i = 0; i < burst; ++i) {
            std::this_thread::sleep_for(
                std::chrono::milliseconds(std::uniform_int_distribution<int>(50, 400)(random)));
            ASSERT_TRUE(kubelet_->restart());
        }
        const auto restarted = std::chrono::steady_clock::now();
        ASSERT_TRUE(kubelet_->waitFor([&] { return allRegistered(*kubelet_, resources_); }, 20s))
            << daemon_->log();
        slowest = std::max(slowest, std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::steady_clock::now() - restarted));
        storm.stop();
        ASSERT_EQ(givenTwice(*kubelet_), std::vector<std::string>{});
        ASSERT_EQ(waitForAgreement(*kubelet_, resources_, Agreement::Exact, 30s), std::vector<std::string>{})
            << daemon_->log();
    }

    storm.endAllPods();
    EXPECT_EQ(waitForAgreement(*kubelet_, resources_, Agreement::Exact, 30s), std::vector<std::string>{});
    EXPECT_TRUE(daemon_->running());
    EXPECT_EQ(daemon_->log().find("was not recorded; adopted"), std::string::npos);
    for (const std::string& resource : resources_) EXPECT_GT(kubelet_->registrations(resource), rounds);
    const auto counts = storm.counts();
    std::printf(
        "%d restart bursts; %llu allocations granted, %llu refused, %llu pods ended; slowest "
        "last restart to every plugin registered: %lld ms\n",
        rounds, static_cast<unsigned long long>(counts.granted),
        static_cast<unsigned long long>(counts.refused), static_cast<unsigned long long>(counts.ended),
        static_cast<long long>(slowest.count()));
    for (const std::string& refusal : storm.refusals()) std::printf("  refused: %s\n", refusal.c_str());
    EXPECT_GT(counts.granted, 0u);
}

}  // namespace
}  // namespace devlet::test
