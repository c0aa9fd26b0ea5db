#include "cluster/lease_table.h"

#include <algorithm>

namespace devlet::kube {

namespace {
// A Lease without a duration would lapse at once; one second is the least the API allows.
constexpr int kLeastDurationSeconds = 1;

bool renewal(const Lease& before, const Lease& after) {
    return before.holder != after.holder || before.renewTime != after.renewTime;
}
}  // namespace

LeaseTable::LeaseTable(std::string node, std::chrono::milliseconds trust)
    : node_(std::move(node)), trust_(trust) {}

void LeaseTable::seen(const Lease& lease, Clock::time_point now) {
    auto& seen = mapFor(lease);
    if (!lease.node && lease.holder != node_) slotRun_.erase(lease.name);
    auto it = seen.find(lease.name);
    if (it == seen.end()) {
        seen.emplace(lease.name, Seen{lease, now});
        return;
    }
    if (it->second.vanished) {
        it->second = Seen{lease, now};
        return;
    }
    const bool renewed = renewal(it->second.lease, lease);
    it->second.lease = lease;
    if (renewed) it->second.changed = now;
}

void LeaseTable::gone(const std::string& name) {
    slots_.erase(name);
    nodes_.erase(name);
    slotRun_.erase(name);
}

void LeaseTable::vanished(const std::string& name, Clock::time_point now) {
    auto it = slots_.find(name);
    if (it == slots_.end() || it->second.lease.holder.empty() || it->second.lease.holder == node_) {
        gone(name);
        return;
    }
    if (!it->second.vanished) it->second = Seen{it->second.lease, now, true};
    it->second.lease.resourceVersion.clear();
}

std::uint64_t LeaseTable::run(Clock::time_point now) const {
    return trustedUntil_ && now < *trustedUntil_ ? run_ : 0;
}

void LeaseTable::nodeLeaseConfirmed(const Lease& written, Clock::time_point sent, Clock::time_point now,
                                    bool anew) {
    seen(written, now);
    // Answered after the last confirmation stopped vouching: another node may have seen
    // this node's Lease lapse in between, so what was held before is not vouched for.
    if (run(now) == 0 || anew) {
        ++run_;
        restartOthersClocks(now);
    }
    trustedUntil_ = std::max(trustedUntil_.value_or(sent), sent + trust_);
}

void LeaseTable::restartOthersClocks(Clock::time_point now) {
    for (auto* known : {&slots_, &nodes_}) {
        for (auto& [name, seen] : *known) {
            if (seen.lease.holder != node_) seen.changed = std::max(seen.changed, now);
        }
    }
}

void LeaseTable::slotConfirmed(const Lease& written, std::uint64_t runAtSend, Clock::time_point now) {
    seen(written, now);
    if (runAtSend != 0 && runAtSend == run(now) && written.holder == node_)
        slotRun_[written.name] = runAtSend;
    else
        slotRun_.erase(written.name);
}

bool LeaseTable::trusted(const std::string& name, Clock::time_point now) const {
    auto it = slotRun_.find(name);
    return it != slotRun_.end() && it->second == run(now);
}

LeaseTable::Clock::time_point LeaseTable::lapsesAt(const Seen& seen) {
    return seen.changed + std::chrono::seconds(std::max(seen.lease.durationSeconds, kLeastDurationSeconds));
}

LeaseTable::Clock::time_point LeaseTable::slotLapsesAt(const Seen& slot) const {
    auto at = lapsesAt(slot);
    if (slot.vanished) return at;
    auto holder = nodes_.find(nodeLeaseName(slot.lease.holder));
    // A node Lease naming another holder is not this holder's heartbeat.
    if (holder != nodes_.end() && holder->second.lease.holder == slot.lease.holder)
        at = std::max(at, lapsesAt(holder->second));
    return at;
}

LeaseTable::Decision LeaseTable::decide(const std::string& name, Clock::time_point now) const {
    auto it = slots_.find(name);
    if (it == slots_.end()) return {Decision::Kind::Create, {}, {}, {}};
    const Seen& seen = it->second;
    if (seen.vanished) {
        if (now < lapsesAt(seen))
            return {Decision::Kind::HeldElsewhere,
                    seen.lease,
                    std::chrono::duration_cast<std::chrono::milliseconds>(lapsesAt(seen) - now),
                    {}};
        return {Decision::Kind::Create, {}, {}, {}};
    }
    if (seen.lease.holder == node_)
        return {trusted(name, now) ? Decision::Kind::Ours : Decision::Kind::Confirm, seen.lease, {}, {}};
    if (seen.lease.holder.empty()) return {Decision::Kind::TakeOver, seen.lease, {}, {}};
    const auto lapses = slotLapsesAt(seen);
    if (now < lapses)
        return {Decision::Kind::HeldElsewhere,
                seen.lease,
                std::chrono::duration_cast<std::chrono::milliseconds>(lapses - now),
                {}};
    Decision decision{Decision::Kind::TakeOver, seen.lease, {}, {}};
    if (auto holder = nodes_.find(nodeLeaseName(seen.lease.holder)); holder != nodes_.end())
        decision.holderLease = holder->second.lease;
    return decision;
}

bool LeaseTable::renewedSince(const std::optional<Lease>& seenBefore, const Lease& now) const {
    return !seenBefore || renewal(*seenBefore, now);
}

std::map<std::string, std::string> LeaseTable::heldElsewhere(Clock::time_point now) const {
    std::map<std::string, std::string> result;
    for (const auto& [name, seen] : slots_) {
        if (!seen.lease.holder.empty() && seen.lease.holder != node_ && now < slotLapsesAt(seen))
            result.emplace(name, seen.lease.holder);
    }
    return result;
}

std::vector<Lease> LeaseTable::ours() const {
    std::vector<Lease> result;
    for (const auto& [name, seen] : slots_) {
        if (seen.lease.holder == node_) result.push_back(seen.lease);
    }
    return result;
}

std::optional<LeaseTable::Clock::time_point> LeaseTable::nextLapse(Clock::time_point now) const {
    std::optional<Clock::time_point> next;
    for (const auto& [name, seen] : slots_) {
        if (seen.lease.holder.empty() || seen.lease.holder == node_) continue;
        const auto at = slotLapsesAt(seen);
        if (at <= now) continue;
        if (!next || at < *next) next = at;
    }
    return next;
}

bool LeaseTable::nodeLeaseLapsed(const std::string& name, Clock::time_point now) const {
    auto it = nodes_.find(name);
    return it == nodes_.end() || now >= lapsesAt(it->second);
}

const Lease* LeaseTable::find(const std::string& name) const {
    if (auto it = slots_.find(name); it != slots_.end()) return &it->second.lease;
    if (auto it = nodes_.find(name); it != nodes_.end()) return &it->second.lease;
    return nullptr;
}

}  // namespace devlet::kube
