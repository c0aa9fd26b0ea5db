#include "runtime/store.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/log.h"

namespace devlet {

namespace {

const Log log{"store"};

namespace fs = std::filesystem;

// "dvlt" in the SQLite header, so a foreign database in the state directory is
// recognised rather than migrated into.
constexpr std::int32_t kApplicationId = 0x64766C74;

// Forward-only: step i brings the schema from version i to i + 1, in the same
// transaction that raises user_version. Never edit a released step; append one
// and raise Store::kSchemaVersion.
constexpr std::array<std::string_view, Store::kSchemaVersion> kMigrations = {
    R"sql(
CREATE TABLE configurations (
    name TEXT PRIMARY KEY NOT NULL,
    handler TEXT NOT NULL,
    source TEXT NOT NULL,
    capacity INTEGER NOT NULL,
    first_seen_ms INTEGER NOT NULL,
    last_seen_ms INTEGER NOT NULL,
    active INTEGER NOT NULL
);
CREATE TABLE instances (
    name TEXT PRIMARY KEY NOT NULL,
    configuration TEXT NOT NULL,
    device_id TEXT NOT NULL,
    first_seen_ms INTEGER NOT NULL,
    last_seen_ms INTEGER NOT NULL,
    health TEXT NOT NULL
);
CREATE TABLE slots (
    device_id TEXT PRIMARY KEY NOT NULL,
    instance TEXT NOT NULL,
    configuration TEXT NOT NULL,
    idx INTEGER NOT NULL,
    holder_resource TEXT NOT NULL,
    since_ms INTEGER NOT NULL,
    pod TEXT NOT NULL DEFAULT '',
    pod_namespace TEXT NOT NULL DEFAULT ''
);
CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time_ms INTEGER NOT NULL,
    level TEXT NOT NULL,
    subject TEXT NOT NULL,
    message TEXT NOT NULL
);
)sql",
};

// A slot held again through the same resource is updated; one held through another
// resource is left as it is (no row changes), and holdSlots refuses the whole call.
constexpr std::string_view kUpsertSlot = R"sql(
INSERT INTO slots (device_id, instance, configuration, idx, holder_resource, since_ms, pod, pod_namespace)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (device_id) DO UPDATE SET
    instance = excluded.instance, configuration = excluded.configuration, idx = excluded.idx,
    since_ms = excluded.since_ms, pod = excluded.pod, pod_namespace = excluded.pod_namespace
WHERE slots.holder_resource = excluded.holder_resource)sql";
constexpr std::string_view kDeleteSlot = "DELETE FROM slots WHERE device_id = ?";
constexpr std::string_view kSetSlotPod = "UPDATE slots SET pod = ?, pod_namespace = ? WHERE device_id = ?";
constexpr std::string_view kSelectSlots = R"sql(
SELECT device_id, instance, configuration, idx, holder_resource, since_ms, pod, pod_namespace
FROM slots ORDER BY configuration, instance, idx, device_id)sql";

constexpr std::string_view kUpsertConfiguration = R"sql(
INSERT INTO configurations (name, handler, source, capacity, first_seen_ms, last_seen_ms, active)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET
    handler = excluded.handler, source = excluded.source, capacity = excluded.capacity,
    last_seen_ms = excluded.last_seen_ms, active = excluded.active)sql";
constexpr std::string_view kDeactivateConfiguration =
    "UPDATE configurations SET active = 0, last_seen_ms = ? WHERE name = ?";
constexpr std::string_view kSelectConfigurations = R"sql(
SELECT name, handler, source, capacity, first_seen_ms, last_seen_ms, active
FROM configurations ORDER BY name)sql";

constexpr std::string_view kUpsertInstance = R"sql(
INSERT INTO instances (name, configuration, device_id, first_seen_ms, last_seen_ms, health)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET
    configuration = excluded.configuration, device_id = excluded.device_id,
    last_seen_ms = excluded.last_seen_ms, health = excluded.health)sql";
constexpr std::string_view kDeleteInstance = "DELETE FROM instances WHERE name = ?";
constexpr std::string_view kSelectInstances = R"sql(
SELECT name, configuration, device_id, first_seen_ms, last_seen_ms, health
FROM instances ORDER BY name)sql";

constexpr std::string_view kInsertEvent =
    "INSERT INTO events (time_ms, level, subject, message) VALUES (?, ?, ?, ?)";
