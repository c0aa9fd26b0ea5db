#pragma once
// A SQLite VFS that can cut the power. It wraps the default (unix) VFS and remembers, for
// every file it opens, what the disk is sure to hold: the file as it was at its last
// xSync. A power cut takes that image (plus, if asked, a random part of the writes made
// since, as a disk may have written some of them anyway); restore() then puts every file
// back to it, as a reboot would find them. Like SQLite's own crash-test VFS.
//
// Model, and its limits:
// - A write or truncate is durable only once the file is synced.
// - A file the VFS created is durable only from its first sync (SQLite fsyncs the
//   directory on the first sync of a WAL or journal it created); until then a power cut
//   takes it away. A file that already existed when the VFS first opened it (state.db,
//   created by the store itself and its directory synced) counts as durable as it was.
// - A deletion is durable at once. The -shm file is not modelled: SQLite rebuilds it
//   from the WAL when the first connection opens the database after a reboot.
//
// Registered as the default VFS for its lifetime, so code under test needs no option to
// use it. One per process, used from one thread; restore() only while no connection is
// open, as after a reboot.

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

struct sqlite3_vfs;   // NOLINT(readability-identifier-naming): SQLite's name
struct sqlite3_file;  // NOLINT(readability-identifier-naming): SQLite's name

namespace devlet::test {

class PowerCutVfs {
public:
    PowerCutVfs();
    ~PowerCutVfs();
    PowerCutVfs(const PowerCutVfs&) = delete;
    PowerCutVfs& operator=(const PowerCutVfs&) = delete;

    // A random seed for a run of cuts, or $DEVLET_FAULT_SEED to repeat one.
    static std::uint64_t seed();

    // The probability that a write not yet synced is on the disk all the same after a
    // cut (each write on its own, so a later one may land and an earlier one not).
    void keepUnsyncedWrites(double probability, std::uint64_t seed);

    // The power goes now: the disk's image is taken. Whatever runs afterwards (the store
    // closing, say) still reaches the files but is thrown away by restore().
    void cutNow();
    // The power goes right after the n-th write, truncate, sync or delete from now (n >= 1).
    void cutAfter(std::uint64_t operations);
    bool cut() const { return image_.has_value(); }

    // The reboot: every file back to its image at the cut. Call with no connection open.
    // Returns "" or what could not be put back.
    std::string restore();

    // How many times the file at path (as SQLite names it) was synced so far.
    std::uint64_t syncs(const std::string& path) const;

    // For the SQLite callbacks.
    struct File;
    struct Tracked {
        std::optional<std::string> durable;  // nullopt: not on the disk after a cut
        struct Change {
            bool truncate = false;
            std::int64_t offset = 0;  // truncate: the new size
            std::string data;
        };
        std::vector<Change> unsynced;
        std::uint64_t syncs = 0;
    };
    Tracked* track(const std::string& path);
    void changed(Tracked& file, Tracked::Change change);
    void synced(Tracked& file);
    void deleted(const std::string& path);
    sqlite3_vfs* inner() const { return inner_; }

private:
    void operation();
    std::optional<std::string> imageOf(const Tracked& file);

    sqlite3_vfs* inner_ = nullptr;
    sqlite3_vfs* vfs_ = nullptr;
    std::map<std::string, Tracked> files_;
    std::optional<std::map<std::string, std::optional<std::string>>> image_;
    std::uint64_t operationsToCut_ = 0;  // 0: no cut armed
    double keepProbability_ = 0;
    std::optional<std::mt19937_64> random_;  // made with the seed keepUnsyncedWrites is given
};

// While it lives, every connection this process opens keeps synchronous = NORMAL whatever
// it asks for: the store as it was before it synced each commit. For tests that show a
// power cut really takes what was not synced.
class SynchronousNormalForced {
public:
    SynchronousNormalForced();
    ~SynchronousNormalForced();
    SynchronousNormalForced(const SynchronousNormalForced&) = delete;
    SynchronousNormalForced& operator=(const SynchronousNormalForced&) = delete;
};

}  // namespace devlet::test
