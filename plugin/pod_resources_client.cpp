#include "plugin/pod_resources_client.h"

#include <filesystem>

#include "plugin/grpc_channel.h"

namespace devlet::plugin {

namespace {
// Calls visit(field, value) for each length-delimited field of a protobuf message and
// steps over the others; false if the bytes are not a well-formed message.
template <typename Visit>
bool forEachField(std::string_view message, Visit visit) {
    auto varint = [&message](std::uint64_t& value) {
        value = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (message.empty()) return false;
            const auto byte = static_cast<std::uint8_t>(message.front());
            message.remove_prefix(1);
            value |= std::uint64_t{byte & 0x7fu} << shift;
            if (!(byte & 0x80)) return true;
        }
        return false;
    };
    while (!message.empty()) {
        std::uint64_t tag = 0, value = 0;
        if (!varint(tag)) return false;
        switch (tag & 7) {
            case 0:  // varint
                if (!varint(value)) return false;
                break;
            case 1:  // 64-bit
            case 5:  // 32-bit
                if (message.size() < ((tag & 7) == 1 ? 8u : 4u)) return false;
                message.remove_prefix((tag & 7) == 1 ? 8 : 4);
                break;
            case 2:  // length-delimited
                if (!varint(value) || value > message.size()) return false;
                if (!visit(tag >> 3, message.substr(0, value))) return false;
                message.remove_prefix(value);
                break;
            default:  // groups are gone from proto3; anything else is not protobuf
                return false;
        }
    }
    return true;
}
}  // namespace

bool readHeldDevices(std::string_view response, std::vector<PodDevice>& held) {
    // ListPodResourcesResponse.pod_resources = 1; PodResources: name = 1, namespace = 2,
    // containers = 3; ContainerResources.devices = 2; ContainerDevices: resource_name = 1,
    // device_ids = 2. Fields may come in any order, so a pod's name is known at its end.
    return forEachField(response, [&](std::uint64_t field, std::string_view pod) {
        if (field != 1) return true;
        std::string_view name, space;
        const std::size_t first = held.size();
        const bool ok = forEachField(pod, [&](std::uint64_t podField, std::string_view value) {
            if (podField == 1) name = value;
            if (podField == 2) space = value;
            if (podField != 3) return true;
            return forEachField(value, [&](std::uint64_t containerField, std::string_view devices) {
                if (containerField != 2) return true;
                std::string_view resource;
                std::vector<std::string_view> ids;
                const bool read =
                    forEachField(devices, [&](std::uint64_t devicesField, std::string_view text) {
                        if (devicesField == 1) resource = text;
                        if (devicesField == 2) ids.push_back(text);
                        return true;
                    });
                for (std::string_view id : ids)
                    held.push_back({std::string(resource), std::string(id), {}, {}, {}});
                return read;
            });
        });
        for (std::size_t i = first; i < held.size(); ++i) {
            held[i].pod = name;
            held[i].podNamespace = space;
        }
        return ok;
    });
}

PodResourcesClient::PodResourcesClient(boost::asio::io_context& loop, std::string socketPath,
                                       std::chrono::milliseconds interval, ListHandler onList,
                                       ErrorHandler onError)
    : loop_(loop),
      socketPath_(std::move(socketPath)),
      interval_(interval),
      onList_(std::move(onList)),
      onError_(std::move(onError)),
      timer_(loop) {}

PodResourcesClient::~PodResourcesClient() {
    *alive_ = false;
    stop();
}

void PodResourcesClient::start() {
    schedule(std::chrono::milliseconds(0));
}

void PodResourcesClient::stop() {
    timer_.cancel();
}

void PodResourcesClient::schedule(std::chrono::milliseconds delay) {
    timer_.expires_after(delay);
    timer_.async_wait([this](boost::system::error_code ec) {
        if (!ec) poll();
    });
}

void PodResourcesClient::poll() {
    schedule(interval_);
    if (inFlight_) return;
    std::error_code exists;
    if (!std::filesystem::exists(socketPath_, exists)) {
        channel_.reset();
        onError_("no PodResources API at " + socketPath_);
        return;
    }
    if (!channel_) channel_ = std::make_unique<GrpcChannel>(loop_, socketPath_);
    inFlight_ = true;
    channel_->call(
        // ListPodResourcesRequest has no fields: its encoding is empty.
        "/v1.PodResourcesLister/List", std::string(), {.timeout = std::chrono::seconds(3)},
        [this, alive = alive_](const GrpcStatus& status, const std::string& bytes) {
            if (!*alive) return;
            inFlight_ = false;
            if (!status.ok()) {
                // A fresh connection next time: a restarted kubelet has a new socket.
                channel_.reset();
                onError_("PodResources List at " + socketPath_ + " failed: " + status.message);
                return;
            }
            std::vector<PodDevice> held;
            if (!readHeldDevices(bytes, held)) {
                onError_("PodResources List at " + socketPath_ + " answered something that is not a list");
                return;
            }
            onList_(std::move(held));
        });
}

}  // namespace devlet::plugin
