#pragma once
// Success or one Error (runtime/error.h): a code callers decide on, what it is about, a
// message a user can act on, and whether trying again can help. How errors cross
// component boundaries.

#include <string>
#include <system_error>
#include <utility>

#include "runtime/error.h"

namespace devlet {

class [[nodiscard]] Outcome {
public:
    static Outcome ok() { return Outcome(); }
    // A failure of a component without codes of its own (GeneralError::Failed).
    static Outcome failure(std::string message, Fault fault = Fault::Lasting) {
        return Outcome(Error{GeneralError::Failed, {}, std::move(message), fault});
    }
    static Outcome failure(std::error_code code, std::string message, Fault fault = Fault::Lasting) {
        return Outcome(Error{code, {}, std::move(message), fault});
    }
    static Outcome failure(Error error) { return Outcome(std::move(error)); }

    explicit operator bool() const { return ok_; }
    // Meaningful for a failure only.
    const std::string& error() const { return error_.message; }
    std::error_code code() const { return error_.code; }
    Fault fault() const { return error_.fault; }
    const Error& details() const { return error_; }

private:
    Outcome() = default;
    explicit Outcome(Error error) : ok_(false), error_(std::move(error)) {}
    bool ok_ = true;
    Error error_;
};

}  // namespace devlet
