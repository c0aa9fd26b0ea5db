#pragma once
// Asks the slot arbiter and returns its decision, for requests it decides at once (no
// cluster step awaited: no SharedSlotGate, or no slot of a shared device). A request that
// would wait is refused with Refusal::Failed, "not decided at once".

#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "runtime/slot_arbiter.h"

namespace devlet::test {

inline SlotArbiter::Decision decideNow(SlotArbiter& arbiter, const std::string& resource,
                                       std::vector<std::vector<std::string>> containers) {
    std::optional<SlotArbiter::Decision> decision;
    arbiter.allocate({resource, std::move(containers), nullptr},
                     [&decision](SlotArbiter::Decision d) { decision = std::move(d); });
    if (!decision)
        return AllocationRefused{
            Refusal::Failed, {}, "the request for " + resource + " was not decided at once"};
    return std::move(*decision);
}

// One container's slots.
inline std::variant<ContainerGrant, AllocationRefused> allocateNow(SlotArbiter& arbiter,
                                                                   const std::string& resource,
                                                                   const std::vector<std::string>& ids) {
    SlotArbiter::Decision decision = decideNow(arbiter, resource, {ids});
    if (auto* refused = std::get_if<AllocationRefused>(&decision)) return std::move(*refused);
    return std::move(std::get<std::vector<ContainerGrant>>(decision).front());
}

}  // namespace devlet::test
