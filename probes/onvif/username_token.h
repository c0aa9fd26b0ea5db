#pragma once
// WS-Security UsernameToken with PasswordDigest, as ONVIF cameras check it:
// Digest = Base64(SHA1(nonce + created + password)). `created` is stamped with the camera's
// clock (local time + the offset GetSystemDateAndTime showed), because cameras with a wrong
// clock refuse tokens made with ours. Pure apart from the random nonce; any thread.

#include <chrono>
#include <string>

namespace devlet::onvif {

struct UsernameToken {
    std::string username;
    std::string passwordDigest;  // Base64
    std::string nonce;           // Base64
    std::string created;         // YYYY-MM-DDThh:mm:ss.sssZ
};

std::string base64Encode(const std::string& bytes);
// nullopt-free: invalid input decodes to an empty string.
std::string base64Decode(const std::string& text);

// Base64(SHA1(nonce + created + password)); `nonce` as raw bytes.
std::string passwordDigest(const std::string& nonce, const std::string& created, const std::string& password);

std::string formatCreated(std::chrono::system_clock::time_point time);

// A token for now + clockOffset with a fresh 16-byte random nonce.
UsernameToken makeUsernameToken(const std::string& username, const std::string& password,
                                std::chrono::milliseconds clockOffset);

}  // namespace devlet::onvif
