// The store against real SQLite files in a temporary directory. Failures are
// produced in ways that work as root too: a second connection holding the write
// lock, and RLIMIT_FSIZE (which root is not exempt from) for a failing write.

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/store.h"
#include "tests/support/temp_dir.h"

namespace devlet {
namespace {

namespace fs = std::filesystem;

std::string readFile(const fs::path& path) {
    std::ifstream stream(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>()};
}

void writeFile(const fs::path& path, const std::string& contents) {
    std::ofstream stream(path, std::ios::binary | std::ios::trunc);
    stream << contents;
}

// Runs statements on a connection of the test's own, as another program would.
void runSql(const fs::path& path, const std::string& statements) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    char* message = nullptr;
    int rc = sqlite3_exec(db, statements.c_str(), nullptr, nullptr, &message);
    std::string error = message ? message : "";
    sqlite3_free(message);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK) << error;
}

std::int64_t pragmaValue(const fs::path& path, const std::string& pragma) {
    sqlite3* db = nullptr;
    sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
    sqlite3_stmt* statement = nullptr;
    std::int64_t value = -1;
    if (sqlite3_prepare_v2(db, ("PRAGMA " + pragma).c_str(), -1, &statement, nullptr) == SQLITE_OK &&
        sqlite3_step(statement) == SQLITE_ROW)
        value = sqlite3_column_int64(statement, 0);
    sqlite3_finalize(statement);
    sqlite3_close(db);
    return value;
}

unsigned fileMode(const fs::path& path) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) return 0;
    return info.st_mode & 07777;
}

Slot slot(const std::string& instance, int index, const std::string& holder) {
    Slot result;
    result.deviceId = instance + "-" + std::to_string(index);
    result.instance = instance;
    result.configuration = "cams";
    result.index = index;
    result.holderResource = holder;
    result.sinceMs = 1000 + index;
    return result;
}

StoredConfiguration configuration(const std::string& name, int capacity, std::int64_t seenMs) {
    StoredConfiguration result;
    result.name = name;
    result.handler = "onvif";
    result.source = "/etc/devlet/" + name + ".yaml:1";
    result.capacity = capacity;
    result.firstSeenMs = seenMs;
    result.lastSeenMs = seenMs;
    return result;
}

StoredInstance instance(const std::string& name, std::int64_t seenMs, const std::string& health) {
    StoredInstance result;
    result.name = name;
    result.configuration = "cams";
    result.id = "http://10.0.0.7/onvif/device_service urn:uuid:" + name;
    result.firstSeenMs = seenMs;
    result.lastSeenMs = seenMs;
    result.health = health;
    return result;
}

class StoreTest : public ::testing::Test {
protected:
    void SetUp() override {
        stateDir_ = root_.path() / "state";
        dbPath_ = stateDir_ / "state.db";
    }

    std::unique_ptr<Store> openStore(StoreOptions options = {}) {
        Outcome why = Outcome::ok();
        auto store = Store::open(stateDir_.string(), options, why);
        EXPECT_NE(store, nullptr) << why.error();
        return store;
    }

    std::vector<fs::path> corruptCopies() const {
        std::vector<fs::path> copies;
        for (const auto& entry : fs::directory_iterator(stateDir_)) {
            std::string name = entry.path().filename().string();
            if (name.starts_with("state.db.corrupt-") && !name.ends_with("-wal"))
                copies.push_back(entry.path());
        }
        return copies;
    }

    test::TempDir root_;
    fs::path stateDir_;
    fs::path dbPath_;
};

TEST_F(StoreTest, CreatesOwnerOnlyDatabaseWithCurrentSchema) {
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->schemaVersion(), Store::kSchemaVersion);
    EXPECT_EQ(fileMode(stateDir_), 0700u);
    EXPECT_EQ(fileMode(dbPath_), 0600u);
    EXPECT_EQ(pragmaValue(dbPath_, "user_version"), Store::kSchemaVersion);
    EXPECT_EQ(pragmaValue(dbPath_, "application_id"), 0x64766C74);
    ASSERT_TRUE(store->holdSlots({slot("cams-4294ea", 0, "akri.sh/cams")}));
    // The WAL holds the same data as the database file and gets its mode.
    ASSERT_TRUE(fs::exists(stateDir_ / "state.db-wal"));
    EXPECT_EQ(fileMode(stateDir_ / "state.db-wal"), 0600u);
    EXPECT_TRUE(store->slots().size() == 1);
}