// Deletes everything older than the newest ?1 rows; a no-op while there are fewer.
constexpr std::string_view kTrimEvents =
    "DELETE FROM events WHERE id <= (SELECT id FROM events ORDER BY id DESC LIMIT 1 OFFSET ?)";
constexpr std::string_view kSelectEvents =
    "SELECT id, time_ms, level, subject, message FROM events ORDER BY id DESC LIMIT ?";

// Every table and column this version reads and writes: a file whose schema lacks one is
// refused when opened rather than failing each write later.
constexpr std::array<std::string_view, 4> kSchemaReads = {kSelectSlots, kSelectConfigurations,
                                                          kSelectInstances, kSelectEvents};

struct DatabaseCloser {
    void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using DatabaseHandle = std::unique_ptr<sqlite3, DatabaseCloser>;

Outcome failure(sqlite3* db, std::string_view what) {
    return Outcome::failure(storeErrorOf(sqlite3_extended_errcode(db)),
                            "state store: " + std::string(what) + " failed: " + sqlite3_errmsg(db));
}

std::string hex32(std::int64_t value) {
    char text[16];
    std::snprintf(text, sizeof text, "0x%08x", static_cast<unsigned>(static_cast<std::uint32_t>(value)));
    return text;
}

// Resets a cached statement at scope exit, so it holds no read snapshot and
// no stale bindings between calls, whichever way the call left.
class StatementReset {
public:
    explicit StatementReset(sqlite3_stmt* statement) : statement_(statement) {}
    ~StatementReset() {
        sqlite3_reset(statement_);
        sqlite3_clear_bindings(statement_);
    }
    StatementReset(const StatementReset&) = delete;
    StatementReset& operator=(const StatementReset&) = delete;

private:
    sqlite3_stmt* statement_;
};

int bindOne(sqlite3_stmt* statement, int index, const std::string& value) {
    return sqlite3_bind_text64(statement, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
}
int bindOne(sqlite3_stmt* statement, int index, std::int64_t value) {
    return sqlite3_bind_int64(statement, index, value);
}
int bindOne(sqlite3_stmt* statement, int index, int value) {
    return sqlite3_bind_int(statement, index, value);
}
int bindOne(sqlite3_stmt* statement, int index, bool value) {
    return sqlite3_bind_int(statement, index, value ? 1 : 0);
}

template <typename... Args>
int bindAll(sqlite3_stmt* statement, const Args&... args) {
    int index = 0;
    int rc = SQLITE_OK;
    ((rc = rc == SQLITE_OK ? bindOne(statement, ++index, args) : rc), ...);
    return rc;
}

// Runs one statement that returns no rows; statement is nullptr when preparing it failed.
template <typename... Args>
Outcome execute(sqlite3* db, sqlite3_stmt* statement, std::string_view what, const Args&... args) {
    if (!statement) return failure(db, "preparing statement for " + std::string(what));
    StatementReset reset(statement);
    if (bindAll(statement, args...) != SQLITE_OK) return failure(db, what);
    if (sqlite3_step(statement) != SQLITE_DONE) return failure(db, what);
    return Outcome::ok();
}

std::string columnText(sqlite3_stmt* statement, int column) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(statement, column));
    return text ? std::string(text, static_cast<std::size_t>(sqlite3_column_bytes(statement, column)))
                : std::string();
}

// Steps a query, calling row(statement) for each row; a failure part-way is
// logged and the rows read so far are kept.
template <typename Row>
void query(sqlite3* db, sqlite3_stmt* statement, std::string_view what, Row row) {
    if (!statement) {
        log.warning() << failure(db, "preparing statement for " + std::string(what)).error();
        return;
    }
    StatementReset reset(statement);
    int rc;
    while ((rc = sqlite3_step(statement)) == SQLITE_ROW) row(statement);
    if (rc != SQLITE_DONE) log.warning() << failure(db, what).error();
}

// Statements without parameters run once at open; not worth caching.
int querySingle(sqlite3* db, const char* sql, std::int64_t& value, std::string* text = nullptr) {
    sqlite3_stmt* statement = nullptr;
    int rc = sqlite3_prepare_v2(db, sql, -1, &statement, nullptr);
    if (rc != SQLITE_OK) return rc;
    rc = sqlite3_step(statement);
    if (rc == SQLITE_ROW) {
        value = sqlite3_column_int64(statement, 0);
        if (text) *text = columnText(statement, 0);
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_ERROR;
    }
    sqlite3_finalize(statement);
    return rc;
}

