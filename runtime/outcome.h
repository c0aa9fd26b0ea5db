#pragma once
// Success or a message a user can act on: how errors cross component boundaries.

#include <string>
#include <utility>

namespace devlet {

class [[nodiscard]] Outcome {
public:
    static Outcome ok() { return Outcome(); }
    static Outcome failure(std::string message) { return Outcome(std::move(message)); }

    explicit operator bool() const { return ok_; }
    const std::string& error() const { return error_; }

private:
    Outcome() = default;
    explicit Outcome(std::string message) : ok_(false), error_(std::move(message)) {}
    bool ok_ = true;
    std::string error_;
};

}  // namespace devlet
