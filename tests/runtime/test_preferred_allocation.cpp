// Spread and pack as pure functions of the candidates: no inventory, no handler.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/preferred_allocation.h"

namespace devlet {
namespace {

// Two slots of "a" (both free), one of "b" (one of its two slots free), three of "c".
std::vector<PreferenceCandidate> candidates() {
    return {{"a-0", "a", 0, 2}, {"a-1", "a", 1, 2}, {"b-1", "b", 1, 1},
            {"c-0", "c", 0, 3}, {"c-1", "c", 1, 3}, {"c-2", "c", 2, 3}};
}

TEST(PreferredAllocation, SpreadTakesDistinctDevicesWithTheMostFreeSlotsFirst) {
    EXPECT_EQ(spreadOrPack(candidates(), {}, 3, AllocationPolicy::Spread, false),
              (std::vector<std::string>{"c-0", "a-0", "b-1"}));
    EXPECT_EQ(spreadOrPack(candidates(), {}, 4, AllocationPolicy::Spread, false),
              (std::vector<std::string>{"c-0", "a-0", "b-1", "c-1"}));
}

TEST(PreferredAllocation, PackFillsTheFullestDeviceFirst) {
    EXPECT_EQ(spreadOrPack(candidates(), {}, 3, AllocationPolicy::Pack, false),
              (std::vector<std::string>{"b-1", "a-0", "a-1"}));
}

TEST(PreferredAllocation, UniqueDevicesStopAtOneSlotPerDevice) {
    EXPECT_EQ(spreadOrPack(candidates(), {}, 5, AllocationPolicy::Pack, true),
              (std::vector<std::string>{"b-1", "a-0", "c-0"}));
}

TEST(PreferredAllocation, MustIncludeComesFirstAndCountsAsPicked) {
    EXPECT_EQ(spreadOrPack(candidates(), {"c-2"}, 3, AllocationPolicy::Spread, false),
              (std::vector<std::string>{"c-2", "a-0", "b-1"}));
    EXPECT_EQ(spreadOrPack(candidates(), {"c-2"}, 2, AllocationPolicy::Pack, false),
              (std::vector<std::string>{"c-2", "c-0"}));
}

}  // namespace
}  // namespace devlet
