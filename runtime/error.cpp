#include "runtime/error.h"

namespace devlet {

namespace {
class GeneralCategory : public std::error_category {
public:
    const char* name() const noexcept override { return "devlet"; }
    std::string message(int) const override { return "failed"; }
};
}  // namespace

const std::error_category& generalCategory() {
    static const GeneralCategory category;
    return category;
}

}  // namespace devlet
