// The real devlet with the gpu handler on a umockdev testbed, against the kubelet
// simulator: a two-socket machine with four Intel GPUs (two per NUMA node), offered under
// Intel's resource name with capacity 2, so requests for several shares show where the
// allocation policy puts them. The test runs under umockdev-wrapper and the daemon it
// forks inherits the testbed; without umockdev it skips.

#include <gtest/gtest.h>

#include "tests/probes/usb/umockdev_main.h"

#if DEVLET_HAVE_UMOCKDEV

#include <map>
#include <set>
#include <string>
#include <vector>

#include <umockdev.h>
#include <unistd.h>

#include "tests/integration/fixture.h"
#include "tests/probes/gpu/gpu_testbeds.h"
#include "tests/status/status_test_support.h"

namespace devlet::test {
namespace {

constexpr const char* kIntelResource = "gpu.intel.com/i915";

std::string gpuConfiguration(const std::string& details, int capacity) {
    return "apiVersion: akri.sh/v0\n"
           "kind: Configuration\n"
           "metadata:\n"
           "  name: gpus\n"
           "spec:\n"
           "  discoveryHandler:\n"
           "    name: gpu\n"
           "    discoveryDetails: |\n" +
           details + "  capacity: " + std::to_string(capacity) +
           "\n"
           "  devlet:\n"
           "    configurationResource: gpu.intel.com/i915\n";
}

class GpuKubeletTest : public DaemonTest {
protected:
    void SetUp() override {
        testbed_ = umockdev_testbed_new();
        for (const std::string& gpu : fourArcGpusOnTwoNumaNodes()) add(gpu);
        DaemonTest::SetUp();
    }
    void TearDown() override {
        DaemonTest::TearDown();
        g_object_unref(testbed_);
    }

    void add(const std::string& description) {
        GError* error = nullptr;
        ASSERT_TRUE(umockdev_testbed_add_from_string(testbed_, description.c_str(), &error))
            << (error ? error->message : "unknown error");
    }

    void startWith(const std::string& details, int capacity) {
        writeFile(daemon_->confDir() / "gpus.yaml", gpuConfiguration(details, capacity));
        ASSERT_TRUE(kubelet_->start());
        daemon_->start();
        ASSERT_TRUE(waitForDevices(kIntelResource, 4 * static_cast<std::size_t>(capacity), 20s))
            << daemon_->log();
    }

    int numaOf(const std::string& id) {
        const auto devices = kubelet_->devices(kIntelResource);
        auto it = devices.find(id);
        if (it == devices.end() || it->second.numaNodes.size() != 1) return -1;
        return static_cast<int>(it->second.numaNodes[0]);
    }

    // The GPU (instance) a share belongs to: the id without its "-<k>".
    static std::string gpuOf(const std::string& id) { return id.substr(0, id.rfind('-')); }