TEST_F(StoreTest, UsesWriteAheadLog) {
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(dbPath_.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* statement = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &statement, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(statement), SQLITE_ROW);
    EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(statement, 0)), "wal");
    sqlite3_finalize(statement);
    sqlite3_close(db);
}

TEST_F(StoreTest, RestrictsLooseModeOfExistingDatabase) {
    openStore().reset();
    ASSERT_EQ(::chmod(dbPath_.c_str(), 0644), 0);
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(fileMode(dbPath_), 0600u);
}

TEST_F(StoreTest, SlotsSurviveCloseAndReopen) {
    std::vector<Slot> held = {slot("cams-4294ea", 0, "akri.sh/cams"),
                              slot("cams-4294ea", 1, "akri.sh/cams-4294ea")};
    held[1].pod = "viewer-1";
    held[1].podNamespace = "video";
    {
        auto store = openStore();
        ASSERT_NE(store, nullptr);
        ASSERT_TRUE(store->holdSlots(held));
    }
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->slots(), held);
}

TEST_F(StoreTest, CommittedSlotsSurviveKilledProcess) {
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        std::string error;
        auto store = Store::open(stateDir_.string(), error);
        bool held = store && store->holdSlots({slot("cams-4294ea", 0, "akri.sh/cams")});
        // No destructor, no checkpoint: what kill -9 leaves behind.
        ::_exit(held ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ASSERT_TRUE(fs::exists(stateDir_ / "state.db-wal"));

    auto store = openStore();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->slots(), std::vector<Slot>{slot("cams-4294ea", 0, "akri.sh/cams")});
}

TEST_F(StoreTest, HoldingAHeldSlotThroughItsResourceAgainUpdatesItsRow) {
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->holdSlots({slot("cams-4294ea", 0, "akri.sh/cams")}));
    Slot again = slot("cams-4294ea", 0, "akri.sh/cams");
    again.sinceMs = 5000;
    again.pod = "viewer";
    ASSERT_TRUE(store->holdSlots({again}));
    EXPECT_EQ(store->slots(), std::vector<Slot>{again});
}

// The second line behind the slot ledger: a row held through one resource is never
// overwritten by a hold through another, and a call with such a slot writes nothing.
TEST_F(StoreTest, AHoldThroughAnotherResourceIsRefusedAndWritesNothing) {
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->holdSlots({slot("cams-4294ea", 0, "akri.sh/cams")}));
    const Outcome refused = store->holdSlots(
        {slot("cams-4294ea", 1, "akri.sh/cams-4294ea"), slot("cams-4294ea", 0, "akri.sh/cams-4294ea")});
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.code(), StoreError::HeldThroughOther);
    EXPECT_NE(refused.error().find("slot cams-4294ea-0 is held through another resource"), std::string::npos)
        << refused.error();
    EXPECT_EQ(store->slots(), std::vector<Slot>{slot("cams-4294ea", 0, "akri.sh/cams")});
}

TEST_F(StoreTest, ReleaseDeletesOnlyTheNamedSlots) {
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(
        store->holdSlots({slot("cams-4294ea", 0, "akri.sh/cams"), slot("cams-4294ea", 1, "akri.sh/cams"),
                          slot("cams-8120fe", 0, "akri.sh/cams")}));
    ASSERT_TRUE(store->releaseSlots({"cams-4294ea-0", "cams-8120fe-0", "not-held-0"}));
    EXPECT_EQ(store->slots(), std::vector<Slot>{slot("cams-4294ea", 1, "akri.sh/cams")});
}

