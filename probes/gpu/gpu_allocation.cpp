#include "probes/gpu/gpu_allocation.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace devlet::gpu {

namespace {

// How well a group of shares (one NUMA node, or one PCI root) can take the rest of a
// request: lower is better.
struct GroupScore {
    bool fits = false;
    bool distinctFits = false;
    int slots = 0;
    int gpus = 0;
};

bool better(const GroupScore& a, const GroupScore& b, GpuAllocationPolicy policy) {
    if (a.fits != b.fits) return a.fits;
    switch (policy) {
        case GpuAllocationPolicy::None:
            // Distinct GPUs first, so prefer the group that has enough of them.
            if (a.distinctFits != b.distinctFits) return a.distinctFits;
            return a.slots > b.slots;
        case GpuAllocationPolicy::Balanced:
            return a.slots > b.slots;
        case GpuAllocationPolicy::Packed:
            // The tightest group that fits, so a larger one stays whole for a larger request.
            return a.fits ? a.slots < b.slots : a.slots > b.slots;
    }
    return false;
}

template <typename Key>
std::optional<Key> bestGroup(const std::vector<const GpuSlot*>& candidates, Key (*keyOf)(const GpuSlot&),
                             int need, const GpuAllocationRequest& request) {
    std::map<Key, std::pair<int, std::set<std::string>>> groups;
    for (const GpuSlot* slot : candidates) {
        auto& group = groups[keyOf(*slot)];
        group.first++;
        group.second.insert(slot->gpu);
    }
    std::optional<Key> best;
    GroupScore bestScore;
    for (const auto& [key, group] : groups) {
        GroupScore score;
        score.gpus = static_cast<int>(group.second.size());
        score.slots = request.uniqueDevices ? score.gpus : group.first;
        score.fits = score.slots >= need;
        score.distinctFits = score.gpus >= need;
        // std::map order: on a tie the lower key (NUMA node, root name) wins.
        if (!best || better(score, bestScore, request.policy)) {
            best = key;
            bestScore = score;
        }
    }
    return best;
}

int numaKey(const GpuSlot& slot) {
    return slot.numaNode.value_or(-1);
}
std::string rootKey(const GpuSlot& slot) {
    return slot.pciRoot;
}

}  // namespace

std::vector<std::string> chooseGpuSlots(const GpuAllocationRequest& request) {
    std::vector<std::string> result;
    std::set<std::string> chosen;
    std::map<std::string, const GpuSlot*> byId;
    for (const GpuSlot& slot : request.available) byId.emplace(slot.id, &slot);
    std::map<std::string, int> picked;  // shares taken per GPU
    const GpuSlot* first = nullptr;
    for (const std::string& id : request.mustInclude) {
        if (!chosen.insert(id).second) continue;
        result.push_back(id);
        if (auto it = byId.find(id); it != byId.end()) {
            picked[it->second->gpu]++;
            if (!first) first = it->second;
        }
    }
    std::vector<const GpuSlot*> candidates;
    std::map<std::string, int> free;  // shares per GPU the kubelet offers
    for (const GpuSlot& slot : request.available) {
        if (!chosen.insert(slot.id).second) continue;
        candidates.push_back(&slot);
        free[slot.gpu]++;
    }
    if (request.uniqueDevices) {
        std::erase_if(candidates, [&](const GpuSlot* slot) { return picked[slot->gpu] > 0; });
    }
    const int need = request.size - static_cast<int>(result.size());
    if (need <= 0 || candidates.empty()) return result;

    // Where the request should land: beside what the kubelet already chose, or the group
    // that takes it best.
    std::optional<int> numa;
    std::optional<std::string> root;
    if (request.topologyAware) {
        if (first) {
            numa = numaKey(*first);
            root = rootKey(*first);
        } else {
            numa = bestGroup<int>(candidates, numaKey, need, request);
            std::vector<const GpuSlot*> local;
            for (const GpuSlot* slot : candidates) {
                if (numaKey(*slot) == *numa) local.push_back(slot);
            }
            root = bestGroup<std::string>(local, rootKey, need, request);
        }
    }
    auto tier = [&](const GpuSlot& slot) {
        int t = 0;
        if (numa && numaKey(slot) != *numa) t += 2;
        if (root && rootKey(slot) != *root) t += 1;
        return t;
    };
    while (static_cast<int>(result.size()) < request.size && !candidates.empty()) {
        auto order = [&](const GpuSlot* a, const GpuSlot* b) {
            const int ta = tier(*a), tb = tier(*b);
            if (ta != tb) return ta < tb;
            const int pa = picked[a->gpu], pb = picked[b->gpu];
            switch (request.policy) {
                case GpuAllocationPolicy::None:
                    // As many distinct GPUs as possible, then fill.
                    if (pa != pb) return pa < pb;
                    break;
                case GpuAllocationPolicy::Balanced: {
                    // The GPU with the most free shares left.
                    const int fa = free[a->gpu] - pa, fb = free[b->gpu] - pb;
                    if (fa != fb) return fa > fb;
                    break;
                }
                case GpuAllocationPolicy::Packed:
                    // In id order, which fills one GPU before the next.
                    break;
            }
            return std::tie(a->gpu, a->index) < std::tie(b->gpu, b->index);
        };
        auto best = std::min_element(candidates.begin(), candidates.end(), order);
        const GpuSlot* slot = *best;
        candidates.erase(best);
        picked[slot->gpu]++;
        result.push_back(slot->id);
        if (request.uniqueDevices) {
            std::erase_if(candidates, [&](const GpuSlot* other) { return other->gpu == slot->gpu; });
        }
    }
    return result;
}

}  // namespace devlet::gpu
