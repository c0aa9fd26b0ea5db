// An IP camera that answers one liveness check and fails the next, through the real
// daemon with simulated cameras in network namespaces. With the default missedChecks (2)
// the kubelet never sees it flap; with missedChecks 1 it flaps Unhealthy and back every
// check, and the pod holding its slot keeps it, its plugin is never registered again, and a
// second pod is refused while it is down. Skips where network namespaces cannot be created.

#include <filesystem>
#include <mutex>
#include <thread>

#include <sys/stat.h>

#include "tests/integration/fault_support.h"
#include "tests/integration/fixture.h"
#include "tests/integration/onvif_lab_test.h"

namespace devlet::test {
namespace {

constexpr const char* kCl = "akri.sh/onvif-cams";

// Every health the kubelet was sent for one slot of one resource, in order.
class HealthHistory {
public:
    void observe(const v1beta1::ListAndWatchResponse& response, const std::string& slot) {
        std::lock_guard lock(mutex_);
        for (const auto& device : response.devices()) {
            if (device.id() == slot) healths_.push_back(device.health());
        }
    }
    std::vector<std::string> healths() const {
        std::lock_guard lock(mutex_);
        return healths_;
    }

private:
    mutable std::mutex mutex_;
    std::vector<std::string> healths_;
};

class OnvifFlappingTest : public OnvifLabTest {
protected:
    void SetUp() override {
        OnvifLabTest::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        ASSERT_TRUE(kubelet_->start());
    }

    // One camera that fails every second liveness check, and devlet looking for it.
    void start(int host, int missedChecks) {
        startCamera(host, {"--uuid", "44444444-4444-4444-8444-44444444444" + std::to_string(host % 10),
                           "--fail-every", "2"});
        if (HasFailure()) return;
        writeFile(daemon_->confDir() / "onvif.yaml",
                  "apiVersion: akri.sh/v0\n"
                  "kind: Configuration\n"
                  "metadata:\n"
                  "  name: onvif-cams\n"
                  "spec:\n"
                  "  discoveryHandler:\n"
                  "    name: onvif\n"
                  "    discoveryDetails: |\n"
                  "      discoveryTimeoutSeconds: 1\n"
                  "      interfaces: [br0]\n"
                  "      livenessIntervalSeconds: 1\n"
                  "      missedChecks: " +
                      std::to_string(missedChecks) + "\n  capacity: 2\n");
        startDaemon();
        ASSERT_TRUE(kubelet_->waitFor(
            [&] {
                for (const std::string& resource : kubelet_->resources()) {
                    if (resource.starts_with(std::string(kCl) + "-")) camera_ = resource;
                }
                return !camera_.empty() && allRegistered(*kubelet_, {kCl, camera_});
            },
            60s))
            << daemon_->log();
        slot_ = camera_.substr(camera_.find('/') + 1) + "-0";
        kubelet_->onListAndWatch(
            [history = history_, camera = camera_, slot = slot_](
                const std::string& resource, const v1beta1::ListAndWatchResponse& response) {
                if (resource == camera) history->observe(response, slot);
            });
        // A camera that flaps may be down just then: devlet refuses, the pod tries again.
        AllocationResult held;
        for (int attempt = 0; attempt < 20 && !held.ok; ++attempt) {
            ASSERT_TRUE(waitForHealth(camera_, slot_, "Healthy", 30s)) << daemon_->log();
            held = kubelet_->allocateIds("default", "holder", "main", camera_, {slot_});
        }
        ASSERT_TRUE(held.ok) << held.error;
    }
    // Waits until the camera's instance plugin has sent `count` more lists.
    bool waitForLists(std::uint64_t count) {
        const std::uint64_t until = kubelet_->listAndWatchMessages(camera_) + count;
        return kubelet_->waitFor([&] { return kubelet_->listAndWatchMessages(camera_) >= until; }, 60s);
    }

    std::unique_ptr<onvif::test::NetworkLab> lab_;
    std::string camera_;
    std::string slot_;
    std::shared_ptr<HealthHistory> history_ = std::make_shared<HealthHistory>();
};

TEST_F(OnvifFlappingTest, CameraMissingEveryOtherCheckNeverFlapsAtTheKubelet) {
    start(31, 2);
    ASSERT_EQ(waitForAgreement(*kubelet_, {kCl, camera_}, Agreement::Exact, 20s), std::vector<std::string>{});
    // Checks answered and failed by turns, one a second: watched for several of them (a
    // slow machine only makes fewer checks happen, never a false failure).
    std::this_thread::sleep_for(6s);
    for (const std::string& health : history_->healths()) EXPECT_EQ(health, "Healthy");
    EXPECT_EQ(daemon_->log().find("stopped answering"), std::string::npos) << daemon_->log();
    EXPECT_EQ(kubelet_->registrations(camera_), 1);
    EXPECT_EQ(waitForAgreement(*kubelet_, {kCl, camera_}, Agreement::Exact, 20s), std::vector<std::string>{});
}

TEST_F(OnvifFlappingTest, CameraFlappingEveryCheckKeepsItsHolderAndIsRefusedWhileDown) {
    start(32, 1);
    int refused = 0;
    for (int flap = 0; flap < 3; ++flap) {
        SCOPED_TRACE("flap " + std::to_string(flap));
        // Down: every slot Unhealthy; its free slot is refused even when asked for directly.
        ASSERT_TRUE(waitForHealth(camera_, slot_, "Unhealthy", 30s)) << daemon_->log();
        const std::string free = slot_.substr(0, slot_.size() - 1) + "1";
        auto down = kubelet_->allocateIds("default", "pod-" + std::to_string(flap), "main", kCl, {free});
        refused += down.ok ? 0 : 1;
        EXPECT_FALSE(down.ok) << "a camera that is down was allocated";
        // Up again: still held by the same pod through the same resource.
        ASSERT_TRUE(waitForHealth(camera_, slot_, "Healthy", 30s)) << daemon_->log();
        ASSERT_EQ(waitForAgreement(*kubelet_, {kCl, camera_}, Agreement::Held, 20s),
                  std::vector<std::string>{});
    }
    EXPECT_EQ(kubelet_->registrations(camera_), 1) << "withdrawn and registered again while flapping";
    EXPECT_EQ(givenTwice(*kubelet_), std::vector<std::string>{});
    EXPECT_GE(refused, 1);
}

}  // namespace
}  // namespace devlet::test
