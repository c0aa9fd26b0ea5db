// The inventory: names, device lists and their health, grants' contents, preferred
// allocation, devices that go away, the store across restarts, configuration changes.
// Who may hold a slot is tested with the arbiter (test_slot_arbiter_rules.cpp).

#include "tests/runtime/inventory_fixture.h"

namespace devlet::test {
namespace {

class InventoryTest : public InventoryFixture {};

// --- names ----------------------------------------------------------------------

TEST_F(InventoryTest, SharedInstancesAreNamedByAkriHashOfTheirId) {
    setUpEcho(1);
    ASSERT_EQ(inventory_->view().size(), 1u);
    std::vector<std::string> names;
    const std::vector<ConfigurationView> view = inventory_->view();
    for (const InstanceView& i : view[0].instances) names.push_back(i.name);
    EXPECT_EQ(names, (std::vector<std::string>{kFoo0, kFoo1}));
    EXPECT_TRUE(observer_.latest.count(kFoo0Il));
    EXPECT_TRUE(observer_.latest.count(kFoo1Il));
    EXPECT_EQ(observer_.latest.at(kFoo0Il).instance, kFoo0);
    EXPECT_EQ(observer_.latest.at(kFoo0Il).configuration, "echo");
}

TEST_F(InventoryTest, LocalInstanceNameHashesIdWithNodeName) {
    configurations_ = {echoConfiguration("echo", 1)};
    inventory().applyConfigurations(configurations_, {});
    Instance local = echoDevice("foo0");
    local.shared = false;
    inventory().reportSnapshot("echo", {local});
    const std::string name = "echo-" + instanceHash("foo0", kNode, false);
    EXPECT_NE(name, kFoo0);
    EXPECT_TRUE(observer_.latest.count(std::string(kDomain) + "/" + name));
    EXPECT_FALSE(observer_.latest.count(kFoo0Il));
}

TEST_F(InventoryTest, InstanceResourceListsItsSlots) {
    setUpEcho(3);
    const ResourceState& state = observer_.latest.at(kFoo0Il);
    std::vector<DeviceState> expected = {
        {"echo-8120fe-0", true, std::nullopt},
        {"echo-8120fe-1", true, std::nullopt},
        {"echo-8120fe-2", true, std::nullopt},
    };
    EXPECT_EQ(state.devices, expected);
}

TEST_F(InventoryTest, ConfigurationResourceListsEverySlotOfEveryInstance) {
    setUpEcho(2);
    const ResourceState& state = observer_.latest.at(kCl);
    EXPECT_EQ(state.instance, "");
    EXPECT_EQ(state.configuration, "echo");
    EXPECT_EQ(health(kCl), (std::map<std::string, bool>{{"echo-8120fe-0", true},
                                                        {"echo-8120fe-1", true},
                                                        {"echo-a19705-0", true},
                                                        {"echo-a19705-1", true}}));
    EXPECT_TRUE(inventory_->isConfigurationLevel(kCl));
    EXPECT_FALSE(inventory_->isConfigurationLevel(kFoo0Il));
}

TEST_F(InventoryTest, SlotsCarryTheDevicesNumaNode) {
    configurations_ = {echoConfiguration("echo", 1)};
    inventory().applyConfigurations(configurations_, {});
    Instance device = echoDevice("foo0");
    device.numaNode = 1;
    inventory().reportSnapshot("echo", {device});
    EXPECT_EQ(observer_.latest.at(kFoo0Il).devices.at(0).numaNode, 1);
    EXPECT_EQ(observer_.latest.at(kCl).devices.at(0).numaNode, 1);

    device.numaNode = 0;
    inventory().reportSnapshot("echo", {device});
    EXPECT_EQ(observer_.latest.at(kFoo0Il).devices.at(0).numaNode, 0);
}

TEST_F(InventoryTest, TwoDevicesWithOneIdOfferTheFirstOnly) {
    configurations_ = {echoConfiguration("echo", 1)};
    inventory().applyConfigurations(configurations_, {});
    Instance second = echoDevice("foo0");
    second.properties["DEBUG_ECHO_DESCRIPTION"] = "impostor";
    inventory().reportSnapshot("echo", {echoDevice("foo0"), second});
    ASSERT_EQ(inventory_->view()[0].instances.size(), 1u);
    EXPECT_EQ(inventory_->view()[0].instances[0].device.properties.at("DEBUG_ECHO_DESCRIPTION"), "foo0");
}

TEST_F(InventoryTest, SnapshotForUnknownConfigurationIsIgnored) {
    setUpEcho(1);
    const int before = observer_.changes;
    inventory().reportSnapshot("nope", {echoDevice("foo0")});
    EXPECT_EQ(observer_.changes, before);
    EXPECT_EQ(inventory_->view().size(), 1u);
}

// --- allocation -------------------------------------------------------------------

TEST_F(InventoryTest, ClAllocationMarksIlSlotUnhealthy) {
    setUpEcho(2);
    allocateOk(kCl, {"echo-8120fe-0"});
    EXPECT_EQ(health(kFoo0Il),
              (std::map<std::string, bool>{{"echo-8120fe-0", false}, {"echo-8120fe-1", true}}));
    // The holder itself still lists it Healthy: the kubelet tracks it as allocated.
    EXPECT_TRUE(health(kCl).at("echo-8120fe-0"));
    EXPECT_EQ(holder("echo-8120fe-0"), kCl);
    EXPECT_EQ(inventory_->slotsHeld(), 1u);
}

TEST_F(InventoryTest, IlAllocationMarksClSlotUnhealthy) {
    setUpEcho(2);
    allocateOk(kFoo1Il, {"echo-a19705-1"});
    EXPECT_EQ(health(kCl), (std::map<std::string, bool>{{"echo-8120fe-0", true},
                                                        {"echo-8120fe-1", true},
                                                        {"echo-a19705-0", true},
                                                        {"echo-a19705-1", false}}));
    EXPECT_TRUE(health(kFoo1Il).at("echo-a19705-1"));
    EXPECT_EQ(holder("echo-a19705-1"), kFoo1Il);
}

TEST_F(InventoryTest, AllocationRepublishesOnlyTheResourceWhereHealthChanged) {
    setUpEcho(2);
    observer_.changesOf.clear();
    allocateOk(kCl, {"echo-8120fe-0"});
    EXPECT_EQ(observer_.changesOf, (std::map<std::string, int>{{kFoo0Il, 1}}));

    observer_.changesOf.clear();
    allocateOk(kFoo1Il, {"echo-a19705-0"});
    EXPECT_EQ(observer_.changesOf, (std::map<std::string, int>{{kCl, 1}}));
}

TEST_F(InventoryTest, ConfigurationListGetsOnlyTheSlotsWhoseHolderChanged) {
    setUpEcho(2);
    observer_.slotChangesOf.clear();
    allocateOk(kFoo1Il, {"echo-a19705-1"});
    allocateOk(kFoo0Il, {"echo-8120fe-0", "echo-8120fe-1"});
    EXPECT_EQ(observer_.slotChangesOf, (std::map<std::string, int>{{kCl, 2}}));
    EXPECT_EQ(healthyIds(kCl), (std::vector<std::string>{"echo-a19705-0"}));

    // A slot freed is a changed slot too.
    advance(11s);
    arbiter().reconcile(kubeletSays({{kFoo0Il, "echo-8120fe-0", "pod", "default", ""},
                                     {kFoo0Il, "echo-8120fe-1", "pod", "default", ""}}),
                        10s);
    EXPECT_EQ(observer_.slotChangesOf, (std::map<std::string, int>{{kCl, 3}}));
    EXPECT_EQ(healthyIds(kCl), (std::vector<std::string>{"echo-a19705-0", "echo-a19705-1"}));
}

TEST_F(InventoryTest, ObserverWithoutTheListGetsItInFull) {
    observer_.keepsLists = false;
    setUpEcho(2);
    observer_.changesOf.clear();
    allocateOk(kFoo1Il, {"echo-a19705-1"});
    EXPECT_EQ(observer_.changesOf, (std::map<std::string, int>{{kCl, 1}}));
    EXPECT_TRUE(observer_.slotChangesOf.empty());
    EXPECT_EQ(health(kCl).size(), 4u);
    EXPECT_FALSE(health(kCl).at("echo-a19705-1"));
}

TEST_F(InventoryTest, ScheduledPublishingGathersChangesUntilTheSchedulerRuns) {
    std::vector<std::function<void()>> pending;
    inventory().setPublishScheduler(
        [&](std::function<void()> publish) { pending.push_back(std::move(publish)); });
    setUpEcho(2);
    EXPECT_TRUE(observer_.latest.empty()) << "nothing published before the scheduled work runs";
    allocateOk(kCl, {"echo-8120fe-0"});
    ASSERT_EQ(pending.size(), 1u) << "one scheduled publication for a burst of changes";
    pending.front()();
    EXPECT_EQ(health(kFoo0Il),
              (std::map<std::string, bool>{{"echo-8120fe-0", false}, {"echo-8120fe-1", true}}));
    EXPECT_EQ(health(kCl).size(), 4u);
}

TEST_F(InventoryTest, ReportToPluginsLatencyRunsUntilTheScheduledPublishHandsItOver) {
    std::vector<std::function<void()>> pending;
    inventory().setPublishScheduler(
        [&](std::function<void()> publish) { pending.push_back(std::move(publish)); });
    setUpEcho(2);
    for (auto& publish : pending) publish();
    pending.clear();
    const auto latency = [&] { return inventory().view().at(0).discovery.publishLatency; };
    const std::uint64_t before = latency().count();  // the first report's sample

    inventory().reportSnapshot("echo", {echoDevice("foo0")});  // foo1 goes
    advance(3ms);  // the loop is busy with other work before the publication runs
    ASSERT_EQ(pending.size(), 1u);
    pending.front()();
    const DurationHistogram h = latency();
    EXPECT_EQ(h.count(), before + 1);
    // The 3 ms sample is above the 2.5 ms bound and within the 5 ms one.
    const auto& bounds = DurationHistogram::kBoundsSeconds;
    const auto at = [&](double bound) {
        return h.cumulative(
            static_cast<std::size_t>(std::find(bounds.begin(), bounds.end(), bound) - bounds.begin()));
    };
    EXPECT_EQ(at(0.005) - at(0.0025), 1u);

    // A report that changes nothing hands nothing over and measures nothing.
    pending.clear();
    inventory().reportSnapshot("echo", {echoDevice("foo0")});
    for (auto& publish : pending) publish();
    EXPECT_EQ(latency().count(), before + 1);
}

TEST_F(InventoryTest, ScansAndErrorsAreKeptForTheStatusPage) {
    setUpEcho(1);
    const std::uint64_t revision = inventory().revision();
    ScanReport scan;
    scan.duration = 40ms;
    scan.excluded = {{"foo9", "the availability file says OFFLINE", 1}};
    scan.deviceStates = {{"foo0", "up with authentication"}};
    inventory().reportScan("echo", scan);
    EXPECT_NE(inventory().revision(), revision);
    inventory().reportProbeError("echo", "cannot read /x");
    inventory().reportProbeError("echo", "cannot read /x");  // a second failed pass counts too
    inventory().reportProbeError("echo", "");
    inventory().reportScan("elsewhere", scan);  // no such configuration: ignored

    const DiscoveryView d = inventory().view().at(0).discovery;
    EXPECT_EQ(d.scans, 1u);
    EXPECT_EQ(d.lastScanMs, wallMs_);
    EXPECT_EQ(d.lastScan, scan);
    EXPECT_EQ(d.scanDurations.count(), 1u);
    EXPECT_EQ(d.errors, 2u);
    EXPECT_EQ(d.lastError, "cannot read /x");
    EXPECT_EQ(inventory().view().at(0).probeError, "");
}

TEST_F(InventoryTest, RevisionChangesWithWhatTheStatusPageShows) {
    setUpEcho(2);
    std::uint64_t revision = inventory().revision();
    auto changed = [&] {
        const bool moved = inventory().revision() != revision;
        revision = inventory().revision();
        return moved;
    };
    EXPECT_FALSE(changed());
    allocateOk(kCl, {"echo-8120fe-0"});
    EXPECT_TRUE(changed());
    arbiter().reconcile(kubeletSays({{kCl, "echo-8120fe-0", "pod-a", "ns", ""}}), 1s);
    EXPECT_TRUE(changed()) << "the pod's name is shown";
    arbiter().reconcile(kubeletSays({{kCl, "echo-8120fe-0", "pod-a", "ns", ""}}), 1s);
    EXPECT_FALSE(changed()) << "the same pods again change nothing";
    inventory().reportProbeError("echo", "broken");
    EXPECT_TRUE(changed());
    advance(5ms);
    inventory().reportSnapshot("echo", {echoDevice("foo0"), echoDevice("foo1")});
    EXPECT_TRUE(changed()) << "last seen moved";
    EXPECT_FALSE(inventory().expireGone().has_value());
    EXPECT_FALSE(changed());
}

// --- grant contents -------------------------------------------------------------

TEST_F(InventoryTest, GrantCarriesPropertiesAndBrokerPropertiesPlainAndHashed) {
    configurations_ = {echoConfiguration("echo", 1)};
    configurations_[0].brokerProperties = {{"RESOLUTION", "1080p"}};
    inventory().applyConfigurations(configurations_, {});
    inventory().reportSnapshot("echo", {echoDevice("foo0")});
    ContainerGrant grant = allocateOk(kCl, {"echo-8120fe-0"});
    EXPECT_EQ(grant.envs, (std::map<std::string, std::string>{
                              {"DEBUG_ECHO_DESCRIPTION", "foo0"},
                              {"DEBUG_ECHO_DESCRIPTION_8120FE", "foo0"},
                              {"RESOLUTION", "1080p"},
                              {"RESOLUTION_8120FE", "1080p"},
                              {"DEVLET_INSTANCES", "echo-8120fe"},
                          }));
}

// As in Akri's agent: the Configuration's brokerProperties come after the device's own
// properties in the container's environment, so the broker property is what stays.
TEST_F(InventoryTest, BrokerPropertyWinsOverDevicePropertyOfTheSameName) {
    configurations_ = {echoConfiguration("echo", 1)};
    configurations_[0].brokerProperties = {{"DEBUG_ECHO_DESCRIPTION", "from-broker"}};
    inventory().applyConfigurations(configurations_, {});
    inventory().reportSnapshot("echo", {echoDevice("foo0"), echoDevice("foo1")});
    ContainerGrant grant = allocateOk(kCl, {"echo-8120fe-0", "echo-a19705-0"});
    EXPECT_EQ(grant.envs.at("DEBUG_ECHO_DESCRIPTION"), "from-broker");
    EXPECT_EQ(grant.envs.at("DEBUG_ECHO_DESCRIPTION_8120FE"), "from-broker");
    EXPECT_EQ(grant.envs.at("DEBUG_ECHO_DESCRIPTION_A19705"), "from-broker");
    inventory().reportSnapshot("echo", {echoDevice("foo0"), echoDevice("foo1"), echoDevice("foo2")});
    const std::string foo2 = instanceName("echo", instanceHash("foo2", kNode, true));
    ContainerGrant il = allocateOk("akri.sh/" + foo2, {slotId(foo2, 0)});
    EXPECT_EQ(il.envs.at("DEBUG_ECHO_DESCRIPTION"), "from-broker");
}

TEST_F(InventoryTest, GrantForTwoInstancesGivesPlainKeyToTheFirst) {
    setUpEcho(1);
    ContainerGrant grant = allocateOk(kCl, {"echo-8120fe-0", "echo-a19705-0"});
    EXPECT_EQ(grant.envs.at("DEBUG_ECHO_DESCRIPTION"), "foo0");
    EXPECT_EQ(grant.envs.at("DEBUG_ECHO_DESCRIPTION_8120FE"), "foo0");
    EXPECT_EQ(grant.envs.at("DEBUG_ECHO_DESCRIPTION_A19705"), "foo1");
    EXPECT_EQ(grant.envs.at("DEVLET_INSTANCES"), "echo-8120fe,echo-a19705");
}

TEST_F(InventoryTest, GrantListsInstancesInRequestOrder) {
    setUpEcho(1);
    ContainerGrant grant = allocateOk(kCl, {"echo-a19705-0", "echo-8120fe-0"});
    EXPECT_EQ(grant.envs.at("DEBUG_ECHO_DESCRIPTION"), "foo1");
    EXPECT_EQ(grant.envs.at("DEVLET_INSTANCES"), "echo-a19705,echo-8120fe");
}

TEST_F(InventoryTest, GrantWithTwoSlotsOfOneInstanceNamesItOnce) {
    setUpEcho(2);
    ContainerGrant grant = allocateOk(kFoo0Il, {"echo-8120fe-0", "echo-8120fe-1"});
    EXPECT_EQ(grant.envs.at("DEVLET_INSTANCES"), "echo-8120fe");
}

TEST_F(InventoryTest, GrantDeduplicatesDeviceNodesByContainerPath) {
    configurations_ = {echoConfiguration("echo", 1)};
    inventory().applyConfigurations(configurations_, {});
    Instance a = echoDevice("foo0");
    a.nodes = {{"/dev/dri/card0", "", "rw"}, {"/dev/dri/renderD128", "/dev/dri/renderD128", "rw"}};
    a.mounts = {{"/run/foo", "/run/foo", true}};
    Instance b = echoDevice("foo1");
    b.nodes = {{"/dev/dri/card1", "/dev/dri/card0", "rw"}, {"/dev/dri/renderD129", "", "r"}};
    b.mounts = {{"/run/foo", "/run/foo", true}};
    inventory().reportSnapshot("echo", {a, b});
    ContainerGrant grant = allocateOk(kCl, {"echo-8120fe-0", "echo-a19705-0"});
    std::vector<DeviceNode> expected = {
        {"/dev/dri/card0", "/dev/dri/card0", "rw"},
        {"/dev/dri/renderD128", "/dev/dri/renderD128", "rw"},
        {"/dev/dri/renderD129", "/dev/dri/renderD129", "r"},
    };
    EXPECT_EQ(grant.devices, expected);
    EXPECT_EQ(grant.mounts, (std::vector<Mount>{{"/run/foo", "/run/foo", true}}));
}

// --- preferred allocation -----------------------------------------------------------

TEST_F(InventoryTest, PreferredAllocationTakesOneSlotFromEachInstance) {
    setUpEcho(2);
    auto chosen = inventory().preferredAllocation(kCl, healthyIds(kCl), {}, 2);
    EXPECT_EQ(chosen, (std::vector<std::string>{"echo-8120fe-0", "echo-a19705-0"}));
}

TEST_F(InventoryTest, PreferredAllocationPrefersInstanceWithMostFreeSlots) {
    setUpEcho(2);
    allocateOk(kCl, {"echo-8120fe-0"});
    // The kubelet leaves out what it already gave.
    auto chosen =
        inventory().preferredAllocation(kCl, {"echo-8120fe-1", "echo-a19705-0", "echo-a19705-1"}, {}, 1);
    EXPECT_EQ(chosen, (std::vector<std::string>{"echo-a19705-0"}));
}

TEST_F(InventoryTest, PreferredAllocationCountsSlotsHeldThroughInstanceResource) {
    setUpEcho(2);
    allocateOk(kFoo1Il, {"echo-a19705-0"});
    auto chosen = inventory().preferredAllocation(kCl, healthyIds(kCl), {}, 1);
    EXPECT_EQ(chosen, (std::vector<std::string>{"echo-8120fe-0"}));
}

TEST_F(InventoryTest, PreferredAllocationAlwaysKeepsMustInclude) {
    setUpEcho(2);
    auto chosen =
        inventory().preferredAllocation(kCl, healthyIds(kCl), {"echo-8120fe-0", "echo-8120fe-1"}, 3);
    EXPECT_EQ(chosen, (std::vector<std::string>{"echo-8120fe-0", "echo-8120fe-1", "echo-a19705-0"}));

    // Even when they alone exceed the size.
    chosen = inventory().preferredAllocation(kCl, healthyIds(kCl), {"echo-a19705-1", "echo-8120fe-1"}, 1);
    EXPECT_EQ(chosen, (std::vector<std::string>{"echo-a19705-1", "echo-8120fe-1"}));
}

TEST_F(InventoryTest, PreferredAllocationSpreadsAroundMustInclude) {
    setUpEcho(2);
    auto chosen = inventory().preferredAllocation(kCl, healthyIds(kCl), {"echo-8120fe-1"}, 2);
    EXPECT_EQ(chosen, (std::vector<std::string>{"echo-8120fe-1", "echo-a19705-0"}));
}

TEST_F(InventoryTest, PackPolicyFillsOneInstanceFirst) {
    configurations_ = {echoConfiguration("echo", 2)};
    configurations_[0].allocationPolicy = AllocationPolicy::Pack;
    configurations_[0].uniqueDevices = false;  // one pod may take both slots of a device
    inventory().applyConfigurations(configurations_, {});
    inventory().reportSnapshot("echo", {echoDevice("foo0"), echoDevice("foo1")});
    auto chosen = inventory().preferredAllocation(kCl, healthyIds(kCl), {}, 2);
    EXPECT_EQ(chosen, (std::vector<std::string>{"echo-8120fe-0", "echo-8120fe-1"}));
}

TEST_F(InventoryTest, PackPolicyPrefersThePartlyUsedInstance) {
    configurations_ = {echoConfiguration("echo", 2)};
    configurations_[0].allocationPolicy = AllocationPolicy::Pack;
    inventory().applyConfigurations(configurations_, {});
    inventory().reportSnapshot("echo", {echoDevice("foo0"), echoDevice("foo1")});
    allocateOk(kCl, {"echo-a19705-0"});
    auto chosen =
        inventory().preferredAllocation(kCl, {"echo-8120fe-0", "echo-8120fe-1", "echo-a19705-1"}, {}, 1);
    EXPECT_EQ(chosen, (std::vector<std::string>{"echo-a19705-1"}));
}

TEST_F(InventoryTest, UniqueDevicesPreferredAllocationStopsAtNumberOfInstances) {
    configurations_ = {echoConfiguration("echo", 2)};
    configurations_[0].uniqueDevices = true;
    inventory().applyConfigurations(configurations_, {});
    inventory().reportSnapshot("echo", {echoDevice("foo0"), echoDevice("foo1")});
    auto chosen = inventory().preferredAllocation(kCl, healthyIds(kCl), {}, 3);
    EXPECT_EQ(chosen, (std::vector<std::string>{"echo-8120fe-0", "echo-a19705-0"}));
}

TEST_F(InventoryTest, PackWithUniqueDevicesPrefersUsedDevicesButNeverTwoSlotsOfOne) {
    configurations_ = {echoConfiguration("echo", 2)};
    configurations_[0].uniqueDevices = true;
    configurations_[0].allocationPolicy = AllocationPolicy::Pack;
    inventory().applyConfigurations(configurations_, {});
    inventory().reportSnapshot("echo", {echoDevice("foo0"), echoDevice("foo1"), echoDevice("foo2")});
    allocateOk(kCl, {"echo-a19705-0"});  // foo1 is partly used: pack prefers it
    // The kubelet leaves devices it has given out of `available`.
    std::vector<std::string> available = healthyIds(kCl);
    std::erase(available, "echo-a19705-0");
    auto chosen = inventory().preferredAllocation(kCl, available, {}, 2);
    ASSERT_EQ(chosen.size(), 2u);
    EXPECT_EQ(chosen[0], "echo-a19705-1");
    EXPECT_NE(chosen[1].substr(0, chosen[1].rfind('-')), "echo-a19705");
}

TEST_F(InventoryTest, PreferredAllocationOnInstanceResourceTakesAvailableInOrder) {
    setUpEcho(3);
    auto chosen = inventory().preferredAllocation(
        kFoo0Il, {"echo-8120fe-2", "echo-8120fe-0", "echo-8120fe-1"}, {"echo-8120fe-1"}, 2);
    EXPECT_EQ(chosen, (std::vector<std::string>{"echo-8120fe-1", "echo-8120fe-2"}));
}

TEST_F(InventoryTest, ThreePodsEachAskingForOneClUnitAllRun) {
    setUpEcho(2);
    std::set<std::string> given;  // what the kubelet already allocated
    std::vector<std::string> instances;
    for (int pod = 0; pod < 3; ++pod) {
        std::vector<std::string> available;
        for (const std::string& id : healthyIds(kCl)) {
            if (!given.count(id)) available.push_back(id);
        }
        auto chosen = inventory().preferredAllocation(kCl, available, {}, 1);
        ASSERT_EQ(chosen.size(), 1u) << "pod " << pod;
        auto result = allocateNow(arbiter(), kCl, chosen);
        ASSERT_TRUE(std::holds_alternative<ContainerGrant>(result))
            << "pod " << pod << ": " << std::get<AllocationRefused>(result).message;
        given.insert(chosen[0]);
        instances.push_back(std::get<ContainerGrant>(result).envs.at("DEVLET_INSTANCES"));
    }
    EXPECT_NE(instances[0], instances[1]);
    EXPECT_EQ(inventory_->slotsHeld(), 3u);
    EXPECT_EQ(given.size(), 3u);
}

// --- devices that go away -------------------------------------------------------------

TEST_F(InventoryTest, VanishedDeviceSlotsTurnUnhealthyAtOnce) {
    setUpEcho(2, 30s);
    inventory().reportSnapshot("echo", {echoDevice("foo1")});
    EXPECT_EQ(health(kFoo0Il),
              (std::map<std::string, bool>{{"echo-8120fe-0", false}, {"echo-8120fe-1", false}}));
    EXPECT_EQ(health(kCl), (std::map<std::string, bool>{{"echo-8120fe-0", false},
                                                        {"echo-8120fe-1", false},
                                                        {"echo-a19705-0", true},
                                                        {"echo-a19705-1", true}}));
    EXPECT_TRUE(observer_.withdrawn.empty());
    const std::string message = refusal(kCl, {"echo-8120fe-0"});
    EXPECT_NE(message.find("gone"), std::string::npos) << message;
}

TEST_F(InventoryTest, VanishedDeviceWithoutGraceIsWithdrawn) {
    setUpEcho(2);
    inventory().reportSnapshot("echo", {echoDevice("foo1")});
    EXPECT_EQ(observer_.withdrawn, (std::set<std::string>{kFoo0Il}));
    EXPECT_FALSE(observer_.latest.count(kFoo0Il));
    EXPECT_EQ(health(kCl), (std::map<std::string, bool>{{"echo-a19705-0", true}, {"echo-a19705-1", true}}));
    EXPECT_EQ(inventory_->view()[0].instances.size(), 1u);
}

TEST_F(InventoryTest, VanishedDeviceStaysUntilGracePasses) {
    setUpEcho(1, 30s);
    const auto goneAt = steadyNow_;
    inventory().reportSnapshot("echo", {echoDevice("foo1")});

    advance(29s);
    EXPECT_EQ(inventory().expireGone(), goneAt + 30s);
    EXPECT_TRUE(observer_.latest.count(kFoo0Il));
    EXPECT_TRUE(health(kCl).count("echo-8120fe-0"));

    advance(1s);
    EXPECT_EQ(inventory().expireGone(), std::nullopt);
    EXPECT_EQ(observer_.withdrawn, (std::set<std::string>{kFoo0Il}));
    EXPECT_EQ(health(kCl), (std::map<std::string, bool>{{"echo-a19705-0", true}}));
}

TEST_F(InventoryTest, OfferedCountsInstancesAndSlotsUntilWithdrawn) {
    setUpEcho(2, 30s);
    EXPECT_EQ(inventory().offered().instances, 2u);
    EXPECT_EQ(inventory().offered().slots, 4u);

    inventory().reportSnapshot("echo", {echoDevice("foo1")});
    EXPECT_EQ(inventory().offered().instances, 2u) << "a vanished device stays offered within its grace";

    advance(30s);
    inventory().expireGone();
    EXPECT_EQ(inventory().offered().instances, 1u);
    EXPECT_EQ(inventory().offered().slots, 2u);
}

TEST_F(InventoryTest, DeviceBackWithinGraceIsRestoredUnchanged) {
    setUpEcho(2, 30s);
    allocateOk(kCl, {"echo-8120fe-0"});
    const auto before = observer_.latest;
    inventory().reportSnapshot("echo", {echoDevice("foo1")});
    advance(10s);
    inventory().reportSnapshot("echo", {echoDevice("foo0"), echoDevice("foo1")});
    EXPECT_EQ(observer_.latest, before);
    EXPECT_TRUE(observer_.withdrawn.empty());
    EXPECT_EQ(holder("echo-8120fe-0"), kCl);

    advance(30s);
    inventory().expireGone();
    EXPECT_TRUE(observer_.withdrawn.empty());
    EXPECT_EQ(observer_.latest, before);
}

TEST_F(InventoryTest, WithdrawnDeviceKeepsHeldSlotUntilReleased) {
    setUpEcho(1);
    allocateOk(kCl, {"echo-8120fe-0"});
    inventory().reportSnapshot("echo", {echoDevice("foo1")});
    EXPECT_EQ(observer_.withdrawn, (std::set<std::string>{kFoo0Il}));
    EXPECT_EQ(holder("echo-8120fe-0"), kCl);
    // The held slot stays in the list it is held through, Unhealthy, so that the kubelet
    // shows the pod's device Unhealthy; the free one is gone.
    EXPECT_EQ(health(kCl), (std::map<std::string, bool>{{"echo-8120fe-0", false}, {"echo-a19705-0", true}}));

    // Back before the pod is gone: the same slot, still held.
    inventory().reportSnapshot("echo", {echoDevice("foo0"), echoDevice("foo1")});
    EXPECT_EQ(health(kFoo0Il), (std::map<std::string, bool>{{"echo-8120fe-0", false}}));
    EXPECT_EQ(holder("echo-8120fe-0"), kCl);

    // Gone again, and the pod with it: the instance is forgotten.
    inventory().reportSnapshot("echo", {echoDevice("foo1")});
    advance(10s);
    arbiter().reconcile(kubeletSays({}), 5s);
    EXPECT_EQ(holder("echo-8120fe-0"), "<no such slot>");
    EXPECT_EQ(inventory_->view()[0].instances.size(), 1u);
    EXPECT_EQ(health(kCl), (std::map<std::string, bool>{{"echo-a19705-0", true}}));
}

TEST_F(InventoryTest, WithdrawnDeviceHeldThroughItsOwnResourceLeavesTheConfigurationList) {
    setUpEcho(1);
    allocateOk(kFoo0Il, {"echo-8120fe-0"});
    inventory().reportSnapshot("echo", {echoDevice("foo1")});
    EXPECT_EQ(observer_.withdrawn, (std::set<std::string>{kFoo0Il}));
    EXPECT_EQ(health(kCl), (std::map<std::string, bool>{{"echo-a19705-0", true}}));
}

// --- resource names ----------------------------------------------------------------------

TEST_F(InventoryTest, InstanceWhoseResourceIsAnotherConfigurationsIsNotOffered) {
    configurations_ = {echoConfiguration("echo", 1), echoConfiguration("echo-8120fe", 1)};
    graces_ = {{"echo", 0ms}, {"echo-8120fe", 0ms}};
    inventory().applyConfigurations(configurations_, graces_);
    inventory().reportSnapshot("echo", {echoDevice("foo0"), echoDevice("foo1")});
    EXPECT_TRUE(inventory().isConfigurationLevel(kFoo0Il));
    EXPECT_EQ(health(kCl).count("echo-8120fe-0"), 0u);
    EXPECT_EQ(health(kCl).count("echo-a19705-0"), 1u);
    // An Allocate through it reaches the configuration, never the instance.
    EXPECT_NE(refusal(kFoo0Il, {"echo-8120fe-0"}).find("not part of"), std::string::npos);
}

// --- the store ------------------------------------------------------------------------

TEST_F(InventoryTest, AllocationIsInTheStoreWhenAllocateReturns) {
    Store& store = useStore();
    setUpEcho(2);
    allocateOk(kCl, {"echo-8120fe-1"});
    Slot expected{"echo-8120fe-1", kFoo0, "echo", 1, kCl, wallMs_, "", ""};
    EXPECT_EQ(store.slots(), (std::vector<Slot>{expected}));

    arbiter().reconcile(kubeletSays({{kCl, "echo-8120fe-1", "camera-app", "vision", ""}}), 5s);
    expected.pod = "camera-app";
    expected.podNamespace = "vision";
    EXPECT_EQ(store.slots(), (std::vector<Slot>{expected}));

    advance(10s);
    arbiter().reconcile(kubeletSays({}), 5s);
    EXPECT_TRUE(store.slots().empty());
}

TEST_F(InventoryTest, RestartKeepsHolders) {
    useStore();
    setUpEcho(2);
    allocateOk(kCl, {"echo-8120fe-0"});
    arbiter().reconcile(kubeletSays({{kCl, "echo-8120fe-0", "camera-app", "vision", ""}}), 5s);
    const std::int64_t since = slotView("echo-8120fe-0")->sinceMs;
    stopNode();
    store_.reset();

    advance(60s);
    auto store = openStore();
    RecordingObserver observer;
    auto restarted = makeInventory(store.get(), observer);
    SlotArbiter restartedArbiter(*restarted);
    restarted->applyConfigurations(configurations_, graces_);
    restarted->restoreSlots();
    restarted->reportSnapshot("echo", {echoDevice("foo0"), echoDevice("foo1")});

    EXPECT_EQ(restarted->slotsHeld(), 1u);
    std::map<std::string, bool> il;
    for (const DeviceState& d : observer.latest.at(kFoo0Il).devices) il[d.id] = d.healthy;
    EXPECT_EQ(il, (std::map<std::string, bool>{{"echo-8120fe-0", false}, {"echo-8120fe-1", true}}));
    auto result = allocateNow(restartedArbiter, kFoo0Il, {"echo-8120fe-0"});
    ASSERT_TRUE(std::holds_alternative<AllocationRefused>(result));
    EXPECT_NE(std::get<AllocationRefused>(result).message.find("by pod vision/camera-app"),
              std::string::npos);
    EXPECT_EQ(restarted->view()[0].instances[0].slots[0].sinceMs, since);
}

TEST_F(InventoryTest, RestartGivesRestoredSlotAFullGrace) {
    useStore();
    setUpEcho(1);
    allocateOk(kCl, {"echo-8120fe-0"});
    stopNode();
    store_.reset();

    advance(60s);
    auto store = openStore();
    RecordingObserver observer;
    auto restarted = makeInventory(store.get(), observer);
    SlotArbiter restartedArbiter(*restarted);
    restarted->applyConfigurations(configurations_, graces_);
    restarted->restoreSlots();
    restarted->reportSnapshot("echo", {echoDevice("foo0")});
    restartedArbiter.reconcile(kubeletSays({}), 5s);
    EXPECT_EQ(restarted->slotsHeld(), 1u);
    advance(5s);
    restartedArbiter.reconcile(kubeletSays({}), 5s);
    EXPECT_EQ(restarted->slotsHeld(), 0u);
    EXPECT_TRUE(store->slots().empty());
}

TEST_F(InventoryTest, RestartKeepsSlotsOfMissingConfigurationUntilTheirPodIsGone) {
    useStore();
    setUpEcho(1);
    allocateOk(kCl, {"echo-8120fe-0"});
    stopNode();
    store_.reset();

    auto store = openStore();
    RecordingObserver observer;
    auto restarted = makeInventory(store.get(), observer);
    SlotArbiter restartedArbiter(*restarted);
    restarted->applyConfigurations({echoConfiguration("other", 1)}, {});
    restarted->restoreSlots();
    EXPECT_EQ(store->slots().size(), 1u) << "the pod may still run; its configuration may come back";

    restartedArbiter.reconcile(kubeletSays({{kCl, "echo-8120fe-0", "camera-app", "vision", ""}}), 5s);
    advance(10s);
    restartedArbiter.reconcile(kubeletSays({{kCl, "echo-8120fe-0", "camera-app", "vision", ""}}), 5s);
    EXPECT_EQ(store->slots().size(), 1u);

    advance(10s);
    restartedArbiter.reconcile(kubeletSays({}), 5s);
    EXPECT_TRUE(store->slots().empty());
}

TEST_F(InventoryTest, RestartDropsSlotRecordsWithAnInvalidIndex) {
    Store& store = useStore();
    ASSERT_TRUE(store.holdSlots({Slot{"echo-8120fe-x", "echo-8120fe", "echo", -1, kCl, 1, "", ""}}));
    setUpEcho(1);
    inventory().restoreSlots();
    EXPECT_TRUE(store.slots().empty());
    EXPECT_EQ(inventory().slotsHeld(), 0u);
}

TEST_F(InventoryTest, UnwritableStoreRefusesAllocationAndChangesNothing) {
    Store& store = useStore({.busyTimeoutMs = 50});
    setUpEcho(2);
    const auto published = observer_.latest;
    const int changes = observer_.changes;

    sqlite3* other = nullptr;
    ASSERT_EQ(sqlite3_open((stateDir() / "state.db").c_str(), &other), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
    const std::string message = refusal(kCl, {"echo-8120fe-0"});
    ASSERT_EQ(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(other);

    EXPECT_NE(message.find("cannot record the allocation"), std::string::npos) << message;
    EXPECT_EQ(holder("echo-8120fe-0"), "");
    EXPECT_EQ(inventory_->slotsHeld(), 0u);
    EXPECT_EQ(observer_.latest, published);
    EXPECT_EQ(observer_.changes, changes);
    EXPECT_TRUE(store.slots().empty());

    allocateOk(kCl, {"echo-8120fe-0"});
    EXPECT_EQ(store.slots().size(), 1u);
}

TEST_F(InventoryTest, UnwritableStoreKeepsSlotHeldRatherThanFreeIt) {
    Store& store = useStore({.busyTimeoutMs = 50});
    setUpEcho(1);
    allocateOk(kCl, {"echo-8120fe-0"});
    advance(10s);

    sqlite3* other = nullptr;
    ASSERT_EQ(sqlite3_open((stateDir() / "state.db").c_str(), &other), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
    arbiter().reconcile(kubeletSays({}), 5s);
    ASSERT_EQ(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(other);

    EXPECT_EQ(holder("echo-8120fe-0"), kCl);
    EXPECT_EQ(store.slots().size(), 1u);
    arbiter().reconcile(kubeletSays({}), 5s);
    EXPECT_EQ(holder("echo-8120fe-0"), "");
    EXPECT_TRUE(store.slots().empty());
}

// --- configuration changes -------------------------------------------------------------

TEST_F(InventoryTest, RaisingCapacityAddsSlots) {
    setUpEcho(1);
    setCapacity(3);
    EXPECT_EQ(health(kFoo0Il),
              (std::map<std::string, bool>{
                  {"echo-8120fe-0", true}, {"echo-8120fe-1", true}, {"echo-8120fe-2", true}}));
    EXPECT_EQ(health(kCl).size(), 6u);
    allocateOk(kCl, {"echo-a19705-2"});
}

TEST_F(InventoryTest, LoweringCapacityBelowHeldSlotKeepsItUnhealthyUntilReleased) {
    setUpEcho(3);
    allocateOk(kCl, {"echo-8120fe-2"});
    setCapacity(1);
    EXPECT_EQ(health(kFoo0Il),
              (std::map<std::string, bool>{
                  {"echo-8120fe-0", true}, {"echo-8120fe-1", false}, {"echo-8120fe-2", false}}));
    EXPECT_FALSE(health(kCl).at("echo-8120fe-2"));
    EXPECT_EQ(health(kFoo1Il), (std::map<std::string, bool>{{"echo-a19705-0", true}}));
    EXPECT_EQ(holder("echo-8120fe-2"), kCl);
    refusal(kFoo0Il, {"echo-8120fe-1"});

    advance(10s);
    arbiter().reconcile(kubeletSays({}), 5s);
    EXPECT_EQ(health(kFoo0Il), (std::map<std::string, bool>{{"echo-8120fe-0", true}}));
    EXPECT_EQ(health(kCl).size(), 2u);
}

TEST_F(InventoryTest, RemovingConfigurationWithdrawsItsResources) {
    useStore();
    setUpEcho(1);
    allocateOk(kCl, {"echo-8120fe-0"});
    inventory().applyConfigurations({}, {});
    EXPECT_EQ(observer_.withdrawn, (std::set<std::string>{kCl, kFoo0Il, kFoo1Il}));
    EXPECT_TRUE(observer_.latest.empty());
    EXPECT_TRUE(inventory_->resources().empty());
    EXPECT_EQ(store_->slots().size(), 1u) << "its pod may still run";
    refusal(kCl, {"echo-8120fe-0"});
}

TEST_F(InventoryTest, ConfigurationThatComesBackDoesNotGiveAHeldSlotAgain) {
    useStore();
    setUpEcho(1);
    allocateOk(kCl, {"echo-8120fe-0"});
    inventory().applyConfigurations({}, {});
    inventory().applyConfigurations(configurations_, graces_);
    inventory().reportSnapshot("echo", {echoDevice("foo0"), echoDevice("foo1")});

    EXPECT_EQ(holder("echo-8120fe-0"), kCl);
    EXPECT_EQ(health(kFoo0Il), (std::map<std::string, bool>{{"echo-8120fe-0", false}}));
    EXPECT_NE(refusal(kFoo0Il, {"echo-8120fe-0"}).find(kCl), std::string::npos);
}

TEST_F(InventoryTest, SlotOfRemovedConfigurationIsReleasedOnceItsPodIsGone) {
    useStore();
    setUpEcho(1);
    allocateOk(kCl, {"echo-8120fe-0"});
    inventory().applyConfigurations({}, {});
    advance(10s);
    arbiter().reconcile(kubeletSays({}), 5s);
    EXPECT_TRUE(store_->slots().empty());

    inventory().applyConfigurations(configurations_, graces_);
    inventory().reportSnapshot("echo", {echoDevice("foo0"), echoDevice("foo1")});
    EXPECT_EQ(health(kFoo0Il), (std::map<std::string, bool>{{"echo-8120fe-0", true}}));
    allocateOk(kFoo0Il, {"echo-8120fe-0"});
}

TEST_F(InventoryTest, RemovingOneConfigurationLeavesTheOther) {
    configurations_ = {echoConfiguration("echo", 1), echoConfiguration("other", 1)};
    inventory().applyConfigurations(configurations_, {});
    inventory().reportSnapshot("echo", {echoDevice("foo0")});
    inventory().reportSnapshot("other", {echoDevice("foo0")});
    inventory().applyConfigurations({configurations_[1]}, {});
    EXPECT_EQ(observer_.withdrawn, (std::set<std::string>{kCl, kFoo0Il}));
    EXPECT_TRUE(observer_.latest.count("akri.sh/other"));
    EXPECT_TRUE(observer_.latest.count("akri.sh/other-8120fe"));
}

TEST_F(InventoryTest, ConfigurationResourceOverrideMovesTheResource) {
    setUpEcho(1);
    configurations_[0].configurationResource = "example.com/echo";
    inventory().applyConfigurations(configurations_, graces_);
    EXPECT_TRUE(observer_.withdrawn.count(kCl));
    EXPECT_EQ(health("example.com/echo").size(), 2u);
    EXPECT_TRUE(inventory_->isConfigurationLevel("example.com/echo"));
    allocateOk("example.com/echo", {"echo-8120fe-0"});
    EXPECT_FALSE(health(kFoo0Il).at("echo-8120fe-0"));
}

// Renaming a configuration but keeping its resource (gpu -> intel-gpu, both
// gpu.intel.com/i915) must leave the resource offered by the new one.
TEST_F(InventoryTest, RenamedConfigurationKeepsItsOverriddenResource) {
    configurations_ = {echoConfiguration("echo", 1)};
    configurations_[0].configurationResource = "example.com/cams";
    inventory().applyConfigurations(configurations_, {});
    inventory().reportSnapshot("echo", {echoDevice("foo0")});

    Configuration renamed = configurations_[0];
    renamed.name = "cams";
    inventory().applyConfigurations({renamed}, {});
    inventory().reportSnapshot("cams", {echoDevice("foo0")});
    EXPECT_TRUE(inventory_->isConfigurationLevel("example.com/cams"));
    EXPECT_FALSE(observer_.withdrawn.count("example.com/cams"));
    EXPECT_EQ(health("example.com/cams"), (std::map<std::string, bool>{{"cams-8120fe-0", true}}));
    allocateOk("example.com/cams", {"cams-8120fe-0"});
}

TEST_F(InventoryTest, ResourceHandedToAnotherConfigurationStaysOffered) {
    Configuration echo = echoConfiguration("echo", 1);
    echo.configurationResource = "example.com/old";
    Configuration other = echoConfiguration("other", 1);
    other.configurationResource = "example.com/spare";
    inventory().applyConfigurations({other, echo}, {});

    echo.configurationResource = "example.com/new";
    other.configurationResource = "example.com/old";
    inventory().applyConfigurations({other, echo}, {});
    inventory().reportSnapshot("other", {echoDevice("foo0")});
    EXPECT_TRUE(inventory_->isConfigurationLevel("example.com/old"));
    EXPECT_TRUE(inventory_->isConfigurationLevel("example.com/new"));
    EXPECT_FALSE(inventory_->isConfigurationLevel("example.com/spare"));
    EXPECT_EQ(health("example.com/old"), (std::map<std::string, bool>{{"other-8120fe-0", true}}));
    EXPECT_TRUE(observer_.latest.count("example.com/new"));
    EXPECT_EQ(observer_.withdrawn, (std::set<std::string>{"example.com/spare"}));
}

TEST_F(InventoryTest, ResourcesListsEveryOfferedResource) {
    setUpEcho(1);
    std::vector<ResourceState> resources = inventory_->resources();
    std::map<std::string, ResourceState> byName;
    for (const ResourceState& r : resources) byName[r.resource] = r;
    EXPECT_EQ(byName, observer_.latest);
}

}  // namespace
}  // namespace devlet::test
