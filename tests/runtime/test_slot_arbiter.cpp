// The slot arbiter: a request is decided at once when no cluster step is needed; slots of
// shared devices in cluster mode are granted only once the cluster agreed (SharedSlotGate,
// answered here by hand as the slot Leases would), and given back when the request is then
// refused or nobody waits for the answer any more.

#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/inventory.h"
#include "runtime/shared_slots.h"
#include "runtime/slot_arbiter.h"

namespace devlet {
namespace {

class NoObserver : public InventoryObserver {
public:
    void resourceChanged(ResourceState) override {}
    void resourceWithdrawn(const std::string&) override {}
};

// The cluster's side: remembers each take() and answers when the test says.
class HeldGate : public SharedSlotGate {
public:
    void take(const std::vector<std::string>& slotIds, std::function<void(Outcome)> done) override {
        taken.insert(taken.end(), slotIds.begin(), slotIds.end());
        pending = std::move(done);
    }
    void release(const std::string& slotId) override { released.push_back(slotId); }
    void answer(Outcome outcome) {
        auto done = std::move(pending);
        pending = nullptr;
        done(std::move(outcome));
    }
    std::vector<std::string> taken;
    std::vector<std::string> released;
    std::function<void(Outcome)> pending;
};

class SlotArbiterTest : public ::testing::Test {
protected:
    void SetUp() override {
        Configuration echo;
        echo.name = "echo";
        echo.handler = "debugEcho";
        echo.capacity = 1;
        inventory_.applyConfigurations({echo}, {});
        Instance foo0;
        foo0.id = "foo0";
        foo0.shared = true;
        foo0.properties["DEBUG_ECHO_DESCRIPTION"] = "foo0";
        inventory_.reportSnapshot("echo", {foo0});
    }

    // Asks for the slots; the decision, once there is one.
    void ask(std::vector<std::vector<std::string>> containers, bool* wanted = nullptr) {
        SlotArbiter::Request request{"akri.sh/echo", std::move(containers), nullptr};
        if (wanted) request.stillWanted = [wanted] { return *wanted; };
        arbiter_.allocate(std::move(request), [this](SlotArbiter::Decision d) { decision_ = std::move(d); });
    }
    std::string refusal() const {
        if (!decision_ || !std::holds_alternative<AllocationRefused>(*decision_)) return "<not refused>";
        return std::get<AllocationRefused>(*decision_).message;
    }
    bool granted() const {
        return decision_ && std::holds_alternative<std::vector<ContainerGrant>>(*decision_);
    }

    NoObserver observer_;
    Inventory inventory_{"node-a", "akri.sh", nullptr, observer_};
    SlotArbiter arbiter_{inventory_};
    HeldGate gate_;
    std::optional<SlotArbiter::Decision> decision_;
};

TEST_F(SlotArbiterTest, WithoutClusterModeARequestIsDecidedAtOnce) {
    ask({{"echo-8120fe-0"}});
    ASSERT_TRUE(granted()) << refusal();
    EXPECT_TRUE(arbiter_.slotHeld("echo-8120fe-0"));
    decision_.reset();
    ask({{"echo-8120fe-1"}});
    EXPECT_EQ(refusal(), "device echo-8120fe-1 is not part of akri.sh/echo");  // capacity 1: no slot 1
}

TEST_F(SlotArbiterTest, ASharedSlotIsGrantedOnlyOnceTheClusterAgreed) {
    arbiter_.setSharedSlotGate(&gate_);
    ask({{"echo-8120fe-0"}});
    EXPECT_FALSE(decision_) << "no answer before the cluster's";
    EXPECT_FALSE(arbiter_.slotHeld("echo-8120fe-0"));
    EXPECT_EQ(gate_.taken, std::vector<std::string>{"echo-8120fe-0"});
    gate_.answer(Outcome::ok());
    ASSERT_TRUE(granted()) << refusal();
    EXPECT_TRUE(arbiter_.slotHeld("echo-8120fe-0"));
    EXPECT_TRUE(gate_.released.empty());
    arbiter_.setSharedSlotGate(nullptr);
}

TEST_F(SlotArbiterTest, TheClustersRefusalIsTheAnswerAndNothingIsHeld) {
    arbiter_.setSharedSlotGate(&gate_);
    ask({{"echo-8120fe-0"}});
    gate_.answer(Outcome::failure("slot echo-8120fe-0 is held by node node-b"));
    EXPECT_EQ(refusal(), "slot echo-8120fe-0 is held by node node-b");
    EXPECT_FALSE(arbiter_.slotHeld("echo-8120fe-0"));
    arbiter_.setSharedSlotGate(nullptr);
}

TEST_F(SlotArbiterTest, ARequestRefusedAfterTheClusterAgreedGivesItsSlotsBack) {
    arbiter_.setSharedSlotGate(&gate_);
    // One slot in two containers of one request: the local rule refuses it.
    ask({{"echo-8120fe-0"}, {"echo-8120fe-0"}});
    gate_.answer(Outcome::ok());
    EXPECT_NE(refusal().find("is requested for two containers in one request"), std::string::npos)
        << refusal();
    EXPECT_EQ(gate_.released, std::vector<std::string>{"echo-8120fe-0"});
    EXPECT_FALSE(arbiter_.slotHeld("echo-8120fe-0"));
    arbiter_.setSharedSlotGate(nullptr);
}

TEST_F(SlotArbiterTest, ARequestNobodyWaitsForAnyMoreHoldsNothingAndGivesItsSlotsBack) {
    arbiter_.setSharedSlotGate(&gate_);
    bool wanted = true;
    ask({{"echo-8120fe-0"}}, &wanted);
    wanted = false;  // the kubelet's call went away meanwhile
    gate_.answer(Outcome::ok());
    EXPECT_FALSE(decision_);
    EXPECT_FALSE(arbiter_.slotHeld("echo-8120fe-0"));
    EXPECT_EQ(gate_.released, std::vector<std::string>{"echo-8120fe-0"});
    arbiter_.setSharedSlotGate(nullptr);
}

}  // namespace
}  // namespace devlet
