#pragma once
// Success or a message a user can act on, with whether trying again can help: how errors
// cross component boundaries.

#include <string>
#include <utility>

namespace devlet {

// A lasting fault needs a person (a corrupt file, a file of another program, a wrong
// setting); a passing one may clear by itself (a full or read-only file system, a lock
// another process holds, permissions being fixed).
enum class Fault { Lasting, Passing };

class [[nodiscard]] Outcome {
public:
    static Outcome ok() { return Outcome(); }
    static Outcome failure(std::string message, Fault fault = Fault::Lasting) {
        return Outcome(std::move(message), fault);
    }

    explicit operator bool() const { return ok_; }
    const std::string& error() const { return error_; }
    // Meaningful for a failure only.
    Fault fault() const { return fault_; }

private:
    Outcome() = default;
    Outcome(std::string message, Fault fault) : ok_(false), error_(std::move(message)), fault_(fault) {}
    bool ok_ = true;
    std::string error_;
    Fault fault_ = Fault::Lasting;
};

}  // namespace devlet
