// Who holds a shared slot, as one node judges it from the Leases it has seen: plain data,
// a hand-driven clock. Nodes' clocks differ; only this node's observation times count.

#include <chrono>
#include <optional>

#include <gtest/gtest.h>

#include "cluster/lease.h"
#include "cluster/lease_table.h"

namespace devlet::kube {
namespace {

using namespace std::chrono_literals;
using Kind = LeaseTable::Decision::Kind;
const LeaseTable::Clock::time_point t0{};
constexpr std::chrono::milliseconds kTrust = 10s;  // two thirds of the 15 s duration

Lease lease(const std::string& holder, const std::string& renewTime, const std::string& rv = "1") {
    Lease l;
    l.name = "cams-4294ea-0";
    l.holder = holder;
    l.renewTime = renewTime;
    l.resourceVersion = rv;
    l.durationSeconds = 15;
    l.instance = "cams-4294ea";
    return l;
}

TEST(LeaseTable, NoLeaseMeansCreate) {
    LeaseTable table("node-a", kTrust);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0).kind, Kind::Create);
    EXPECT_TRUE(table.heldElsewhere(t0).empty());
}

Lease nodeLease(const std::string& node, const std::string& renewTime, const std::string& rv = "1") {
    Lease l;
    l.name = nodeLeaseName(node);
    l.node = true;
    l.holder = node;
    l.renewTime = renewTime;
    l.resourceVersion = rv;
    l.durationSeconds = 15;
    return l;
}

// Seen on the watch only (after a restart, or long ago): this node's own Lease is not
// trusted until it has been written again in a run the API confirms.
TEST(LeaseTable, OwnLeaseSeenButNotConfirmedMustBeWrittenAgain) {
    LeaseTable table("node-a", kTrust);
    table.seen(lease("node-a", "2026-11-25T10:00:00.000000Z"), t0);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0).kind, Kind::Confirm);
    EXPECT_EQ(table.ours().size(), 1u);
    EXPECT_TRUE(table.heldElsewhere(t0).empty());
}

TEST(LeaseTable, OwnLeaseWrittenInTheCurrentRunIsOursWhileItLasts) {
    LeaseTable table("node-a", kTrust);
    table.nodeLeaseConfirmed(nodeLease("node-a", "t1"), t0, t0 + 10ms);
    const std::uint64_t run = table.run(t0 + 1s);
    ASSERT_NE(run, 0u);
    table.slotConfirmed(lease("node-a", "t1", "2"), run, t0 + 1s);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 2s).kind, Kind::Ours);
    // Renewed in time, again and again: still ours, with no write of the slot's Lease.
    table.nodeLeaseConfirmed(nodeLease("node-a", "t2", "3"), t0 + 5s, t0 + 5100ms);
    table.nodeLeaseConfirmed(nodeLease("node-a", "t3", "4"), t0 + 10s, t0 + 10100ms);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 19s).kind, Kind::Ours);
    // No confirmation for the trust window after the last one was sent: not vouched for.
    EXPECT_FALSE(table.confirmed(t0 + 20s));
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 20s).kind, Kind::Confirm);
}

// A partition: the renewals stop; when one is answered again, the run is a new one, and
// what was held before must be written again (a 409 then says another node took it).
TEST(LeaseTable, ABrokenRunOfConfirmationsVouchesForNothingHeldBefore) {
    LeaseTable table("node-a", kTrust);
    table.nodeLeaseConfirmed(nodeLease("node-a", "t1"), t0, t0 + 10ms);
    table.slotConfirmed(lease("node-a", "t1", "2"), table.run(t0 + 1s), t0 + 1s);
    table.nodeLeaseConfirmed(nodeLease("node-a", "t2", "3"), t0 + 30s, t0 + 30100ms);
    EXPECT_TRUE(table.confirmed(t0 + 31s));
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 31s).kind, Kind::Confirm);
}

