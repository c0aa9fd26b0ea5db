// Power cuts against the store, on real SQLite files in a temporary directory. The
// power-cut VFS (tests/support/power_cut_vfs.h) is the default VFS of this process, so
// the store uses it without knowing: after a cut, only what was synced is on the "disk".
// After a reboot the kubelet reuses the allocations in its checkpoint without calling
// Allocate again, so a hold acknowledged and then lost is a slot offered twice.

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "runtime/store.h"
#include "tests/support/power_cut_vfs.h"
#include "tests/support/temp_dir.h"

namespace devlet {
namespace {

namespace fs = std::filesystem;
using Held = std::map<std::string, Slot>;
using test::SynchronousNormalForced;

std::string describe(const Held& held) {
    std::string text = "{";
    for (const auto& [id, slot] : held)
        text += " " + id + "@" + slot.holderResource + (slot.pod.empty() ? "" : "/" + slot.pod);
    return text + " }";
}

std::string integrityCheck(const fs::path& path) {
    sqlite3* db = nullptr;
    std::string result;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
        result = std::string("cannot open: ") + sqlite3_errmsg(db);
    } else {
        sqlite3_stmt* statement = nullptr;
        if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &statement, nullptr) != SQLITE_OK) {
            result = sqlite3_errmsg(db);
        } else {
            while (sqlite3_step(statement) == SQLITE_ROW)
                result += reinterpret_cast<const char*>(sqlite3_column_text(statement, 0));
            if (result.empty()) result = sqlite3_errmsg(db);
        }
        sqlite3_finalize(statement);
    }
    sqlite3_close(db);
    return result;
}

class StorePowerLossTest : public ::testing::Test {
protected:
    void SetUp() override {
        stateDir_ = fs::canonical(root_.path()) / "state";
        dbPath_ = stateDir_ / "state.db";
    }

    std::unique_ptr<Store> openStore() {
        std::string error;
        auto store = Store::open(stateDir_.string(), error);
        EXPECT_NE(store, nullptr) << error;
        return store;
    }

    struct Cuts {
        int rounds = 40;
        bool midCall = true;           // also cut in the middle of a call, not only between calls
        bool keepSomeUnsynced = true;  // a disk that wrote part of what was not synced
    };
    struct Result {
        int cuts = 0;
        int midCallCuts = 0;
        int lostHolds = 0;  // acknowledged holds missing (or changed) after a cut
        std::vector<std::string> mismatches;
    };

    // Rounds of random store calls, each ended by a power cut, a reboot and a reopen.
    // After each the database must open and pass integrity_check, and the held slots must
    // be exactly what was acknowledged: a call the cut interrupted may or may not have
    // happened, as a whole.
    Result cutRepeatedly(const Cuts& cuts) {
        const std::uint64_t seed = test::PowerCutVfs::seed();
        std::printf("power cuts: %d rounds, seed %llu (DEVLET_FAULT_SEED repeats it)\n", cuts.rounds,
                    static_cast<unsigned long long>(seed));
        std::mt19937_64 random(seed);
        auto chance = [&](double p) { return std::bernoulli_distribution(p)(random); };
        auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(random); };

