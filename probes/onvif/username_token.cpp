#include "probes/onvif/username_token.h"

#include <cstdio>
#include <ctime>

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

namespace devlet::onvif {

std::string base64Encode(const std::string& bytes) {
    std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(bytes.data()), int(bytes.size()));
    out.resize(n < 0 ? 0 : std::size_t(n));
    return out;
}

std::string base64Decode(const std::string& text) {
    if (text.empty() || text.size() % 4 != 0) return "";
    std::string out(3 * text.size() / 4 + 1, '\0');
    const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(text.data()), int(text.size()));
    if (n < 0) return "";
    std::size_t size = std::size_t(n);
    // EVP_DecodeBlock counts the padding as zero bytes.
    if (text.ends_with("=="))
        size -= 2;
    else if (text.ends_with("="))
        size -= 1;
    out.resize(size);
    return out;
}

std::string passwordDigest(const std::string& nonce, const std::string& created,
                           const std::string& password) {
    const std::string input = nonce + created + password;
    unsigned char digest[SHA_DIGEST_LENGTH];
    SHA1(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
    return base64Encode(std::string(reinterpret_cast<const char*>(digest), sizeof digest));
}

std::string formatCreated(std::chrono::system_clock::time_point time) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch()).count();
    const std::time_t seconds = std::time_t(ms / 1000);
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char text[96];
    std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                  utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, int(ms % 1000));
    return text;
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
