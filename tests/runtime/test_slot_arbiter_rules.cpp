// Who may hold a slot, decided by the slot arbiter over a real inventory: the local rules
// of a request (offered, present, within capacity, distinct devices, never through two
// resources, one decision per request), what the kubelet says (adoption, release only on
// positive evidence) and what cluster mode says (slots held elsewhere).

#include <functional>

#include "runtime/shared_slots.h"
#include "tests/runtime/inventory_fixture.h"

namespace devlet::test {
namespace {

class SlotRulesTest : public InventoryFixture {};

TEST_F(SlotRulesTest, AllocateOfSlotHeldThroughOtherResourceIsRefusedNamingHolder) {
    setUpEcho(2);
    allocateOk(kCl, {"echo-8120fe-0"});
    const std::string message = refusal(kFoo0Il, {"echo-8120fe-0"});
    EXPECT_NE(message.find("echo-8120fe-0"), std::string::npos) << message;
    EXPECT_NE(message.find("held through akri.sh/echo"), std::string::npos) << message;
    const AllocationRefused why = refused(kFoo0Il, {"echo-8120fe-0"});
    EXPECT_EQ(why.code, Refusal::HeldThroughOther);
    EXPECT_EQ(why.subject, "echo-8120fe-0");
    EXPECT_EQ(holder("echo-8120fe-0"), kCl);
}

TEST_F(SlotRulesTest, AllocationsAndRefusalsAreCountedByConfiguration) {
    setUpEcho(2);
    allocateOk(kCl, {"echo-8120fe-0"});
    allocateOk(kFoo0Il, {"echo-8120fe-1"});
    refusal(kFoo0Il, {"echo-8120fe-0"});
    EXPECT_EQ(refused("akri.sh/nothing", {"x-0"}).code, Refusal::NotOffered);
    const auto& counts = inventory().allocationCounts();
    ASSERT_TRUE(counts.contains("echo"));
    EXPECT_EQ(counts.at("echo").granted, 2u);
    EXPECT_EQ(counts.at("echo").refused, 1u);
    ASSERT_TRUE(counts.contains(""));
    EXPECT_EQ(counts.at("").refused, 1u);
}

TEST_F(SlotRulesTest, RefusalNamesHoldingPodOnceKnown) {
    setUpEcho(1);
    allocateOk(kFoo0Il, {"echo-8120fe-0"});
    arbiter().reconcile(kubeletSays({{kFoo0Il, "echo-8120fe-0", "camera-app", "vision", ""}}), 5s);
    const std::string message = refusal(kCl, {"echo-8120fe-0"});
    EXPECT_NE(message.find("akri.sh/echo-8120fe by pod vision/camera-app"), std::string::npos) << message;
}

TEST_F(SlotRulesTest, RefusedRequestHoldsNoneOfItsSlots) {
    setUpEcho(2);
    allocateOk(kFoo0Il, {"echo-8120fe-1"});
    refusal(kCl, {"echo-a19705-0", "echo-8120fe-1"});
    EXPECT_EQ(holder("echo-a19705-0"), "");
    EXPECT_EQ(inventory_->slotsHeld(), 1u);
}

TEST_F(SlotRulesTest, SameResourceReofferIsAcceptedAndKeepsSince) {
    setUpEcho(1);
    allocateOk(kCl, {"echo-8120fe-0"});
    const std::int64_t since = slotView("echo-8120fe-0")->sinceMs;
    EXPECT_EQ(since, wallMs_);
    advance(60s);
    const int before = observer_.changes;
    ContainerGrant grant = allocateOk(kCl, {"echo-8120fe-0"});
    EXPECT_EQ(grant.envs.at("DEBUG_ECHO_DESCRIPTION"), "foo0");
    EXPECT_EQ(slotView("echo-8120fe-0")->sinceMs, since);
    EXPECT_EQ(holder("echo-8120fe-0"), kCl);
    EXPECT_EQ(observer_.changes, before);
}

TEST_F(SlotRulesTest, AllocateOfAnotherConfigurationsSlotIsRefused) {
    configurations_ = {echoConfiguration("echo", 1), echoConfiguration("other", 1)};
    inventory().applyConfigurations(configurations_, {});
    inventory().reportSnapshot("echo", {echoDevice("foo0")});
    inventory().reportSnapshot("other", {echoDevice("foo0")});
    const std::string message = refusal(kCl, {"other-8120fe-0"});
    EXPECT_NE(message.find("other-8120fe-0 is not part of akri.sh/echo"), std::string::npos) << message;
    EXPECT_EQ(refused(kFoo0Il, {"other-8120fe-0"}).code, Refusal::NotPartOf);
    EXPECT_EQ(holder("other-8120fe-0"), "");
}

TEST_F(SlotRulesTest, AllocateOfOtherInstancesSlotThroughInstanceResourceIsRefused) {
    setUpEcho(1);
    refusal(kFoo0Il, {"echo-a19705-0"});
    EXPECT_EQ(inventory_->slotsHeld(), 0u);
}

TEST_F(SlotRulesTest, AllocateOfUnknownIdIsRefused) {
    setUpEcho(2);
    EXPECT_EQ(refused(kCl, {"echo-ffffff-0"}).code, Refusal::NotPartOf);
    EXPECT_EQ(refused(kCl, {"echo-8120fe-2"}).code, Refusal::NotPartOf);
    EXPECT_EQ(refused(kCl, {"echo-8120fe"}).code, Refusal::NotPartOf);
    EXPECT_EQ(refused(kCl, {"bogus"}).code, Refusal::NotPartOf);
    EXPECT_EQ(refused(kCl, {}).code, Refusal::EmptyRequest);
    EXPECT_EQ(inventory_->slotsHeld(), 0u);
}

TEST_F(SlotRulesTest, AllocateThroughUnknownResourceIsRefused) {
    setUpEcho(1);
    const std::string message = refusal("akri.sh/nothing", {"echo-8120fe-0"});
    EXPECT_NE(message.find("does not offer akri.sh/nothing"), std::string::npos) << message;
    EXPECT_EQ(refused("example.com/echo", {"echo-8120fe-0"}).code, Refusal::NotOffered);
}

// Akri's default: a configuration-level request gets distinct devices.
TEST_F(SlotRulesTest, ClRefusesTwoSlotsOfOneInstanceByDefault) {
    configurations_ = {echoConfiguration("echo", 2)};
    ASSERT_TRUE(configurations_[0].uniqueDevices);
    inventory().applyConfigurations(configurations_, {});
    inventory().reportSnapshot("echo", {echoDevice("foo0"), echoDevice("foo1")});
    const std::string message = refusal(kCl, {"echo-8120fe-0", "echo-8120fe-1"});
    EXPECT_NE(message.find("distinct devices"), std::string::npos) << message;
    EXPECT_EQ(refused(kCl, {"echo-8120fe-0", "echo-8120fe-1"}).code, Refusal::NotDistinct);
    EXPECT_EQ(inventory_->slotsHeld(), 0u);
    allocateOk(kCl, {"echo-8120fe-0", "echo-a19705-0"});
    // Through the instance's own resource two of its slots are what was asked for.
    allocateOk(kFoo1Il, {"echo-a19705-1"});
}

TEST_F(SlotRulesTest, UniqueDevicesFalseLetsOnePodShareOneDevice) {
    configurations_ = {echoConfiguration("echo", 2)};
    configurations_[0].uniqueDevices = false;
    inventory().applyConfigurations(configurations_, {});
    inventory().reportSnapshot("echo", {echoDevice("foo0"), echoDevice("foo1")});
    ContainerGrant grant = allocateOk(kCl, {"echo-8120fe-0", "echo-8120fe-1"});
    EXPECT_EQ(grant.envs.at("DEVLET_INSTANCES"), kFoo0);
}

// --- reconciling with PodResources ---------------------------------------------------

TEST_F(SlotRulesTest, ReconcileRecordsPodOfHeldSlot) {
    setUpEcho(1);
    allocateOk(kCl, {"echo-8120fe-0"});
    arbiter().reconcile(kubeletSays({{kCl, "echo-8120fe-0", "camera-app", "vision", ""}}), 5s);
    auto view = slotView("echo-8120fe-0");
    ASSERT_TRUE(view);
    EXPECT_EQ(view->pod, "camera-app");
    EXPECT_EQ(view->podNamespace, "vision");
    EXPECT_EQ(view->holderResource, kCl);
}

TEST_F(SlotRulesTest, ReconcileFreesUnlistedSlotOnlyAfterGrace) {
    setUpEcho(1);
    allocateOk(kCl, {"echo-8120fe-0"});
    advance(4s);
    arbiter().reconcile(kubeletSays({}), 5s);
    EXPECT_EQ(holder("echo-8120fe-0"), kCl);
    EXPECT_FALSE(health(kFoo0Il).at("echo-8120fe-0"));

    advance(1s);
    arbiter().reconcile(kubeletSays({}), 5s);
    EXPECT_EQ(holder("echo-8120fe-0"), "");
    EXPECT_TRUE(health(kFoo0Il).at("echo-8120fe-0"));
    EXPECT_EQ(inventory_->slotsHeld(), 0u);
}

// Cluster mode's part, as the inventory sees it: the slots it may not offer, and the
// slots of shared devices it frees.
class RecordingGate : public SharedSlotGate {
public:
    void take(const std::vector<std::string>& slotIds, std::function<void(Outcome)> done) override {
        taken.insert(taken.end(), slotIds.begin(), slotIds.end());
        done(Outcome::ok());
    }
    void release(const std::string& slotId) override { released.push_back(slotId); }
    std::vector<std::string> taken;
    std::vector<std::string> released;
};

TEST_F(SlotRulesTest, SlotHeldElsewhereIsUnhealthyEverywhereAndRefusedNamingWhy) {
    setUpEcho(2);
    arbiter().setHeldElsewhere({{"echo-8120fe-0", "held on node node-b"}});
    EXPECT_FALSE(health(kFoo0Il).at("echo-8120fe-0"));
    EXPECT_FALSE(health(kCl).at("echo-8120fe-0"));
    EXPECT_TRUE(health(kCl).at("echo-8120fe-1"));
    const std::string message = refusal(kCl, {"echo-8120fe-0"});
    EXPECT_NE(message.find("held on node node-b"), std::string::npos) << message;
    EXPECT_EQ(refused(kCl, {"echo-8120fe-0"}).code, Refusal::HeldElsewhere);
    EXPECT_EQ(inventory().view().at(0).instances.at(0).heldElsewhere.at("echo-8120fe-0"),
              "held on node node-b");

    arbiter().setHeldElsewhere({});
    EXPECT_TRUE(health(kFoo0Il).at("echo-8120fe-0"));
    EXPECT_TRUE(health(kCl).at("echo-8120fe-0"));
    allocateOk(kCl, {"echo-8120fe-0"});
}

TEST_F(SlotRulesTest, SlotHeldHereStaysHealthyInItsHolderWhateverTheClusterSays) {
    setUpEcho(1);
    allocateOk(kCl, {"echo-8120fe-0"});
    arbiter().setHeldElsewhere({{"echo-8120fe-0", "held on node node-b"}});
    EXPECT_TRUE(health(kCl).at("echo-8120fe-0"));
    EXPECT_EQ(holder("echo-8120fe-0"), kCl);
}

TEST_F(SlotRulesTest, SharedSlotsOfARequestAreNamedAndFreedOnesReleased) {
    RecordingGate gate;
    setUpEcho(1);
    arbiter().setSharedSlotGate(&gate);
    // The cluster is asked for every shared slot a request names, once each; refused here
    // (one slot in two containers), the request gives them back.
    decideNow(arbiter(), kCl, {{"echo-8120fe-0"}, {"echo-a19705-0", "echo-8120fe-0"}});
    EXPECT_EQ(gate.taken, (std::vector<std::string>{"echo-8120fe-0", "echo-a19705-0"}));
    EXPECT_EQ(gate.released, (std::vector<std::string>{"echo-8120fe-0", "echo-a19705-0"}));
    gate.taken.clear();
    gate.released.clear();
    decideNow(arbiter(), "akri.sh/other", {{"echo-8120fe-0"}});
    EXPECT_TRUE(gate.taken.empty());
    allocateOk(kCl, {"echo-8120fe-0"});
    EXPECT_EQ(arbiter().heldSharedSlots(), std::vector<std::string>{"echo-8120fe-0"});
    EXPECT_TRUE(arbiter().slotHeld("echo-8120fe-0"));
    advance(5s);
    arbiter().reconcile(kubeletSays({}), 5s);
    EXPECT_EQ(holder("echo-8120fe-0"), "");
    EXPECT_EQ(gate.released, std::vector<std::string>{"echo-8120fe-0"});
    arbiter().setSharedSlotGate(nullptr);
}

TEST_F(SlotRulesTest, ReconcileConfirmationRestartsGrace) {
    setUpEcho(1);
    allocateOk(kCl, {"echo-8120fe-0"});
    advance(4s);
    arbiter().reconcile(kubeletSays({{kCl, "echo-8120fe-0", "camera-app", "vision", ""}}), 5s);
    advance(4s);
    arbiter().reconcile(kubeletSays({}), 5s);
    EXPECT_EQ(holder("echo-8120fe-0"), kCl);
    advance(1s);
    arbiter().reconcile(kubeletSays({}), 5s);
    EXPECT_EQ(holder("echo-8120fe-0"), "");
}

TEST_F(SlotRulesTest, ReconcileDoesNotConfirmSlotListedUnderOtherResource) {
    setUpEcho(1);
    allocateOk(kCl, {"echo-8120fe-0"});
    advance(5s);
    arbiter().reconcile(kubeletSays({{kFoo0Il, "echo-8120fe-0", "camera-app", "vision", ""}}), 5s);
    EXPECT_EQ(holder("echo-8120fe-0"), "");
}

TEST_F(SlotRulesTest, ReconcileAdoptsSlotThatPodResourcesListsAsHeld) {
    setUpEcho(2);
    arbiter().reconcile(kubeletSays({{kFoo0Il, "echo-8120fe-1", "camera-app", "vision", ""}}), 5s);
    auto view = slotView("echo-8120fe-1");
    ASSERT_TRUE(view);
    EXPECT_EQ(view->holderResource, kFoo0Il);
    EXPECT_EQ(view->pod, "camera-app");
    EXPECT_EQ(view->podNamespace, "vision");
    EXPECT_FALSE(health(kCl).at("echo-8120fe-1"));
    EXPECT_EQ(refused(kCl, {"echo-8120fe-1"}).code, Refusal::HeldThroughOther);
}

TEST_F(SlotRulesTest, ReconcileDoesNotAdoptSlotUnderForeignResource) {
    setUpEcho(1);
    arbiter().reconcile(kubeletSays({{kFoo1Il, "echo-8120fe-0", "camera-app", "vision", ""},
                                     {"akri.sh/other", "echo-a19705-0", "camera-app", "vision", ""}}),
                        5s);
    EXPECT_EQ(inventory_->slotsHeld(), 0u);
}

// --- evidence: a slot is released only when the kubelet can know -----------------------

TEST_F(SlotRulesTest, PodResourcesFailureReleasesNothing) {
    setUpEcho(1);
    allocateOk(kCl, {"echo-8120fe-0"});
    advance(60s);
    arbiter().reconcile(KubeletEvidence{std::nullopt, std::vector<PodDevice>{}, {}}, 5s);
    EXPECT_EQ(holder("echo-8120fe-0"), kCl);
}

TEST_F(SlotRulesTest, CheckpointListingASlotKeepsItHeldWhilePodResourcesListsNoPod) {
    setUpEcho(1);
    allocateOk(kCl, {"echo-8120fe-0"});
    allocateOk(kFoo1Il, {"echo-a19705-0"});
    // A kubelet restarted without its API server: no pod known, the checkpoint intact.
    const std::vector<PodDevice> checkpoint{{kCl, "echo-8120fe-0", "", "", "uid-a"},
                                            {kFoo1Il, "echo-a19705-0", "", "", "uid-b"}};
    for (int poll = 0; poll < 20; ++poll) {
        advance(5s);
        auto reconciled = arbiter().reconcile(KubeletEvidence{std::vector<PodDevice>{}, checkpoint, {}}, 5s);
        EXPECT_TRUE(reconciled.checkpointLags);
    }
    EXPECT_EQ(holder("echo-8120fe-0"), kCl);
    EXPECT_EQ(holder("echo-a19705-0"), kFoo1Il);
    EXPECT_FALSE(health(kFoo0Il).at("echo-8120fe-0"));
    EXPECT_FALSE(health(kCl).at("echo-a19705-0"));
}

TEST_F(SlotRulesTest, SlotGoneFromPodResourcesAndCheckpointIsReleased) {
    setUpEcho(1);
    allocateOk(kCl, {"echo-8120fe-0"});
    advance(5s);
    auto reconciled =
        arbiter().reconcile(KubeletEvidence{std::vector<PodDevice>{}, std::vector<PodDevice>{}, {}}, 5s);
    EXPECT_FALSE(reconciled.checkpointLags);
    EXPECT_EQ(holder("echo-8120fe-0"), "");
}

TEST_F(SlotRulesTest, WithoutCheckpointAnEmptyPodListIsNoEvidence) {
    setUpEcho(1);
    allocateOk(kCl, {"echo-8120fe-0"});
    allocateOk(kFoo1Il, {"echo-a19705-0"});
    advance(60s);
    arbiter().reconcile(KubeletEvidence{std::vector<PodDevice>{}, std::nullopt, {}}, 5s);
    EXPECT_EQ(inventory_->slotsHeld(), 2u) << "an empty answer is what a kubelet that knows no pod gives";
    // A list that shows the kubelet knows its pods: the slot it leaves out is free.
    arbiter().reconcile(
        KubeletEvidence{
            std::vector<PodDevice>{{kFoo1Il, "echo-a19705-0", "app", "ns", ""}}, std::nullopt, {}},
        5s);
    EXPECT_EQ(holder("echo-8120fe-0"), "");
    EXPECT_EQ(holder("echo-a19705-0"), kFoo1Il);
}

TEST_F(SlotRulesTest, UnreadableCheckpointReleasesNothing) {
    setUpEcho(1);
    allocateOk(kCl, {"echo-8120fe-0"});
    advance(60s);
    arbiter().reconcile(KubeletEvidence{std::vector<PodDevice>{}, std::nullopt, "cut short"}, 5s);
    EXPECT_EQ(holder("echo-8120fe-0"), kCl);
}

TEST_F(SlotRulesTest, CheckpointHoldIsAdopted) {
    setUpEcho(2);
    arbiter().reconcile(
        KubeletEvidence{
            std::nullopt, std::vector<PodDevice>{{kFoo0Il, "echo-8120fe-1", "", "", "uid-a"}}, {}},
        5s);
    EXPECT_EQ(holder("echo-8120fe-1"), kFoo0Il);
    EXPECT_FALSE(health(kCl).at("echo-8120fe-1"));
    refusal(kCl, {"echo-8120fe-1"});
}

TEST_F(SlotRulesTest, HolderReportedBeforeItsDeviceIsFoundIsAdoptedWhenItIs) {
    configurations_ = {echoConfiguration("echo", 1)};
    graces_ = {{"echo", 0ms}};
    inventory().applyConfigurations(configurations_, graces_);
    arbiter().reconcile(
        KubeletEvidence{
            std::nullopt, std::vector<PodDevice>{{kFoo0Il, "echo-8120fe-0", "", "", "uid-a"}}, {}},
        5s);
    inventory().reportSnapshot("echo", {echoDevice("foo0")});
    EXPECT_EQ(holder("echo-8120fe-0"), kFoo0Il);
    EXPECT_FALSE(health(kCl).at("echo-8120fe-0"))
        << "its first list already keeps it from the other resource";
}

TEST_F(SlotRulesTest, HolderThroughAnotherResourceIsAConflictEventOnce) {
    Store& store = useStore();
    setUpEcho(1);
    allocateOk(kCl, {"echo-8120fe-0"});
    const KubeletEvidence says{std::vector<PodDevice>{{kFoo0Il, "echo-8120fe-0", "app", "vision", ""}},
                               std::vector<PodDevice>{{kFoo0Il, "echo-8120fe-0", "", "", "uid-a"}},
                               {}};
    arbiter().reconcile(says, 5s);
    arbiter().reconcile(says, 5s);
    int conflicts = 0;
    for (const StoredEvent& event : store.recentEvents(50)) {
        if (event.message.find("but devlet records it held through akri.sh/echo") != std::string::npos) {
            ++conflicts;
            EXPECT_EQ(event.level, "error");
        }
    }
    EXPECT_EQ(conflicts, 2) << "one per source (PodResources, checkpoint), each said once";
    EXPECT_EQ(holder("echo-8120fe-0"), kCl);
}

// --- one Allocate is one decision ----------------------------------------------------------

TEST_F(SlotRulesTest, RequestForSeveralContainersIsGrantedWhole) {
    useStore();
    setUpEcho(2);
    auto result = decideNow(arbiter(), kCl, {{"echo-8120fe-0"}, {"echo-a19705-0", "echo-8120fe-1"}});
    ASSERT_TRUE(std::holds_alternative<std::vector<ContainerGrant>>(result));
    const auto& grants = std::get<std::vector<ContainerGrant>>(result);
    ASSERT_EQ(grants.size(), 2u);
    EXPECT_EQ(grants[0].envs.at("DEVLET_INSTANCES"), kFoo0);
    EXPECT_EQ(grants[1].envs.at("DEVLET_INSTANCES"), std::string(kFoo1) + "," + kFoo0);
    EXPECT_EQ(store_->slots().size(), 3u);
}

TEST_F(SlotRulesTest, RefusedContainerLeavesNothingOfTheRequestHeld) {
    Store& store = useStore();
    setUpEcho(1);
    allocateOk(kFoo1Il, {"echo-a19705-0"});
    auto result = decideNow(arbiter(), kCl, {{"echo-8120fe-0"}, {"echo-a19705-0"}});
    ASSERT_TRUE(std::holds_alternative<AllocationRefused>(result));
    EXPECT_NE(std::get<AllocationRefused>(result).message.find("already held through akri.sh/echo-a19705"),
              std::string::npos);
    EXPECT_EQ(holder("echo-8120fe-0"), "");
    EXPECT_EQ(store.slots().size(), 1u);
}

TEST_F(SlotRulesTest, OneSlotInTwoContainersOfARequestIsRefused) {
    setUpEcho(1);
    auto result = decideNow(arbiter(), kCl, {{"echo-8120fe-0"}, {"echo-8120fe-0"}});
    ASSERT_TRUE(std::holds_alternative<AllocationRefused>(result));
    EXPECT_NE(std::get<AllocationRefused>(result).message.find("two containers"), std::string::npos);
    EXPECT_EQ(std::get<AllocationRefused>(result).code, Refusal::TwiceInRequest);
    EXPECT_EQ(inventory_->slotsHeld(), 0u);
}

// While cluster mode cannot tell who holds shared slots, none is offered or given; the
// slots held here stay with their holders.
TEST_F(SlotRulesTest, ClusterUnavailableWithholdsEveryFreeSharedSlot) {
    setUpEcho(2);
    allocateOk(kCl, {"echo-8120fe-0"});
    arbiter().setClusterUnavailable("the Kubernetes API does not answer");
    EXPECT_TRUE(health(kCl).at("echo-8120fe-0"));
    EXPECT_FALSE(health(kCl).at("echo-8120fe-1"));
    EXPECT_FALSE(health(kFoo1Il).at("echo-a19705-0"));
    const AllocationRefused why = refused(kFoo1Il, {"echo-a19705-0"});
    EXPECT_EQ(why.code, Refusal::ClusterUnavailable);
    EXPECT_NE(why.message.find("does not answer"), std::string::npos) << why.message;
    EXPECT_EQ(inventory().view().at(0).instances.at(1).heldElsewhere.at("echo-a19705-0"),
              "the Kubernetes API does not answer");

    arbiter().setClusterUnavailable("");
    EXPECT_TRUE(health(kFoo1Il).at("echo-a19705-0"));
    allocateOk(kFoo1Il, {"echo-a19705-0"});
}

// --- the kubelet's word, with a real store -------------------------------------------------

TEST_F(SlotRulesTest, NothingIsReleasedWithoutEvidenceForTheWholeGrace) {
    Store& store = useStore();
    setUpEcho(1);
    allocateOk(kCl, {"echo-8120fe-0"});
    advance(10s);
    arbiter().reconcile(KubeletEvidence{}, 1s);  // PodResources did not answer
    EXPECT_EQ(holder("echo-8120fe-0"), kCl);
    // An empty answer without a checkpoint is what a kubelet that has not learned its
    // pods gives: no evidence either.
    arbiter().reconcile(KubeletEvidence{std::vector<PodDevice>{}, std::nullopt, {}}, 1s);
    EXPECT_EQ(holder("echo-8120fe-0"), kCl);
    // The checkpoint still lists it: held, and the lag is said.
    PodDevice listed{kCl, "echo-8120fe-0", "", "", "uid-1"};
    EXPECT_TRUE(
        arbiter()
            .reconcile(KubeletEvidence{std::vector<PodDevice>{}, std::vector<PodDevice>{listed}, {}}, 1s)
            .checkpointLags);
    EXPECT_EQ(holder("echo-8120fe-0"), kCl);
    // Neither lists it, after the grace: released, in the store too.
    EXPECT_FALSE(arbiter()
                     .reconcile(KubeletEvidence{std::vector<PodDevice>{}, std::vector<PodDevice>{}, {}}, 1s)
                     .checkpointLags);
    EXPECT_EQ(holder("echo-8120fe-0"), "");
    EXPECT_TRUE(store.slots().empty());
}

TEST_F(SlotRulesTest, WhatTheKubeletReportsHeldIsAdoptedAndNamed) {
    Store& store = useStore();
    setUpEcho(2);
    auto adoptions = [&] {
        int adopted = 0;
        int conflicts = 0;
        for (const StoredEvent& e : store.recentEvents(Store::kEventHistory)) {
            if (e.message.find("adopted") != std::string::npos) ++adopted;
            if (e.message.find("devlet records it held through") != std::string::npos) ++conflicts;
        }
        return std::pair{adopted, conflicts};
    };
    PodDevice held{kFoo0Il, "echo-8120fe-1", "recorder", "video", ""};
    arbiter().reconcile(KubeletEvidence{std::vector<PodDevice>{held}, std::nullopt, {}}, 1s);
    ASSERT_TRUE(slotView("echo-8120fe-1"));
    EXPECT_EQ(slotView("echo-8120fe-1")->holderResource, kFoo0Il);
    EXPECT_EQ(slotView("echo-8120fe-1")->pod, "recorder");
    EXPECT_EQ(store.slots().size(), 1u);
    EXPECT_EQ(adoptions(), std::pair(1, 0));
    // Another resource's claim on it is a conflict, said once while it lasts.
    PodDevice other{kCl, "echo-8120fe-1", "viewer", "video", ""};
    arbiter().reconcile(KubeletEvidence{std::vector<PodDevice>{held, other}, std::nullopt, {}}, 1s);
    arbiter().reconcile(KubeletEvidence{std::vector<PodDevice>{held, other}, std::nullopt, {}}, 1s);
    EXPECT_EQ(adoptions(), std::pair(1, 1));
    EXPECT_EQ(holder("echo-8120fe-1"), kFoo0Il);
}

TEST_F(SlotRulesTest, SlotsOfResourcesDevletDoesNotOfferAreLeftAlone) {
    setUpEcho(1);
    const std::uint64_t before = inventory().revision();  // moves with every event said
    arbiter().reconcile(
        KubeletEvidence{
            std::vector<PodDevice>{{"gpu.intel.com/i915", "card0-0", "p", "ns", ""}}, std::nullopt, {}},
        1s);
    EXPECT_EQ(inventory().slotsHeld(), 0u);
    EXPECT_EQ(inventory().revision(), before);
}

}  // namespace
}  // namespace devlet::test
