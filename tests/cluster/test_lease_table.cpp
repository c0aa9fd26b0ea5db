// Who holds a shared slot, as one node judges it from the Leases it has seen: plain data,
// a hand-driven clock. Nodes' clocks differ; only this node's observation times count.

#include <chrono>

#include <gtest/gtest.h>

#include "cluster/lease.h"
#include "cluster/lease_table.h"

namespace devlet::kube {
namespace {

using namespace std::chrono_literals;
using Kind = LeaseTable::Decision::Kind;
const LeaseTable::Clock::time_point t0{};

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
    LeaseTable table("node-a");
    EXPECT_EQ(table.decide("cams-4294ea-0", t0).kind, Kind::Create);
    EXPECT_TRUE(table.heldElsewhere(t0).empty());
}

TEST(LeaseTable, OwnLeaseIsOurs) {
    LeaseTable table("node-a");
    table.seen(lease("node-a", "2026-11-25T10:00:00.000000Z"), t0);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 1h).kind, Kind::Ours);
    EXPECT_EQ(table.ours().size(), 1u);
    EXPECT_TRUE(table.heldElsewhere(t0).empty());
}

TEST(LeaseTable, AnotherNodesLeaseIsHeldElsewhereUntilItLapsesHere) {
    LeaseTable table("node-a");
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
    LeaseTable table("node-a");
    table.seen(lease("node-b", "2026-11-25T10:00:00.000000Z", "1"), t0);
    table.seen(lease("node-b", "2026-11-25T10:00:05.000000Z", "2"), t0 + 10s);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 20s).kind, Kind::HeldElsewhere);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 25s).kind, Kind::TakeOver);
}

// node-b's clock is an hour behind: its renewTime looks long expired by node-a's clock,
// yet it renews, and node-a sees it renewed.
TEST(LeaseTable, ClockSkewDoesNotMakeAHeldSlotLookFree) {
    LeaseTable table("node-a");
    table.seen(lease("node-b", "2026-11-25T09:00:00.000000Z", "1"), t0);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 1s).kind, Kind::HeldElsewhere);
    table.seen(lease("node-b", "2026-11-25T09:00:10.000000Z", "2"), t0 + 10s);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 20s).kind, Kind::HeldElsewhere);
}

// A change seen only in metadata (a label) is not a renewal.
TEST(LeaseTable, OnlyHolderOrRenewTimeCountsAsRenewal) {
    LeaseTable table("node-a");
    table.seen(lease("node-b", "2026-11-25T10:00:00.000000Z", "1"), t0);
    table.seen(lease("node-b", "2026-11-25T10:00:00.000000Z", "2"), t0 + 10s);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 15s).kind, Kind::TakeOver);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 15s).lease.resourceVersion, "2");
}

TEST(LeaseTable, RelistKeepsObservationTimeOfUnchangedLeases) {
    LeaseTable table("node-a");
    table.seen(lease("node-b", "2026-11-25T10:00:00.000000Z", "1"), t0);
    table.replaceAll({lease("node-b", "2026-11-25T10:00:00.000000Z", "1")}, t0 + 10s);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 15s).kind, Kind::TakeOver);
    table.replaceAll({}, t0 + 16s);
    EXPECT_EQ(table.decide("cams-4294ea-0", t0 + 16s).kind, Kind::Create);
}

TEST(LeaseTable, ReleasedLeaseIsTakenOverAtItsVersion) {
    LeaseTable table("node-a");
    table.seen(lease("", "2026-11-25T10:00:00.000000Z", "7"), t0);
    LeaseTable::Decision d = table.decide("cams-4294ea-0", t0);
    EXPECT_EQ(d.kind, Kind::TakeOver);
    EXPECT_EQ(d.lease.resourceVersion, "7");
}

TEST(LeaseTable, DeletedLeaseMeansCreate) {
    LeaseTable table("node-a");
    table.seen(lease("node-b", "2026-11-25T10:00:00.000000Z"), t0);
    table.gone("cams-4294ea-0");
    EXPECT_EQ(table.decide("cams-4294ea-0", t0).kind, Kind::Create);
}

TEST(LeaseJson, BodyParsesBack) {
    Lease l = lease("node-a", "2026-11-25T10:00:00.123456Z", "42");
    l.acquireTime = "2026-11-25T09:59:00.000000Z";
    l.transitions = 3;
    std::string error;
    auto parsed = parseLease(leaseBody(l, "devlet"), error);
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
