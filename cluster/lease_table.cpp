#include "cluster/lease_table.h"

#include <algorithm>

namespace devlet::kube {

namespace {
// A Lease without a duration would lapse at once; one second is the least the API allows.
constexpr int kLeastDurationSeconds = 1;
}  // namespace

LeaseTable::LeaseTable(std::string node) : node_(std::move(node)) {}

void LeaseTable::seen(const Lease& lease, Clock::time_point now) {
    auto it = seen_.find(lease.name);
    if (it == seen_.end()) {
        seen_.emplace(lease.name, Seen{lease, now});
        return;
    }
    const bool renewed =
        it->second.lease.holder != lease.holder || it->second.lease.renewTime != lease.renewTime;
    it->second.lease = lease;
    if (renewed) it->second.changed = now;
}

void LeaseTable::gone(const std::string& name) {
    seen_.erase(name);
}

void LeaseTable::replaceAll(const std::vector<Lease>& leases, Clock::time_point now) {
    std::map<std::string, Seen> next;
    for (const Lease& lease : leases) {
        auto it = seen_.find(lease.name);
        const bool unchanged = it != seen_.end() && it->second.lease.holder == lease.holder &&
                               it->second.lease.renewTime == lease.renewTime;
        next.emplace(lease.name, Seen{lease, unchanged ? it->second.changed : now});
    }
    seen_ = std::move(next);
}

LeaseTable::Clock::time_point LeaseTable::lapsesAt(const Seen& seen) const {
    return seen.changed + std::chrono::seconds(std::max(seen.lease.durationSeconds, kLeastDurationSeconds));
}

bool LeaseTable::lapsed(const Seen& seen, Clock::time_point now) const {
    return now >= lapsesAt(seen);
}

LeaseTable::Decision LeaseTable::decide(const std::string& name, Clock::time_point now) const {
    auto it = seen_.find(name);
    if (it == seen_.end()) return {Decision::Kind::Create, {}, {}};
    const Seen& seen = it->second;
    if (seen.lease.holder == node_) return {Decision::Kind::Ours, seen.lease, {}};
    if (seen.lease.holder.empty() || lapsed(seen, now)) return {Decision::Kind::TakeOver, seen.lease, {}};
    return {Decision::Kind::HeldElsewhere, seen.lease,
            std::chrono::duration_cast<std::chrono::milliseconds>(lapsesAt(seen) - now)};
}

std::map<std::string, std::string> LeaseTable::heldElsewhere(Clock::time_point now) const {
    std::map<std::string, std::string> result;
    for (const auto& [name, seen] : seen_) {
        if (!seen.lease.holder.empty() && seen.lease.holder != node_ && !lapsed(seen, now))
            result.emplace(name, seen.lease.holder);
    }
    return result;
}

std::vector<Lease> LeaseTable::ours() const {
    std::vector<Lease> result;
    for (const auto& [name, seen] : seen_) {
        if (seen.lease.holder == node_) result.push_back(seen.lease);
    }
    return result;
}

std::optional<LeaseTable::Clock::time_point> LeaseTable::nextLapse(Clock::time_point now) const {
    std::optional<Clock::time_point> next;
    for (const auto& [name, seen] : seen_) {
        if (seen.lease.holder.empty() || seen.lease.holder == node_ || lapsed(seen, now)) continue;
        const auto at = lapsesAt(seen);
        if (!next || at < *next) next = at;
    }
    return next;
}

const Lease* LeaseTable::find(const std::string& name) const {
    auto it = seen_.find(name);
    return it == seen_.end() ? nullptr : &it->second.lease;
}

}  // namespace devlet::kube
