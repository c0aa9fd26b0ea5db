#pragma once
// The onvif probe's cameras of one configuration and every rule about them: which
// WS-Discovery answers are read (per-sender rate limit, retransmissions, answers to our own
// Probes and Resolves), which are believed (the sender rule, one uuid one camera, a camera
// that moves, the cap), when a camera is queried or checked again, and which instances,
// problems and scan reports the sink gets. It holds no socket, thread or timer: the probe
// (onvif_handler.cpp) feeds it events with the time they happen and carries out the
// effects each event returns. Owned by one probe, on its loop thread.

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "probes/onvif/camera_status.h"
#include "probes/onvif/credentials.h"
#include "probes/onvif/onvif_client.h"
#include "probes/onvif/onvif_details.h"
#include "probes/onvif/sender_rate_limit.h"
#include "probes/onvif/soap_wire.h"
#include "runtime/discovery.h"

namespace devlet::onvif {

// A call the probe makes to a camera on a worker; its result comes back through
// OnvifCameras::callReturned with the same value.
struct CameraCall {
    enum class Purpose {
        Query,     // the full query (queryCamera)
        Liveness,  // the periodic liveness check (checkCamera)
        Claims,    // a liveness check at the known address on behalf of hosts claiming its uuid
    };
    Purpose purpose = Purpose::Query;
    std::string camera;  // the camera's key: the service URL it is known at, "-", its uuid
    std::string url;     // the device service URL to call
    // For a query: the credential for the host called, within its scope, or why it is
    // withheld; and the scheme that worked before.
    std::optional<Credential> credential;
    std::string credentialWithheld;
    AuthScheme authScheme = AuthScheme::Unknown;
};

// A Resolve to send to the sender of the datagram being handled (port 3702): it announced
// an endpoint without XAddrs. The probe says whether it went out (resolveSent,
// resolveNotSent).
struct ResolveRequest {
    std::string sender;           // the datagram's source address
    std::string endpointAddress;  // EndpointReference/Address to resolve
    std::string uuid;
};

// What the sink is to be told, in the order the reports are made.
struct OfferedSnapshot {
    std::vector<Instance> instances;
};
struct ProbeProblem {
    std::string message;  // empty: recovered
};
using SinkReport = std::variant<OfferedSnapshot, ProbeProblem, ScanReport>;

// What an event asks the probe to do.
struct CameraEffects {
    std::vector<CameraCall> calls;
    std::vector<ResolveRequest> resolves;
    // The datagram's sender was over its share: ask it again with a unicast Probe once it has
    // refilled (what it said was not read, and may have been a camera's Hello).
    bool probeSenderAgain = false;
    std::vector<SinkReport> reports;
};

// Remembers the last N message ids: WS-Discovery repeats every message over UDP.
class RecentIds {
public:
    explicit RecentIds(std::size_t capacity) : capacity_(capacity) {}
    // False when the id was seen already.
    bool insert(const std::string& id);
    bool contains(const std::string& id) const { return set_.count(id) != 0; }

private:
    std::size_t capacity_;
    std::set<std::string> set_;
    std::deque<std::string> order_;
};

class OnvifCameras {
public:
    using TimePoint = std::chrono::steady_clock::time_point;

    // `pass`: one pass of `devlet probe onvif`, which keeps the first of two hosts naming
    // one uuid (it makes no liveness call), lists retransmissions and logs less.
    OnvifCameras(std::string configuration, OnvifDetails details, bool pass);

    // --- Events -------------------------------------------------------------------------

    // The credentials to use from now on, and why the configured ones could not be read.
    void setCredentials(CredentialStore credentials, std::string problem);
    // A Probe went out with this MessageID: ProbeMatches relating to it are answers.
    void probeSent(const std::string& messageId);
    // A discovery cycle begins: ignored answers not seen in the last two are forgotten.
    void cycleStarted(TimePoint now);
    // A datagram arrived from `sender` (its address as text, IPv4-mapped as IPv4), on the
    // Probe socket (`answers`: ProbeMatches, ResolveMatches) or on the listener (Hello, Bye).
    CameraEffects datagram(std::string_view bytes, const std::string& sender, bool answers, TimePoint now);
    CameraEffects resolveSent(const ResolveRequest& request, const std::string& messageId, TimePoint now);
    CameraEffects resolveNotSent(const ResolveRequest& request, const std::string& why, TimePoint now);
    // A call returned with what the camera answered.
    CameraEffects callReturned(const CameraCall& call, CameraReport result, TimePoint now);
    // The window after the last Probe of a cycle closed: its answers make a snapshot.
    CameraEffects windowClosed(TimePoint now);
    // Time for the liveness checks: cameras gone for good are forgotten, the others called.
    CameraEffects livenessDue(TimePoint now);
    // Discovery cannot work (no socket): a probe error until the probe is made anew.
    CameraEffects networkFailed(const std::string& message, TimePoint now);

    // --- What it knows ------------------------------------------------------------------

