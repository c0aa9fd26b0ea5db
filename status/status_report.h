#pragma once
// Turns a StatusSnapshot into what people and programs read: the JSON of /api/v1/...,
// the one-line summary, readiness, and the explanation of anything not offered. Pure
// functions of their arguments; secrets are removed here, on the way out.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "status/status_source.h"

namespace devlet::status {

// Whether a property name looks like it carries a credential (PASSWORD, TOKEN, ...).
bool looksLikeSecret(std::string_view name);
// The value with any "user:password@" of a URL removed.
std::string withoutUserInfo(std::string_view value);

// "healthy" (present and offered), "unhealthy" (gone, still offered within its grace
// period: its slots are Unhealthy) or "withdrawn" (gone; kept while pods hold slots).
std::string instanceHealth(const InstanceStatus& instance);
// Why the instance is not (fully) offered now; empty when it is.
std::string instanceReason(const StatusSnapshot& snapshot, const ConfigurationStatus& configuration,
                           const InstanceStatus& instance);
// Why nothing, or less than expected, is offered for the configuration; empty if all is well.
std::vector<std::string> configurationProblems(const StatusSnapshot& snapshot,
                                               const ConfigurationStatus& configuration);

// "3 cameras, 2 usb devices; 5 of 12 slots in use; kubelet connected"
std::string summaryLine(const StatusSnapshot& snapshot);
std::string kubeletStateName(KubeletStatus::State state);

struct Readiness {
    bool ready = false;
    std::vector<std::string> reasons;  // why not; empty when ready
};
// Ready: the first discovery pass is done, and every plugin is registered with the
// kubelet, or no kubelet is there and everything else is healthy.
Readiness readiness(const StatusSnapshot& snapshot);

// RFC 3339 in UTC with milliseconds; "" for 0.
std::string isoTime(std::int64_t ms);

// The JSON documents of the API (serialized, compact). `what` is the path below /api/v1/
// ("status", "daemon", "configurations", "instances", "slots", "probes", "events"); an
// unknown one gives "".
std::string apiJson(std::string_view what, const StatusSnapshot& snapshot,
                    const std::vector<StatusEvent>& events);

}  // namespace devlet::status
