#include "cluster/token_renewal.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include <boost/json.hpp>

#include "runtime/log.h"
#include "runtime/strict_yaml.h"

namespace devlet::kube {

namespace {
constexpr Log log{"cluster"};
namespace json = boost::json;

std::int64_t unixNow() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// A token is written into YAML as it came: only what a JWT is made of (base64url and dots).
bool plainToken(const std::string& token) {
    return !token.empty() && token.size() < 16384 && std::all_of(token.begin(), token.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
               c == '_' || c == '.';
    });
}

// A timer waits at most this long and then looks at the wall clock again: a suspended
// machine or a clock set forward does not delay a renewal by more.
constexpr std::int64_t kLongestWait = 3600;
}  // namespace

TokenRenewal::TokenRenewal(boost::asio::io_context& loop, ApiClient& sender, std::vector<ApiClient*> users,
                           std::string kubeconfigPath)
    : sender_(sender), users_(std::move(users)), kubeconfigPath_(std::move(kubeconfigPath)), timer_(loop) {}

TokenRenewal::~TokenRenewal() {
    stop();
}

void TokenRenewal::stop() {
    loopThread_.check();
    lifetime_.end();
    timer_.cancel();
}

std::string TokenRenewal::describe() const {
    loopThread_.check();
    switch (state_.kind) {
        case State::Kind::NotAToken:
            return "not a token (a client certificate)";
        case State::Kind::TokenFile:
            return "a token file (read again when it changes; not renewed by devlet)";
        case State::Kind::NotAJwt:
            return "does not expire (not a JSON Web Token)";
        case State::Kind::DoesNotExpire:
            return "does not expire";
        case State::Kind::Expiring:
            break;
    }
    std::string text =
        (unixNow() >= state_.expiresAt ? "expired " : "expires ") + formatUnixTime(state_.expiresAt);
    if (state_.nextRenewalAt) text += ", renewed from " + formatUnixTime(state_.nextRenewalAt);
    return text;
}

void TokenRenewal::start() {
    loopThread_.check();
    const Kubeconfig& config = sender_.config();
    if (!config.tokenFile.empty()) {
        state_.kind = State::Kind::TokenFile;
        return;
    }
    if (config.token.empty()) {
        state_.kind = State::Kind::NotAToken;
        return;
    }
    token_ = config.token;
    claims_ = readTokenClaims(token_);
    switch (claims_.kind) {
        case TokenClaims::Kind::NotAJwt:
            state_.kind = State::Kind::NotAJwt;
            return;
        case TokenClaims::Kind::DoesNotExpire:
            state_.kind = State::Kind::DoesNotExpire;
            return;
        case TokenClaims::Kind::Expiring:
            break;
    }
    state_.kind = State::Kind::Expiring;
    state_.expiresAt = claims_.expiresAt;
    state_.serviceAccount = claims_.serviceAccountNamespace + "/" + claims_.serviceAccountName;
    if (unixNow() >= claims_.expiresAt) {
        // Nothing can renew it now: the API server refuses it (401) for the TokenRequest too.
        state_.lastError = "the token expired at " + formatUnixTime(claims_.expiresAt) +
                           ": write the node's kubeconfig again (docs/cluster.md, Setup)";
        log.error() << "cluster mode: the kubeconfig's token expired at " << formatUnixTime(claims_.expiresAt)
                    << "; the API server refuses it (401 Unauthorized) until the node's kubeconfig is "
                       "written again and devlet restarted";
        return;
    }
    if (!claims_.problem.empty()) {
        state_.lastError = claims_.problem + ": devlet cannot renew it";
        log.warning() << "cluster mode: the kubeconfig's token expires at "
                      << formatUnixTime(claims_.expiresAt) << "; " << state_.lastError;
        return;
    }
    log.info() << "cluster token of ServiceAccount " << state_.serviceAccount << " expires at "
               << formatUnixTime(claims_.expiresAt) << "; renewed from "
               << formatUnixTime(std::max(renewalDueAt(claims_), unixNow()));
    schedule(renewalDueAt(claims_));
}

void TokenRenewal::schedule(std::int64_t at) {
    state_.nextRenewalAt = at;
    const std::int64_t wait = std::clamp<std::int64_t>(at - unixNow(), 0, kLongestWait);
    timer_.expires_after(std::chrono::seconds(wait));
    timer_.async_wait(lifetime_.guard([this](const boost::system::error_code& ec) {
        if (ec) return;
        if (unixNow() < state_.nextRenewalAt)
            schedule(state_.nextRenewalAt);
        else
            renew();
    }));
}