// "ok", or the first few problems PRAGMA quick_check finds, on one line.
int quickCheck(sqlite3* db, std::string& problems) {
    sqlite3_stmt* statement = nullptr;
    int rc = sqlite3_prepare_v2(db, "PRAGMA quick_check(4)", -1, &statement, nullptr);
    if (rc != SQLITE_OK) return rc;
    problems.clear();
    while ((rc = sqlite3_step(statement)) == SQLITE_ROW) {
        std::string line = columnText(statement, 0);
        // The first row starts with a "*** in database main ***" header line.
        if (line.starts_with("*** ")) {
            auto newline = line.find('\n');
            line = newline == std::string::npos ? std::string() : line.substr(newline + 1);
        }
        if (line.empty()) continue;
        for (auto at = line.find('\n'); at != std::string::npos; at = line.find('\n', at))
            line.replace(at, 1, "; ");
        problems += (problems.empty() ? "" : "; ") + line;
    }
    sqlite3_finalize(statement);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

// BEGIN IMMEDIATE takes the write lock up front, so a locked database fails at
// the start rather than half-way. Whatever did not commit is rolled back when the
// transaction goes out of scope, which leaves the connection usable after a full
// disk, an I/O error or a lock held by another process.
class Transaction {
public:
    explicit Transaction(sqlite3* db) : db_(db) {}
    ~Transaction() {
        if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    }
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;

    Outcome begin() {
        if (sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK)
            return failure(db_, "starting a transaction");
        return Outcome::ok();
    }
    Outcome commit() {
        if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK)
            return failure(db_, "committing a transaction");
        return Outcome::ok();
    }

private:
    sqlite3* db_;
};

enum class Verdict {
    Usable,
    Unusable,   // not SQLite, corrupt or foreign: kept aside, never touched
    TooNew,     // a newer devlet's database: refused, nothing copied
    Unreadable  // could not look (permissions, locks): refused, nothing copied
};

struct Inspection {
    Verdict verdict = Verdict::Usable;
    std::string reason;
};

// Looks at an existing state.db through a read-only connection: a read-write one
// would checkpoint a foreign database's WAL into it on close. A WAL our own
// daemon left behind when it was killed is still read (and recovered) here.
Inspection inspect(const std::string& path, int busyTimeoutMs) {
    sqlite3* raw = nullptr;
    int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
    DatabaseHandle db(raw);
    if (rc != SQLITE_OK)
        return {Verdict::Unreadable,
                std::string("it cannot be opened: ") + (raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc))};
    sqlite3_busy_timeout(db.get(), busyTimeoutMs);

    auto classify = [&](int code, std::string_view what) -> Inspection {
        int primary = code & 0xff;
        std::string message = sqlite3_errmsg(db.get());
        if (primary == SQLITE_NOTADB)
            return {Verdict::Unusable, "it is not an SQLite database (" + message + ")"};
        if (primary == SQLITE_CORRUPT) return {Verdict::Unusable, "it is corrupt (" + message + ")"};
        return {Verdict::Unreadable, std::string(what) + " failed: " + message};
    };

    std::int64_t applicationId = 0;
    if (rc = querySingle(db.get(), "PRAGMA application_id", applicationId); rc != SQLITE_OK)
        return classify(rc, "reading application_id");
    if (applicationId != kApplicationId) {
        std::int64_t objects = 0;
        if (rc = querySingle(db.get(), "SELECT count(*) FROM sqlite_schema", objects); rc != SQLITE_OK)
            return classify(rc, "reading the schema");
        if (applicationId != 0)
            return {Verdict::Unusable,
                    "it is not a devlet state database (application_id " + hex32(applicationId) + ")"};
        // An empty file, or one created before its first migration committed.
        if (objects > 0)
            return {Verdict::Unusable,
                    "it is not a devlet state database (it has tables but no application_id)"};
    }

    std::string problems;
    if (rc = quickCheck(db.get(), problems); rc != SQLITE_OK) return classify(rc, "checking integrity");
    if (problems != "ok") return {Verdict::Unusable, "it is corrupt (quick_check: " + problems + ")"};

    std::int64_t version = 0;
    if (rc = querySingle(db.get(), "PRAGMA user_version", version); rc != SQLITE_OK)
        return classify(rc, "reading user_version");
    if (version > Store::kSchemaVersion)
        return {Verdict::TooNew, "has schema version " + std::to_string(version) +
                                     ", this devlet understands up to " +
                                     std::to_string(Store::kSchemaVersion) + "; refusing to downgrade"};
    // A file that says it is current but lacks a table or a column (edited by hand, or
    // restored from a mismatched backup) would fail every write, Allocate included.
    if (version == Store::kSchemaVersion) {
        for (std::string_view sql : kSchemaReads) {
            sqlite3_stmt* statement = nullptr;
            rc = sqlite3_prepare_v2(db.get(), sql.data(), static_cast<int>(sql.size()), &statement, nullptr);
            sqlite3_finalize(statement);
            if ((rc & 0xff) == SQLITE_ERROR)
                return {Verdict::Unusable, "its tables do not match devlet's schema version " +
                                               std::to_string(version) + " (" + sqlite3_errmsg(db.get()) +
                                               ")"};
            if (rc != SQLITE_OK) return classify(rc, "reading the schema");
        }
    }
    return {};
}

