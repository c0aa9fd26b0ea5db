#include "cluster/service_account_token.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <boost/json.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/base64.h"
#include "runtime/rfc3339.h"

namespace devlet::kube {

namespace json = boost::json;

namespace {

constexpr std::int64_t kDay = 24 * 60 * 60;
// The API server refuses a TokenRequest for less (spec.expirationSeconds).
constexpr std::int64_t kShortestLifetime = 10 * 60;


std::optional<std::int64_t> seconds(const json::object& payload, const char* key) {
    const json::value* v = payload.if_contains(key);
    if (!v) return std::nullopt;
    if (v->is_int64()) return v->as_int64();
    if (v->is_uint64()) return static_cast<std::int64_t>(v->as_uint64());
    if (v->is_double()) return static_cast<std::int64_t>(v->as_double());
    return std::nullopt;
}

std::string stringAt(const json::object& object, const char* key) {
    const json::value* v = object.if_contains(key);
    return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

}  // namespace

TokenClaims readTokenClaims(const std::string& token) {
    TokenClaims claims;
    const auto first = token.find('.');
    const auto second = first == std::string::npos ? first : token.find('.', first + 1);
    if (second == std::string::npos || token.find('.', second + 1) != std::string::npos) {
        claims.problem = "not a JSON Web Token";
        return claims;
    }
    auto payloadText = base64UrlDecode(token.substr(first + 1, second - first - 1));
    if (!payloadText) {
        claims.problem = "not a JSON Web Token (its payload is not base64url)";
        return claims;
    }
    boost::system::error_code ec;
    json::value payload = json::parse(*payloadText, ec);
    if (ec || !payload.is_object()) {
        claims.problem = "not a JSON Web Token (its payload is not a JSON object)";
        return claims;
    }
    const json::object& p = payload.as_object();
    claims.issuedAt = seconds(p, "iat").value_or(0);
    if (const json::value* aud = p.if_contains("aud")) {
        if (aud->is_string()) claims.audiences.emplace_back(aud->as_string());
        if (aud->is_array())
            for (const json::value& a : aud->as_array())
                if (a.is_string()) claims.audiences.emplace_back(a.as_string());
    }
    // The `kubernetes.io` claim of bound tokens names the account directly; `sub` is
    // system:serviceaccount:NAMESPACE:NAME in every ServiceAccount token.
    if (const json::value* k8s = p.if_contains("kubernetes.io"); k8s && k8s->is_object()) {
        claims.serviceAccountNamespace = stringAt(k8s->as_object(), "namespace");
        if (const json::value* sa = k8s->as_object().if_contains("serviceaccount"); sa && sa->is_object())
            claims.serviceAccountName = stringAt(sa->as_object(), "name");
    }
    const std::string subject = stringAt(p, "sub");
    constexpr std::string_view prefix = "system:serviceaccount:";
    if ((claims.serviceAccountNamespace.empty() || claims.serviceAccountName.empty()) &&
        subject.starts_with(prefix)) {
        const std::string rest = subject.substr(prefix.size());
        const auto colon = rest.find(':');
        if (colon != std::string::npos && colon > 0 && colon + 1 < rest.size() &&
            rest.find(':', colon + 1) == std::string::npos) {
            claims.serviceAccountNamespace = rest.substr(0, colon);
            claims.serviceAccountName = rest.substr(colon + 1);
        }
    }
    const auto exp = seconds(p, "exp");
    if (!exp) {
        claims.kind = TokenClaims::Kind::DoesNotExpire;
        return claims;
    }
    claims.kind = TokenClaims::Kind::Expiring;
    claims.expiresAt = *exp;
    if (claims.serviceAccountNamespace.empty() || claims.serviceAccountName.empty())
        claims.problem = "the token names no ServiceAccount (sub is " +
                         (subject.empty() ? std::string("missing") : "not system:serviceaccount:NS:NAME") +
                         ")";
    return claims;
}

std::int64_t renewalDueAt(const TokenClaims& claims) {
    if (claims.issuedAt <= 0 || claims.issuedAt >= claims.expiresAt) return claims.expiresAt - kDay;
    const std::int64_t lifetime = claims.expiresAt - claims.issuedAt;
    return claims.issuedAt + std::min(lifetime * 8 / 10, kDay);
}

std::int64_t requestedLifetimeSeconds(const TokenClaims& claims) {
    if (claims.issuedAt <= 0 || claims.issuedAt >= claims.expiresAt) return 0;
    return std::max(claims.expiresAt - claims.issuedAt, kShortestLifetime);
}

std::chrono::seconds renewalRetryDelay(int failures, std::int64_t now, std::int64_t expiresAt) {
    std::int64_t delay = 10;
    for (int i = 1; i < failures && delay < 300; ++i) delay *= 2;
    delay = std::min<std::int64_t>(delay, 300);
    const std::int64_t left = expiresAt - now;
    if (left > 0) delay = std::min(delay, std::max<std::int64_t>(left / 4, 1));
    return std::chrono::seconds(std::max<std::int64_t>(delay, 1));
}

std::optional<std::string> replaceTokenText(const std::string& text, const std::string& oldToken,
                                            const std::string& newToken) {
    if (oldToken.empty()) return std::nullopt;
    const auto at = text.find(oldToken);
    if (at == std::string::npos || text.find(oldToken, at + 1) != std::string::npos) return std::nullopt;
    std::string out = text;
    out.replace(at, oldToken.size(), newToken);
    return out;
}

std::string replaceFileDurably(const std::string& path, const std::string& text) {
    struct stat old {};
    if (::stat(path.c_str(), &old) != 0) return "cannot read " + path + ": " + std::strerror(errno);
    const auto slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
    const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    const std::string temporary = dir + "/." + base + ".devlet-new";
    ::unlink(temporary.c_str());  // left by a write that was cut off
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, old.st_mode & 0600);
    if (fd < 0) return "cannot write " + temporary + ": " + std::strerror(errno);
    auto failed = [&](const std::string& what) {
        const std::string message = what + " " + temporary + ": " + std::strerror(errno);
        ::close(fd);
        ::unlink(temporary.c_str());
        return message;
    };
    // The same owner and mode as the file it replaces (0600 root's, as the setup writes it);
    // never more open than 0600, whatever the old file was.
    if (::fchown(fd, old.st_uid, old.st_gid) != 0 && (old.st_uid != ::geteuid() || old.st_gid != ::getegid()))
        return failed("cannot give the owner to");
    if (::fchmod(fd, old.st_mode & 0600) != 0) return failed("cannot set the mode of");
    std::size_t written = 0;
    while (written < text.size()) {
        const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return failed("cannot write");
        written += static_cast<std::size_t>(n);
    }
    if (::fsync(fd) != 0) return failed("cannot fsync");
    if (::close(fd) != 0) {
        const std::string message = "cannot write " + temporary + ": " + std::strerror(errno);
        ::unlink(temporary.c_str());
        return message;
    }
    if (::rename(temporary.c_str(), path.c_str()) != 0) {
        const std::string message =
            "cannot rename " + temporary + " to " + path + ": " + std::strerror(errno);
        ::unlink(temporary.c_str());
        return message;
    }
    // The rename is durable only once the directory is.
    const int dirFd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirFd < 0) return "cannot fsync " + dir + ": " + std::strerror(errno);
    const int synced = ::fsync(dirFd);
    const int error = errno;
    ::close(dirFd);
    if (synced != 0) return "cannot fsync " + dir + ": " + std::strerror(error);
    return "";
}

std::string formatUnixTime(std::int64_t seconds) {
    return rfc3339(std::chrono::system_clock::time_point(std::chrono::seconds(seconds)), TimePrecision::Seconds);
}

}  // namespace devlet::kube
