// readHeldDevices against what protobuf itself writes for ListPodResourcesResponse:
// several pods, containers and resources, the fields devlet does not read (CPU ids,
// memory, topology, DRA claims), fields out of their usual order, and bytes that are
// not such a message at all.
#include <gtest/gtest.h>

#include "plugin/pod_resources_client.h"
#include "podresources/v1/api.pb.h"

namespace devlet::plugin {
namespace {

std::vector<std::tuple<std::string, std::string, std::string, std::string>> flat(
    const std::vector<PodDevice>& held) {
    std::vector<std::tuple<std::string, std::string, std::string, std::string>> out;
    for (const PodDevice& d : held) out.emplace_back(d.podNamespace, d.pod, d.resource, d.deviceId);
    return out;
}

TEST(PodResourcesReader, ReadsEveryHeldDeviceAndSkipsTheRest) {
    v1::ListPodResourcesResponse response;
    auto* pod = response.add_pod_resources();
    pod->set_name("camera-0");
    pod->set_namespace_("video");
    auto* container = pod->add_containers();
    container->set_name("broker");
    container->add_cpu_ids(3);
    container->add_cpu_ids(300);
    auto* memory = container->add_memory();
    memory->set_memory_type("memory");
    memory->set_size(1 << 30);
    memory->mutable_topology()->add_nodes()->set_id(1);
    auto* devices = container->add_devices();
    devices->set_resource_name("akri.sh/cams");
    devices->add_device_ids("cams-4294ea-0");
    devices->add_device_ids("cams-4294ea-1");
    devices->mutable_topology()->add_nodes()->set_id(0);
    auto* other = container->add_devices();
    other->set_resource_name("gpu.intel.com/i915");
    other->add_device_ids("gpu-8120fe-0");
    container->add_dynamic_resources()->set_claim_name("claim");
    auto* idle = response.add_pod_resources();
    idle->set_name("no-devices");
    idle->set_namespace_("default");
    idle->add_containers()->set_name("main");

    std::vector<PodDevice> held;
    ASSERT_TRUE(readHeldDevices(response.SerializeAsString(), held));
    using Row = std::tuple<std::string, std::string, std::string, std::string>;
    EXPECT_EQ(flat(held), (std::vector<Row>{{"video", "camera-0", "akri.sh/cams", "cams-4294ea-0"},
                                            {"video", "camera-0", "akri.sh/cams", "cams-4294ea-1"},
                                            {"video", "camera-0", "gpu.intel.com/i915", "gpu-8120fe-0"}}));
}

TEST(PodResourcesReader, PodNameAfterItsContainersStillCounts) {
    v1::ContainerResources container;
    auto* devices = container.add_devices();
    devices->set_resource_name("akri.sh/echo");
    devices->add_device_ids("echo-a19705-0");
    // containers (3) first, then namespace (2) and name (1): a valid encoding too.
    std::string pod =
        "\x1a" + std::string(1, static_cast<char>(container.ByteSizeLong())) + container.SerializeAsString();
    pod += std::string("\x12\x03ns1", 5) + std::string("\x0a\x04pod1", 6);
    const std::string response = "\x0a" + std::string(1, static_cast<char>(pod.size())) + pod;

    std::vector<PodDevice> held;
    ASSERT_TRUE(readHeldDevices(response, held));
    ASSERT_EQ(held.size(), 1u);
    EXPECT_EQ(held[0].pod, "pod1");
    EXPECT_EQ(held[0].podNamespace, "ns1");
    EXPECT_EQ(held[0].deviceId, "echo-a19705-0");
}

TEST(PodResourcesReader, NoPodsIsAnEmptyList) {
    std::vector<PodDevice> held;
    EXPECT_TRUE(readHeldDevices("", held));
    EXPECT_TRUE(held.empty());
}

TEST(PodResourcesReader, BytesThatAreNotTheMessageAreRefused) {
    v1::ListPodResourcesResponse response;
    auto* pod = response.add_pod_resources();
    pod->set_name("camera-0");
    pod->add_containers()->add_devices()->add_device_ids("x");
    const std::string bytes = response.SerializeAsString();
    std::vector<PodDevice> held;
    EXPECT_FALSE(readHeldDevices(bytes.substr(0, bytes.size() - 1), held));           // cut short
    EXPECT_FALSE(readHeldDevices(std::string("\x0a\xff\xff\xff\xff\x0f", 6), held));  // length beyond the end
    EXPECT_FALSE(readHeldDevices(std::string("\x0b", 1), held));                      // a group
    EXPECT_FALSE(readHeldDevices("GET / HTTP/1.1", held));
}

}  // namespace
}  // namespace devlet::plugin
