#include "runtime/live_files.h"

#include <utility>

#include "runtime/log.h"

namespace devlet {

namespace {
constexpr Log log{"inventory"};
}

LiveFiles::LiveFiles(const std::string& stateDir, Describe describe, Event event)
    : writer_(stateDir), describe_(std::move(describe)), event_(std::move(event)) {}

std::optional<LiveFiles::Granted> LiveFiles::granted(const std::vector<std::string>& slotIds) {
    loopThread_.check();
    if (slotIds.empty()) return std::nullopt;
    const std::string& allocation = slotIds.front();
    // A slot given again (the kubelet allocating anew for the same resource) is
    // described by its new container's file only.
    if (auto previous = slots_.find(allocation); previous != slots_.end()) {
        for (const std::string& id : previous->second) allocationOf_.erase(id);
        previous->second.clear();
    }
    for (const std::string& id : slotIds) {
        if (allocationOf_.count(id)) slotGone(id);
        allocationOf_[id] = allocation;
    }
    slots_[allocation] = slotIds;
    changed_.erase(allocation);
    // Without its directory the container could not start: the mount is offered only
    // once the file is written.
    if (!write(allocation)) return std::nullopt;
    return Granted{Mount{writer_.directory(allocation).string(), LiveInfoWriter::kContainerDirectory, true},
                   LiveInfoWriter::kEnvironmentVariable, LiveInfoWriter::kContainerFile};
}

void LiveFiles::instanceChanged(const std::string& instance) {
    loopThread_.check();
    const std::string prefix = instance + "-";
    for (auto it = allocationOf_.lower_bound(prefix);
         it != allocationOf_.end() && it->first.starts_with(prefix); ++it) {
        if (splitSlotId(it->first).first == instance) changed_.insert(it->second);
    }
}

void LiveFiles::slotChanged(const std::string& slotId) {
    loopThread_.check();
    if (auto it = allocationOf_.find(slotId); it != allocationOf_.end()) changed_.insert(it->second);
}

void LiveFiles::holderChanged(const Slot& slot, const std::string& before) {
    (void)before;
    if (!slot.held()) slotGone(slot.deviceId);
}

void LiveFiles::slotGone(const std::string& slotId) {
    auto it = allocationOf_.find(slotId);
    if (it == allocationOf_.end()) return;
    const std::string allocation = it->second;
    allocationOf_.erase(it);
    std::vector<std::string>& slots = slots_[allocation];
    std::erase(slots, slotId);
    if (!slots.empty()) {
        changed_.insert(allocation);
        return;
    }
    slots_.erase(allocation);
    changed_.erase(allocation);
    if (auto outcome = writer_.remove(allocation); !outcome) log.warning() << outcome.error();
}

std::vector<LiveDevice> LiveFiles::devices(const std::string& allocation) const {
    std::vector<LiveDevice> devices;
    auto it = slots_.find(allocation);
    if (it == slots_.end()) return devices;
    for (const std::string& id : it->second) {
        if (std::optional<LiveDevice> device = describe_(id)) devices.push_back(std::move(*device));
    }
    return devices;
}

bool LiveFiles::written(const std::string& allocation, const std::string& staleBefore,
                        const Outcome& outcome) {
    if (!outcome) {
        if (outcome.error() != staleBefore)
            event_("warning", allocation,
                   "the live file of " + allocation + " keeps its last content: " + outcome.error());
        return false;
    }
    if (!staleBefore.empty())
        event_("info", allocation, "the live file of " + allocation + " is current again");
    return true;
}

bool LiveFiles::write(const std::string& allocation) {
    const std::string staleBefore = writer_.staleReason(allocation);
    return written(allocation, staleBefore, writer_.write(allocation, devices(allocation)));
}

void LiveFiles::writeChanged() {
    loopThread_.check();
    if (changed_.empty()) return;
    std::set<std::string> changed;
    changed.swap(changed_);
    std::vector<LiveInfoWriter::Document> documents;
    std::vector<std::string> staleBefore;
    for (const std::string& allocation : changed) {
        if (!slots_.count(allocation)) continue;
        staleBefore.push_back(writer_.staleReason(allocation));
        documents.emplace_back(allocation, devices(allocation));
    }
    // One that failed is tried again with the next change.
    const std::vector<Outcome> outcomes = writer_.writeAll(documents);
    for (std::size_t i = 0; i < documents.size(); ++i)
        (void)written(documents[i].first, staleBefore[i], outcomes[i]);
}

void LiveFiles::rebuild(const std::function<bool(const std::string& slotId)>& held) {
    loopThread_.check();
    for (auto& [allocation, found] : writer_.existing()) {
        // A directory whose file was lost still names its first slot.
        std::vector<std::string> listed =
            found.slots.empty() ? std::vector<std::string>{allocation} : found.slots;
        std::vector<std::string> kept;
        for (const std::string& id : listed) {
            if (held(id) && !allocationOf_.count(id)) kept.push_back(id);
        }
        if (kept.empty()) {
            if (auto outcome = writer_.remove(allocation); !outcome) log.warning() << outcome.error();
            continue;
        }
        for (const std::string& id : kept) allocationOf_[id] = allocation;
        slots_[allocation] = std::move(kept);
        changed_.insert(allocation);
    }
}

std::optional<LiveFileView> LiveFiles::file(const std::string& slotId) const {
    loopThread_.check();
    auto it = allocationOf_.find(slotId);
    if (it == allocationOf_.end()) return std::nullopt;
    return LiveFileView{(writer_.directory(it->second) / "devices.json").string(),
                        writer_.generation(it->second), writer_.staleReason(it->second)};
}

}  // namespace devlet
