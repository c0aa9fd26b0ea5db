// Devices that come and go many times a second while pods allocate: debugEcho's
// availability file in bursts, for a configuration whose devices are withdrawn at once
// (removal grace 0) and one whose devices stay offered, Unhealthy, while gone. A gone
// device is never allocated, a held slot stays held through every flap, and when the
// devices settle the kubelet sees exactly what is held. DEVLET_FAULTS=long flaps thousands
// of times.

#include <cstdio>
#include <random>

#include "tests/integration/fault_support.h"
#include "tests/integration/fixture.h"

namespace devlet::test {
namespace {

namespace fs = std::filesystem;

std::string configuration(const std::string& name, const fs::path& availability, int graceSeconds) {
    return echoDevicesConfiguration(
        name, name + "0, " + name + "1, " + name + "2", 2,
        "      availabilityFile: " + availability.string() + "\n",
        "  devlet:\n    removalGracePeriodSeconds: " + std::to_string(graceSeconds) + "\n");
}

class FlappingTest : public DaemonTest {
protected:
    // One configuration `name`; returns its resources once all are offered.
    std::vector<std::string> startWith(const std::string& name, int graceSeconds) {
        writeFile(daemon_->confDir() / (name + ".yaml"), configuration(name, availability(), graceSeconds));
        EXPECT_TRUE(kubelet_->start());
        daemon_->start();
        const std::string cl = "akri.sh/" + name;
        std::vector<std::string> resources;
        EXPECT_TRUE(kubelet_->waitFor(
            [&] {
                resources.clear();
                for (const std::string& resource : kubelet_->resources()) {
                    if (resource == cl || resource.starts_with(cl + "-")) resources.push_back(resource);
                }
                return resources.size() == 4 && allRegistered(*kubelet_, resources);
            },
            20s))
            << daemon_->log();
        return resources;
    }
    fs::path availability() const { return dir_.path() / "available"; }
    void setOnline(bool online) { writeFile(availability(), online ? "\n" : "OFFLINE\n"); }

    // Flaps the devices in bursts while the storm allocates; ends with them online.
    void flap(AllocationStorm& storm, std::uint32_t seed, int flaps) {
        std::mt19937 random(seed);
        storm.start();
        bool online = true;
        for (int i = 0; i < flaps; ++i) {
            online = !online;
            setOnline(online);
            // Mostly faster than devlet can publish, now and then long enough to allocate.
            const int pause = std::uniform_int_distribution<int>(0, 9)(random) == 0
                                  ? std::uniform_int_distribution<int>(50, 200)(random)
                                  : std::uniform_int_distribution<int>(0, 5)(random);
            std::this_thread::sleep_for(std::chrono::milliseconds(pause));
            ASSERT_EQ(givenTwice(*kubelet_), std::vector<std::string>{});
        }
        setOnline(true);
        storm.stop();
    }
};

TEST_F(FlappingTest, DevicesWithdrawnAndOfferedInBurstsNeverLoseOrDoubleGiveASlot) {
    const int flaps = faultRounds(300, 10000);
    const std::uint32_t seed = faultSeed();
    const auto resources = startWith("flap", 0);
    ASSERT_EQ(resources.size(), 4u);
    std::vector<std::string> instances(resources.begin(), resources.end());
    std::erase(instances, std::string("akri.sh/flap"));
    AllocationStorm storm(*kubelet_, "akri.sh/flap", instances, seed);
    flap(storm, seed, flaps);

    ASSERT_TRUE(kubelet_->waitFor([&] { return allRegistered(*kubelet_, resources); }, 20s))
        << daemon_->log();
    EXPECT_EQ(givenTwice(*kubelet_), std::vector<std::string>{});
    EXPECT_EQ(waitForAgreement(*kubelet_, resources, Agreement::Exact, 30s), std::vector<std::string>{})
        << daemon_->log();
    storm.endAllPods();
    EXPECT_EQ(waitForAgreement(*kubelet_, resources, Agreement::Exact, 30s), std::vector<std::string>{});
    EXPECT_EQ(daemon_->log().find("was not recorded; adopted"), std::string::npos);
    const auto counts = storm.counts();
    std::printf("%d flaps; %llu allocations granted, %llu refused\n", flaps,
                static_cast<unsigned long long>(counts.granted),
                static_cast<unsigned long long>(counts.refused));
    EXPECT_GT(counts.granted, 0u);
}

TEST_F(FlappingTest, DevicesUnhealthyWhileGoneAreNeverAllocatedAndKeepTheirHolders) {
    const int flaps = faultRounds(300, 10000);
    const std::uint32_t seed = faultSeed();
    const auto resources = startWith("steady", 3600);
    ASSERT_EQ(resources.size(), 4u);
    std::vector<std::string> instances(resources.begin(), resources.end());
    std::erase(instances, std::string("akri.sh/steady"));
    AllocationStorm storm(*kubelet_, "akri.sh/steady", instances, seed);
    flap(storm, seed, flaps);
    // Offered all along: not one plugin was registered twice.
    for (const std::string& resource : resources) EXPECT_EQ(kubelet_->registrations(resource), 1) << resource;
    EXPECT_EQ(waitForAgreement(*kubelet_, resources, Agreement::Exact, 30s), std::vector<std::string>{})
        << daemon_->log();

    // Gone: every slot is Unhealthy, and Allocate says why even when asked directly.
    setOnline(false);
    ASSERT_TRUE(kubelet_->waitFor(
        [&] {
            for (const auto& [id, state] : kubelet_->devices("akri.sh/steady")) {
                if (state.health == "Healthy") return false;
            }
            return true;
        },
        10s));
    const std::string slot = instances.front().substr(instances.front().find('/') + 1) + "-1";
    auto gone = kubelet_->allocateIds("default", "pod-gone", "main", instances.front(), {slot});
    EXPECT_FALSE(gone.ok);
    EXPECT_NE(gone.error.find("is gone"), std::string::npos) << gone.error;
    setOnline(true);
    storm.endAllPods();
    EXPECT_EQ(waitForAgreement(*kubelet_, resources, Agreement::Exact, 30s), std::vector<std::string>{});
}

}  // namespace
}  // namespace devlet::test
