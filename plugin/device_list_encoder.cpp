#include "plugin/device_list_encoder.h"

#include <cstdint>
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

void appendVarint(std::string& out, std::uint64_t value) {
    while (value >= 0x80) {
        out.push_back(static_cast<char>((value & 0x7f) | 0x80));
        value >>= 7;
    }
    out.push_back(static_cast<char>(value));
}

void appendBytes(std::string& out, char tag, std::string_view bytes) {
    out.push_back(tag);
    appendVarint(out, bytes.size());
    out.append(bytes);
}

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

std::string encodeDeviceList(const std::vector<DeviceState>& devices) {
    std::size_t total = 0;
    for (const DeviceState& device : devices) {
        const std::size_t size = sizesOf(device).device;
        total += 1 + varintSize(size) + size;
    }
    std::string out;
    out.reserve(total);
    for (const DeviceState& device : devices) {
        const DeviceSizes sizes = sizesOf(device);
        out.push_back(kListDevices);
        appendVarint(out, sizes.device);
        appendBytes(out, kDeviceId, device.id);
        appendBytes(out, kDeviceHealth, device.healthy ? kHealthy : kUnhealthy);
        if (device.numaNode) {
            out.push_back(kDeviceTopology);
            appendVarint(out, sizes.topology);
            out.push_back(kTopologyNodes);
            appendVarint(out, sizes.node);
            if (*device.numaNode != 0) {
                out.push_back(kNodeId);
                appendVarint(out, int64Wire(*device.numaNode));
            }
        }
    }
    return out;
}

}  // namespace devlet::plugin
