// The slot ledger on its own, with a real SQLite store: holds are durable before they
// count, a refused write holds nothing, and the kubelet's word adopts and releases slots
// only as docs/guarantees.md says.

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
        ledger_ = std::make_unique<SlotLedger>(store_.get(), clock_, recorder_);
    }

    static Slot slot(int index, const std::string& holder) {
        return Slot{"cams-8120fe-" + std::to_string(index), "cams-8120fe", "cams", index, holder, 1, "", ""};
    }
    // Every slot of cams-8120fe is one devlet offers, through either resource.
    SlotLedger::Locate locate() const {
        return
            [](const std::string& resource, const std::string& deviceId) -> std::optional<SlotLedger::Place> {
                auto [instance, index] = splitSlotId(deviceId);
                if (instance != "cams-8120fe" || index < 0 || (resource != kIl && resource != kCl))
                    return std::nullopt;
                return SlotLedger::Place{"cams", instance, "http://192.0.2.10/onvif/device_service", index};
            };
    }
    static bool placed(const Slot&) { return true; }
    static KubeletEvidence says(std::vector<PodDevice> pods,
                                std::optional<std::vector<PodDevice>> checkpoint = {}) {
        KubeletEvidence evidence;
        evidence.pods = std::move(pods);
        evidence.checkpoint = std::move(checkpoint);
        return evidence;
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
    EXPECT_EQ(refused.error(), "slot cams-8120fe-0 is already held through akri.sh/cams; one slot is never given twice");
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
    SlotLedger again(store_.get(), clock_, recorder_);
    again.restore();
    ASSERT_NE(again.holder("cams-8120fe", 2), nullptr);
    EXPECT_EQ(again.holder("cams-8120fe", 2)->holderResource, kCl);
    EXPECT_EQ(again.size(), 1u);
}

TEST_F(SlotLedgerTest, NothingIsReleasedWithoutEvidenceForTheWholeGrace) {
    ASSERT_TRUE(ledger_->hold({slot(0, kCl)}));
    advance(10s);
    KubeletEvidence silent;  // PodResources did not answer
    ledger_->reconcile(silent, 1s, locate(), placed);
    EXPECT_NE(ledger_->holder("cams-8120fe", 0), nullptr);
    // An empty answer without a checkpoint is what a kubelet that has not learned its
    // pods gives: no evidence either.
    ledger_->reconcile(says({}), 1s, locate(), placed);
    EXPECT_NE(ledger_->holder("cams-8120fe", 0), nullptr);
    // The checkpoint still lists it: held, and the lag is said.
    PodDevice listed{kCl, "cams-8120fe-0", "", "", "uid-1"};
    EXPECT_TRUE(ledger_->reconcile(says({}, std::vector<PodDevice>{listed}), 1s, locate(), placed));
    EXPECT_NE(ledger_->holder("cams-8120fe", 0), nullptr);
    // Neither lists it, after the grace: released, in the store too.
    EXPECT_FALSE(ledger_->reconcile(says({}, std::vector<PodDevice>{}), 1s, locate(), placed));
    EXPECT_EQ(ledger_->holder("cams-8120fe", 0), nullptr);
    EXPECT_TRUE(store_->slots().empty());
}

TEST_F(SlotLedgerTest, WhatTheKubeletReportsHeldIsAdoptedAndNamed) {
    PodDevice held{kIl, "cams-8120fe-1", "recorder", "video", ""};
    ledger_->reconcile(says({held}), 1s, locate(), placed);
    const Slot* slot = ledger_->holder("cams-8120fe", 1);
    ASSERT_NE(slot, nullptr);
    EXPECT_EQ(slot->holderResource, kIl);
    EXPECT_EQ(slot->pod, "recorder");
    EXPECT_EQ(store_->slots().size(), 1u);
    ASSERT_EQ(recorder_.events.size(), 1u);
    EXPECT_NE(recorder_.events[0].find("adopted"), std::string::npos);
    // Another resource's claim on it is a conflict, said once while it lasts.
    PodDevice other{kCl, "cams-8120fe-1", "viewer", "video", ""};
    ledger_->reconcile(says({held, other}), 1s, locate(), placed);
    ledger_->reconcile(says({held, other}), 1s, locate(), placed);
    EXPECT_EQ(recorder_.events.size(), 2u);
    EXPECT_EQ(ledger_->holder("cams-8120fe", 1)->holderResource, kIl);
}

TEST_F(SlotLedgerTest, SlotsOfResourcesDevletDoesNotOfferAreLeftAlone) {
    ledger_->reconcile(says({{"gpu.intel.com/i915", "card0-0", "p", "ns", ""}}), 1s, locate(), placed);
    EXPECT_EQ(ledger_->size(), 0u);
    EXPECT_TRUE(recorder_.events.empty());
}

}  // namespace
}  // namespace devlet