bool sameContents(const fs::path& a, const fs::path& b) {
    std::error_code ec;
    auto sizeA = fs::file_size(a, ec);
    if (ec) return false;
    auto sizeB = fs::file_size(b, ec);
    if (ec || sizeA != sizeB) return false;
    std::ifstream streamA(a, std::ios::binary);
    std::ifstream streamB(b, std::ios::binary);
    if (!streamA || !streamB) return false;
    return std::equal(std::istreambuf_iterator<char>(streamA), std::istreambuf_iterator<char>(),
                      std::istreambuf_iterator<char>(streamB), std::istreambuf_iterator<char>());
}

// Keeps a copy of a file devlet refuses, so refusing never loses data. A daemon
// restarted in a loop by systemd reuses an identical earlier copy instead of
// filling the disk with them. Returns the copy's path, or "" with error set.
std::string keepCopy(const fs::path& path, std::string& error) {
    std::error_code ec;
    const std::string prefix = path.filename().string() + ".corrupt-";
    for (const fs::directory_entry& entry : fs::directory_iterator(path.parent_path(), ec)) {
        std::string name = entry.path().filename().string();
        if (name.starts_with(prefix) && !name.ends_with("-wal") && !name.ends_with("-shm") &&
            sameContents(path, entry.path()))
            return entry.path().string();
    }

    auto seconds =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    fs::path copy = path;
    copy += ".corrupt-" + std::to_string(seconds);
    for (int n = 1; fs::exists(copy, ec) && n < 100; ++n) {
        copy = path;
        copy += ".corrupt-" + std::to_string(seconds) + "." + std::to_string(n);
    }
    if (!fs::copy_file(path, copy, fs::copy_options::none, ec)) {
        error = "copying it to " + copy.string() + " failed: " + ec.message();
        return {};
    }
    fs::permissions(copy, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace, ec);
    // Without its WAL the copy could lack the last transactions of a WAL-mode file.
    fs::path wal = path;
    wal += "-wal";
    if (fs::exists(wal, ec)) {
        fs::path walCopy = copy;
        walCopy += "-wal";
        if (fs::copy_file(wal, walCopy, fs::copy_options::none, ec))
            fs::permissions(walCopy, fs::perms::owner_read | fs::perms::owner_write,
                            fs::perm_options::replace, ec);
    }
    return copy.string();
}

// A -wal file with no state.db beside it (the database moved away, its WAL left behind)
// holds the last transactions of the database that was moved. SQLite would delete it as
// stale when the new, empty database opens, so it is renamed aside instead; the -shm index
// is derived data and rebuilt. False, with error set, when it cannot be moved.
bool keepOrphanWal(const std::string& path, std::string& error) {
    std::error_code ec;
    const fs::path wal = path + "-wal";
    if (!fs::exists(wal, ec)) return true;
    auto seconds =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    fs::path kept = path + "-wal.orphan-" + std::to_string(seconds);
    for (int n = 1; fs::exists(kept, ec) && n < 100; ++n)
        kept = path + "-wal.orphan-" + std::to_string(seconds) + "." + std::to_string(n);
    fs::rename(wal, kept, ec);
    if (ec) {
        error = "moving the WAL file " + wal.string() + " of a missing " + path +
                " aside failed: " + ec.message();
        return false;
    }
    fs::remove(path + "-shm", ec);
    log.warning() << path << " is missing but its WAL file was there; kept aside as " << kept.string()
                  << ", starting with an empty state";
    return true;
}

