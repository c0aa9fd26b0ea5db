#pragma once
// One capacity slot of an instance and who holds it: the one model of a slot. The slot
// ledger decides it, the store keeps it, the status page and `devlet instances` show it.

#include <cstdint>
#include <string>
#include <system_error>

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

// Why a request for slots was refused; the message says it for a person.
enum class Refusal {
    NotOffered,          // devlet does not offer the resource
    EmptyRequest,        // no container, or a container without device ids
    NotPartOf,           // a device id that is not a slot of the resource
    DeviceGone,          // the slot's device is no longer seen
    AboveCapacity,       // the slot is above its configuration's capacity
    TwiceInRequest,      // one slot asked for two containers of the request
    HeldThroughOther,    // held through the other resource (never twice)
    NotDistinct,         // two slots of one device where distinct devices are required
    ClusterUnavailable,  // cluster mode cannot tell who holds shared slots now
    HeldElsewhere,       // another node holds the slot
    ClusterRefused,      // the cluster did not agree (its answer in the message)
    NotRecorded,         // the store refused the hold: refused rather than given unrecorded
    Failed,              // the decision failed (out of memory)
};
const char* refusalName(Refusal refusal);
const std::error_category& refusalCategory();
inline std::error_code make_error_code(Refusal r) {
    return {static_cast<int>(r) + 1, refusalCategory()};
}

}  // namespace devlet

template <>
struct std::is_error_code_enum<devlet::Refusal> : std::true_type {};