void TokenRenewal::renew() {
    if (inFlight_) return;
    inFlight_ = true;
    json::object spec;
    if (!claims_.audiences.empty()) {
        json::array audiences;
        for (const std::string& a : claims_.audiences) audiences.emplace_back(a);
        spec["audiences"] = std::move(audiences);
    }
    if (const std::int64_t lifetime = requestedLifetimeSeconds(claims_)) spec["expirationSeconds"] = lifetime;
    const json::object request{
        {"apiVersion", "authentication.k8s.io/v1"}, {"kind", "TokenRequest"}, {"spec", std::move(spec)}};
    const std::string path = "/api/v1/namespaces/" + claims_.serviceAccountNamespace + "/serviceaccounts/" +
                             claims_.serviceAccountName + "/token";
    log.debug() << "asking for a new token of ServiceAccount " << state_.serviceAccount;
    sender_.create(path, request, lifetime_.guard([this](const ApiResult& result) {
        inFlight_ = false;
        renewed(result);
    }));
}

void TokenRenewal::renewed(const ApiResult& result) {
    const std::string what = "TokenRequest for ServiceAccount " + state_.serviceAccount;
    if (!result.ok()) return failed(what + ": " + result.describe());
    const json::value* status =
        result.body.is_object() ? result.body.as_object().if_contains("status") : nullptr;
    const json::value* token =
        status && status->is_object() ? status->as_object().if_contains("token") : nullptr;
    if (!token || !token->is_string() || !plainToken(std::string(token->as_string())))
        return failed(what + ": the answer has no status.token a JSON Web Token can be");
    std::string fresh(token->as_string());
    TokenClaims claims = readTokenClaims(fresh);
    if (claims.kind != TokenClaims::Kind::Expiring || claims.expiresAt <= unixNow())
        return failed(what + ": the new token " +
                      (claims.kind == TokenClaims::Kind::Expiring ? std::string("has already expired")
                                                                  : "has no expiry devlet can read"));
    // In memory first: the new token is valid whether or not the file can be written.
    for (ApiClient* client : users_) client->useToken(fresh);
    std::string fileError;
    int readError = 0;
    if (auto text = yaml::readText(kubeconfigPath_, readError); !text) {
        fileError = "cannot read " + kubeconfigPath_ + ": " + std::strerror(readError);
    } else if (auto rewritten = replaceTokenText(*text, token_, fresh); !rewritten) {
        fileError = kubeconfigPath_ + " no longer holds the token devlet started with (changed by hand?)";
    } else {
        fileError = replaceFileDurably(kubeconfigPath_, *rewritten);
    }
    token_ = std::move(fresh);
    claims_ = std::move(claims);
    failuresInRow_ = 0;
    state_.expiresAt = claims_.expiresAt;
    state_.lastRenewalAt = unixNow();
    ++state_.renewals;
    const std::int64_t due = renewalDueAt(claims_);
    if (fileError.empty()) {
        state_.lastError.clear();
        log.info() << "cluster token of ServiceAccount " << state_.serviceAccount << " renewed: expires at "
                   << formatUnixTime(claims_.expiresAt) << ", next renewal at " << formatUnixTime(due) << "; "
                   << kubeconfigPath_ << " written";
    } else {
        // Used from now on, but lost at a restart: the old token in the file then expires
        // on its own schedule.
        state_.lastError = "renewed, but the kubeconfig was not written: " + fileError;
        log.error() << "cluster token of ServiceAccount " << state_.serviceAccount << " renewed (expires at "
                    << formatUnixTime(claims_.expiresAt)
                    << "), but the kubeconfig was not written: " << fileError
                    << "; after a restart devlet uses the old token";
    }
    schedule(due);
    changed();
}

void TokenRenewal::failed(const std::string& why) {
    ++state_.failures;
    ++failuresInRow_;
    state_.lastError = why;
    const std::int64_t now = unixNow();
    const auto delay = renewalRetryDelay(failuresInRow_, now, state_.expiresAt);
    log.warning() << "cannot renew the cluster token: " << why << "; again in " << delay.count()
                  << " s (it expires at " << formatUnixTime(state_.expiresAt) << ")";
    schedule(now + delay.count());
    changed();
}

void TokenRenewal::changed() {
    if (changed_) changed_();
}

}  // namespace devlet::kube
