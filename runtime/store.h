#pragma once
// Durable state in one SQLite file (WAL): configurations seen, instances, held
// slots and a short event history. Lives on the loop thread; every call is
// synchronous and committed when it returns. A slot change is also fsynced by then
// (synchronous=FULL), so it survives a power loss as well as a crash; the other writes
// reach the disk with the next slot change or checkpoint (synchronous=NORMAL), since
// the WAL is synced in order: a power loss may take the last of them, never a slot.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/outcome.h"
#include "runtime/slot.h"
#include "runtime/thread_bound.h"

struct sqlite3;
struct sqlite3_stmt;

namespace devlet {

struct StoredInstance {
    std::string name;
    std::string configuration;
    std::string id;
    std::int64_t firstSeenMs = 0;
    std::int64_t lastSeenMs = 0;
    std::string health;  // "present", "gone"
    bool operator==(const StoredInstance&) const = default;
};

struct StoredConfiguration {
    std::string name;
    std::string handler;
    std::string source;  // file:line
    int capacity = 1;
    std::int64_t firstSeenMs = 0;
    std::int64_t lastSeenMs = 0;
    bool active = true;
    bool operator==(const StoredConfiguration&) const = default;
};

struct StoredEvent {
    std::int64_t id = 0;
    std::int64_t timeMs = 0;
    std::string level;    // "info", "warning", "error"
    std::string subject;  // configuration, instance or component
    std::string message;
};

struct StoreOptions {
    // How long a write waits for a lock another process holds (an operator's sqlite3
    // shell); this store is the only writer otherwise, so it never waits.
    int busyTimeoutMs = 1000;
};

// What kind of failure the state store reports (Outcome::code()).
enum class StoreError {
    Io = 1,            // the file or its directory cannot be made, read or written
    ReadOnly,          // the state directory is on a read-only file system
    Busy,              // another process holds the file (SQLite's lock)
    Full,              // the disk is full
    Corrupt,           // not a database, or a damaged one (kept aside, never used)
    TooNew,            // written by a newer devlet
    HeldThroughOther,  // holdSlots: a slot held through another resource (never twice)
};
const std::error_category& storeCategory();
inline std::error_code make_error_code(StoreError e) {
    return {static_cast<int>(e), storeCategory()};
}
// SQLite's result code (primary or extended) as a StoreError.
StoreError storeErrorOf(int sqliteCode);

class Store {
public:
    // Opens (creating if needed) <stateDir>/state.db and migrates it forward.
    // A corrupt or foreign file, or one whose tables do not match its schema version, is
    // refused with a clear message and left untouched; a copy is kept next to it as
    // state.db.corrupt-<unix-seconds>. A WAL file left without its database (state.db
    // moved away, its -wal not) holds that database's last transactions: it is kept
    // aside as state.db-wal.orphan-<unix-seconds>, where SQLite would delete it.
    // On failure `why` says what and whether trying again later can help: a lasting fault
    // (not a devlet database, corrupt, written by a newer devlet) needs a person; a passing
    // one (a read-only or full file system, a lock another process holds, permissions) may
    // clear by itself.
    static std::unique_ptr<Store> open(const std::string& stateDir, std::string& error);
    static std::unique_ptr<Store> open(const std::string& stateDir, const StoreOptions& options,
                                       Outcome& why);
    ~Store();
    Store(const Store&) = delete;
    Store& operator=(const Store&) = delete;

    static constexpr int kSchemaVersion = 1;
    static constexpr int kEventHistory = 200;

    // Held slots: one row each; freeing a slot deletes its row. One transaction per call.
    Outcome holdSlots(const std::vector<Slot>& slots);
    Outcome releaseSlots(const std::vector<std::string>& deviceIds);
    Outcome setSlotPod(const std::string& deviceId, const std::string& pod, const std::string& podNamespace);
    std::vector<Slot> slots() const;

    Outcome saveConfiguration(const StoredConfiguration& configuration);  // upsert, keeps firstSeen
    Outcome deactivateConfiguration(const std::string& name, std::int64_t nowMs);
    std::vector<StoredConfiguration> configurations() const;

    Outcome saveInstance(const StoredInstance& instance);  // upsert, keeps firstSeen
    Outcome removeInstance(const std::string& name);
    std::vector<StoredInstance> instances() const;

    // Keeps the newest kEventHistory events.
    Outcome addEvent(const std::string& level, const std::string& subject, const std::string& message,
                     std::int64_t nowMs);
    std::vector<StoredEvent> recentEvents(int limit) const;  // newest first

    int schemaVersion() const;

private:
    explicit Store(sqlite3* db);
    // Whether the next commits are fsynced before they return; outside a transaction.
    Outcome syncEachCommit(bool each);
    // A cached prepared statement for sql (a literal), or nullptr with the sqlite error.
    sqlite3_stmt* statement(std::string_view sql) const;

    sqlite3* db_;
    bool syncEachCommit_ = true;  // as open() leaves the connection
    // Prepared once, reused on every Allocate; finalized before db_ closes.
    mutable std::map<std::string, sqlite3_stmt*, std::less<>> statements_;
    ThreadBound loopThread_;  // every public member is called on the loop thread
};

}  // namespace devlet

template <>
struct std::is_error_code_enum<devlet::StoreError> : std::true_type {};
