#pragma once
// A running devlet over a kubelet simulator, both in one temp tree.

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/daemon_process.h"
#include "tests/support/kubelet_simulator.h"

namespace devlet::test {

using namespace std::chrono_literals;

// A debugEcho configuration of the given devices ("a, b"); extraDetails and extraSpec
// are YAML lines added to its discoveryDetails and its spec.
inline std::string echoDevicesConfiguration(const std::string& name, const std::string& descriptions,
                                            int capacity, const std::string& extraDetails = "",
                                            const std::string& extraSpec = "") {
    return "apiVersion: akri.sh/v0\n"
           "kind: Configuration\n"
           "metadata:\n"
           "  name: " +
           name +
           "\n"
           "spec:\n"
           "  discoveryHandler:\n"
           "    name: debugEcho\n"
           "    discoveryDetails: |\n"
           "      descriptions: [" +
           descriptions + "]\n" + extraDetails + "  capacity: " + std::to_string(capacity) + "\n" + extraSpec;
}

// Two debugEcho devices (foo0, foo1; shared, as in Akri's tests) with the given capacity.
inline std::string echoConfiguration(const std::string& name, int capacity,
                                     const std::string& extraDetails = "",
                                     const std::string& extraSpec = "") {
    return echoDevicesConfiguration(name, "foo0, foo1", capacity, "      shared: true\n" + extraDetails,
                                    extraSpec);
}

class DaemonTest : public ::testing::Test {
protected:
    void SetUp() override {
        daemon_ = std::make_unique<DaemonProcess>(dir_.path());
        kubelet_ =
            std::make_unique<KubeletSimulator>(daemon_->devicePluginDir(), daemon_->podResourcesSocket());
        // Fast slot release so tests need not wait 10 s.
        writeFile(daemon_->settingsFile(),
                  "kubelet:\n  podResourcesIntervalSeconds: 0.2\n  slotReleaseGraceSeconds: 0.5\n");
    }
    void TearDown() override {
        if (HasFailure() && daemon_) std::cerr << "--- devlet log ---\n" << daemon_->log();
        daemon_.reset();
        kubelet_.reset();
    }

    // The devices of a resource as the kubelet saw them last: id -> health.
    std::map<std::string, std::string> health(const std::string& resource) {
        std::map<std::string, std::string> result;
        for (const auto& [id, state] : kubelet_->devices(resource)) result[id] = state.health;
        return result;
    }
    bool waitForHealth(const std::string& resource, const std::string& id, const std::string& want,
                       std::chrono::milliseconds timeout = 10s) {
        return kubelet_->waitFor(
            [&] {
                auto h = health(resource);
                auto it = h.find(id);
                return it != h.end() && it->second == want && !kubelet_->endpoint(resource).empty();
            },
            timeout);
    }
    bool waitForDevices(const std::string& resource, std::size_t count,
                        std::chrono::milliseconds timeout = 10s) {
        return kubelet_->waitFor(
            [&] {
                return !kubelet_->endpoint(resource).empty() && kubelet_->devices(resource).size() == count;
            },
            timeout);
    }

    // Every resource is registered and its latest list holds that many devices.
    bool listsComplete(const std::map<std::string, std::size_t>& counts) {
        for (const auto& [resource, count] : counts) {
            if (kubelet_->endpoint(resource).empty() || kubelet_->devices(resource).size() != count)
                return false;
        }
        return true;
    }
    // The same, for the "cams" configuration of echoConfiguration("cams", 2).
    bool camsOffered() {
        return listsComplete({{"akri.sh/cams", 4}, {"akri.sh/cams-8120fe", 2}, {"akri.sh/cams-a19705", 2}});
    }

    TempDir dir_;
    std::unique_ptr<DaemonProcess> daemon_;
    std::unique_ptr<KubeletSimulator> kubelet_;
};

}  // namespace devlet::test
