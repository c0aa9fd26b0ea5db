#pragma once
// Base64 (RFC 4648): the API's Secret data and kubeconfig certificates, JSON Web Tokens'
// parts (base64url), WS-Security nonces and digests. The one codec.

#include <optional>
#include <string>
#include <string_view>

namespace devlet {

// Standard alphabet, padded.
std::string base64Encode(std::string_view bytes);
// Standard alphabet; padding optional, whitespace ignored; nullopt when it is not base64.
std::optional<std::string> base64Decode(std::string_view text);
// The URL-safe alphabet without padding or whitespace, as JSON Web Tokens write their parts;
// nullopt when it is not that.
std::optional<std::string> base64UrlDecode(std::string_view text);

}  // namespace devlet
