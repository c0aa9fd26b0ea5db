// Which live file describes which held slot, on a real directory and a real slot ledger
// (without a store): a grant writes its container's file at once, a freed slot leaves its
// file, the last one removes it, and a restart keeps only the files of slots still held.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/live_files.h"
#include "runtime/slot_ledger.h"
#include "tests/support/temp_dir.h"

namespace devlet {
namespace {

namespace fs = std::filesystem;

class LiveFilesTest : public ::testing::Test {
protected:
    LiveFiles makeFiles() {
        return LiveFiles(
            dir_.path().string(),
            [this](const std::string& id) -> std::optional<LiveDevice> {
                auto [instance, index] = splitSlotId(id);
                const Slot* slot = ledger_.holder(instance, index);
                if (!slot) return std::nullopt;
                LiveDevice device;
                device.slot = slot->deviceId;
                device.instance = slot->instance;
                device.present = true;
                return device;
            },
            [this](const std::string& level, const std::string&, const std::string& message) {
                events_.push_back(level + ": " + message);
            });
    }
    void hold(const std::string& instance, int index) {
        ASSERT_TRUE(ledger_.hold({Slot{instance + "-" + std::to_string(index), instance, "cams", index,
                                       "akri.sh/cams", 1, "", ""}}));
    }

    test::TempDir dir_;
    Clock clock_ = Clock::system();
    SlotLedger ledger_{nullptr, clock_};
    std::vector<std::string> events_;
};

TEST_F(LiveFilesTest, AGrantWritesItsFileAndTheLastFreedSlotRemovesIt) {
    LiveFiles files = makeFiles();
    ledger_.addListener(files);
    hold("cams-8120fe", 0);
    hold("cams-a19705", 0);
    std::optional<LiveFiles::Granted> granted = files.granted({"cams-8120fe-0", "cams-a19705-0"});
    ASSERT_TRUE(granted);
    EXPECT_EQ(granted->variable, "DEVLET_INFO_FILE");
    EXPECT_EQ(granted->mount.containerPath, "/run/devlet/info");
    std::optional<LiveFileView> file = files.file("cams-a19705-0");
    ASSERT_TRUE(file);
    EXPECT_TRUE(fs::exists(file->path));
    EXPECT_EQ(files.file("cams-8120fe-0")->path, file->path) << "one file per container";

    ASSERT_TRUE(ledger_.release("cams-8120fe", 0, true));
    EXPECT_FALSE(files.file("cams-8120fe-0"));
    EXPECT_TRUE(files.pending()) << "the other slot's file is rewritten with the next batch";
    files.writeChanged();
    EXPECT_TRUE(fs::exists(file->path));

    ASSERT_TRUE(ledger_.release("cams-a19705", 0, true));
    EXPECT_FALSE(files.file("cams-a19705-0"));
    EXPECT_FALSE(fs::exists(file->path));
    ledger_.removeListener(files);
}

TEST_F(LiveFilesTest, ARestartKeepsTheFilesOfHeldSlotsOnly) {
    std::string kept;
    {
        LiveFiles files = makeFiles();
        hold("cams-8120fe", 0);
        hold("cams-a19705", 0);
        ASSERT_TRUE(files.granted({"cams-8120fe-0"}));
        ASSERT_TRUE(files.granted({"cams-a19705-0"}));
        kept = files.file("cams-a19705-0")->path;
    }
    ASSERT_TRUE(ledger_.release("cams-8120fe", 0, true));
    LiveFiles files = makeFiles();
    files.rebuild([this](const std::string& id) {
        auto [instance, index] = splitSlotId(id);
        return ledger_.holder(instance, index) != nullptr;
    });
    EXPECT_FALSE(files.file("cams-8120fe-0"));
    ASSERT_TRUE(files.file("cams-a19705-0"));
    EXPECT_EQ(files.file("cams-a19705-0")->path, kept);
    EXPECT_TRUE(files.pending());
    EXPECT_TRUE(events_.empty());
}

}  // namespace
}  // namespace devlet
