// kill -9 of devlet at random points of an allocation storm. After every restart each slot
// a pod holds is still held through the same resource, none is held twice, and none leaks:
// once the kubelet's PodResources no longer lists a pod, its slots come back.
// DEVLET_FAULTS=long runs hundreds of kills instead of a dozen.

#include <algorithm>
#include <cstdio>
#include <random>

#include "tests/integration/storm_fixture.h"

namespace devlet::test {
namespace {

class DaemonKillTest : public CamsStormTest {
protected:
    // The other resource that lists a slot: its instance's for the configuration's, and back.
    static std::string otherResource(const std::string& slot, const std::string& holder) {
        if (holder != kCl) return kCl;
        return "akri.sh/" + slot.substr(0, slot.rfind('-'));
    }

    std::map<std::string, int> registrations() const {
        std::map<std::string, int> result;
        for (const std::string& resource : resources_) result[resource] = kubelet_->registrations(resource);
        return result;
    }

    // Every resource registered again since `before`, and its fresh device list arrived.
    bool reregistered(const std::map<std::string, int>& before, std::chrono::milliseconds timeout) {
        return kubelet_->waitFor(
            [&] {
                for (const auto& [resource, count] : before) {
                    if (kubelet_->registrations(resource) <= count) return false;
                }
                return allRegistered(*kubelet_, resources_);
            },
            timeout);
    }
};

TEST_F(DaemonKillTest, KillDashNineAtRandomPointsNeverLosesLeaksOrDoubleGivesASlot) {
    const int rounds = faultRounds(12, 300);
    const std::uint32_t seed = faultSeed();
    std::mt19937 random(seed);
    AllocationStorm storm(*kubelet_, kCl, instanceResources(), seed);
    int probes = 0;
    std::chrono::milliseconds slowestRecovery{0};

    for (int round = 0; round < rounds; ++round) {
        SCOPED_TRACE("round " + std::to_string(round) + " of " + std::to_string(rounds) + ", seed " +
                     std::to_string(seed));
        storm.start();
        std::this_thread::sleep_for(
            std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 300)(random)));
        daemon_->kill9();
        storm.stop();

        // From here until the check, the store is all devlet knows: PodResources stays
        // silent, so a slot devlet forgot cannot be taken back from the kubelet's list.
        kubelet_->setPodResourcesAvailable(false);
        const auto before = registrations();
        if (round % 4 == 3) {
            // Killed again while restoring its state and registering.
            daemon_->start();
            std::this_thread::sleep_for(
                std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 60)(random)));
            daemon_->kill9();
        }
        const auto restarted = std::chrono::steady_clock::now();
        daemon_->start();
        ASSERT_TRUE(reregistered(before, 20s)) << daemon_->log();

        ASSERT_EQ(givenTwice(*kubelet_), std::vector<std::string>{});
        ASSERT_EQ(waitForAgreement(*kubelet_, resources_, Agreement::Held, 20s), std::vector<std::string>{})
            << daemon_->log();
        slowestRecovery = std::max(slowestRecovery, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                        std::chrono::steady_clock::now() - restarted));
        // And devlet refuses each held slot through the other resource.
        for (const auto& [slot, list] : holds(*kubelet_)) {
            const std::string other = otherResource(slot, list.front().resource);
            auto twice =
                kubelet_->allocateIds("default", "probe-" + std::to_string(probes++), "main", other, {slot});
            EXPECT_FALSE(twice.ok) << "slot " << slot << " held through " << list.front().resource
                                   << " was given again through " << other;
        }

        // The kubelet answers again; slots of pods that ended, and slots devlet recorded
        // for an Allocate whose answer the kill cut off, come back.
        kubelet_->setPodResourcesAvailable(true);
        storm.endPods(0.3);
        ASSERT_EQ(waitForAgreement(*kubelet_, resources_, Agreement::Exact, 30s), std::vector<std::string>{})
            << daemon_->log();
    }

    storm.endAllPods();
    EXPECT_EQ(waitForAgreement(*kubelet_, resources_, Agreement::Exact, 30s), std::vector<std::string>{});
    EXPECT_EQ(daemon_->log().find("was not recorded; adopted"), std::string::npos)
        << "a slot the kubelet held was missing from the state store";
    const auto counts = storm.counts();
    std::printf(
        "%d kills; %llu allocations granted, %llu refused, %llu pods ended; slowest restart to "
        "every held slot shown: %lld ms\n",
        rounds, static_cast<unsigned long long>(counts.granted),
        static_cast<unsigned long long>(counts.refused), static_cast<unsigned long long>(counts.ended),
        static_cast<long long>(slowestRecovery.count()));
    for (const std::string& refusal : storm.refusals()) std::printf("  refused: %s\n", refusal.c_str());
    EXPECT_GT(counts.granted, 0u);
}

}  // namespace
}  // namespace devlet::test
