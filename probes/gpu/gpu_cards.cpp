#include "probes/gpu/gpu_cards.h"

#include <string_view>
#include <utility>

namespace devlet::gpu {

namespace {

// `path` is `device` or lies below it, by whole path components.
bool atOrBelow(std::string_view path, std::string_view device) {
    return path.starts_with(device) && (path.size() == device.size() || path[device.size()] == '/');
}

}  // namespace

std::optional<std::vector<std::string>> devicesOfEvents(const std::vector<GpuUevent>& events) {
    std::vector<std::string> devices;
    for (const GpuUevent& event : events) {
        if (!event.devpath.starts_with("/devices/")) return std::nullopt;
        if (event.subsystem == "pci") {
            devices.push_back(event.devpath);
        } else if (event.subsystem == "drm") {
            // .../0000:03:00.0/drm/card1, .../drm/renderD129, .../drm/card1/card1-DP-1
            const std::size_t drm = event.devpath.find("/drm/");
            if (drm == std::string::npos || drm == 0) return std::nullopt;
            devices.push_back(event.devpath.substr(0, drm));
        } else {
            return std::nullopt;
        }
    }
    return devices;
}

void GpuCards::assign(std::vector<GpuObservation> observations) {
    cards_.clear();
    for (GpuObservation& gpu : observations) {
        std::string card = gpu.card;
        cards_.insert_or_assign(std::move(card), std::move(gpu));
    }
}

void GpuCards::update(const std::set<std::string, CardOrder>& read,
                      std::vector<GpuObservation> observations) {
    for (const std::string& card : read) cards_.erase(card);
    for (GpuObservation& gpu : observations) {
        std::string card = gpu.card;
        cards_.insert_or_assign(std::move(card), std::move(gpu));
    }
}

std::vector<GpuObservation> GpuCards::observations() const {
    std::vector<GpuObservation> all;
    all.reserve(cards_.size());
    for (const auto& [card, gpu] : cards_) all.push_back(gpu);
    return all;
}

const GpuObservation* GpuCards::find(const std::string& card) const {
    auto it = cards_.find(card);
    return it == cards_.end() ? nullptr : &it->second;
}

std::set<std::string, CardOrder> GpuCards::cardsAt(const std::vector<std::string>& devpaths) const {
    std::set<std::string, CardOrder> found;
    for (const auto& [card, gpu] : cards_) {
        for (const std::string& devpath : devpaths) {
            if (atOrBelow(gpu.devpath, devpath)) {
                found.insert(card);
                break;
            }
        }
    }
    return found;
}

std::set<std::string, CardOrder> GpuCards::relativesOf(const GpuObservation& gpu) const {
    std::set<std::string, CardOrder> found;
    if (gpu.pciAddress.empty()) return found;
    for (const auto& [card, other] : cards_) {
        if (other.pciAddress.empty() || other.pciAddress == gpu.pciAddress) continue;
        const bool itsPhysicalFunction = other.pciAddress == gpu.physicalFunction;
        const bool itsVirtualFunction = other.physicalFunction == gpu.pciAddress;
        if (itsPhysicalFunction || itsVirtualFunction) found.insert(card);
    }
    return found;
}

}  // namespace devlet::gpu