// A renewal held up in the network and answered late vouches for nothing: the API may have
// written it after other nodes saw this node's Lease lapse.
TEST(LeaseTable, ALateAnswerDoesNotConfirm) {
    LeaseTable table("node-a", kTrust);
    table.nodeLeaseConfirmed(nodeLease("node-a", "t1"), t0, t0 + 50s);
    EXPECT_FALSE(table.confirmed(t0 + 50s));
    EXPECT_EQ(table.run(t0 + 50s), 0u);
}

// A write sent in one run and answered after it broke is recorded, not trusted.
TEST(LeaseTable, ASlotWrittenAcrossABrokenRunIsNotTrusted) {
    LeaseTable table("node-a", kTrust);
    table.nodeLeaseConfirmed(nodeLease("node-a", "t1"), t0, t0 + 10ms);
    const std::uint64_t run = table.run(t0 + 9s);
    table.slotConfirmed(lease("node-a", "t1", "2"), run, t0 + 11s);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 11s).kind, Kind::Confirm);
    EXPECT_EQ(table.find("cams-4294ea-0")->resourceVersion, "2");
}

// Another node's takeover, seen on the watch, ends this node's hold at once.
TEST(LeaseTable, ATakeoverSeenEndsTheHold) {
    LeaseTable table("node-a", kTrust);
    table.nodeLeaseConfirmed(nodeLease("node-a", "t1"), t0, t0 + 10ms);
    table.slotConfirmed(lease("node-a", "t1", "2"), table.run(t0 + 1s), t0 + 1s);
    table.seen(lease("node-b", "t9", "9"), t0 + 2s);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 2s).kind, Kind::HeldElsewhere);
    EXPECT_FALSE(table.trusted("cams-4294ea-0", t0 + 2s));
}

// Another node's slot Lease is never renewed itself: it lives while its holder's node Lease
// is seen renewed here.
TEST(LeaseTable, ASlotLastsWhileItsHoldersNodeLeaseIsRenewed) {
    LeaseTable table("node-a", kTrust);
    table.seen(lease("node-b", "2026-11-25T10:00:00.000000Z", "1"), t0);
    table.seen(nodeLease("node-b", "r0", "2"), t0);
    table.seen(nodeLease("node-b", "r1", "3"), t0 + 10s);
    table.seen(nodeLease("node-b", "r2", "4"), t0 + 20s);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 34s).kind, Kind::HeldElsewhere);
    EXPECT_EQ(table.heldElsewhere(t0 + 34s).at("cams-4294ea-0"), "node-b");
    EXPECT_EQ(table.nextLapse(t0 + 21s), t0 + 35s);
    const LeaseTable::Decision d = table.decide("cams-4294ea-0", t0 + 35s);
    EXPECT_EQ(d.kind, Kind::TakeOver);
    ASSERT_TRUE(d.holderLease);
    EXPECT_EQ(d.holderLease->renewTime, "r2");
    // Read once more before the takeover: renewed since, the holder is alive.
    EXPECT_TRUE(table.renewedSince(d.holderLease, nodeLease("node-b", "r3", "5")));
    EXPECT_FALSE(table.renewedSince(d.holderLease, nodeLease("node-b", "r2", "4")));
    EXPECT_TRUE(table.renewedSince(std::nullopt, nodeLease("node-b", "r2", "4")));
}

// The API server down for everyone (restarted): this node saw nothing while its own run
// was broken, so the holder gets a whole duration after the API returns to renew, as it
// had before. Found on a real API server: a holder still failing its first renewals (the
// server's RBAC warming up) lost its slot the moment another node came back.
TEST(LeaseTable, AnOutageThisNodeCouldNotSeeThroughFreesNoSlot) {
    LeaseTable table("node-a", kTrust);
    table.nodeLeaseConfirmed(nodeLease("node-a", "a0", "1"), t0, t0 + 10ms);
    table.seen(lease("node-b", "2026-11-25T10:00:00.000000Z", "2"), t0);
    table.seen(nodeLease("node-b", "r0", "3"), t0);
    // The API is down from t0 + 1 s to t0 + 40 s: no confirmation, no renewal seen.
    EXPECT_FALSE(table.confirmed(t0 + 20s));
    table.nodeLeaseConfirmed(nodeLease("node-a", "a1", "4"), t0 + 40s, t0 + 40100ms);
    ASSERT_TRUE(table.confirmed(t0 + 41s));
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 41s).kind, Kind::HeldElsewhere);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 54s).kind, Kind::HeldElsewhere);
    // Still not renewed a whole duration after this node could see again: lapsed.
    table.nodeLeaseConfirmed(nodeLease("node-a", "a2", "5"), t0 + 45s, t0 + 45100ms);
    table.nodeLeaseConfirmed(nodeLease("node-a", "a3", "6"), t0 + 50s, t0 + 50100ms);
    table.nodeLeaseConfirmed(nodeLease("node-a", "a4", "7"), t0 + 55s, t0 + 55100ms);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 56s).kind, Kind::TakeOver);
}

