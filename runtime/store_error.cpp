// The state store's error codes: their category, and SQLite's result codes read as them.

#include <sqlite3.h>

#include "runtime/store.h"

namespace devlet {

namespace {
class StoreCategory : public std::error_category {
public:
    const char* name() const noexcept override { return "devlet.store"; }
    std::string message(int value) const override {
        switch (static_cast<StoreError>(value)) {
            case StoreError::Io:
                return "io";
            case StoreError::ReadOnly:
                return "read-only";
            case StoreError::Busy:
                return "busy";
            case StoreError::Full:
                return "full";
            case StoreError::Corrupt:
                return "corrupt";
            case StoreError::TooNew:
                return "too-new";
            case StoreError::HeldThroughOther:
                return "held-through-other";
        }
        return "store";
    }
};
}  // namespace

const std::error_category& storeCategory() {
    static const StoreCategory category;
    return category;
}

StoreError storeErrorOf(int sqliteCode) {
    switch (sqliteCode & 0xff) {
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
            return StoreError::Busy;
        case SQLITE_FULL:
            return StoreError::Full;
        case SQLITE_READONLY:
            return StoreError::ReadOnly;
        case SQLITE_CORRUPT:
        case SQLITE_NOTADB:
            return StoreError::Corrupt;
        default:
            return StoreError::Io;
    }
}

}  // namespace devlet
