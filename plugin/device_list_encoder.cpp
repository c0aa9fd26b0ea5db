#include "plugin/device_list_encoder.h"

#include <cstdint>
#include <cstring>
#include <string_view>

namespace devlet::plugin {

namespace {
// Field tags: (number << 3) | wire type (0 varint, 2 length-delimited).
constexpr char kListDevices = (1 << 3) | 2;     // ListAndWatchResponse.devices
constexpr char kDeviceId = (1 << 3) | 2;        // Device.ID
constexpr char kDeviceHealth = (2 << 3) | 2;    // Device.health
constexpr char kDeviceTopology = (3 << 3) | 2;  // Device.topology
constexpr char kTopologyNodes = (1 << 3) | 2;   // TopologyInfo.nodes
constexpr char kNodeId = (1 << 3) | 0;          // NUMANode.ID (int64)
constexpr std::string_view kHealthy = "Healthy";
constexpr std::string_view kUnhealthy = "Unhealthy";

std::size_t varintSize(std::uint64_t value) {
    std::size_t size = 1;
    while (value >= 0x80) {
        value >>= 7;
        ++size;
    }
    return size;
}

// Writes at a cursor into a buffer sized beforehand: a configuration-level list is
// thousands of tiny fields, and appending them one by one to a string cost more than
// finding the slots they describe.
class Writer {
public:
    explicit Writer(char* at) : at_(at) {}
    void byte(char value) { *at_++ = value; }
    void varint(std::uint64_t value) {
        while (value >= 0x80) {
            *at_++ = static_cast<char>((value & 0x7f) | 0x80);
            value >>= 7;
        }
        *at_++ = static_cast<char>(value);
    }
    void bytes(char tag, std::string_view bytes) {
        byte(tag);
        varint(bytes.size());
        std::memcpy(at_, bytes.data(), bytes.size());
        at_ += bytes.size();
    }

private:
    char* at_;
};

// int64 as protobuf writes it: negative values as ten-byte two's complement.
std::uint64_t int64Wire(int value) {
    return static_cast<std::uint64_t>(static_cast<std::int64_t>(value));
}

// Sizes of a device's nested messages, so each is written once, front to back.
struct DeviceSizes {
    std::size_t node = 0;      // NUMANode
    std::size_t topology = 0;  // TopologyInfo
    std::size_t device = 0;    // Device
};

DeviceSizes sizesOf(const DeviceState& device) {
    DeviceSizes sizes;
    const std::string_view health = device.healthy ? kHealthy : kUnhealthy;
    sizes.device =
        1 + varintSize(device.id.size()) + device.id.size() + 1 + varintSize(health.size()) + health.size();
    if (device.numaNode) {
        // proto3 leaves out a field at its default: NUMA node 0 is an empty NUMANode.
        sizes.node = *device.numaNode == 0 ? 0 : 1 + varintSize(int64Wire(*device.numaNode));
        sizes.topology = 1 + varintSize(sizes.node) + sizes.node;
        sizes.device += 1 + varintSize(sizes.topology) + sizes.topology;
    }
    return sizes;
}
}  // namespace

std::string encodeDeviceList(const std::vector<DeviceState>& devices, std::size_t headroom) {
    std::size_t total = headroom;
    for (const DeviceState& device : devices) {
        const std::size_t size = sizesOf(device).device;
        total += 1 + varintSize(size) + size;
    }
    std::string out(total, '\0');
    Writer writer(out.data() + headroom);
    for (const DeviceState& device : devices) {
        const DeviceSizes sizes = sizesOf(device);
        writer.byte(kListDevices);
        writer.varint(sizes.device);
        writer.bytes(kDeviceId, device.id);
        writer.bytes(kDeviceHealth, device.healthy ? kHealthy : kUnhealthy);
        if (device.numaNode) {
            writer.byte(kDeviceTopology);
            writer.varint(sizes.topology);
            writer.byte(kTopologyNodes);
            writer.varint(sizes.node);
            if (*device.numaNode != 0) {
                writer.byte(kNodeId);
                writer.varint(int64Wire(*device.numaNode));
            }
        }
    }
    return out;
}

}  // namespace devlet::plugin
