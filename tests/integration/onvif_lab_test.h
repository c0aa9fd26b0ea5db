#pragma once
// ONVIF through the real daemon: simulated cameras, each in a network namespace of its own
// behind a bridge, and devlet in the client namespace (tests/probes/onvif/network_lab.h).
// Skips where network namespaces cannot be created (not root): a test's own SetUp calls
// OnvifLabTest::SetUp() first and returns when IsSkipped() or HasFatalFailure().

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/fixture.h"
#include "tests/probes/onvif/network_lab.h"

namespace devlet::test {

class OnvifLabTest : public DaemonTest {
protected:
    void SetUp() override {
        lab_ = std::make_unique<onvif::test::NetworkLab>();
        if (!lab_->unavailable().empty()) GTEST_SKIP() << "skipped: " << lab_->unavailable();
        ASSERT_TRUE(lab_->broken().empty()) << lab_->broken();
        DaemonTest::SetUp();
    }
    void TearDown() override {
        DaemonTest::TearDown();
        stopInLab();
        lab_.reset();
    }
    // Stops what a test started inside the lab's namespaces: after the daemon, before the lab.
    virtual void stopInLab() {}

    // Starts the simulated camera 192.0.2.<host> with `options` (--uuid, --user, ...) and
    // waits until it answers; its pid.
    pid_t startCamera(int host, const std::vector<std::string>& options) {
        const std::string ns = lab_->addCameraHost(host);
        hosts_[host] = ns;
        const std::string ready = (dir_.path() / ("ready-" + std::to_string(host))).string();
        std::vector<std::string> argv = {ONVIF_CAMERA, "--address", "192.0.2." + std::to_string(host),
                                         "--ready-file", ready};
        argv.insert(argv.end(), options.begin(), options.end());
        const pid_t pid = lab_->start(ns, argv);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (!std::filesystem::exists(ready) && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        EXPECT_TRUE(std::filesystem::exists(ready)) << "camera 192.0.2." << host << " did not start";
        return pid;
    }

    // devlet starts inside the client namespace: a child forked from a thread that entered it.
    void startDaemon() {
        ASSERT_TRUE(lab_->enter());
        daemon_->start();
        lab_->leave();
    }

    std::unique_ptr<onvif::test::NetworkLab> lab_;
    std::map<int, std::string> hosts_;  // host number -> namespace
};

}  // namespace devlet::test