    // The first window has closed: snapshots are made from now on.
    bool firstWindowDone() const { return firstWindowDone_; }
    bool callsInFlight() const;
    // Every camera heard of, as of now: queried ones, and those a discovery filter excluded.
    std::vector<CameraStatus> statuses() const;
    const std::vector<IgnoredAnswer>& ignoredAnswers() const { return ignoredAnswers_; }
    std::uint64_t ignoredUnlisted() const { return ignoredOverflow_; }
    const std::vector<std::string>& notCameras() const { return notCameras_; }
    const std::string& credentialsProblem() const { return credentialsProblem_; }
    const std::string& networkProblem() const { return networkProblem_; }
    // "camera cap of 1024 reached; N answers ignored", or empty.
    std::string capProblem() const;

private:
    // Another host's announcement of a known camera's uuid, held while the camera is asked at
    // the address it was found at: the camera has moved there only if it no longer answers.
    struct MoveClaim {
        std::string how;     // "Hello", "ProbeMatches", …
        std::string sender;  // the claiming datagram's source address
        std::string url;     // its XAddr at that address
        std::vector<std::string> xaddrs;
        std::vector<std::string> scopes;
        unsigned metadataVersion = 0;
    };

    struct Camera {
        CameraObservation observation;
        std::string sender;  // the address whose datagram made it known
        // Claims being checked (or to be, once the call in flight returns), one per sender.
        std::vector<MoveClaim> claims;
        // Senders whose claim was refused because the camera still answered, and when.
        std::map<std::string, TimePoint> refusedClaims;
        unsigned metadataVersion = 0;
        bool queried = false;                                // a full query has found the camera up
        bool answered = false;                               // a full query has returned, whatever it found
        bool busy = false;                                   // a call is in flight
        int missed = 0;                                      // liveness checks failed in a row
        bool left = false;                                   // said Bye
        CameraState lastCheck = CameraState::UpWithoutAuth;  // of the latest failed check
        std::string lastCheckError;
    };

    void handleDatagram(std::string_view bytes, const std::string& from, bool answers, TimePoint now);
    bool ignore(IgnoredAnswer answer, TimePoint now);
    void found(const DiscoveredEndpoint& endpoint, const std::string& how, const std::string& from,
               TimePoint now);
    void claim(const std::string& key, MoveClaim claim, TimePoint now);
    void checkClaims(const std::string& key);
    void claimsChecked(const std::string& key, const CameraReport& result, TimePoint now);
    void move(const std::string& key, MoveClaim claim, const std::string& why);
    void checkWaitingClaims(const std::string& key);
    bool knownAt(const std::string& uuid, const std::vector<std::string>& urls) const;
    void requestResolve(const DiscoveredEndpoint& endpoint, const std::string& from, TimePoint now);
    void resolved(const DiscoveryMessage& message, const std::string& from, TimePoint now);
    void bye(const DiscoveredEndpoint& endpoint, const std::string& from, TimePoint now);
    void query(const std::string& key, std::optional<std::string> at = std::nullopt);
    void queried(const std::string& key, const std::string& url, CameraReport result, TimePoint now);
    void checked(const std::string& key, const CameraReport& result, TimePoint now);
    bool gone(const Camera& camera) const;
    std::vector<std::string> refusedCameras() const;
    void report(TimePoint now, bool cycleEnd = false);
    void reportScan(TimePoint now, bool cycleEnd);
    void reportProblem(const std::vector<std::string>& refused);
    CameraStatus statusOf(const Camera& camera) const;
    void refreshStatuses();
    CameraEffects take();

    std::string configuration_;
    OnvifDetails details_;
    bool pass_;
    CredentialStore credentials_;
    std::string credentialsProblem_;
    std::string networkProblem_;
    std::string reportedProblem_;
    std::map<std::string, Camera> cameras_;  // by key: service URL + "-" + uuid (the instance id)
    // Cameras a discovery filter excluded, by instance id; at most kMaxCameras.
    std::map<std::string, CameraStatus> excluded_;
    // Each camera's state as of the last snapshot: what the status server is to show.
    std::vector<CameraStatus> statuses_;
    ScanReport scanned_;  // what reportScan() told the sink last
    TimePoint cycleStart_{};
    std::vector<std::string> notCameras_;  // endpoint addresses of responders that are no camera
    std::optional<std::vector<Instance>> reported_;
    RecentIds sentIds_;
    RecentIds seenIds_;  // "<sender> <MessageID>"
    SenderRateLimit rateLimit_;
    std::vector<IgnoredAnswer> ignoredAnswers_;  // at most kMaxIgnoredAnswers
    std::vector<std::uint64_t> ignoredCycle_;    // the cycle each was last seen in
    std::uint64_t cycles_ = 0;                   // discovery cycles started
    std::uint64_t ignoredOverflow_ = 0;          // ignored answers past that
    std::uint64_t capIgnored_ = 0;               // answers ignored because of kMaxCameras
    struct PendingResolve {
        std::string sender;
        std::string uuid;
        TimePoint sent;
    };
    std::map<std::string, PendingResolve> resolves_;  // by the Resolve's MessageID
    std::deque<std::string> resolveOrder_;
    bool firstWindowDone_ = false;
    CameraEffects effects_;  // of the event being handled
};

}  // namespace devlet::onvif
