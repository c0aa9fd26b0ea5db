#pragma once
// What devlet reads from the ServiceAccount token in its kubeconfig (a JWT from `kubectl
// create token`): when it expires, when it was issued, whose it is and for which audiences,
// and when to ask for a new one. Never the signature: the API server checks that. Pure
// functions and plain values, any thread; a token is never part of a message.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace devlet::kube {

struct TokenClaims {
    enum class Kind {
        NotAJwt,        // not three base64url parts with a JSON payload: left alone
        DoesNotExpire,  // no `exp` (a legacy Secret token): left alone
        Expiring,       // `exp` set: renewed before it passes
    };
    Kind kind = Kind::NotAJwt;
    std::int64_t expiresAt = 0;           // `exp`, Unix seconds; Expiring only
    std::int64_t issuedAt = 0;            // `iat`, Unix seconds; 0 when the token has none
    std::string serviceAccountNamespace;  // from `kubernetes.io` or `sub`; empty when neither
    std::string serviceAccountName;
    std::vector<std::string> audiences;  // `aud`, a string or a list
    std::string problem;                 // why it is NotAJwt, or why it cannot be renewed
};

TokenClaims readTokenClaims(const std::string& token);

// The rule for when an expiring token is renewed, as the kubelet renews projected tokens:
// once 80 % of its lifetime (exp - iat) has passed, or once it is 24 hours old, whichever
// comes first. Without `iat` the lifetime is unknown: a day before `exp`, or now when that
// has passed.
std::int64_t renewalDueAt(const TokenClaims& claims);

// The lifetime asked for in the TokenRequest: the old token's (exp - iat), at least the 10
// minutes the API server accepts; the server may cut it to its maximum.
std::int64_t requestedLifetimeSeconds(const TokenClaims& claims);

// The delay before the next attempt after `failures` failed renewals: 10 s doubling to 5
// minutes, but at most a quarter of the time the token has left (at least 1 s), so that the
// last tries before it expires come closer together instead of after it.
std::chrono::seconds renewalRetryDelay(int failures, std::int64_t now, std::int64_t expiresAt);

// `text` with the one occurrence of `oldToken` replaced by `newToken`; nullopt when the old
// token is not in it exactly once (the file changed under devlet: it is then not written).
std::optional<std::string> replaceTokenText(const std::string& text, const std::string& oldToken,
                                            const std::string& newToken);

// Writes `text` to `path` in place of the file: a file beside it with the old file's mode
// and owner, fsynced, renamed over it, the directory fsynced. An error message, or empty.
std::string replaceFileDurably(const std::string& path, const std::string& text);

// "2025-01-02T03:04:05Z" for Unix seconds.
std::string formatUnixTime(std::int64_t seconds);

}  // namespace devlet::kube
