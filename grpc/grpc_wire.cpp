#include "grpc/grpc_wire.h"

#include <charconv>

namespace devlet::rpc {

GrpcFrame frameMessage(std::string_view message) {
    std::string buffer;
    buffer.reserve(kGrpcPrefix + message.size());
    buffer.resize(kGrpcPrefix);
    buffer.append(message);
    return frameInPlace(std::move(buffer));
}

GrpcFrame frameInPlace(std::string buffer) {
    const auto size = static_cast<std::uint32_t>(buffer.size() - kGrpcPrefix);
    buffer[0] = 0;  // not compressed
    buffer[1] = static_cast<char>(size >> 24);
    buffer[2] = static_cast<char>(size >> 16);
    buffer[3] = static_cast<char>(size >> 8);
    buffer[4] = static_cast<char>(size);
    return std::make_shared<const std::string>(std::move(buffer));
}

std::variant<std::string_view, GrpcStatus> singleMessage(std::string_view body) {
    if (body.size() < 5) return GrpcStatus{GrpcCode::Internal, "no message"};
    const auto* prefix = reinterpret_cast<const unsigned char*>(body.data());
    const std::size_t length = (std::size_t{prefix[1]} << 24) | (std::size_t{prefix[2]} << 16) |
                               (std::size_t{prefix[3]} << 8) | std::size_t{prefix[4]};
    if (prefix[0] != 0) return GrpcStatus{GrpcCode::Unimplemented, "compressed messages are not supported"};
    if (length > kMaxGrpcMessage) return GrpcStatus{GrpcCode::ResourceExhausted, "message larger than 4 MiB"};
    if (body.size() != length + 5) return GrpcStatus{GrpcCode::Internal, "expected exactly one message"};
    return body.substr(5);
}

std::string percentEncode(std::string_view text) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    out.reserve(text.size());
    for (const char ch : text) {
        const auto byte = static_cast<unsigned char>(ch);
        if (byte < 0x20 || byte > 0x7e || byte == '%') {
            out.push_back('%');
            out.push_back(kHex[byte >> 4]);
            out.push_back(kHex[byte & 0xf]);
        } else {
            out.push_back(ch);
        }
    }
    return out;
}

std::string percentDecode(std::string_view text) {
    auto hex = [](char ch) -> int {
        if (ch >= '0' && ch <= '9') return ch - '0';
        if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
        if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
        return -1;
    };
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        // A '%' without two hex digits stays as it is, as gRPC's own decoders do.
        if (text[i] == '%' && i + 2 < text.size() && hex(text[i + 1]) >= 0 && hex(text[i + 2]) >= 0) {
            out.push_back(static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2])));
            i += 2;
        } else {
            out.push_back(text[i]);
        }
    }
    return out;
}

GrpcCode parseGrpcCode(std::string_view text) {
    int value = -1;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || value < 0 || value > 16)
        return GrpcCode::Unknown;
    return static_cast<GrpcCode>(value);
}

}  // namespace devlet::rpc
