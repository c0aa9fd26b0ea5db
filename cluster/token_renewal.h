#pragma once
// Renews the ServiceAccount token of the kubeconfig before it expires: a TokenRequest for
// the token's own ServiceAccount, sent with the still-valid token on the sending client's
// connection, once the renewal is due (renewalDueAt), retried with backoff when it fails.
// The new token is handed to every client of the daemon at once and written into the
// kubeconfig in place of the old one. Lives on the loop thread; callbacks run there.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "cluster/api_client.h"
#include "cluster/service_account_token.h"
#include "runtime/lifetime.h"
#include "runtime/thread_bound.h"

namespace devlet::kube {

class TokenRenewal {
public:
    struct State {
        enum class Kind {
            NotAToken,      // a client certificate: nothing to renew
            TokenFile,      // a tokenFile: whoever writes the file renews it; devlet reads it again
            NotAJwt,        // an opaque token: left alone
            DoesNotExpire,  // no `exp` (a legacy Secret token): left alone
            Expiring,       // renewed before it expires
        };
        Kind kind = Kind::NotAToken;
        std::string serviceAccount;      // NAMESPACE/NAME, Expiring only
        std::int64_t expiresAt = 0;      // Unix seconds; 0 unless Expiring
        std::int64_t nextRenewalAt = 0;  // Unix seconds; 0 when none is planned
        std::int64_t lastRenewalAt = 0;  // Unix seconds; 0 before the first renewal
        std::uint64_t renewals = 0;      // since start
        std::uint64_t failures = 0;      // failed tries since start
        std::string
            lastError;  // why the last try failed (or the kubeconfig was not written); never the token
        bool operator==(const State&) const = default;
    };

    // `sender` sends the TokenRequest; `users` (the sender too) get the new token.
    TokenRenewal(boost::asio::io_context& loop, ApiClient& sender, std::vector<ApiClient*> users,
                 std::string kubeconfigPath);
    ~TokenRenewal();
    TokenRenewal(const TokenRenewal&) = delete;
    TokenRenewal& operator=(const TokenRenewal&) = delete;

    void start();
    void stop();  // no callback afterwards
    void onStateChanged(std::function<void()> changed) { changed_ = std::move(changed); }
    const State& state() const { return state_; }
    // Whether the token in use has expired by `now` (Unix seconds): a 401 then has that cause.
    bool expiredAt(std::int64_t now) const {
        return state_.kind == State::Kind::Expiring && now >= state_.expiresAt;
    }
    // "does not expire", "expires 2025-01-02T03:04:05Z" ...: for logs and status.
    std::string describe() const;

private:
    void schedule(std::int64_t at);
    void renew();
    void renewed(const ApiResult& result);
    void failed(const std::string& why);
    void changed();

    ApiClient& sender_;
    std::vector<ApiClient*> users_;
    std::string kubeconfigPath_;
    std::string token_;  // the one in use; never logged
    TokenClaims claims_;
    State state_;
    boost::asio::steady_timer timer_;
    int failuresInRow_ = 0;
    bool inFlight_ = false;
    Lifetime lifetime_;  // ended by stop()
    std::function<void()> changed_;
    ThreadBound loopThread_;  // every public member is called on the loop thread
};

}  // namespace devlet::kube
