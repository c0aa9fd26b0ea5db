#pragma once
// gRPC's framing on top of HTTP/2, as the kubelet's APIs use it: length-prefixed
// protobuf messages, statuses in grpc-status and a percent-encoded grpc-message.
// Pure functions; the connections in this folder use them on both sides.

#include <memory>
#include <string>
#include <string_view>
#include <variant>

namespace devlet::rpc {

// gRPC status codes (the values are gRPC's).
enum class GrpcCode : int {
    Ok = 0,
    Cancelled = 1,
    Unknown = 2,
    InvalidArgument = 3,
    DeadlineExceeded = 4,
    ResourceExhausted = 8,
    FailedPrecondition = 9,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
};

struct GrpcStatus {
    GrpcCode code = GrpcCode::Ok;
    std::string message;
    bool ok() const { return code == GrpcCode::Ok; }
};

// One message as it goes on the wire (the 5-byte prefix, then the message), shared by
// every stream that sends it.
using GrpcFrame = std::shared_ptr<const std::string>;
GrpcFrame frameMessage(std::string_view message);
// The same without copying the message: `buffer` is kGrpcPrefix bytes of room, then the
// message (a device list of thousands of slots is written this way).
constexpr std::size_t kGrpcPrefix = 5;
GrpcFrame frameInPlace(std::string buffer);

// Largest message accepted in either direction (gRPC's default receive limit).
constexpr std::size_t kMaxGrpcMessage = 4 * 1024 * 1024;

// The one message a unary body holds, or why the body is not exactly one uncompressed
// message no larger than kMaxGrpcMessage.
std::variant<std::string_view, GrpcStatus> singleMessage(std::string_view body);

// grpc-message's value: bytes outside printable ASCII, and '%', percent-encoded.
std::string percentEncode(std::string_view text);
std::string percentDecode(std::string_view text);

// The status a grpc-status header carries ("0".."16"); Unknown for anything else.
GrpcCode parseGrpcCode(std::string_view text);

}  // namespace devlet::rpc
