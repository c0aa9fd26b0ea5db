// Fuzz target: the bytes devlet reads from the kubelet outside HTTP/2 itself: a
// PodResources List answer (readHeldDevices, compared with protobuf's own parser), a
// unary body (singleMessage), and a grpc-message value (percentDecode, with
// percentEncode's round trip) and a grpc-status value (parseGrpcCode).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>
#include <tuple>
#include <variant>
#include <vector>

#include "grpc/grpc_wire.h"
#include "plugin/pod_resources_client.h"
#include "podresources/v1/api.pb.h"

namespace {

using namespace devlet::plugin;
using namespace devlet::rpc;
using Row = std::tuple<std::string, std::string, std::string, std::string>;

[[noreturn]] void broken(const std::string& what) {
    std::cerr << "broken promise: " << what << "\n";
    std::abort();
}

// Where readHeldDevices takes the bytes, it must find the held devices the message that
// protobuf parses from them holds, in its order.
void compareWithProtobuf(std::string_view bytes) {
    std::vector<devlet::PodDevice> held;
    const bool ours = readHeldDevices(bytes, held);
    v1::ListPodResourcesResponse response;
    if (!ours || !response.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return;
    std::vector<Row> expected;
    for (const auto& pod : response.pod_resources()) {
        for (const auto& container : pod.containers()) {
            for (const auto& devices : container.devices()) {
                for (const auto& id : devices.device_ids())
                    expected.emplace_back(pod.namespace_(), pod.name(), devices.resource_name(), id);
            }
        }
    }
    std::vector<Row> found;
    found.reserve(held.size());
    for (const auto& d : held) found.emplace_back(d.podNamespace, d.pod, d.resource, d.deviceId);
    if (found != expected)
        broken("readHeldDevices found " + std::to_string(found.size()) + " devices, protobuf " +
               std::to_string(expected.size()) + " (or others)");
}

void checkSingleMessage(std::string_view body) {
    const auto message = singleMessage(body);
    if (const auto* view = std::get_if<std::string_view>(&message)) {
        if (view->size() + 5 != body.size() || view->size() > kMaxGrpcMessage ||
            view->data() != body.data() + 5)
            broken("singleMessage gave a message that is not the body's");
        const GrpcFrame framed = frameMessage(*view);
        const auto again = singleMessage(*framed);
        if (!std::holds_alternative<std::string_view>(again) || std::get<std::string_view>(again) != *view)
            broken("a framed message does not read back");
    } else if (std::get<GrpcStatus>(message).ok() || std::get<GrpcStatus>(message).message.empty()) {
        broken("singleMessage refused without a status that says why");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    compareWithProtobuf(bytes);
    checkSingleMessage(bytes);
    const std::string decoded = percentDecode(bytes);
    if (decoded.size() > bytes.size()) broken("percentDecode grew its input");
    if (percentDecode(percentEncode(bytes)) != bytes) broken("percentEncode does not round-trip");
    for (const char c : percentEncode(bytes)) {
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e)
            broken("percentEncode left a byte outside printable ASCII");
    }
    const GrpcCode code = parseGrpcCode(bytes);
    if (static_cast<int>(code) < 0 || static_cast<int>(code) > 16) broken("parseGrpcCode out of range");
    return 0;
}