        Result result;
        Held acknowledged;
        std::int64_t clock = 1000;
        auto store = openStore();
        if (!store) return result;
        for (int round = 0; round < cuts.rounds; ++round) {
            vfs_.keepUnsyncedWrites(cuts.keepSomeUnsynced ? std::vector<double>{0, 0.5, 1}[pick(3)] : 0,
                                    random());
            const int calls = 1 + pick(25);
            const bool midCall = cuts.midCall && chance(0.5);
            if (midCall) vfs_.cutAfter(1 + pick(calls * 4));
            Held inFlight = acknowledged;  // what the interrupted call would have made of it

            for (int call = 0; call < calls && !vfs_.cut(); ++call) {
                Held after = acknowledged;
                Outcome outcome = Outcome::ok();
                int kind = pick(10);
                if (kind < 4) {
                    std::vector<Slot> slots;
                    for (int n = 1 + pick(3); n > 0; --n) {
                        Slot slot;
                        slot.instance = "cams-" + std::to_string(100000 + pick(12));
                        slot.index = pick(4);
                        slot.deviceId = slot.instance + "-" + std::to_string(slot.index);
                        slot.configuration = "cams";
                        slot.holderResource = chance(0.5) ? "akri.sh/cams" : "akri.sh/" + slot.instance;
                        // Held already: again only through its resource (the store refuses another).
                        if (auto held = after.find(slot.deviceId); held != after.end())
                            slot.holderResource = held->second.holderResource;
                        slot.sinceMs = ++clock;
                        after[slot.deviceId] = slot;
                        slots.push_back(slot);
                    }
                    outcome = store->holdSlots(slots);
                } else if (kind < 6 && !acknowledged.empty()) {
                    std::vector<std::string> ids;
                    for (int n = 1 + pick(2); n > 0 && !after.empty(); --n) {
                        auto it = std::next(after.begin(), pick(static_cast<int>(after.size())));
                        ids.push_back(it->first);
                        after.erase(it);
                    }
                    outcome = store->releaseSlots(ids);
                } else if (kind < 7 && !acknowledged.empty()) {
                    auto it = std::next(after.begin(), pick(static_cast<int>(after.size())));
                    it->second.pod = "pod-" + std::to_string(++clock);
                    it->second.podNamespace = "default";
                    outcome = store->setSlotPod(it->first, it->second.pod, it->second.podNamespace);
                } else if (kind < 9) {
                    // Large events grow the WAL, so checkpoints run (and get cut) too.
                    outcome = store->addEvent("info", "cams", std::string(500 + pick(3000), 'e'), ++clock);
                } else {
                    StoredInstance instance{
                        "cams-" + std::to_string(100000 + pick(12)), "cams", "id", 1, ++clock, "present"};
                    outcome = store->saveInstance(instance);
                }
                if (vfs_.cut()) {
                    inFlight = after;  // the process died before it could answer
                    break;
                }
                EXPECT_TRUE(outcome) << outcome.error();
                acknowledged = after;
                inFlight = after;
                if (chance(0.05)) {  // a clean restart: checkpoint, WAL removed and created anew
                    store.reset();
                    store = openStore();
                    if (!store) return result;
                }
            }
            if (!vfs_.cut()) vfs_.cutNow();
            result.midCallCuts += midCall ? 1 : 0;
            ++result.cuts;

            store.reset();  // whatever it writes while closing is after the cut
            std::string problems = vfs_.restore();
            EXPECT_EQ(problems, "");
            std::string integrity = integrityCheck(dbPath_);
            EXPECT_EQ(integrity, "ok") << "round " << round;
            store = openStore();
            if (!store) {
                result.mismatches.push_back("round " + std::to_string(round) + ": the store did not open");
                return result;
            }
            Held found;
            for (const Slot& slot : store->slots()) found[slot.deviceId] = slot;
            if (found != acknowledged && found != inFlight) {
                result.mismatches.push_back("round " + std::to_string(round) + ": held " + describe(found) +
                                            ", acknowledged " + describe(acknowledged));
            }
            for (const auto& [id, slot] : acknowledged) {
                auto it = found.find(id);
                auto flying = inFlight.find(id);
                bool asAcknowledged = it != found.end() && it->second == slot;
                bool asInFlight =
                    it != found.end() && flying != inFlight.end() && it->second == flying->second;
                bool releasedInFlight = it == found.end() && flying == inFlight.end();
                if (!asAcknowledged && !asInFlight && !releasedInFlight) ++result.lostHolds;
            }
            acknowledged = found;
        }
        std::printf(
            "%d cuts (%d in the middle of a call), %llu checkpoints, %d acknowledged holds lost, %zu "
            "mismatches\n",
            result.cuts, result.midCallCuts, static_cast<unsigned long long>(vfs_.syncs(dbPath_.string())),
            result.lostHolds, result.mismatches.size());
        return result;
    }

    test::PowerCutVfs vfs_;  // before the store: registered as the default VFS first
    test::TempDir root_;
    fs::path stateDir_;
    fs::path dbPath_;
};

