#pragma once
// The time sources of the inventory and the slot ledger: a steady clock for grace periods
// and the wall clock for what people read. Tests drive them by hand.

#include <chrono>
#include <cstdint>
#include <functional>

namespace devlet {

struct Clock {
    std::function<std::chrono::steady_clock::time_point()> steady;
    std::function<std::int64_t()> wallMs;
    static Clock system() {
        return {[] { return std::chrono::steady_clock::now(); },
                [] {
                    return std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                        .count();
                }};
    }
};

}  // namespace devlet