// Node Leases are not slots: not counted, never offered or taken.
TEST(LeaseTable, NodeLeasesAreNotSlots) {
    LeaseTable table("node-a", kTrust);
    table.seen(nodeLease("node-b", "r0"), t0);
    table.nodeLeaseConfirmed(nodeLease("node-a", "t1", "2"), t0, t0 + 10ms);
    EXPECT_EQ(table.size(), 0u);
    EXPECT_EQ(table.nodes(), 2u);
    EXPECT_TRUE(table.ours().empty());
    EXPECT_TRUE(table.heldElsewhere(t0).empty());
}

TEST(LeaseTable, AnotherNodesLeaseIsHeldElsewhereUntilItLapsesHere) {
    LeaseTable table("node-a", kTrust);
    table.seen(lease("node-b", "2026-11-25T10:00:00.000000Z"), t0);
    LeaseTable::Decision d = table.decide("cams-4294ea-0", t0 + 10s);
    EXPECT_EQ(d.kind, Kind::HeldElsewhere);
    EXPECT_EQ(d.lease.holder, "node-b");
    EXPECT_EQ(d.left, 5s);
    EXPECT_EQ(table.heldElsewhere(t0 + 10s).at("cams-4294ea-0"), "node-b");
    EXPECT_EQ(table.nextLapse(t0), t0 + 15s);
    // Not renewed for its whole duration, as seen here: it may be taken over.
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 15s).kind, Kind::TakeOver);
    EXPECT_TRUE(table.heldElsewhere(t0 + 15s).empty());
    EXPECT_FALSE(table.nextLapse(t0 + 15s));
}

TEST(LeaseTable, RenewalSeenHereExtendsTheHold) {
    LeaseTable table("node-a", kTrust);
    table.seen(lease("node-b", "2026-11-25T10:00:00.000000Z", "1"), t0);
    table.seen(lease("node-b", "2026-11-25T10:00:05.000000Z", "2"), t0 + 10s);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 20s).kind, Kind::HeldElsewhere);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 25s).kind, Kind::TakeOver);
}

// node-b's clock is an hour behind: its renewTime looks long expired by node-a's clock,
// yet it renews, and node-a sees it renewed.
TEST(LeaseTable, ClockSkewDoesNotMakeAHeldSlotLookFree) {
    LeaseTable table("node-a", kTrust);
    table.seen(lease("node-b", "2026-11-25T09:00:00.000000Z", "1"), t0);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 1s).kind, Kind::HeldElsewhere);
    table.seen(lease("node-b", "2026-11-25T09:00:10.000000Z", "2"), t0 + 10s);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 20s).kind, Kind::HeldElsewhere);
}

// A change seen only in metadata (a label) is not a renewal.
TEST(LeaseTable, OnlyHolderOrRenewTimeCountsAsRenewal) {
    LeaseTable table("node-a", kTrust);
    table.seen(lease("node-b", "2026-11-25T10:00:00.000000Z", "1"), t0);
    table.seen(lease("node-b", "2026-11-25T10:00:00.000000Z", "2"), t0 + 10s);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 15s).kind, Kind::TakeOver);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 15s).lease.resourceVersion, "2");
}

