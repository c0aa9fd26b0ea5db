#pragma once
// How a failure crosses a component boundary: what kind it is (a code in its component's
// category: the slot arbiter's refusals, the state store's failures, ...), what it is
// about (a slot, a file), the sentence a person reads, and whether trying again can help.
// Callers decide on the code and the fault; the message is for people (logs, the status
// page, a gRPC status). Outcome (runtime/outcome.h) is success or one Error.

#include <string>
#include <system_error>

namespace devlet {

// A lasting fault needs a person (a corrupt file, a file of another program, a wrong
// setting); a passing one may clear by itself (a full or read-only file system, a lock
// another process holds, permissions being fixed).
enum class Fault { Lasting, Passing };

struct Error {
    std::error_code code;
    std::string subject;  // what it is about; empty when the message says it all
    std::string message;
    Fault fault = Fault::Lasting;
};

// The code of a failure whose component has no codes of its own: its message is what it
// says.
enum class GeneralError { Failed = 1 };
const std::error_category& generalCategory();
inline std::error_code make_error_code(GeneralError e) {
    return {static_cast<int>(e), generalCategory()};
}

}  // namespace devlet

template <>
struct std::is_error_code_enum<devlet::GeneralError> : std::true_type {};