TEST_F(StoreTest, SetSlotPodNamesTheHolder) {
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->holdSlots({slot("cams-4294ea", 0, "akri.sh/cams")}));
    ASSERT_TRUE(store->setSlotPod("cams-4294ea-0", "viewer-1", "video"));
    auto slots = store->slots();
    ASSERT_EQ(slots.size(), 1u);
    EXPECT_EQ(slots[0].pod, "viewer-1");
    EXPECT_EQ(slots[0].podNamespace, "video");
}

TEST_F(StoreTest, SaveConfigurationKeepsFirstSeen) {
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    StoredConfiguration first = configuration("cams", 2, 100);
    ASSERT_TRUE(store->saveConfiguration(first));
    StoredConfiguration later = first;
    later.capacity = 3;
    later.firstSeenMs = 900;
    later.lastSeenMs = 900;
    ASSERT_TRUE(store->saveConfiguration(later));

    StoredConfiguration expected = later;
    expected.firstSeenMs = 100;
    EXPECT_EQ(store->configurations(), std::vector<StoredConfiguration>{expected});
}

TEST_F(StoreTest, DeactivateConfigurationKeepsItsRow) {
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->saveConfiguration(configuration("cams", 1, 100)));
    ASSERT_TRUE(store->deactivateConfiguration("cams", 700));
    auto configurations = store->configurations();
    ASSERT_EQ(configurations.size(), 1u);
    EXPECT_FALSE(configurations[0].active);
    EXPECT_EQ(configurations[0].lastSeenMs, 700);
    EXPECT_EQ(configurations[0].firstSeenMs, 100);
}

TEST_F(StoreTest, SaveInstanceKeepsFirstSeen) {
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    StoredInstance first = instance("cams-4294ea", 100, "present");
    ASSERT_TRUE(store->saveInstance(first));
    StoredInstance later = first;
    later.firstSeenMs = 800;
    later.lastSeenMs = 800;
    later.health = "gone";
    ASSERT_TRUE(store->saveInstance(later));

    StoredInstance expected = later;
    expected.firstSeenMs = 100;
    EXPECT_EQ(store->instances(), std::vector<StoredInstance>{expected});
}

TEST_F(StoreTest, RemoveInstanceDeletesIt) {
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->saveInstance(instance("cams-4294ea", 100, "present")));
    ASSERT_TRUE(store->saveInstance(instance("cams-8120fe", 100, "present")));
    ASSERT_TRUE(store->removeInstance("cams-4294ea"));
    auto instances = store->instances();
    ASSERT_EQ(instances.size(), 1u);
    EXPECT_EQ(instances[0].name, "cams-8120fe");
}

TEST_F(StoreTest, EventHistoryKeepsNewestFirstUpToLimit) {
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    const int total = Store::kEventHistory + 25;
    for (int i = 0; i < total; ++i)
        ASSERT_TRUE(store->addEvent("info", "cams", "event " + std::to_string(i), 1000 + i));

    auto events = store->recentEvents(total);
    ASSERT_EQ(events.size(), static_cast<std::size_t>(Store::kEventHistory));
    EXPECT_EQ(events.front().message, "event " + std::to_string(total - 1));
    EXPECT_EQ(events.front().timeMs, 1000 + total - 1);
    EXPECT_EQ(events.back().message, "event " + std::to_string(total - Store::kEventHistory));
    for (std::size_t i = 1; i < events.size(); ++i) EXPECT_GT(events[i - 1].id, events[i].id);

    auto three = store->recentEvents(3);
    ASSERT_EQ(three.size(), 3u);
    EXPECT_EQ(three[0].message, "event " + std::to_string(total - 1));
    EXPECT_EQ(three[0].level, "info");
    EXPECT_EQ(three[0].subject, "cams");
}

