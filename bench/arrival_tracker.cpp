#include "bench/arrival_tracker.h"

#include <algorithm>

namespace devlet::bench {

void ArrivalTracker::expect(std::map<std::string, WantedState> wanted, Clock::time_point since) {
    std::lock_guard lock(mutex_);
    wanted_ = std::move(wanted);
    since_ = since;
    last_ = since;
    std::erase_if(wanted_, [this](const auto& entry) {
        auto seen = latest_.find(entry.first);
        if (seen == latest_.end() || seen->second.at < since_ || !(seen->second.state == entry.second))
            return false;
        last_ = std::max(last_, seen->second.at);
        return true;
    });
}

std::optional<ArrivalTracker::Clock::time_point> ArrivalTracker::wait(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (!done_.wait_for(lock, timeout, [this] { return wanted_.empty(); })) return std::nullopt;
    return last_;
}

std::size_t ArrivalTracker::missing() const {
    std::lock_guard lock(mutex_);
    return wanted_.size();
}

void ArrivalTracker::observe(const std::string& resource, const v1beta1::ListAndWatchResponse& response,
                             Clock::time_point receivedAt) {
    const WantedState state{static_cast<std::size_t>(response.devices_size()),
                            static_cast<std::size_t>(std::count_if(
                                response.devices().begin(), response.devices().end(),
                                [](const v1beta1::Device& device) { return device.health() == "Healthy"; }))};
    std::lock_guard lock(mutex_);
    // Messages of one stream arrive in order, but two registrations of one resource may
    // overlap: the later arrival wins.
    Seen& seen = latest_[resource];
    if (receivedAt < seen.at) return;
    seen = {state, receivedAt};
    auto it = wanted_.find(resource);
    if (it == wanted_.end() || receivedAt < since_ || !(it->second == state)) return;
    last_ = std::max(last_, receivedAt);
    wanted_.erase(it);
    if (wanted_.empty()) done_.notify_all();
}

}  // namespace devlet::bench