TEST_F(StorePowerLossTest, EveryAcknowledgedHoldSurvivesPowerCuts) {
    Result result = cutRepeatedly({});
    EXPECT_EQ(result.cuts, 40);
    EXPECT_GT(result.midCallCuts, 0);
    EXPECT_EQ(result.lostHolds, 0);
    EXPECT_TRUE(result.mismatches.empty()) << result.mismatches.front();
}

// The test's own teeth: with synchronous=NORMAL (the WAL synced only at checkpoints) the
// same cuts lose acknowledged holds, so the VFS really throws away what was not synced.
TEST_F(StorePowerLossTest, WithoutSyncingEachCommitPowerCutsLoseAcknowledgedHolds) {
    SynchronousNormalForced normal;
    Result result = cutRepeatedly({.rounds = 15, .midCall = false, .keepSomeUnsynced = false});
    EXPECT_EQ(result.cuts, 15);
    EXPECT_GT(result.lostHolds, 0);
    EXPECT_FALSE(result.mismatches.empty());
}

TEST_F(StorePowerLossTest, HoldsReleasesAndPodNamesAreSyncedBeforeTheCallReturns) {
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    const std::string wal = dbPath_.string() + "-wal";
    Slot slot{"cams-4294ea-0", "cams-4294ea", "cams", 0, "akri.sh/cams", 1000, "", ""};

    std::uint64_t before = vfs_.syncs(wal);
    ASSERT_TRUE(store->holdSlots({slot}));
    EXPECT_GT(vfs_.syncs(wal), before) << "holdSlots";

    before = vfs_.syncs(wal);
    ASSERT_TRUE(store->setSlotPod(slot.deviceId, "camera-reader", "default"));
    EXPECT_GT(vfs_.syncs(wal), before) << "setSlotPod";

    before = vfs_.syncs(wal);
    ASSERT_TRUE(store->releaseSlots({slot.deviceId}));
    EXPECT_GT(vfs_.syncs(wal), before) << "releaseSlots";
}

// Instances and events are not worth a disk flush each (a flapping device would wait for
// the disk twice per change); the next hold's flush carries them, as the WAL is in order.
TEST_F(StorePowerLossTest, InstancesAndEventsReachTheDiskWithTheNextHold) {
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    const std::string wal = dbPath_.string() + "-wal";
    StoredInstance instance{"cams-4294ea", "cams", "urn:uuid:4294ea", 10, 20, "present"};
    Slot slot{"cams-4294ea-0", "cams-4294ea", "cams", 0, "akri.sh/cams", 1000, "", ""};

    std::uint64_t before = vfs_.syncs(wal);
    ASSERT_TRUE(store->saveInstance(instance));
    ASSERT_TRUE(store->addEvent("info", "cams-4294ea", "offered", 30));
    EXPECT_EQ(vfs_.syncs(wal), before);
    ASSERT_TRUE(store->holdSlots({slot}));
    EXPECT_GT(vfs_.syncs(wal), before);

    vfs_.cutNow();
    store.reset();
    ASSERT_EQ(vfs_.restore(), "");
    store = openStore();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->instances(), std::vector<StoredInstance>{instance});
    ASSERT_EQ(store->recentEvents(1).size(), 1u);
    EXPECT_EQ(store->recentEvents(1).front().message, "offered");
    EXPECT_EQ(store->slots(), std::vector<Slot>{slot});
}

// state.db is created by the store itself; a cut right after the first hold keeps both
// the file and the hold.
TEST_F(StorePowerLossTest, FirstHoldInAFreshStateDirectorySurvivesAPowerCut) {
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    Slot slot{"cams-4294ea-0", "cams-4294ea", "cams", 0, "akri.sh/cams", 1000, "", ""};
    ASSERT_TRUE(store->holdSlots({slot}));
    vfs_.cutNow();
    store.reset();
    ASSERT_EQ(vfs_.restore(), "");
    store = openStore();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->slots(), std::vector<Slot>{slot});
}

}  // namespace
}  // namespace devlet
