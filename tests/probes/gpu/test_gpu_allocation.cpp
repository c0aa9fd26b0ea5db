// The gpu allocation policy: Intel's none/balanced/packed, then one NUMA node and one PCI
// root for requests of several GPUs or shares.

#include <gtest/gtest.h>

#include "probes/gpu/gpu_allocation.h"

namespace devlet::gpu {
namespace {

using Ids = std::vector<std::string>;

// `free` shares of GPU `gpu` (slots numbered from `first`).
void addShares(std::vector<GpuSlot>& slots, const std::string& gpu, int free,
               std::optional<int> numa = std::nullopt, const std::string& root = "pci0000:00",
               int first = 0) {
    for (int k = first; k < first + free; ++k)
        slots.push_back({gpu + "-" + std::to_string(k), gpu, k, numa, root});
}

GpuAllocationRequest request(std::vector<GpuSlot> available, int size, GpuAllocationPolicy policy,
                             Ids mustInclude = {}) {
    GpuAllocationRequest r;
    r.available = std::move(available);
    r.size = size;
    r.policy = policy;
    r.mustInclude = std::move(mustInclude);
    return r;
}

TEST(GpuAllocation, NoneTakesDistinctGpusFirstThenFills) {
    std::vector<GpuSlot> slots;
    addShares(slots, "gpus-aaaaaa", 2);
    addShares(slots, "gpus-bbbbbb", 2);
    EXPECT_EQ(chooseGpuSlots(request(slots, 2, GpuAllocationPolicy::None)),
              (Ids{"gpus-aaaaaa-0", "gpus-bbbbbb-0"}));
    EXPECT_EQ(chooseGpuSlots(request(slots, 3, GpuAllocationPolicy::None)),
              (Ids{"gpus-aaaaaa-0", "gpus-bbbbbb-0", "gpus-aaaaaa-1"}));
}

TEST(GpuAllocation, BalancedTakesFromTheGpuWithTheMostFreeShares) {
    std::vector<GpuSlot> slots;
    addShares(slots, "gpus-aaaaaa", 1, std::nullopt, "pci0000:00", 2);
    addShares(slots, "gpus-bbbbbb", 3);
    EXPECT_EQ(chooseGpuSlots(request(slots, 1, GpuAllocationPolicy::Balanced)), (Ids{"gpus-bbbbbb-0"}));
    // b (3 free), b again (2 left against 1), then a tie that id order breaks.
    EXPECT_EQ(chooseGpuSlots(request(slots, 3, GpuAllocationPolicy::Balanced)),
              (Ids{"gpus-bbbbbb-0", "gpus-bbbbbb-1", "gpus-aaaaaa-2"}));
}

TEST(GpuAllocation, PackedFillsOneGpuInIdOrder) {
    std::vector<GpuSlot> slots;
    addShares(slots, "gpus-aaaaaa", 1, std::nullopt, "pci0000:00", 3);
    addShares(slots, "gpus-bbbbbb", 4);
    EXPECT_EQ(chooseGpuSlots(request(slots, 1, GpuAllocationPolicy::Packed)), (Ids{"gpus-aaaaaa-3"}));
    EXPECT_EQ(chooseGpuSlots(request(slots, 3, GpuAllocationPolicy::Packed, {})),
              (Ids{"gpus-aaaaaa-3", "gpus-bbbbbb-0", "gpus-bbbbbb-1"}));
}

TEST(GpuAllocation, PackedOrdersSlotNumbersAsNumbers) {
    std::vector<GpuSlot> slots;
    addShares(slots, "gpus-aaaaaa", 12);
    const Ids chosen = chooseGpuSlots(request(slots, 3, GpuAllocationPolicy::Packed));
    EXPECT_EQ(chosen, (Ids{"gpus-aaaaaa-0", "gpus-aaaaaa-1", "gpus-aaaaaa-2"}));
}

// Four GPUs on two NUMA nodes, two shares each.
std::vector<GpuSlot> twoSockets() {
    std::vector<GpuSlot> slots;
    addShares(slots, "gpus-000001", 2, 0, "pci0000:00");
    addShares(slots, "gpus-000002", 2, 1, "pci0000:80");
    addShares(slots, "gpus-000003", 2, 0, "pci0000:00");
    addShares(slots, "gpus-000004", 2, 1, "pci0000:80");
    return slots;
}

int numaOf(const std::vector<GpuSlot>& slots, const std::string& id) {
    for (const GpuSlot& slot : slots) {
        if (slot.id == id) return slot.numaNode.value_or(-1);
    }
    return -2;
}

TEST(GpuAllocation, EveryPolicyKeepsARequestOfTwoOnOneNumaNode) {
    const std::vector<GpuSlot> slots = twoSockets();
    for (GpuAllocationPolicy policy :
         {GpuAllocationPolicy::None, GpuAllocationPolicy::Balanced, GpuAllocationPolicy::Packed}) {
        for (int size : {2, 3, 4}) {
            const Ids chosen = chooseGpuSlots(request(slots, size, policy));
            ASSERT_EQ(chosen.size(), static_cast<std::size_t>(size));
            for (const std::string& id : chosen) {
                EXPECT_EQ(numaOf(slots, id), numaOf(slots, chosen[0]))
                    << "policy " << static_cast<int>(policy) << " size " << size;
            }
        }
    }
    // Without the preference, none spreads over GPUs in id order, across both nodes.
    GpuAllocationRequest flat = request(slots, 2, GpuAllocationPolicy::None);
    flat.topologyAware = false;
    EXPECT_EQ(chooseGpuSlots(flat), (Ids{"gpus-000001-0", "gpus-000002-0"}));
}

TEST(GpuAllocation, NoneStillPrefersDistinctGpusInsideTheNumaNode) {
    const Ids chosen = chooseGpuSlots(request(twoSockets(), 2, GpuAllocationPolicy::None));
    EXPECT_EQ(chosen, (Ids{"gpus-000001-0", "gpus-000003-0"}));
}

TEST(GpuAllocation, MustIncludeAnchorsTheRestOnItsNumaNode) {
    const Ids chosen = chooseGpuSlots(request(twoSockets(), 2, GpuAllocationPolicy::None, {"gpus-000004-1"}));
    EXPECT_EQ(chosen, (Ids{"gpus-000004-1", "gpus-000002-0"}));
}

TEST(GpuAllocation, NodeWithRoomWinsOverOneThatIsPartlyUsed) {
    std::vector<GpuSlot> slots;
    addShares(slots, "gpus-000001", 1, 0, "pci0000:00", 1);  // one share of node 0 is taken
    addShares(slots, "gpus-000002", 2, 1, "pci0000:80");
    const Ids chosen = chooseGpuSlots(request(slots, 2, GpuAllocationPolicy::Packed));
    EXPECT_EQ(chosen, (Ids{"gpus-000002-0", "gpus-000002-1"}));
}

TEST(GpuAllocation, PackedPicksTheTightestNodeThatFits) {
    std::vector<GpuSlot> slots;
    addShares(slots, "gpus-000001", 4, 0, "pci0000:00");
    addShares(slots, "gpus-000002", 2, 1, "pci0000:80");
    EXPECT_EQ(chooseGpuSlots(request(slots, 2, GpuAllocationPolicy::Packed)),
              (Ids{"gpus-000002-0", "gpus-000002-1"}));
    // Balanced goes where there is most room.
    EXPECT_EQ(chooseGpuSlots(request(slots, 2, GpuAllocationPolicy::Balanced)),
              (Ids{"gpus-000001-0", "gpus-000001-1"}));
}

TEST(GpuAllocation, InsideANumaNodeOnePciRootIsPreferred) {
    std::vector<GpuSlot> slots;
    addShares(slots, "gpus-000001", 1, 0, "pci0000:00");
    addShares(slots, "gpus-000002", 1, 0, "pci0000:40");
    addShares(slots, "gpus-000003", 1, 0, "pci0000:40");
    EXPECT_EQ(chooseGpuSlots(request(slots, 2, GpuAllocationPolicy::None)),
              (Ids{"gpus-000002-0", "gpus-000003-0"}));
}

TEST(GpuAllocation, ARequestLargerThanANodeOverflowsToTheNext) {
    const std::vector<GpuSlot> slots = twoSockets();
    const Ids chosen = chooseGpuSlots(request(slots, 6, GpuAllocationPolicy::None));
    ASSERT_EQ(chosen.size(), 6u);
    int onFirst = 0;
    for (const std::string& id : chosen) onFirst += numaOf(slots, id) == numaOf(slots, chosen[0]) ? 1 : 0;
    EXPECT_EQ(onFirst, 4);
}

TEST(GpuAllocation, UniqueDevicesNeverGivesTwoSharesOfOneGpu) {
    std::vector<GpuSlot> slots;
    addShares(slots, "gpus-aaaaaa", 2);
    addShares(slots, "gpus-bbbbbb", 2);
    GpuAllocationRequest r = request(slots, 3, GpuAllocationPolicy::Packed);
    r.uniqueDevices = true;
    EXPECT_EQ(chooseGpuSlots(r), (Ids{"gpus-aaaaaa-0", "gpus-bbbbbb-0"}));
    r.mustInclude = {"gpus-bbbbbb-1"};
    EXPECT_EQ(chooseGpuSlots(r), (Ids{"gpus-bbbbbb-1", "gpus-aaaaaa-0"}));
}

TEST(GpuAllocation, FewerAvailableThanAskedGivesWhatThereIs) {
    std::vector<GpuSlot> slots;
    addShares(slots, "gpus-aaaaaa", 1);
    EXPECT_EQ(chooseGpuSlots(request(slots, 3, GpuAllocationPolicy::Balanced)), (Ids{"gpus-aaaaaa-0"}));
    EXPECT_TRUE(chooseGpuSlots(request({}, 2, GpuAllocationPolicy::None)).empty());
}

}  // namespace
}  // namespace devlet::gpu
