#pragma once
// A histogram of durations with fixed bucket bounds, the shape Prometheus scrapes
// (cumulative counts per upper bound, a sum and a count). A value type the inventory
// fills on the loop thread and the status server copies out; no locks.

#include <array>
#include <chrono>
#include <cstdint>

namespace devlet {

class DurationHistogram {
public:
    // Upper bounds in seconds: from 100 µs (a device change reaching the plugins) to a
    // minute (a camera scan that waits for slow answers).
    static constexpr std::array<double, 18> kBoundsSeconds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                              0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                                              1,      2.5,     5,      10,    30,     60};

    void observe(std::chrono::nanoseconds duration) {
        const double seconds = std::chrono::duration<double>(duration).count();
        for (std::size_t i = 0; i < kBoundsSeconds.size(); ++i) {
            if (seconds <= kBoundsSeconds[i]) ++buckets_[i];
        }
        ++count_;
        sumSeconds_ += seconds < 0 ? 0 : seconds;
    }

    // Observations at or below kBoundsSeconds[i] (cumulative, as Prometheus' `le`).
    std::uint64_t cumulative(std::size_t i) const { return buckets_[i]; }
    std::uint64_t count() const { return count_; }
    double sumSeconds() const { return sumSeconds_; }

    bool operator==(const DurationHistogram&) const = default;

private:
    std::array<std::uint64_t, kBoundsSeconds.size()> buckets_{};
    std::uint64_t count_ = 0;
    double sumSeconds_ = 0;
};

}  // namespace devlet
