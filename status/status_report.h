#pragma once
// Turns a StatusSnapshot into what people and programs read: the JSON of /api/v1/...,
// the one-line summary, readiness, and the explanation of anything not offered. Pure
// functions of their arguments; secrets are removed here, on the way out.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
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
// The sentence for a device the probe saw but does not offer: "GPU 0000:03:00.0 is not
// offered: SR-IOV physical function with 7 virtual functions enabled", or for a counted
// entry "312 devices are not offered: no rule in udevRules matches them".
std::string excludedText(const std::string& handler, const ExcludedDevice& excluded);
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

// A document as the parts it is put together from, the kept ones shared: they are written
// out one after another, never copied into one string.
using DocumentParts = std::vector<std::shared_ptr<const std::string>>;
std::string joined(const DocumentParts& parts);

// How many recent events /api/v1/status and /api/v1/events carry.
inline constexpr std::size_t kEventsInStatus = 50;
inline constexpr std::size_t kEventsInEvents = 200;

// The API's documents for one snapshot, each serialized when first asked for and then
// kept: the status server answers from these bytes until the source hands out another
// snapshot. Only the daemon's `now` and `uptimeSeconds` are written per answer. A
// thousand instances make a document of half a megabyte that takes milliseconds to
// build and microseconds to send. Loop thread only.
class SnapshotDocuments {
public:
    // The recent events, newest first; asked at most once per kind of document.
    using Events = std::function<std::vector<StatusEvent>(std::size_t limit)>;
    SnapshotDocuments(std::shared_ptr<const StatusSnapshot> snapshot, Events events);

    const std::shared_ptr<const StatusSnapshot>& snapshot() const { return snapshot_; }
    // The body of /api/v1/<what> answered at nowMs (as apiJson); no parts for an unknown one.
    DocumentParts api(std::string_view what, std::int64_t nowMs);

private:
    // The kept text under `key`, made by `make` the first time.
    const std::shared_ptr<const std::string>& kept(const std::string& key,
                                                   const std::function<std::string()>& make);

    std::shared_ptr<const StatusSnapshot> snapshot_;
    Events events_;
    std::map<std::string, std::shared_ptr<const std::string>, std::less<>> kept_;
};

}  // namespace devlet::status