// Makes the names in directory (files created, renamed or removed there) durable.
Outcome syncDirectory(const std::string& directory) {
    int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Outcome::failure("cannot open " + directory + " to sync it: " + std::strerror(errno));
    int rc = ::fsync(fd);
    int error = errno;
    ::close(fd);
    if (rc != 0)
        return Outcome::failure("syncing directory " + directory + " failed: " + std::strerror(error));
    return Outcome::ok();
}

// state.db, and the WAL and shared-memory files SQLite derives from it, hold
// which pod has which device: readable by the owner only.
void restrictMode(const std::string& path) {
    for (const char* suffix : {"", "-wal", "-shm"}) {
        std::string file = path + suffix;
        struct stat info {};
        if (::stat(file.c_str(), &info) != 0 || (info.st_mode & 077) == 0) continue;
        if (::chmod(file.c_str(), info.st_mode & 0700) == 0)
            log.info() << "made " << file << " readable by its owner only";
        else
            log.warning() << "cannot restrict the mode of " << file << ": " << std::strerror(errno);
    }
}

Outcome migrate(sqlite3* db, const std::string& path) {
    Transaction transaction(db);
    if (auto outcome = transaction.begin(); !outcome) return outcome;
    std::int64_t version = 0;
    if (querySingle(db, "PRAGMA user_version", version) != SQLITE_OK)
        return failure(db, "reading user_version");
    // Checked again under the write lock: the file may have changed since inspect().
    if (version > Store::kSchemaVersion)
        return Outcome::failure("state store: " + path + " has schema version " + std::to_string(version) +
                                ", this devlet understands up to " + std::to_string(Store::kSchemaVersion) +
                                "; refusing to downgrade");
    if (version == Store::kSchemaVersion) return Outcome::ok();

    for (auto step = version; step < Store::kSchemaVersion; ++step) {
        std::string sql(kMigrations[static_cast<std::size_t>(step)]);
        sql += "\nPRAGMA user_version = " + std::to_string(step + 1) + ";";
        if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK)
            return failure(db, "migrating " + path + " to schema version " + std::to_string(step + 1));
    }
    std::string mark = "PRAGMA application_id = " + std::to_string(kApplicationId);
    if (sqlite3_exec(db, mark.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK)
        return failure(db, "setting application_id");
    if (auto outcome = transaction.commit(); !outcome) return outcome;

    if (version == 0)
        log.info() << "created state database " << path << " (schema version " << Store::kSchemaVersion
                   << ")";
    else
        log.info() << "migrated " << path << " from schema version " << version << " to "
                   << Store::kSchemaVersion;
    return Outcome::ok();
}

}  // namespace

std::unique_ptr<Store> Store::open(const std::string& stateDir, std::string& error) {
    Outcome why = Outcome::ok();
    auto store = open(stateDir, StoreOptions{}, why);
    if (!store) error = why.error();
    return store;
}

