// A state.db devlet cannot trust: another program's database, a file cut short, garbage.
// devlet refuses it with a message that says what to do, exits with code 1, keeps a copy
// and never changes or deletes the file. Once the operator moves it away, devlet starts
// empty and takes back from the kubelet's PodResources every slot a pod still holds, so
// nothing is given twice.

#include <filesystem>
#include <mutex>

#include <sqlite3.h>

#include "tests/integration/fault_support.h"
#include "tests/integration/fixture.h"

namespace devlet::test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCl = "akri.sh/cams";
constexpr const char* kFoo0 = "akri.sh/cams-8120fe";
constexpr const char* kFoo1 = "akri.sh/cams-a19705";
const std::vector<std::string> kResources = {kCl, kFoo0, kFoo1};

// The first device list each resource sent: slot -> health.
class FirstLists {
public:
    void observe(const std::string& resource, const v1beta1::ListAndWatchResponse& response) {
        std::lock_guard lock(mutex_);
        if (lists_.count(resource)) return;
        auto& list = lists_[resource];
        for (const auto& device : response.devices()) list[device.id()] = device.health();
    }
    std::map<std::string, std::map<std::string, std::string>> lists() const {
        std::lock_guard lock(mutex_);
        return lists_;
    }

private:
    mutable std::mutex mutex_;
    std::map<std::string, std::map<std::string, std::string>> lists_;
};

class StateFileTest : public DaemonTest {
protected:
    void SetUp() override {
        DaemonTest::SetUp();
        writeFile(daemon_->confDir() / "cams.yaml", echoConfiguration("cams", 2));
        fs::create_directories(daemon_->stateDir());
    }
    fs::path database() const { return daemon_->stateDir() / "state.db"; }

    std::vector<fs::path> copies() const {
        std::vector<fs::path> result;
        for (const auto& entry : fs::directory_iterator(daemon_->stateDir())) {
            const std::string name = entry.path().filename().string();
            if (name.starts_with("state.db.corrupt-") && !name.ends_with("-wal"))
                result.push_back(entry.path());
        }
        return result;
    }

    // Starts devlet on the state as it is; it must refuse it and leave it as it was.
    void expectRefused(const std::string& why) {
        const std::string before = readFile(database());
        daemon_->start();
        EXPECT_EQ(daemon_->wait(), 1) << daemon_->log();
        const std::string log = daemon_->log();
        EXPECT_NE(log.find("refusing to use " + database().string()), std::string::npos) << log;
        EXPECT_NE(log.find(why), std::string::npos) << log;
        EXPECT_NE(log.find("Move the file away to start with an empty state"), std::string::npos) << log;
        EXPECT_EQ(readFile(database()), before) << "devlet changed a state.db it refused";
        const auto kept = copies();
        ASSERT_EQ(kept.size(), 1u);
        EXPECT_EQ(readFile(kept[0]), before);
        EXPECT_NE(log.find("a copy is kept at " + kept[0].string()), std::string::npos) << log;
        for (const std::string& resource : kResources)
            EXPECT_TRUE(kubelet_->endpoint(resource).empty())
                << "devlet offered " << resource << " on a state it refused";
    }

    // Allocations through both kinds of resource, then a clean stop.
    void holdSlotsAndStop() {
        ASSERT_TRUE(kubelet_->start());
        daemon_->start();
        ASSERT_TRUE(kubelet_->waitFor([&] { return allRegistered(*kubelet_, kResources); }, 20s));
        ASSERT_TRUE(kubelet_->allocate("default", "pod-a", "main", kFoo0, 1).ok);
        ASSERT_EQ(waitForAgreement(*kubelet_, kResources, Agreement::Exact, 20s), std::vector<std::string>{});
        ASSERT_TRUE(kubelet_->allocate("default", "pod-b", "main", kCl, 2).ok);
        ASSERT_EQ(daemon_->stop(SIGTERM), 0);
        kubelet_->stop();
    }
};

TEST_F(StateFileTest, AnotherProgramsDatabaseIsRefusedKeptAndNeverTouched) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(database().c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "PRAGMA application_id = 1234; CREATE TABLE photos (name TEXT); "
                           "INSERT INTO photos VALUES ('holiday.jpg');",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
    ASSERT_TRUE(kubelet_->start());
    expectRefused("it is not a devlet state database (application_id 0x000004d2)");
}

TEST_F(StateFileTest, StateDatabaseCutShortIsRefusedAndKept) {
    holdSlotsAndStop();
    const auto size = fs::file_size(database());
    ASSERT_GT(size, 4u * 4096u);
    fs::resize_file(database(), size / 2 + 100);  // a copy or a disk that stopped half-way
    expectRefused("it is corrupt");
}

TEST_F(StateFileTest, RestartedInALoopItKeepsOneCopy) {
    writeFile(database(), std::string(3000, '\x5a'));
    for (int i = 0; i < 3; ++i) expectRefused("it is not an SQLite database");
    EXPECT_EQ(copies().size(), 1u);
}

TEST_F(StateFileTest, MovedAwayStateIsTakenBackFromTheKubeletWithoutGivingASlotTwice) {
    holdSlotsAndStop();
    writeFile(database(), "scribbled over by a tool that should not have\n");
    expectRefused("it is not an SQLite database");

    // What the message says to do.
    fs::rename(database(), daemon_->stateDir() / "state.db.mine");
    auto first = std::make_shared<FirstLists>();
    kubelet_->onListAndWatch(
        [first](const std::string& resource, const v1beta1::ListAndWatchResponse& response) {
            first->observe(resource, response);
        });
    ASSERT_TRUE(kubelet_->start());
    daemon_->start();
    ASSERT_TRUE(kubelet_->waitFor([&] { return allRegistered(*kubelet_, kResources); }, 20s))
        << daemon_->log();
    EXPECT_TRUE(daemon_->waitForLog("was not recorded; adopted", 10s));
    // Every slot a pod holds was adopted from PodResources before the plugins registered:
    // not even the first list the kubelet got offered it to another pod.
    for (const auto& [slot, list] : holds(*kubelet_)) {
        for (const std::string& resource : kResources) {
            auto lists = first->lists();
            if (resource == list.front().resource || !lists[resource].count(slot)) continue;
            EXPECT_EQ(lists[resource][slot], "Unhealthy")
                << "slot " << slot << " held through " << list.front().resource
                << " was offered in the first list of " << resource;
        }
    }
    EXPECT_EQ(waitForAgreement(*kubelet_, kResources, Agreement::Exact, 30s), std::vector<std::string>{})
        << daemon_->log();
    EXPECT_FALSE(kubelet_->allocate("default", "pod-c", "main", kCl, 2).ok) << "only one free slot is left";
    EXPECT_TRUE(kubelet_->allocate("default", "pod-d", "main", kCl, 1).ok);
    EXPECT_EQ(givenTwice(*kubelet_), std::vector<std::string>{});
}

}  // namespace
}  // namespace devlet::test