TEST_F(StoreTest, ForeignSqliteFileIsRefusedAndCopiedAside) {
    fs::create_directories(stateDir_);
    runSql(dbPath_,
           "PRAGMA application_id = 305419896; CREATE TABLE photos (name TEXT); "
           "INSERT INTO photos VALUES ('cat.jpg');");
    const std::string before = readFile(dbPath_);

    std::string error;
    EXPECT_EQ(Store::open(stateDir_.string(), error), nullptr);
    EXPECT_NE(error.find(dbPath_.string()), std::string::npos) << error;
    EXPECT_NE(error.find("not a devlet state database (application_id 0x12345678)"), std::string::npos)
        << error;

    EXPECT_EQ(readFile(dbPath_), before);
    auto copies = corruptCopies();
    ASSERT_EQ(copies.size(), 1u);
    EXPECT_EQ(readFile(copies[0]), before);
    EXPECT_NE(error.find(copies[0].string()), std::string::npos) << error;
}

TEST_F(StoreTest, SqliteFileWithTablesButNoApplicationIdIsRefused) {
    fs::create_directories(stateDir_);
    runSql(dbPath_, "CREATE TABLE photos (name TEXT);");
    const std::string before = readFile(dbPath_);

    std::string error;
    EXPECT_EQ(Store::open(stateDir_.string(), error), nullptr);
    EXPECT_NE(error.find("not a devlet state database"), std::string::npos) << error;
    EXPECT_EQ(readFile(dbPath_), before);
    EXPECT_EQ(corruptCopies().size(), 1u);
}

