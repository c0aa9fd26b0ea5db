#include "runtime/preferred_allocation.h"

#include <algorithm>
#include <map>
#include <set>

#include "runtime/slot_ledger.h"

namespace devlet {

std::vector<std::string> spreadOrPack(std::vector<PreferenceCandidate> candidates,
                                      const std::vector<std::string>& mustInclude, int size,
                                      AllocationPolicy policy, bool uniqueDevices) {
    std::vector<std::string> result;
    std::set<std::string> chosen;
    for (const std::string& id : mustInclude) {
        if (chosen.insert(id).second) result.push_back(id);
    }
    // Per instance: slots picked so far and slots still free.
    std::map<std::string, int> picked;
    std::map<std::string, int> free;
    for (const std::string& id : result) picked[splitSlotId(id).first]++;
    std::erase_if(candidates, [&](const PreferenceCandidate& c) { return chosen.count(c.id) > 0; });
    for (const PreferenceCandidate& c : candidates) free.try_emplace(c.instance, c.freeOnInstance);
    const bool pack = policy == AllocationPolicy::Pack;
    while (static_cast<int>(result.size()) < size) {
        // Unique devices: a device already in this request offers no further slot.
        if (uniqueDevices) {
            std::erase_if(candidates, [&](const PreferenceCandidate& c) { return picked[c.instance] > 0; });
        }
        if (candidates.empty()) break;
        auto better = [&](const PreferenceCandidate& a, const PreferenceCandidate& b) {
            const int pa = picked[a.instance], pb = picked[b.instance];
            const int fa = free[a.instance] - pa, fb = free[b.instance] - pb;
            if (pack) {
                // Fill one device first: the one already used, then the fullest.
                if ((pa > 0) != (pb > 0)) return pa > 0;
                if (fa != fb) return fa < fb;
            } else {
                // Distinct devices first, then the device with the most free slots.
                if (pa != pb) return pa < pb;
                if (fa != fb) return fa > fb;
            }
            if (a.instance != b.instance) return a.instance < b.instance;
            return a.index < b.index;
        };
        auto best = std::min_element(candidates.begin(), candidates.end(), better);
        picked[best->instance]++;
        result.push_back(best->id);
        candidates.erase(best);
    }
    return result;
}

}  // namespace devlet
