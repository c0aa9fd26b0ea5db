#pragma once
// What devlet can tell a user about each camera it has heard of: EdgeX's device state, what
// the camera said about itself, and whether it is offered or why not (the filter that
// excluded it, refused credentials, a Bye, missed liveness checks). Plain values built from
// the probe's observations; pure, any thread. The onvif probe keeps one per camera for the
// status server; `devlet probe onvif` prints them.

#include <cstdint>
#include <string>
#include <vector>

#include "probes/onvif/onvif_classifier.h"
#include "probes/onvif/onvif_details.h"

namespace devlet::onvif {

// EdgeX's DeviceStatus, best first, plus what a user must act on (credentials the camera
// refuses) and what devlet has not asked yet.
enum class DeviceStatus {
    UpWithAuth,            // an authenticated call worked
    UpWithoutAuth,         // GetSystemDateAndTime answers; no credentials for it
    AuthenticationFailed,  // GetSystemDateAndTime answers; the credentials were refused
    Reachable,             // the service URL takes connections but does not answer SOAP
    Unreachable,           // no connection
    Querying,              // the first query has not returned yet
    NotQueried,            // a discovery filter excluded it: devlet sends it nothing
};

// EdgeX's names ("UpWithAuth", …, plus "AuthenticationFailed", "Querying", "NotQueried").
const char* statusKey(DeviceStatus status);
// For people: "up with authentication", …, "authentication failed", "not queried".
const char* describe(DeviceStatus status);
// The state a query's report shows.
DeviceStatus deviceStatus(const CameraReport& report);

struct CameraStatus {
    std::string uuid;
    std::string serviceUrl;
    DeviceStatus status = DeviceStatus::NotQueried;
    bool offered = false;
    std::string reason;      // why it is not offered: the filter (by its key), the state, a Bye
    std::string instanceId;  // Akri's id, <service URL>-<uuid>, offered or not (kept when it moves)
    std::string movedFrom;   // the service URL it answered at before it moved; empty when it did not
    std::vector<std::string> scopes;
    std::string manufacturer, model, firmware, serial;
    std::string ipAddress, macAddress;
    std::vector<StreamProfile> streams;             // URIs without user information
    std::string mediaUrl;                           // where profiles and stream URIs were asked for
    bool media2 = false;                            // through the Media2 (ver20) service
    std::vector<std::string> rewrittenServices;     // as CameraReport has them
    std::vector<std::string> streamHostsElsewhere;  // as CameraReport has them
    std::string error;                              // the call that failed last, for people (never a secret)
    bool operator==(const CameraStatus&) const = default;
};

// A WS-Discovery answer the probe read (or refused to read) and did not use, for people:
// who sent it, what it announced, and why it was not used. Answers alike in sender, uuid
// and reason are one entry with a count.
struct IgnoredAnswer {
    std::string sender;               // the datagram's source address
    std::string message;              // "ProbeMatches", "Hello", …; empty when it could not be read
    std::string uuid;                 // the endpoint it announced, when one was read
    std::vector<std::string> xaddrs;  // the service URLs it announced
    std::string reason;               // "not a camera", "XAddrs not at the sender's address", …
    std::uint64_t count = 1;
    bool operator==(const IgnoredAnswer&) const = default;
};

// "answer from 192.0.2.9 (uuid 3fa1…)": how the status page names an ignored answer.
std::string ignoredAnswerName(const IgnoredAnswer& answer);

// How far the probe has got with a camera it queries.
struct CameraProgress {
    bool answered = false;  // a full query has returned (whatever it found)
    bool left = false;      // the camera said Bye
    bool gone = false;      // it missed the configured number of liveness checks in a row
    CameraState lastCheck = CameraState::UpWithoutAuth;  // the failed check's state, when gone
    std::string lastCheckError;
};

// A camera the probe queries (or is querying), judged by the configuration's filters.
CameraStatus queriedCameraStatus(const OnvifDetails& details, const CameraObservation& camera,
                                 const CameraProgress& progress);

// A camera a discovery filter (uuids, scopes) excluded before any call.
CameraStatus excludedCameraStatus(const std::string& uuid, const std::string& serviceUrl,
                                  const std::vector<std::string>& scopes, const std::string& reason);

// What a user should know about the camera's addresses, one sentence each: a move to a new
// address, service addresses rewritten to the contacted host, stream URIs that name another
// host. Empty for most cameras.
std::vector<std::string> addressNotes(const CameraStatus& status);

// Stable order for printing and comparing: by uuid, then service URL.
void sortStatuses(std::vector<CameraStatus>& statuses);

}  // namespace devlet::onvif
