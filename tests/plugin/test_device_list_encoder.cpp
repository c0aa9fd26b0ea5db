// The encoder writes what protobuf itself writes for ListAndWatchResponse, byte for
// byte, and protobuf reads it back: health, topology (also a negative NUMA id), long ids
// and lists of thousands of slots, also written behind room for the gRPC prefix.
#include <gtest/gtest.h>

#include "deviceplugin/v1beta1/api.pb.h"
#include "grpc/grpc_wire.h"
#include "plugin/device_list_encoder.h"

namespace devlet::plugin {
namespace {

std::vector<DeviceState> decode(const std::string& bytes) {
    v1beta1::ListAndWatchResponse response;
    EXPECT_TRUE(response.ParseFromString(bytes));
    std::vector<DeviceState> devices;
    for (const auto& d : response.devices()) {
        DeviceState device{d.id(), d.health() == "Healthy", std::nullopt};
        EXPECT_TRUE(d.health() == "Healthy" || d.health() == "Unhealthy") << d.health();
        if (d.has_topology()) {
            EXPECT_EQ(d.topology().nodes_size(), 1);
            device.numaNode = static_cast<int>(d.topology().nodes(0).id());
        }
        devices.push_back(device);
    }
    return devices;
}

std::vector<DeviceState> slots(int instances, int capacity) {
    std::vector<DeviceState> devices;
    for (int i = 0; i < instances; ++i) {
        for (int k = 0; k < capacity; ++k)
            devices.push_back({"akri-debug-echo-" + std::to_string(100000 + i) + "-" + std::to_string(k),
                               true, std::nullopt});
    }
    return devices;
}

TEST(DeviceListEncoder, EmptyListIsAnEmptyMessage) {
    EXPECT_EQ(*encodeDeviceList({}), "");
}

TEST(DeviceListEncoder, MatchesProtobufForHealthAndTopology) {
    const std::vector<DeviceState> devices{
        {"a-0", true, std::nullopt},       {"a-1", false, 0},  {"b-0", true, 3},
        {std::string(300, 'x'), false, 1}, {"c-0", true, 200}, {"d-0", false, -1}};
    const std::string bytes = *encodeDeviceList(devices);
    EXPECT_EQ(decode(bytes), devices);

    v1beta1::ListAndWatchResponse reference;
    for (const DeviceState& device : devices) {
        auto* d = reference.add_devices();
        d->set_id(device.id);
        d->set_health(device.healthy ? "Healthy" : "Unhealthy");
        if (device.numaNode) d->mutable_topology()->add_nodes()->set_id(*device.numaNode);
    }
    EXPECT_EQ(bytes, reference.SerializeAsString());
}

TEST(DeviceListEncoder, ConfigurationLevelListRoundTrips) {
    std::vector<DeviceState> devices = slots(1000, 4);
    devices[1234].healthy = false;  // one slot taken elsewhere
    devices[7].numaNode = 1;
    EXPECT_EQ(decode(*encodeDeviceList(devices)), devices);
}

TEST(DeviceListEncoder, FramedInPlaceAsGrpcFramesACopy) {
    const std::vector<DeviceState> devices = slots(3, 2);
    const std::string withRoom = *encodeDeviceList(devices, rpc::kGrpcPrefix);
    EXPECT_EQ(withRoom.substr(0, rpc::kGrpcPrefix), std::string(rpc::kGrpcPrefix, '\0'));
    EXPECT_EQ(*rpc::frameInPlace(withRoom), *rpc::frameMessage(*encodeDeviceList(devices)));
    EXPECT_EQ(*rpc::frameInPlace(*encodeDeviceList({}, rpc::kGrpcPrefix)),
              std::string(rpc::kGrpcPrefix, '\0'));
}

TEST(DeviceListEncoder, PatchedListIsTheChangedListEncoded) {
    std::vector<DeviceState> devices = slots(1000, 4);
    devices[9].numaNode = 1;
    const std::string list = *encodeDeviceList(devices);
    // Healthy to Unhealthy and back, with and without topology, first and last entry.
    std::vector<DeviceState> changes = {devices[0], devices[9], devices[3999], devices[1234]};
    for (DeviceState& change : changes) change.healthy = !change.healthy;
    changes[1].numaNode = 0;
    auto patched = patchDeviceList(list, changes, rpc::kGrpcPrefix);
    ASSERT_TRUE(patched);
    for (const DeviceState& change : changes) {
        for (DeviceState& device : devices) {
            if (device.id == change.id) device = change;
        }
    }
    EXPECT_EQ(*patched, *encodeDeviceList(devices, rpc::kGrpcPrefix));

    auto unchanged = patchDeviceList(list, {}, 0);
    ASSERT_TRUE(unchanged);
    EXPECT_EQ(*unchanged, list);
}

TEST(DeviceListEncoder, PatchNeedsEveryChangedIdInTheList) {
    const std::string list = *encodeDeviceList(slots(2, 2));
    EXPECT_FALSE(patchDeviceList(list, {{"akri-debug-echo-100000-7", false, std::nullopt}}));
    EXPECT_FALSE(patchDeviceList(list.substr(0, list.size() - 1), {{"akri-debug-echo-100000-0", false, {}}}));
    EXPECT_FALSE(patchDeviceList("\x0a\xff", {{"a-0", false, {}}}));
    EXPECT_FALSE(patchDeviceList("\x12\x00", {{"a-0", false, {}}}));
    const std::string twice = *encodeDeviceList({{"a-0", true, {}}, {"a-0", true, {}}});
    EXPECT_FALSE(patchDeviceList(twice, {{"a-0", false, {}}}));
}

}  // namespace
}  // namespace devlet::plugin