TEST(LeaseTable, RelistKeepsObservationTimeOfUnchangedLeases) {
    LeaseTable table("node-a", kTrust);
    table.seen(lease("node-b", "2026-11-25T10:00:00.000000Z", "1"), t0);
    table.seen(lease("node-b", "2026-11-25T10:00:00.000000Z", "1"), t0 + 10s);  // listed again, unchanged
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 15s).kind, Kind::TakeOver);
    table.vanished("cams-4294ea-0", t0 + 16s);  // not in the next list
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 31s).kind, Kind::Create);
}

// An API server restored without its state lists none of the Leases: another node's hold
// stays for its duration from the relist, so that its holder writes it again first; then
// the slot is created, there being nothing to replace.
TEST(LeaseTable, AHoldMissingFromAFreshListStaysForItsDuration) {
    LeaseTable table("node-a", kTrust);
    table.seen(lease("node-b", "2026-11-25T10:00:00.000000Z", "7"), t0);
    table.vanished("cams-4294ea-0", t0 + 20s);  // the watch's relist lists it no more
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 34s).kind, Kind::HeldElsewhere);
    EXPECT_EQ(table.heldElsewhere(t0 + 34s).size(), 1u);
    EXPECT_TRUE(table.ours().empty());
    // A second relist does not extend it.
    table.vanished("cams-4294ea-0", t0 + 30s);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 35s).kind, Kind::Create);
    // Written again by its holder: held as any other.
    table.seen(lease("node-b", "2026-11-25T10:01:00.000000Z", "3"), t0 + 36s);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 40s).kind, Kind::HeldElsewhere);
    EXPECT_EQ(table.nextLapse(t0 + 40s), t0 + 51s);
}

TEST(LeaseTable, ReleasedLeaseIsTakenOverAtItsVersion) {
    LeaseTable table("node-a", kTrust);
    table.seen(lease("", "2026-11-25T10:00:00.000000Z", "7"), t0);
    LeaseTable::Decision d = table.decide("cams-4294ea-0", t0);
    EXPECT_EQ(d.kind, Kind::TakeOver);
    EXPECT_EQ(d.lease.resourceVersion, "7");
}

TEST(LeaseTable, DeletedLeaseMeansCreate) {
    LeaseTable table("node-a", kTrust);
    table.seen(lease("node-b", "2026-11-25T10:00:00.000000Z"), t0);
    table.gone("cams-4294ea-0");
    EXPECT_EQ(table.decide("cams-4294ea-0", t0).kind, Kind::Create);
}

TEST(LeaseJson, NodeLeaseParsesBackWithItsLabel) {
    Lease l = nodeLease("node-a", "2026-11-25T10:00:00.123456Z", "42");
    std::string error;
    auto parsed = parseLease(leaseObject(l, "devlet"), error);
    ASSERT_TRUE(parsed) << error;
    EXPECT_TRUE(parsed->node);
    EXPECT_EQ(parsed->name, "node.node-a");
    EXPECT_EQ(*parsed, l);
}

TEST(LeaseJson, BodyParsesBack) {
    Lease l = lease("node-a", "2026-11-25T10:00:00.123456Z", "42");
    l.acquireTime = "2026-11-25T09:59:00.000000Z";
    l.transitions = 3;
    std::string error;
    auto parsed = parseLease(leaseObject(l, "devlet"), error);
    ASSERT_TRUE(parsed) << error;
    EXPECT_EQ(*parsed, l);
}

TEST(LeaseJson, NotALeaseIsAnError) {
    std::string error;
    EXPECT_FALSE(parseLease("{", error));
    EXPECT_NE(error, "");
    EXPECT_FALSE(parseLease("{\"kind\":\"Lease\"}", error));
    EXPECT_NE(error.find("metadata"), std::string::npos);
    EXPECT_FALSE(parseLease("{\"metadata\":{}}", error));
    EXPECT_NE(error.find("metadata.name"), std::string::npos);
}

TEST(LeaseJson, MicroTimeIsRfc3339WithMicroseconds) {
    const auto when = std::chrono::system_clock::time_point{} + std::chrono::seconds(1764083045) +
                      std::chrono::microseconds(123456);
    EXPECT_EQ(microTime(when), "2025-11-25T15:04:05.123456Z");
}

}  // namespace
}  // namespace devlet::kube
