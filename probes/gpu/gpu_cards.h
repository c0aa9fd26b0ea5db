#pragma once
// What the gpu probe keeps between udev events: the last observation of every card, and
// which of them a batch of drm/pci events concerns, so that an event re-reads those cards
// instead of all of them. Pure; any thread.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "probes/gpu/gpu_observation.h"

namespace devlet::gpu {

// One udev event as the attribution needs it.
struct GpuUevent {
    std::string subsystem;  // "drm" or "pci" (the probe's monitor is filtered to these)
    std::string devpath;    // without /sys
};

// The devices (devpaths) whose cards a batch of events concerns: for a drm event (a card,
// a render node, a connector) the device whose drm/ directory holds it, its PCI function;
// for a pci event the PCI function itself, whose cards are those at or below it (a port
// takes the cards behind it along). nullopt when an event names something else (another
// subsystem, a drm device outside a drm/ directory, no devpath): everything is re-read.
std::optional<std::vector<std::string>> devicesOfEvents(const std::vector<GpuUevent>& events);

// The last observation of each card, by card name.
class GpuCards {
public:
    // After a full pass: exactly these.
    void assign(std::vector<GpuObservation> observations);
    // After re-reading `read`: each of them is what `observations` says, or gone.
    void update(const std::set<std::string, CardOrder>& read, std::vector<GpuObservation> observations);

    // Every card's observation, in card order.
    std::vector<GpuObservation> observations() const;
    const GpuObservation* find(const std::string& card) const;

    // The cards at or below these devices (whole path components).
    std::set<std::string, CardOrder> cardsAt(const std::vector<std::string>& devpaths) const;
    // The cards whose verdict depends on `gpu`'s through SR-IOV: its physical function's,
    // when it is a virtual function, and its virtual functions', when it is a physical one
    // (a PF with VFs enabled is not offered; its VFs are).
    std::set<std::string, CardOrder> relativesOf(const GpuObservation& gpu) const;

private:
    std::map<std::string, GpuObservation, CardOrder> cards_;
};

}  // namespace devlet::gpu
