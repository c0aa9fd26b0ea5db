#include "probes/onvif/username_token.h"

#include <openssl/rand.h>
#include <openssl/sha.h>

#include "runtime/rfc3339.h"

namespace devlet::onvif {

std::string passwordDigest(const std::string& nonce, const std::string& created,
                           const std::string& password) {
    const std::string input = nonce + created + password;
    unsigned char digest[SHA_DIGEST_LENGTH];
    SHA1(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
    return base64Encode(std::string(reinterpret_cast<const char*>(digest), sizeof digest));
}

std::string formatCreated(std::chrono::system_clock::time_point time) {
    return rfc3339(time, TimePrecision::Milliseconds);
}

std::chrono::milliseconds tokenClockOffset(std::chrono::milliseconds cameraOffset) {
    return cameraOffset > kMaxClockLead ? std::chrono::milliseconds(0) : cameraOffset;
}

UsernameToken makeUsernameToken(const std::string& username, const std::string& password,
                                std::chrono::milliseconds clockOffset) {
    std::string nonce(16, '\0');
    if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), int(nonce.size())) != 1) {
        // Without randomness the token still authenticates; replay protection is the camera's.
        const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
        for (std::size_t i = 0; i < nonce.size(); ++i) nonce[i] = char((now >> (i % 8 * 8)) & 0xff);
    }
    UsernameToken token;
    token.username = username;
    token.created = formatCreated(std::chrono::system_clock::now() + tokenClockOffset(clockOffset));
    token.nonce = base64Encode(nonce);
    token.passwordDigest = passwordDigest(nonce, token.created, password);
    return token;
}

}  // namespace devlet::onvif