    UMockdevTestbed* testbed_ = nullptr;
};

TEST_F(GpuKubeletTest, FourGpusAreOfferedUnderIntelsNameWithTheirNumaNodes) {
    startWith("      allocationPolicy: none\n", 2);
    const auto devices = kubelet_->devices(kIntelResource);
    ASSERT_EQ(devices.size(), 8u);
    std::map<int, int> perNode;
    for (const auto& [id, state] : devices) {
        EXPECT_EQ(state.health, "Healthy") << id;
        ASSERT_EQ(state.numaNodes.size(), 1u) << id;
        perNode[static_cast<int>(state.numaNodes[0])]++;
    }
    EXPECT_EQ(perNode, (std::map<int, int>{{0, 4}, {1, 4}}));
    EXPECT_TRUE(kubelet_->options(kIntelResource).get_preferred_allocation_available());
}

TEST_F(GpuKubeletTest, UnboundGpuGoesUnhealthyAtOnceAndRecoversWhenRebound) {
    startWith("", 2);
    const std::string pci = "/devices/pci0000:80/0000:80:01.0/0000:84:00.0";
    // The card handed to vfio-pci for a VM: its driver link changes, udev says "bind".
    const std::string sys = testbedSysDir(testbed_);
    auto rebind = [&](const std::string& driver) {
        ASSERT_EQ(::unlink((sys + pci + "/driver").c_str()), 0);
        umockdev_testbed_set_attribute_link(testbed_, ("/sys" + pci).c_str(), "driver",
                                            ("../../../../bus/pci/drivers/" + driver).c_str());
        umockdev_testbed_uevent(testbed_, ("/sys" + pci).c_str(), "bind");
    };
    auto unhealthy = [&] {
        int count = 0;
        for (const auto& [id, state] : kubelet_->devices(kIntelResource))
            count += state.health == "Unhealthy";
        return count;
    };
    rebind("vfio-pci");
    ASSERT_TRUE(kubelet_->waitFor([&] { return unhealthy() == 2; }, 10s)) << daemon_->log();
    EXPECT_EQ(kubelet_->devices(kIntelResource).size(), 8u);
    // The status server says why: the handler saw the card and names its reason.
    const unsigned short port = statusPortFromLog(daemon_->log());
    ASSERT_NE(port, 0) << daemon_->log();
    std::string body;
    EXPECT_TRUE(eventually([&] {
        body = httpGet(port, "/api/v1/configurations").body;
        return body.find("\"text\":\"GPU 0000:84:00.0 is not offered: driver vfio-pci is not in drivers") !=
               std::string::npos;
    })) << body;
    rebind("i915");
    ASSERT_TRUE(kubelet_->waitFor([&] { return unhealthy() == 0; }, 10s)) << daemon_->log();
}

class GpuPolicyTest : public GpuKubeletTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(GpuPolicyTest, RequestsOfTwoSharesEachLandOnOneNumaNode) {
    const std::string policy = GetParam();
    startWith("      allocationPolicy: " + policy + "\n", 2);
    for (int pod = 0; pod < 4; ++pod) {
        AllocationResult result =
            kubelet_->allocate("default", "worker-" + std::to_string(pod), "main", kIntelResource, 2);
        ASSERT_TRUE(result.ok) << result.error;
        ASSERT_EQ(result.deviceIds.size(), 2u);
        EXPECT_EQ(numaOf(result.deviceIds[0]), numaOf(result.deviceIds[1]))
            << result.deviceIds[0] << " " << result.deviceIds[1];
        const bool sameGpu = gpuOf(result.deviceIds[0]) == gpuOf(result.deviceIds[1]);
        if (policy == "packed") {
            EXPECT_TRUE(sameGpu) << "packed fills one GPU first";
        }
        // Two GPUs per node: the first request on each node gets two distinct GPUs.
        if (policy == "none" && pod < 2) {
            EXPECT_FALSE(sameGpu) << "none takes distinct GPUs first";
        }
    }
}

INSTANTIATE_TEST_SUITE_P(IntelPolicies, GpuPolicyTest, ::testing::Values("none", "balanced", "packed"));

TEST_F(GpuKubeletTest, DlStreamerStylePodAskingForOneI915GetsItsNodesAndProperties) {
    startWith("", 1);
    AllocationResult result =
        kubelet_->allocate("default", "dlstreamer-gpu-worker", "worker", kIntelResource, 1);
    ASSERT_TRUE(result.ok) << result.error;
    const auto& response = result.response;
    std::set<std::string> devices;
    for (const auto& spec : response.devices()) {
        devices.insert(spec.host_path());
        EXPECT_EQ(spec.permissions(), "rw");
    }
    ASSERT_EQ(devices.size(), 2u);
    const auto& envs = response.envs();
    ASSERT_TRUE(envs.contains("GPU_RENDER_NODE"));
    ASSERT_TRUE(envs.contains("GPU_CARD_NODE"));
    EXPECT_TRUE(devices.contains(envs.at("GPU_RENDER_NODE")));
    EXPECT_TRUE(devices.contains(envs.at("GPU_CARD_NODE")));
    EXPECT_EQ(envs.at("GPU_DRIVER"), "i915");
    EXPECT_EQ(envs.at("GPU_PCI_DEVICE_ID"), "0x56a0");
    EXPECT_EQ(envs.at("GPU_TYPE"), "discrete");
    // The by-path names travel as read-only bind mounts, beside the live file's directory.
    ASSERT_EQ(response.mounts_size(), 3);
    for (const auto& mount : response.mounts()) {
        EXPECT_TRUE(mount.read_only());
        if (mount.container_path() == "/run/devlet/info") continue;
        EXPECT_EQ(mount.host_path().rfind("/dev/dri/by-path/pci-" + envs.at("GPU_PCI_ADDRESS") + "-", 0), 0u)
            << mount.host_path();
    }
}

}  // namespace
}  // namespace devlet::test

#endif

int main(int argc, char** argv) {
    return devlet::test::runUnderUmockdev(argc, argv);
}
