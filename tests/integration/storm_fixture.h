#pragma once
// The configuration the kill and kubelet-restart storms run against: four shared debugEcho
// devices with two slots each (eight configuration-level units, five resources), offered
// and registered with the kubelet simulator before each test.

#include <string>
#include <vector>

#include "tests/integration/fault_support.h"
#include "tests/integration/fixture.h"

namespace devlet::test {

class CamsStormTest : public DaemonTest {
protected:
    static constexpr const char* kCl = "akri.sh/cams";

    void SetUp() override {
        DaemonTest::SetUp();
        writeFile(daemon_->confDir() / "cams.yaml",
                  echoDevicesConfiguration("cams", "foo0, foo1, foo2, foo3", 2, "      shared: true\n"));
        ASSERT_TRUE(kubelet_->start());
        daemon_->start();
        ASSERT_TRUE(kubelet_->waitFor(
            [&] {
                resources_ = configurationResources(*kubelet_, kCl);
                return resources_.size() == 5 && allRegistered(*kubelet_, resources_);
            },
            20s))
            << daemon_->log();
    }

    // The four instances' resources: every one but the configuration's.
    std::vector<std::string> instanceResources() const {
        std::vector<std::string> result;
        for (const std::string& resource : resources_) {
            if (resource != kCl) result.push_back(resource);
        }
        return result;
    }

    std::vector<std::string> resources_;  // the configuration's and its instances'
};

}  // namespace devlet::test