std::unique_ptr<Store> Store::open(const std::string& stateDir, const StoreOptions& options, Outcome& why) {
    auto refuse = [&](Fault fault, std::string message,
                      StoreError code = StoreError::Io) -> std::unique_ptr<Store> {
        why = Outcome::failure(code, std::move(message), fault);
        return nullptr;
    };
    // Refused with a failure of its own (its code kept).
    auto refuseWith = [&](Fault fault, const Outcome& outcome,
                          const std::string& prefix = {}) -> std::unique_ptr<Store> {
        why = Outcome::failure(outcome.code(), prefix + outcome.error(), fault);
        return nullptr;
    };
    why = Outcome::ok();
    std::error_code ec;
    if (!fs::is_directory(stateDir, ec)) {
        if (fs::create_directories(stateDir, ec))
            fs::permissions(stateDir, fs::perms::owner_all, fs::perm_options::replace, ec);
        if (ec)
            return refuse(Fault::Passing,
                          "state store: cannot create state directory " + stateDir + ": " + ec.message());
        // The new directory's own name, like state.db's below, must survive a power loss.
        if (auto outcome = syncDirectory(fs::absolute(stateDir, ec).parent_path().string()); !outcome)
            return refuse(Fault::Passing, "state store: " + outcome.error());
    }
    // Said plainly here: SQLite would only report that it is "unable to open database file".
    if (::access(stateDir.c_str(), W_OK) != 0) {
        if (errno == EROFS)
            return refuse(Fault::Passing,
                          "state store: state directory " + stateDir +
                              " is on a read-only file system; devlet records there which pod holds which "
                              "slot before it offers any",
                          StoreError::ReadOnly);
        return refuse(Fault::Passing, "state store: cannot write to state directory " + stateDir + ": " +
                                          std::strerror(errno));
    }
    const std::string path = (fs::path(stateDir) / "state.db").string();

    // Created by hand so that it starts at 0600; SQLite gives its -wal and -shm
    // files the database file's mode. O_EXCL: never truncate what is there.
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) {
        if (errno != ENOENT)
            return refuse(Fault::Passing, "state store: cannot read " + path + ": " + std::strerror(errno));
        if (std::string walError; !keepOrphanWal(path, walError))
            return refuse(Fault::Passing, "state store: " + walError);
        int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST)
            return refuse(Fault::Passing, "state store: cannot create " + path + ": " + std::strerror(errno));
        if (fd >= 0) {
            ::close(fd);
            // SQLite fsyncs the directory for a WAL it creates, never for the database
            // file: without this a power loss could take state.db's name away while
            // its WAL, holding every slot, stays.
            if (auto outcome = syncDirectory(stateDir); !outcome)
                return refuse(Fault::Passing, "state store: " + outcome.error());
        }
    }

    Inspection inspection = inspect(path, options.busyTimeoutMs);
    switch (inspection.verdict) {
        case Verdict::Usable:
            break;
        case Verdict::TooNew:
            return refuse(Fault::Lasting, "state store: " + path + " " + inspection.reason,
                          StoreError::TooNew);
        case Verdict::Unreadable:
            return refuse(Fault::Passing, "state store: refusing to use " + path + ": " + inspection.reason);
        case Verdict::Unusable: {
            std::string copyError;
            std::string copy = keepCopy(path, copyError);
            return refuse(Fault::Lasting,
                          "state store: refusing to use " + path + ": " + inspection.reason + "; " +
                              (copy.empty() ? copyError : "a copy is kept at " + copy) +
                              ". Move the file away to start with an empty state (held slots are then "
                              "forgotten).",
                          StoreError::Corrupt);
        }
    }
    restrictMode(path);

    sqlite3* raw = nullptr;
    // NOMUTEX: the store lives on the loop thread only.
    int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
    DatabaseHandle db(raw);
    if (rc != SQLITE_OK)
        return refuse(Fault::Passing, "state store: opening " + path +
                                          " failed: " + (raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
    sqlite3_extended_result_codes(db.get(), 1);
    sqlite3_busy_timeout(db.get(), options.busyTimeoutMs);

    std::int64_t unused = 0;
    std::string journalMode;
    if (querySingle(db.get(), "PRAGMA journal_mode = WAL", unused, &journalMode) != SQLITE_OK)
        return refuseWith(Fault::Passing, failure(db.get(), "switching " + path + " to WAL"));
    if (journalMode != "wal")
        return refuse(Fault::Lasting, "state store: switching " + path +
                                          " to WAL failed: journal mode stays " + journalMode +
                                          " (does the file system support shared memory?)");
    // FULL: a commit fsyncs the WAL before it returns, so a slot is on the disk before
    // Allocate answers. After a reboot the kubelet restores its allocations from its own
    // checkpoint without calling Allocate again, so a hold lost with the last unsynced
    // WAL frames (synchronous=NORMAL) would be a slot offered twice. SQLite also fsyncs
    // the directory on the first sync of a WAL file it created. Writes that no slot
    // depends on switch to NORMAL (syncEachCommit).
    if (sqlite3_exec(db.get(), "PRAGMA synchronous = FULL", nullptr, nullptr, nullptr) != SQLITE_OK)
        return refuseWith(Fault::Passing, failure(db.get(), "setting synchronous mode"));
    // The state of a node with a thousand devices is a few hundred KiB; SQLite's default
    // page cache (2 MiB) would only hold more of the same in the daemon's memory.
    if (sqlite3_exec(db.get(), "PRAGMA cache_size = -256", nullptr, nullptr, nullptr) != SQLITE_OK)
        return refuseWith(Fault::Passing, failure(db.get(), "setting the page cache size"));
    if (auto outcome = migrate(db.get(), path); !outcome) return refuseWith(Fault::Passing, outcome);
    return std::unique_ptr<Store>(new Store(db.release()));
}

Store::Store(sqlite3* db) : db_(db) {}

// Slot changes are synced on every commit. Configurations, instances and events are not:
// a device that flaps would otherwise wait for the disk twice per change, and no slot
// depends on them (a restored slot needs only its own row). They reach the disk with the
// next synced commit, because fdatasync of the WAL carries every frame before it.
Outcome Store::syncEachCommit(bool each) {
    if (each == syncEachCommit_) return Outcome::ok();
    const char* sql = each ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL";
    if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK)
        return failure(db_, "setting synchronous mode");
    syncEachCommit_ = each;
    return Outcome::ok();
}

