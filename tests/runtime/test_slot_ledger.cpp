// The slot ledger on its own, with a real SQLite store: holds are durable before they
// count, a refused write holds nothing, a restart finds them again. What the kubelet's
// word does to them is the arbiter's (test_slot_arbiter_rules.cpp).

#include <gtest/gtest.h>

#include "runtime/slot_ledger.h"
#include "runtime/store.h"
#include "tests/support/temp_dir.h"

namespace devlet {
namespace {

using namespace std::chrono_literals;

constexpr const char* kIl = "akri.sh/cams-8120fe";
constexpr const char* kCl = "akri.sh/cams";

struct Recorder : SlotLedger::Listener {
    struct Change {
        std::string deviceId;
        std::string before;
        std::string after;
    };
    std::vector<Change> changes;
    std::vector<std::string> events;
    void holderChanged(const Slot& slot, const std::string& before) override {
        changes.push_back({slot.deviceId, before, slot.holderResource});
    }
    void event(const std::string& level, const std::string&, const std::string& message) override {
        events.push_back(level + ": " + message);
    }
};

class SlotLedgerTest : public ::testing::Test {
protected:
    void SetUp() override {
        std::string error;
        store_ = Store::open(dir_.path().string(), error);
        ASSERT_TRUE(store_) << error;
        ledger_ = std::make_unique<SlotLedger>(store_.get(), clock_);
        ledger_->addListener(recorder_);
    }

    static Slot slot(int index, const std::string& holder) {
        return Slot{"cams-8120fe-" + std::to_string(index), "cams-8120fe", "cams", index, holder, 1, "", ""};
    }
    void advance(std::chrono::milliseconds by) { now_ += by; }

    test::TempDir dir_;
    std::chrono::steady_clock::time_point now_{std::chrono::hours(1)};
    Clock clock_{[this] { return now_; }, [] { return std::int64_t{1700000000000}; }};
    Recorder recorder_;
    std::unique_ptr<Store> store_;
    std::unique_ptr<SlotLedger> ledger_;
};

// The ledger decides "never twice" itself: a slot held through one resource is not held
// through the other until it is released, whatever its caller checked.
TEST_F(SlotLedgerTest, AHoldThroughAnotherResourceIsRefusedAndHoldsNothing) {
    ASSERT_TRUE(ledger_->hold({slot(0, kCl)}));
    recorder_.changes.clear();
    const Outcome refused = ledger_->hold({slot(1, kIl), slot(0, kIl)});
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.code(), Refusal::HeldThroughOther);
    EXPECT_EQ(refused.error(),
              "slot cams-8120fe-0 is already held through akri.sh/cams; one slot is never given twice");
    EXPECT_EQ(ledger_->holder("cams-8120fe", 0)->holderResource, kCl);
    EXPECT_EQ(ledger_->holder("cams-8120fe", 1), nullptr);
    EXPECT_TRUE(recorder_.changes.empty());
    EXPECT_EQ(store_->slots().size(), 1u);
    // Through the same resource again: fine (the kubelet allocates anew after its restart).
    EXPECT_TRUE(ledger_->hold({slot(0, kCl)}));
}

TEST_F(SlotLedgerTest, AHoldIsInTheStoreBeforeItCounts) {
    ASSERT_TRUE(ledger_->hold({slot(0, kCl), slot(1, kIl)}));
    EXPECT_EQ(store_->slots().size(), 2u);
    ASSERT_NE(ledger_->holder("cams-8120fe", 1), nullptr);
    EXPECT_EQ(ledger_->holder("cams-8120fe", 1)->holderResource, kIl);
    EXPECT_EQ(ledger_->highestHeld("cams-8120fe"), 1);
    ASSERT_EQ(recorder_.changes.size(), 2u);
    EXPECT_EQ(recorder_.changes[0].before, "");
    EXPECT_EQ(recorder_.changes[0].after, kCl);
}

TEST_F(SlotLedgerTest, ARestartFindsTheHoldsAgain) {
    ASSERT_TRUE(ledger_->hold({slot(2, kCl)}, "http://192.0.2.10/onvif/device_service"));
    SlotLedger again(store_.get(), clock_);
    again.restore();
    ASSERT_NE(again.holder("cams-8120fe", 2), nullptr);
    EXPECT_EQ(again.holder("cams-8120fe", 2)->holderResource, kCl);
    EXPECT_EQ(again.size(), 1u);
}

}  // namespace
}  // namespace devlet
