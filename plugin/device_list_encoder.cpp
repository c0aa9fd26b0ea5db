#include "plugin/device_list_encoder.h"

#include "deviceplugin/v1beta1/api.pb.h"

namespace devlet::plugin {

namespace {
// ListAndWatchResponse.devices is field 1, length-delimited.
constexpr char kDevicesTag = (1 << 3) | 2;

void appendVarint(std::string& out, std::size_t value) {
    while (value >= 0x80) {
        out.push_back(static_cast<char>((value & 0x7f) | 0x80));
        value >>= 7;
    }
    out.push_back(static_cast<char>(value));
}

std::string encodeEntry(const DeviceState& device) {
    v1beta1::Device message;
    message.set_id(device.id);
    message.set_health(device.healthy ? "Healthy" : "Unhealthy");
    if (device.numaNode) message.mutable_topology()->add_nodes()->set_id(*device.numaNode);
    const std::string body = message.SerializeAsString();
    std::string entry;
    entry.reserve(body.size() + 6);
    entry.push_back(kDevicesTag);
    appendVarint(entry, body.size());
    entry += body;
    return entry;
}
}  // namespace

std::string DeviceListEncoder::encode(const std::vector<DeviceState>& devices) {
    entries_.resize(devices.size());
    std::size_t size = 0;
    for (std::size_t i = 0; i < devices.size(); ++i) {
        Entry& entry = entries_[i];
        if (entry.bytes.empty() || !(entry.device == devices[i])) {
            entry.device = devices[i];
            entry.bytes = encodeEntry(devices[i]);
        }
        size += entry.bytes.size();
    }
    std::string out;
    out.reserve(size);
    for (const Entry& entry : entries_) out += entry.bytes;
    return out;
}

}  // namespace devlet::plugin