Store::~Store() {
    for (auto& [sql, statement] : statements_) sqlite3_finalize(statement);
    statements_.clear();
    // The last connection to close checkpoints the WAL into state.db and removes it.
    if (sqlite3_close(db_) != SQLITE_OK)
        log.warning() << "closing the state database: " << sqlite3_errmsg(db_);
}

sqlite3_stmt* Store::statement(std::string_view sql) const {
    if (auto it = statements_.find(sql); it != statements_.end()) return it->second;
    sqlite3_stmt* prepared = nullptr;
    if (sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                           &prepared, nullptr) != SQLITE_OK)
        return nullptr;
    statements_.emplace(std::string(sql), prepared);
    return prepared;
}

Outcome Store::holdSlots(const std::vector<Slot>& slots) {
    loopThread_.check();
    if (slots.empty()) return Outcome::ok();
    if (auto outcome = syncEachCommit(true); !outcome) return outcome;
    Transaction transaction(db_);
    if (auto outcome = transaction.begin(); !outcome) return outcome;
    sqlite3_stmt* upsert = statement(kUpsertSlot);
    for (const Slot& slot : slots) {
        if (auto outcome = execute(db_, upsert, "holding slot " + slot.deviceId, slot.deviceId, slot.instance,
                                   slot.configuration, slot.index, slot.holderResource, slot.sinceMs,
                                   slot.pod, slot.podNamespace);
            !outcome)
            return outcome;
        // The second line behind the slot ledger's check: a row held through another
        // resource is never overwritten. Nothing of the call is written (rolled back).
        if (sqlite3_changes(db_) == 0)
            return Outcome::failure(StoreError::HeldThroughOther,
                                    "slot " + slot.deviceId + " is held through another resource in " +
                                        "the state database; one slot is never given twice");
    }
    return transaction.commit();
}

Outcome Store::releaseSlots(const std::vector<std::string>& deviceIds) {
    loopThread_.check();
    if (deviceIds.empty()) return Outcome::ok();
    if (auto outcome = syncEachCommit(true); !outcome) return outcome;
    Transaction transaction(db_);
    if (auto outcome = transaction.begin(); !outcome) return outcome;
    sqlite3_stmt* remove = statement(kDeleteSlot);
    for (const std::string& deviceId : deviceIds) {
        if (auto outcome = execute(db_, remove, "releasing slot " + deviceId, deviceId); !outcome)
            return outcome;
    }
    return transaction.commit();
}

Outcome Store::setSlotPod(const std::string& deviceId, const std::string& pod,
                          const std::string& podNamespace) {
    loopThread_.check();
    if (auto outcome = syncEachCommit(true); !outcome) return outcome;
    return execute(db_, statement(kSetSlotPod), "recording the pod of slot " + deviceId, pod, podNamespace,
                   deviceId);
}

std::vector<Slot> Store::slots() const {
    loopThread_.check();
    std::vector<Slot> result;
    query(db_, statement(kSelectSlots), "reading slots", [&](sqlite3_stmt* row) {
        Slot& slot = result.emplace_back();
        slot.deviceId = columnText(row, 0);
        slot.instance = columnText(row, 1);
        slot.configuration = columnText(row, 2);
        slot.index = sqlite3_column_int(row, 3);
        slot.holderResource = columnText(row, 4);
        slot.sinceMs = sqlite3_column_int64(row, 5);
        slot.pod = columnText(row, 6);
        slot.podNamespace = columnText(row, 7);
    });
    return result;
}

