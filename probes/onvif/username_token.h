#pragma once
// WS-Security UsernameToken with PasswordDigest, as ONVIF cameras check it:
// Digest = Base64(SHA1(nonce + created + password)). `created` is stamped with the camera's
// clock (local time + the offset GetSystemDateAndTime showed), because cameras with a wrong
// clock refuse tokens made with ours. Pure apart from the random nonce; any thread.
//
// The camera's time is what whoever answers GetSystemDateAndTime says, so it is trusted only
// so far: a token stamped far in the future stays fresh until then, and whoever chose that
// time could replay it to the real camera later. A clock behind ours gives no such token
// (it is stale everywhere clocks are right), and cameras that lost their time (back to 1970
// or 2000 after a power cut) are common, so only a lead is bounded.

#include <chrono>
#include <string>

#include "runtime/base64.h"

namespace devlet::onvif {

struct UsernameToken {
    std::string username;
    std::string passwordDigest;  // Base64
    std::string nonce;           // Base64
    std::string created;         // YYYY-MM-DDThh:mm:ss.sssZ
};

// Base64(SHA1(nonce + created + password)); `nonce` as raw bytes.
std::string passwordDigest(const std::string& nonce, const std::string& created, const std::string& password);

std::string formatCreated(std::chrono::system_clock::time_point time);

// The most a camera's clock may be ahead of ours for its time to stamp a token.
inline constexpr std::chrono::hours kMaxClockLead{24};

// The offset a token is stamped with: the camera's, or none (our clock) when the camera is
// more than kMaxClockLead ahead.
std::chrono::milliseconds tokenClockOffset(std::chrono::milliseconds cameraOffset);

// A token for now + clockOffset with a fresh 16-byte random nonce.
UsernameToken makeUsernameToken(const std::string& username, const std::string& password,
                                std::chrono::milliseconds clockOffset);

}  // namespace devlet::onvif