TEST_F(StoreTest, GarbageFileIsRefusedAndCopiedAsideOnce) {
    fs::create_directories(stateDir_);
    std::string garbage(8192, '\0');
    for (std::size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>(i * 7 + 3);
    writeFile(dbPath_, garbage);

    std::string error;
    EXPECT_EQ(Store::open(stateDir_.string(), error), nullptr);
    EXPECT_NE(error.find(dbPath_.string()), std::string::npos) << error;
    EXPECT_NE(error.find("not an SQLite database"), std::string::npos) << error;
    EXPECT_EQ(readFile(dbPath_), garbage);
    auto copies = corruptCopies();
    ASSERT_EQ(copies.size(), 1u);
    EXPECT_EQ(readFile(copies[0]), garbage);

    // A daemon restarted in a loop does not pile up identical copies.
    EXPECT_EQ(Store::open(stateDir_.string(), error), nullptr);
    EXPECT_EQ(corruptCopies().size(), 1u);
}

TEST_F(StoreTest, CorruptDatabaseIsRefusedAndCopiedAside) {
    {
        auto store = openStore();
        ASSERT_NE(store, nullptr);
        std::vector<Slot> many;
        for (int i = 0; i < 200; ++i) many.push_back(slot("cams-" + std::to_string(i), 0, "akri.sh/cams"));
        ASSERT_TRUE(store->holdSlots(many));
    }
    std::string contents = readFile(dbPath_);
    const std::size_t pageSize = static_cast<std::size_t>(pragmaValue(dbPath_, "page_size"));
    ASSERT_GT(contents.size(), 3 * pageSize);
    // Scribble over the pages after the first: the header still says "devlet".
    for (std::size_t i = pageSize; i < contents.size(); ++i) contents[i] = static_cast<char>(0xA5);
    writeFile(dbPath_, contents);

    std::string error;
    EXPECT_EQ(Store::open(stateDir_.string(), error), nullptr);
    EXPECT_NE(error.find("corrupt"), std::string::npos) << error;
    EXPECT_EQ(readFile(dbPath_), contents);
    ASSERT_EQ(corruptCopies().size(), 1u);
    EXPECT_EQ(readFile(corruptCopies()[0]), contents);
}

TEST_F(StoreTest, NewerSchemaVersionIsRefused) {
    openStore().reset();
    runSql(dbPath_, "PRAGMA user_version = " + std::to_string(Store::kSchemaVersion + 1));
    const std::string before = readFile(dbPath_);

    std::string error;
    EXPECT_EQ(Store::open(stateDir_.string(), error), nullptr);
    EXPECT_NE(error.find("has schema version " + std::to_string(Store::kSchemaVersion + 1) +
                         ", this devlet understands up to " + std::to_string(Store::kSchemaVersion) +
                         "; refusing to downgrade"),
              std::string::npos)
        << error;
    EXPECT_EQ(readFile(dbPath_), before);
    EXPECT_TRUE(corruptCopies().empty());
}

TEST_F(StoreTest, TablesThatDoNotMatchTheSchemaVersionAreRefusedAndCopiedAside) {
    openStore().reset();
    runSql(dbPath_, "ALTER TABLE slots DROP COLUMN pod_namespace;");
    const std::string before = readFile(dbPath_);

    Outcome why = Outcome::ok();
    EXPECT_EQ(Store::open(stateDir_.string(), {}, why), nullptr);
    EXPECT_NE(why.error().find("its tables do not match devlet's schema version " +
                               std::to_string(Store::kSchemaVersion) + " (no such column: pod_namespace)"),
              std::string::npos)
        << why.error();
    EXPECT_EQ(why.fault(), Fault::Lasting);
    EXPECT_EQ(readFile(dbPath_), before);
    EXPECT_EQ(corruptCopies().size(), 1u);

    fs::remove_all(stateDir_);
    openStore().reset();
    runSql(dbPath_, "DROP TABLE events;");
    std::string error;
    EXPECT_EQ(Store::open(stateDir_.string(), error), nullptr);
    EXPECT_NE(error.find("(no such table: events)"), std::string::npos) << error;
}

TEST_F(StoreTest, RefusalSaysWhetherTryingAgainCanHelp) {
    fs::create_directories(stateDir_);
    writeFile(dbPath_, "not a database");
    Outcome why = Outcome::ok();
    EXPECT_EQ(Store::open(stateDir_.string(), {}, why), nullptr);
    EXPECT_EQ(why.fault(), Fault::Lasting) << why.error();
    EXPECT_EQ(why.code(), StoreError::Corrupt) << why.error();
    fs::remove(dbPath_);

    // A lock another process holds goes away again.
    openStore().reset();
    sqlite3* other = nullptr;
    ASSERT_EQ(sqlite3_open(dbPath_.c_str(), &other), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
    EXPECT_EQ(Store::open(stateDir_.string(), {.busyTimeoutMs = 50}, why), nullptr);
    EXPECT_EQ(why.fault(), Fault::Passing) << why.error();
    EXPECT_NE(why.error().find("locked"), std::string::npos) << why.error();
    sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(other);
    EXPECT_NE(Store::open(stateDir_.string(), {}, why), nullptr) << why.error();
    EXPECT_TRUE(why);
}

// state.db moved away, its -wal left behind: it holds the moved database's last
// transactions, and SQLite would delete it when the new, empty database opens.
TEST_F(StoreTest, WalWithoutItsDatabaseIsKeptAsideNotReplayed) {
    std::string wal;
    {
        auto store = openStore();
        ASSERT_NE(store, nullptr);
        std::vector<Slot> many;
        for (int i = 0; i < 50; ++i) many.push_back(slot("cams-" + std::to_string(i), 0, "akri.sh/cams"));
        ASSERT_TRUE(store->holdSlots(many));
        wal = readFile(stateDir_ / "state.db-wal");
    }
    ASSERT_FALSE(wal.empty());
    fs::rename(dbPath_, root_.path() / "moved-away.db");
    writeFile(stateDir_ / "state.db-wal", wal);

    auto store = openStore();
    ASSERT_NE(store, nullptr);
    EXPECT_TRUE(store->slots().empty());
    std::vector<fs::path> kept;
    for (const auto& entry : fs::directory_iterator(stateDir_)) {
        if (entry.path().filename().string().starts_with("state.db-wal.orphan-"))
            kept.push_back(entry.path());
    }
    ASSERT_EQ(kept.size(), 1u);
    EXPECT_EQ(readFile(kept[0]), wal);
}

// Another process holding the write lock (an operator's sqlite3 shell in a
// transaction) makes a write fail rather than wait forever; reads go on.
TEST_F(StoreTest, LockedDatabaseMakesHoldSlotsFailUntilReleased) {
    auto store = openStore({.busyTimeoutMs = 50});
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->holdSlots({slot("cams-4294ea", 0, "akri.sh/cams")}));

    sqlite3* other = nullptr;
    ASSERT_EQ(sqlite3_open(dbPath_.c_str(), &other), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);

    Outcome outcome = store->holdSlots({slot("cams-4294ea", 1, "akri.sh/cams")});
    EXPECT_FALSE(outcome);
    EXPECT_EQ(outcome.code(), StoreError::Busy);
    EXPECT_EQ(outcome.error(), "state store: starting a transaction failed: database is locked");
    EXPECT_FALSE(store->addEvent("info", "cams", "held", 1));
    EXPECT_EQ(store->slots().size(), 1u);

    ASSERT_EQ(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(other);
    EXPECT_TRUE(store->holdSlots({slot("cams-4294ea", 1, "akri.sh/cams")}));
    EXPECT_EQ(store->slots().size(), 2u);
}

// Stands in for a full or failing disk: root is not exempt from RLIMIT_FSIZE,
// and with SIGXFSZ ignored a write past it fails with EFBIG.
class FileSizeLimit {
public:
    explicit FileSizeLimit(rlim_t bytes) {
        previousHandler_ = std::signal(SIGXFSZ, SIG_IGN);
        ::getrlimit(RLIMIT_FSIZE, &previous_);
        rlimit limited = previous_;
        limited.rlim_cur = bytes;
        ::setrlimit(RLIMIT_FSIZE, &limited);
    }
    ~FileSizeLimit() { lift(); }
    void lift() {
        if (lifted_) return;
        lifted_ = true;
        ::setrlimit(RLIMIT_FSIZE, &previous_);
        std::signal(SIGXFSZ, previousHandler_);
    }

private:
    rlimit previous_{};
    void (*previousHandler_)(int) = nullptr;
    bool lifted_ = false;
};

TEST_F(StoreTest, FailedWriteRollsBackAndStoreWorksAgainAfterwards) {
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->holdSlots({slot("cams-4294ea", 0, "akri.sh/cams")}));

    Slot huge = slot("cams-4294ea", 1, std::string(8 << 20, 'x'));
    {
        FileSizeLimit limit(fs::file_size(stateDir_ / "state.db-wal") + 64 * 1024);
        Outcome outcome = store->holdSlots({slot("cams-8120fe", 0, "akri.sh/cams"), huge});
        EXPECT_FALSE(outcome);
        EXPECT_TRUE(outcome.error().starts_with("state store: ")) << outcome.error();
        EXPECT_NE(outcome.error().find("failed: "), std::string::npos) << outcome.error();
    }
    // Nothing of the failed transaction is visible, before or after a reopen.
    EXPECT_EQ(store->slots(), std::vector<Slot>{slot("cams-4294ea", 0, "akri.sh/cams")});
    ASSERT_TRUE(store->holdSlots({slot("cams-8120fe", 0, "akri.sh/cams")}));
    ASSERT_TRUE(store->addEvent("warning", "store", "disk was full", 5));
    EXPECT_EQ(store->slots().size(), 2u);

    store.reset();
    store = openStore();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->slots(), (std::vector<Slot>{slot("cams-4294ea", 0, "akri.sh/cams"),
                                                 slot("cams-8120fe", 0, "akri.sh/cams")}));
}

// Allocate and a release each write one transaction; many in a row leave exactly the last
// state. What each costs is a figure of bench/store_bench, not a test.
TEST_F(StoreTest, HoldingAndReleasingManyTimesLeavesTheLastState) {
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    constexpr int kRounds = 200;
    for (int i = 0; i < kRounds; ++i) {
        ASSERT_TRUE(store->holdSlots({slot("cams-4294ea", i % 4, "akri.sh/cams")}));
        if (i < kRounds - 1) {
            ASSERT_TRUE(store->releaseSlots({"cams-4294ea-" + std::to_string(i % 4)}));
        }
    }
    const int last = (kRounds - 1) % 4;
    EXPECT_EQ(store->slots(), std::vector<Slot>{slot("cams-4294ea", last, "akri.sh/cams")});
    store.reset();
    store = openStore();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->slots(), std::vector<Slot>{slot("cams-4294ea", last, "akri.sh/cams")});
}

}  // namespace
}  // namespace devlet
