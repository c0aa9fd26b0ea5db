#pragma once
// What the inventory asks of cluster mode (cluster/) for the slots of shared devices: a
// slot of a device several nodes see is held by at most one container in the cluster.
// The inventory asks before it grants such a slot and says when it frees one; cluster
// mode tells it which slots it may not offer (Inventory::setHeldElsewhere). Loop thread.

#include <functional>
#include <string>
#include <vector>

#include "runtime/outcome.h"

namespace devlet {

class SharedSlotGate {
public:
    virtual ~SharedSlotGate() = default;
    // Takes the slots for this node. `done` runs later, on the loop thread, with ok or
    // with why not (the node that holds one, the API unreachable); never before take()
    // returns. Slots this node already holds are ok at once.
    virtual void take(const std::vector<std::string>& slotIds, std::function<void(Outcome)> done) = 0;
    // This node no longer holds the slot (freed, or taken and then not granted).
    virtual void release(const std::string& slotId) = 0;
};

}  // namespace devlet
