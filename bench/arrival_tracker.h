#pragma once
// Waits for ListAndWatch messages that show a wanted device state, as the kubelet simulator
// receives them. The simulator calls observe() on its gRPC threads; the benchmark thread
// calls expect() and wait(). A map lookup per message, so tracking 1,001 resources takes
// the machine under test no CPU time worth measuring.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "deviceplugin/v1beta1/api.pb.h"

namespace devlet::bench {

// What one resource's device list should show.
struct WantedState {
    std::size_t devices = 0;
    std::size_t healthy = 0;
    bool operator==(const WantedState&) const = default;
};

class ArrivalTracker {
public:
    using Clock = std::chrono::steady_clock;

    // Waits for every resource in `wanted` to show its wanted state in a message received
    // at or after `since` (the latest message already received counts). Replaces an
    // earlier expectation.
    void expect(std::map<std::string, WantedState> wanted, Clock::time_point since);
    // When the last wanted message arrived, once every resource showed its state;
    // nullopt on timeout.
    std::optional<Clock::time_point> wait(std::chrono::milliseconds timeout);
    // Resources not yet seen in their wanted state.
    std::size_t missing() const;

    // Called by the simulator for every ListAndWatch message.
    void observe(const std::string& resource, const v1beta1::ListAndWatchResponse& response,
                 Clock::time_point receivedAt);

private:
    struct Seen {
        WantedState state;
        Clock::time_point at;
    };

    // Guards everything below; taken on gRPC threads and the benchmark thread.
    mutable std::mutex mutex_;
    std::condition_variable done_;
    std::map<std::string, Seen> latest_;         // every resource's latest message
    std::map<std::string, WantedState> wanted_;  // only those not yet seen in their state
    Clock::time_point since_{};
    Clock::time_point last_{};  // the latest wanted arrival so far
};

}  // namespace devlet::bench
