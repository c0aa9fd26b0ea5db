#pragma once
// One capacity slot of an instance and who holds it: the one model of a slot. The slot
// ledger decides it, the store keeps it, the status page and `devlet instances` show it.

#include <cstdint>
#include <string>

namespace devlet {

struct Slot {
    std::string deviceId;  // "<instance>-<k>", its device id in both resources
    std::string instance;
    std::string configuration;
    int index = 0;
    std::string holderResource;  // the full resource name that holds it; empty = free
    std::int64_t sinceMs = 0;    // when the holder took it (wall clock, ms since the epoch)
    std::string pod;             // once the kubelet names the pod
    std::string podNamespace;
    bool held() const { return !holderResource.empty(); }
    bool operator==(const Slot&) const = default;
};

}  // namespace devlet
