#pragma once
// GetPreferredAllocation's choice for a configuration-level resource when its handler has
// no preference of its own: spread (distinct devices first, then the device with the most
// free slots) or pack (fill one device first), never two slots of one device where the
// configuration wants distinct devices. Pure: the inventory hands it the candidates.

#include <string>
#include <vector>

#include "runtime/configuration.h"

namespace devlet {

struct PreferenceCandidate {
    std::string id;  // "<instance>-<k>"
    std::string instance;
    int index = 0;
    int freeOnInstance = 0;  // free slots of its instance, this one included
};

// `mustInclude` comes first, always; then up to `size` ids in all from `candidates`
// (ids of mustInclude among them are skipped; mustInclude's slots count as picked).
std::vector<std::string> spreadOrPack(std::vector<PreferenceCandidate> candidates,
                                      const std::vector<std::string>& mustInclude, int size,
                                      AllocationPolicy policy, bool uniqueDevices);

}  // namespace devlet
