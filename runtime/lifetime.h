#pragma once
// Lets asynchronous work (a timer, a read, an answer posted back from a worker) find
// out that the object it would call has stopped or is gone, without keeping it alive.
// The owner holds a Lifetime; each callback holds a Token, a weak reference that
// expires when the owner ends this lifetime (end(), or destruction). Tokens are read
// on the loop thread; copying one to a worker and back is safe.

#include <memory>
#include <utility>

namespace devlet {

class Lifetime {
public:
    class Token {
    public:
        Token() = default;
        bool expired() const { return token_.expired(); }

    private:
        friend class Lifetime;
        explicit Token(std::weak_ptr<char> token) : token_(std::move(token)) {}
        std::weak_ptr<char> token_;
    };

    Lifetime() = default;
    Lifetime(const Lifetime&) = delete;
    Lifetime& operator=(const Lifetime&) = delete;

    // Tokens given out so far expire; later ones live until the next end().
    void renew() { token_ = std::make_shared<char>(); }
    // Tokens given out so far expire, and so do later ones until renew().
    void end() { token_.reset(); }
    bool ended() const { return !token_; }

    Token token() const { return Token(token_); }

    // `callback`, made to do nothing once this lifetime has ended.
    template <typename Callback>
    auto guard(Callback callback) const {
        return [token = token(), callback = std::move(callback)](auto&&... args) mutable {
            if (!token.expired()) callback(std::forward<decltype(args)>(args)...);
        };
    }

private:
    std::shared_ptr<char> token_ = std::make_shared<char>();
};

}  // namespace devlet