Outcome Store::saveConfiguration(const StoredConfiguration& configuration) {
    loopThread_.check();
    if (auto outcome = syncEachCommit(false); !outcome) return outcome;
    return execute(db_, statement(kUpsertConfiguration), "saving configuration " + configuration.name,
                   configuration.name, configuration.handler, configuration.source, configuration.capacity,
                   configuration.firstSeenMs, configuration.lastSeenMs, configuration.active);
}

Outcome Store::deactivateConfiguration(const std::string& name, std::int64_t nowMs) {
    loopThread_.check();
    if (auto outcome = syncEachCommit(false); !outcome) return outcome;
    return execute(db_, statement(kDeactivateConfiguration), "deactivating configuration " + name, nowMs,
                   name);
}

std::vector<StoredConfiguration> Store::configurations() const {
    loopThread_.check();
    std::vector<StoredConfiguration> result;
    query(db_, statement(kSelectConfigurations), "reading configurations", [&](sqlite3_stmt* row) {
        StoredConfiguration& configuration = result.emplace_back();
        configuration.name = columnText(row, 0);
        configuration.handler = columnText(row, 1);
        configuration.source = columnText(row, 2);
        configuration.capacity = sqlite3_column_int(row, 3);
        configuration.firstSeenMs = sqlite3_column_int64(row, 4);
        configuration.lastSeenMs = sqlite3_column_int64(row, 5);
        configuration.active = sqlite3_column_int(row, 6) != 0;
    });
    return result;
}

Outcome Store::saveInstance(const StoredInstance& instance) {
    loopThread_.check();
    if (auto outcome = syncEachCommit(false); !outcome) return outcome;
    return execute(db_, statement(kUpsertInstance), "saving instance " + instance.name, instance.name,
                   instance.configuration, instance.id, instance.firstSeenMs, instance.lastSeenMs,
                   instance.health);
}

Outcome Store::removeInstance(const std::string& name) {
    loopThread_.check();
    if (auto outcome = syncEachCommit(false); !outcome) return outcome;
    return execute(db_, statement(kDeleteInstance), "removing instance " + name, name);
}

std::vector<StoredInstance> Store::instances() const {
    loopThread_.check();
    std::vector<StoredInstance> result;
    query(db_, statement(kSelectInstances), "reading instances", [&](sqlite3_stmt* row) {
        StoredInstance& instance = result.emplace_back();
        instance.name = columnText(row, 0);
        instance.configuration = columnText(row, 1);
        instance.id = columnText(row, 2);
        instance.firstSeenMs = sqlite3_column_int64(row, 3);
        instance.lastSeenMs = sqlite3_column_int64(row, 4);
        instance.health = columnText(row, 5);
    });
    return result;
}

Outcome Store::addEvent(const std::string& level, const std::string& subject, const std::string& message,
                        std::int64_t nowMs) {
    loopThread_.check();
    if (auto outcome = syncEachCommit(false); !outcome) return outcome;
    Transaction transaction(db_);
    if (auto outcome = transaction.begin(); !outcome) return outcome;
    if (auto outcome =
            execute(db_, statement(kInsertEvent), "recording an event", nowMs, level, subject, message);
        !outcome)
        return outcome;
    if (auto outcome = execute(db_, statement(kTrimEvents), "trimming the event history", kEventHistory);
        !outcome)
        return outcome;
    return transaction.commit();
}

std::vector<StoredEvent> Store::recentEvents(int limit) const {
    loopThread_.check();
    std::vector<StoredEvent> result;
    if (limit <= 0) return result;
    sqlite3_stmt* select = statement(kSelectEvents);
    if (select && sqlite3_bind_int(select, 1, limit) != SQLITE_OK) {
        log.warning() << failure(db_, "reading events").error();
        sqlite3_clear_bindings(select);
        return result;
    }
    query(db_, select, "reading events", [&](sqlite3_stmt* row) {
        StoredEvent& event = result.emplace_back();
        event.id = sqlite3_column_int64(row, 0);
        event.timeMs = sqlite3_column_int64(row, 1);
        event.level = columnText(row, 2);
        event.subject = columnText(row, 3);
        event.message = columnText(row, 4);
    });
    return result;
}

int Store::schemaVersion() const {
    std::int64_t version = 0;
    if (querySingle(db_, "PRAGMA user_version", version) != SQLITE_OK) {
        log.warning() << failure(db_, "reading user_version").error();
        return 0;
    }
    return static_cast<int>(version);
}

}  // namespace devlet
