#include "plugin/device_list_encoder.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
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
// finding the slots they describe. It knows where the buffer ends: a write that does not
// fit is not made, and neither is any write after it (failed() says so), so a size
// computed wrongly costs a list, never memory that is not the buffer's.
class Writer {
public:
    Writer(char* at, char* end) : at_(at), end_(end) {}
    bool failed() const { return failed_; }
    // Where the next byte goes (the buffer's end once a write failed).
    char* position() const { return at_; }

    void byte(char value) {
        if (at_ == end_) return fail();
        *at_++ = value;
    }
    void varint(std::uint64_t value) {
        while (value >= 0x80) {
            if (at_ == end_) return fail();
            *at_++ = static_cast<char>((value & 0x7f) | 0x80);
            value >>= 7;
        }
        byte(static_cast<char>(value));
    }
    void bytes(std::string_view data) {
        if (data.size() > static_cast<std::size_t>(end_ - at_)) return fail();
        if (!data.empty()) std::memcpy(at_, data.data(), data.size());
        at_ += data.size();
    }
    void field(char tag, std::string_view value) {
        byte(tag);
        varint(value.size());
        bytes(value);
    }

private:
    void fail() {
        failed_ = true;
        at_ = end_;
    }

    char* at_;
    char* end_;
    bool failed_ = false;
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

std::size_t encodedSize(const DeviceState& device) {
    const std::size_t size = sizesOf(device).device;
    return 1 + varintSize(size) + size;
}

void writeDevice(Writer& writer, const DeviceState& device) {
    const DeviceSizes sizes = sizesOf(device);
    writer.byte(kListDevices);
    writer.varint(sizes.device);
    writer.field(kDeviceId, device.id);
    writer.field(kDeviceHealth, device.healthy ? kHealthy : kUnhealthy);
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

// Reads a varint at `at`, moving it past; nullopt past `end` or over ten bytes.
std::optional<std::uint64_t> readVarint(const char*& at, const char* end) {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64 && at < end; shift += 7) {
        const auto byte = static_cast<std::uint8_t>(*at++);
        value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
        if (!(byte & 0x80)) return value;
    }
    return std::nullopt;
}

// One device entry of an encoded list: where it lies and its id.
struct Entry {
    const char* begin = nullptr;
    const char* end = nullptr;
    std::string_view id;
};

// The entry at `at` (which must be the list's next field); nullopt if the bytes are not
// an entry as encodeDeviceList writes it.
std::optional<Entry> readEntry(const char* at, const char* end) {
    Entry entry{at, nullptr, {}};
    if (*at++ != kListDevices) return std::nullopt;
    const auto size = readVarint(at, end);
    if (!size || *size > static_cast<std::uint64_t>(end - at)) return std::nullopt;
    entry.end = at + *size;
    if (at == entry.end || *at != kDeviceId) return std::nullopt;
    ++at;
    const auto idSize = readVarint(at, entry.end);
    if (!idSize || *idSize > static_cast<std::uint64_t>(entry.end - at)) return std::nullopt;
    entry.id = std::string_view(at, *idSize);
    return entry;
}
}  // namespace

std::optional<std::string> encodeDeviceList(const std::vector<DeviceState>& devices, std::size_t headroom) {
    std::size_t total = headroom;
    for (const DeviceState& device : devices) total += encodedSize(device);
    std::string out(total, '\0');
    Writer writer(out.data() + headroom, out.data() + out.size());
    for (const DeviceState& device : devices) writeDevice(writer, device);
    if (writer.failed() || writer.position() != out.data() + out.size()) return std::nullopt;
    return out;
}

std::optional<std::string> patchDeviceList(std::string_view list, const std::vector<DeviceState>& changes,
                                           std::size_t headroom) {
    std::map<std::string_view, const DeviceState*> wanted;
    for (const DeviceState& change : changes) wanted[change.id] = &change;
    // Each entry to write anew, in the list's order.
    std::vector<std::pair<Entry, const DeviceState*>> found;
    std::size_t total = headroom + list.size();
    const char* const end = list.data() + list.size();
    for (const char* at = list.data(); at < end;) {
        const auto entry = readEntry(at, end);
        if (!entry) return std::nullopt;
        if (auto it = wanted.find(entry->id); it != wanted.end()) {
            if (!it->second) return std::nullopt;  // an id listed twice: not a list devlet wrote
            total = total - static_cast<std::size_t>(entry->end - entry->begin) + encodedSize(*it->second);
            found.emplace_back(*entry, it->second);
            it->second = nullptr;
        }
        at = entry->end;
    }
    if (found.size() != wanted.size()) return std::nullopt;
    std::string out(total, '\0');
    Writer writer(out.data() + headroom, out.data() + out.size());
    const char* copied = list.data();
    for (const auto& [entry, device] : found) {
        writer.bytes(std::string_view(copied, static_cast<std::size_t>(entry.begin - copied)));
        writeDevice(writer, *device);
        copied = entry.end;
    }
    writer.bytes(std::string_view(copied, static_cast<std::size_t>(end - copied)));
    if (writer.failed() || writer.position() != out.data() + out.size()) return std::nullopt;
    return out;
}

}  // namespace devlet::plugin
