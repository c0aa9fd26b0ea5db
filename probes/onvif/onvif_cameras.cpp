#include "probes/onvif/onvif_cameras.h"

#include <algorithm>
#include <utility>

#include <arpa/inet.h>

#include "probes/onvif/onvif_classifier.h"
#include "runtime/log.h"

namespace devlet::onvif {

namespace {
constexpr Log log{"onvif"};
constexpr std::size_t kMaxCameras = 1024;
constexpr std::size_t kRememberedMessages = 2048;
constexpr std::size_t kRememberedProbes = 64;
constexpr int kForgetAfterMisses = 60;  // an unreachable camera no probe finds is dropped
// Distinct ignored answers kept for people (by sender, uuid and reason); more are counted.
constexpr std::size_t kMaxIgnoredAnswers = 256;
// Resolves sent and not yet answered: the oldest is forgotten past this.
constexpr std::size_t kMaxPendingResolves = 256;
// A camera that has not answered a Resolve is asked again on its next announcement after this.
constexpr std::chrono::seconds kResolveAgainAfter{10};
// A host that claims a known camera's uuid while the camera still answers at its address is
// not listened to again for this long: each claim costs a call to the camera.
constexpr std::chrono::seconds kClaimCheckedAgainAfter{10};
// Hosts claiming one camera's uuid at once, and hosts refused, remembered per camera.
constexpr std::size_t kMaxClaims = 8;
constexpr const char* kDuplicate = "duplicate (a retransmission: same sender and MessageID)";

// Whether the URL's host is an IPv4 address inside one of the ranges.
bool urlHostInRanges(const std::string& url, const std::vector<Ipv4Range>& ranges) {
    in_addr parsed{};
    if (inet_pton(AF_INET, urlHost(url).c_str(), &parsed) != 1) return false;
    const std::uint32_t value = ntohl(parsed.s_addr);
    return std::any_of(ranges.begin(), ranges.end(),
                       [&](const Ipv4Range& r) { return value >= r.first && value <= r.last; });
}

// A camera's key in cameras_ and excluded_: its instance id.
std::string cameraKey(const std::string& url, const std::string& uuid) {
    return url + "-" + uuid;
}

std::string uuidOf(const DiscoveryMessage& message) {
    return message.endpoints.empty() ? "" : endpointUuid(message.endpoints.front().address);
}

bool isIpv6(const std::string& address) {
    return address.find(':') != std::string::npos;
}

bool isUp(const CameraReport& result) {
    return result.state == CameraState::UpWithAuth || result.state == CameraState::UpWithoutAuth;
}

std::string joined(const std::vector<std::string>& items) {
    std::string text;
    for (const std::string& item : items) text += (text.empty() ? "" : " ") + item;
    return text.empty() ? "none" : text;
}

std::string clashReason(const std::string& sender) {
    return "uuid already announced by " + sender + ", which still answers";
}

}  // namespace

bool RecentIds::insert(const std::string& id) {
    if (id.empty()) return true;
    if (!set_.insert(id).second) return false;
    order_.push_back(id);
    if (order_.size() > capacity_) {
        set_.erase(order_.front());
        order_.pop_front();
    }
    return true;
}

OnvifCameras::OnvifCameras(std::string configuration, OnvifDetails details, bool pass)
    : configuration_(std::move(configuration)),
      details_(std::move(details)),
      pass_(pass),
      sentIds_(kRememberedProbes),
      seenIds_(kRememberedMessages) {}

CameraEffects OnvifCameras::take() {
    return std::exchange(effects_, CameraEffects{});
}

void OnvifCameras::setCredentials(CredentialStore credentials, std::string problem) {
    credentials_ = std::move(credentials);
    credentialsProblem_ = std::move(problem);
}

void OnvifCameras::probeSent(const std::string& messageId) {
    sentIds_.insert(messageId);
}

void OnvifCameras::cycleStarted(TimePoint now) {
    ++cycles_;
    cycleStart_ = now;
    if (pass_) return;
    // Ignored answers not seen in the last two cycles are forgotten: a spoofer that left
    // drops off the status page.
    std::size_t kept = 0;
    for (std::size_t i = 0; i < ignoredAnswers_.size(); ++i) {
        if (ignoredCycle_[i] + 1 < cycles_) continue;
        ignoredAnswers_[kept] = std::move(ignoredAnswers_[i]);
        ignoredCycle_[kept] = ignoredCycle_[i];
        ++kept;
    }
    ignoredAnswers_.resize(kept);
    ignoredCycle_.resize(kept);
}

CameraEffects OnvifCameras::datagram(std::string_view bytes, const std::string& sender, bool answers,
                                     TimePoint now) {
    handleDatagram(bytes, sender, answers, now);
    return take();
}

void OnvifCameras::handleDatagram(std::string_view bytes, const std::string& from, bool answers,
                                  TimePoint now) {
    if (!rateLimit_.admit(from, now)) {
        ignore({from,
                "",
                "",
                {},
                "rate-limited (more than " + std::to_string(int(rateLimit_.burst())) +
                    " datagrams at once, " + std::to_string(int(rateLimit_.perSecond())) + " a second)"},
               now);
        effects_.probeSenderAgain = true;
        return;
    }
    std::string error;
    std::optional<DiscoveryMessage> message = decodeDiscovery(bytes, error);
    if (!message) {
        ignore({from, "", "", {}, error}, now);
        return;
    }
    const std::string kind = describe(message->kind);
    // A retransmission repeats the MessageID from the same sender. Two cameras of one
    // firmware can send the same MessageID: it identifies a message only with its sender.
    if (!message->messageId.empty() && !seenIds_.insert(from + " " + message->messageId)) {
        ignore({from, kind, uuidOf(*message), {}, kDuplicate}, now);
        return;
    }
    if (message->droppedEndpoints > 0)
        ignore({from,
                kind,
                "",
                {},
                std::to_string(message->droppedEndpoints) + " of its matches unread (past " +
                    std::to_string(kMaxEndpointsPerMessage) + ", or without an address)"},
               now);
    if (answers) {
        if (message->kind == DiscoveryKind::ProbeMatches) {
            if (!sentIds_.contains(message->relatesTo)) {
                ignore({from, kind, uuidOf(*message), {}, "answers no Probe of ours"}, now);
                return;
            }
            for (const DiscoveredEndpoint& endpoint : message->endpoints) found(endpoint, kind, from, now);
        } else if (message->kind == DiscoveryKind::ResolveMatches) {
            resolved(*message, from, now);
        } else if (message->kind != DiscoveryKind::Probe && message->kind != DiscoveryKind::Resolve) {
            ignore({from, kind, uuidOf(*message), {}, "not an answer to a Probe or Resolve"}, now);
        }
    } else if (message->kind == DiscoveryKind::Hello) {
        for (const DiscoveredEndpoint& endpoint : message->endpoints) found(endpoint, kind, from, now);
    } else if (message->kind == DiscoveryKind::Bye) {
        for (const DiscoveredEndpoint& endpoint : message->endpoints) bye(endpoint, from, now);
    }
    // Probes and Resolves of other clients on the group are normal traffic: not reported.
}

// Remembers an answer that was not used, for `devlet probe onvif` and the status page;
// true when it is a new entry. The daemon keeps what was seen in this cycle and the last
// (a spoofer that left drops off the status page) and only counts retransmissions, which
// every camera sends and the status page does not show.
bool OnvifCameras::ignore(IgnoredAnswer answer, TimePoint now) {
    for (std::size_t i = 0; i < ignoredAnswers_.size(); ++i) {
        IgnoredAnswer& known = ignoredAnswers_[i];
        if (known.sender == answer.sender && known.uuid == answer.uuid && known.reason == answer.reason) {
            ++known.count;
            ignoredCycle_[i] = cycles_;
            return false;
        }
    }
    if (!pass_ && answer.reason == kDuplicate) return false;
    if (ignoredAnswers_.size() >= kMaxIgnoredAnswers) {
        ++ignoredOverflow_;
        return false;
    }
    log.debug() << configuration_ << ": ignored " << ignoredAnswerName(answer) << ": " << answer.reason;
    ignoredAnswers_.push_back(std::move(answer));
    ignoredCycle_.push_back(cycles_);
    if (firstWindowDone_) reportScan(now, false);
    return true;
}

// A ProbeMatch, ResolveMatch or Hello from `from`: a camera to query, or an answer to
// report. A camera is queried only at the address that sent the datagram (or inside
// unicastTargets): anyone on the segment can answer a Probe or say Hello, and a device
// service URL elsewhere would make devlet call, and send credentials to, a host the
// announcer chose.
void OnvifCameras::found(const DiscoveredEndpoint& endpoint, const std::string& how, const std::string& from,
                         TimePoint now) {
    const std::string uuid = endpointUuid(endpoint.address);
    IgnoredAnswer answer{from, how, uuid, endpoint.xaddrs, ""};
    if (uuid.empty()) {
        answer.reason = "no endpoint uuid";
        ignore(std::move(answer), now);
        return;
    }
    if (!isCamera(endpoint.types)) {
        if (std::find(notCameras_.begin(), notCameras_.end(), endpoint.address) == notCameras_.end() &&
            notCameras_.size() < 64)
            notCameras_.push_back(endpoint.address);
        answer.reason = "not a camera (Types: " + joined(endpoint.types) + ")";
        ignore(std::move(answer), now);
        return;
    }
    if (auto why = discoveryFilterOut(details_, uuid, endpoint.scopes)) {
        // Remembered for the status page; never queried: a filtered camera gets no credentials.
        for (const std::string& url : endpoint.xaddrs) {
            const std::string key = cameraKey(url, uuid);
            if (excluded_.size() >= kMaxCameras && !excluded_.count(key)) break;
            excluded_[key] = excludedCameraStatus(uuid, url, endpoint.scopes, *why);
        }
        answer.reason = "filtered: " + *why;
        ignore(std::move(answer), now);
        return;
    }
    if (endpoint.xaddrs.empty()) {
        // WS-Discovery's answer to an announcement without service URLs: ask the sender.
        requestResolve(endpoint, from, now);
        return;
    }
    std::string url;
    for (const std::string& candidate : endpoint.xaddrs) {
        if (urlHostIs(candidate, from)) {
            url = candidate;
            break;
        }
    }
    if (url.empty()) {
        for (const std::string& candidate : endpoint.xaddrs) {
            if (urlHostInRanges(candidate, details_.unicastTargets)) {
                url = candidate;
                break;
            }
        }
    }
    if (url.empty() && knownAt(uuid, endpoint.xaddrs)) {
        // A camera found already, answering from its other address (a dual-stack camera
        // answers the IPv6 Probe from its link-local address and names its IPv4 URL):
        // nothing new, and nothing is done with it.
        return;
    }
    if (url.empty()) {
        answer.reason = "XAddrs not at the sender's address";
        const std::string urls = joined(endpoint.xaddrs);
        if (ignore(std::move(answer), now) && !pass_)
            log.warning() << configuration_ << ": " << how << " from " << from << " names camera " << uuid
                          << " at " << urls << ", not at its own address: not queried";
        return;
    }
    const std::string key = cameraKey(url, uuid);
    // One endpoint uuid is one camera: the same uuid from another address of the same
    // family is the camera at a new address, or a second host claiming it. The daemon
    // asks the camera where it was found (claim()); a pass keeps the first.
    if (!cameras_.count(key)) {
        for (auto& [knownKey, camera] : cameras_) {
            if (camera.observation.uuid != uuid || camera.sender == from) continue;
            if (isIpv6(camera.sender) != isIpv6(from)) continue;
            if (pass_) {
                if (gone(camera)) continue;
                answer.reason = "uuid already announced by " + camera.sender;
                ignore(std::move(answer), now);
                return;
            }
            claim(knownKey,
                  MoveClaim{how, from, url, endpoint.xaddrs, endpoint.scopes, endpoint.metadataVersion}, now);
            return;
        }
    }
    auto it = cameras_.find(key);
    if (it == cameras_.end()) {
        if (cameras_.size() >= kMaxCameras) {
            if (capIgnored_++ == 0)
                log.warning() << configuration_ << ": camera cap of " << kMaxCameras
                              << " reached; further cameras are ignored";
            answer.reason = "camera cap of " + std::to_string(kMaxCameras) + " reached";
            ignore(std::move(answer), now);
            reportProblem(refusedCameras());
            return;
        }
        Camera camera;
        camera.observation.uuid = uuid;
        camera.observation.serviceUrl = url;
        camera.observation.scopes = endpoint.scopes;
        camera.sender = from;
        camera.metadataVersion = endpoint.metadataVersion;
        it = cameras_.emplace(key, std::move(camera)).first;
        log.debug() << configuration_ << ": " << how << " from camera " << uuid << " at " << url;
        query(key);
        return;
    }
    Camera& camera = it->second;
    camera.observation.scopes = endpoint.scopes;
    camera.sender = from;
    const bool wasGone = gone(camera);
    // A new MetadataVersion says the camera's description changed (profiles, addresses).
    const bool changed = endpoint.metadataVersion != camera.metadataVersion;
    if (changed && !wasGone)
        log.info() << configuration_ << ": camera " << uuid << " announced metadata version "
                   << endpoint.metadataVersion << " (was " << camera.metadataVersion << "); queried again";
    camera.metadataVersion = endpoint.metadataVersion;
    camera.left = false;
    if ((wasGone || changed) && !camera.busy) {
        camera.missed = 0;
        query(key);
    }
}

// A Bye, or missed liveness checks: not offered, though remembered.
bool OnvifCameras::gone(const Camera& camera) const {
    return camera.left || camera.missed >= details_.missedChecks;
}

// A sender claims the uuid of the camera at `key`. A camera whose address changed (a new
// DHCP lease) says Hello from its new one, and no longer answers at the old: then it is
// the same camera, and keeps its instance. While it still answers where it was found,
// the claimant is a second host using its uuid and is not listened to.
void OnvifCameras::claim(const std::string& key, MoveClaim claim, TimePoint now) {
    Camera& camera = cameras_.at(key);
    std::erase_if(camera.refusedClaims,
                  [&](const auto& refused) { return now - refused.second >= kClaimCheckedAgainAfter; });
    if (camera.refusedClaims.count(claim.sender) || camera.refusedClaims.size() >= kMaxClaims) {
        ignore({claim.sender, claim.how, camera.observation.uuid, claim.xaddrs, clashReason(camera.sender)},
               now);
        return;
    }
    auto same = std::find_if(camera.claims.begin(), camera.claims.end(),
                             [&](const MoveClaim& c) { return c.sender == claim.sender; });
    if (same != camera.claims.end()) {
        *same = std::move(claim);  // its latest word, for the move
        return;
    }
    if (camera.claims.size() >= kMaxClaims) {
        ignore({claim.sender, claim.how, camera.observation.uuid, claim.xaddrs,
                "uuid claimed by more than " + std::to_string(kMaxClaims) + " hosts at once"},
               now);
        return;
    }
    log.debug() << configuration_ << ": " << claim.how << " from " << claim.sender << " names camera "
                << camera.observation.uuid << ", known at " << camera.observation.serviceUrl
                << "; asking it there";
    camera.claims.push_back(std::move(claim));
    if (!camera.busy) checkClaims(key);
}

// The liveness call to the camera's known address, on behalf of the claims.
void OnvifCameras::checkClaims(const std::string& key) {
    Camera& camera = cameras_.at(key);
    camera.busy = true;
    CameraCall call;
    call.purpose = CameraCall::Purpose::Claims;
    call.camera = key;
    call.url = camera.observation.serviceUrl;
    effects_.calls.push_back(std::move(call));
}

void OnvifCameras::claimsChecked(const std::string& key, const CameraReport& result, TimePoint now) {
    auto it = cameras_.find(key);
    if (it == cameras_.end()) return;
    Camera& camera = it->second;
    camera.busy = false;
    std::vector<MoveClaim> claims = std::move(camera.claims);
    camera.claims.clear();
    if (claims.empty()) return;
    const std::string& uuid = camera.observation.uuid;
    if (isUp(result)) {
        const bool wasGone = gone(camera);
        camera.missed = 0;
        camera.left = false;
        camera.observation.report.clockOffset = result.clockOffset;
        for (const MoveClaim& claim : claims) {
            camera.refusedClaims[claim.sender] = now;
            if (ignore({claim.sender, claim.how, uuid, claim.xaddrs, clashReason(camera.sender)}, now))
                log.warning() << configuration_ << ": " << claim.how << " from " << claim.sender
                              << " claims camera " << uuid << ", which still answers at "
                              << camera.observation.serviceUrl << ": ignored";
        }
        if (wasGone) query(key);  // back where it was: read it again
        return;
    }
    if (claims.size() > 1) {
        // The camera is gone from its address and several hosts say they are it: none
        // is believed. A camera that moved alone says Hello again or answers the next Probe.
        std::string senders;
        for (const MoveClaim& claim : claims) senders += (senders.empty() ? "" : ", ") + claim.sender;
        for (const MoveClaim& claim : claims)
            ignore({claim.sender, claim.how, uuid, claim.xaddrs,
                    "uuid claimed by several hosts at once (" + senders +
                        ") while the camera does not "
                        "answer at " +
                        camera.observation.serviceUrl + "; none is taken for it"},
                   now);
        log.warning() << configuration_ << ": camera " << uuid << " does not answer at "
                      << camera.observation.serviceUrl << " and " << senders << " claim its uuid: not moved";
        return;
    }
    move(key, std::move(claims.front()), result.error);
}

// Re-keys the camera to the claimant's service URL and queries it there. The instance
// keeps its id (and so its name, its slots and the pods holding them); its properties
// change once the query at the new address returns (queried()).
void OnvifCameras::move(const std::string& key, MoveClaim claim, const std::string& why) {
    auto node = cameras_.extract(key);
    Camera& camera = node.mapped();
    const std::string uuid = camera.observation.uuid;
    const std::string newKey = cameraKey(claim.url, uuid);
    if (cameras_.count(newKey)) {
        // Found at the new address on its own meanwhile: that one stands.
        cameras_.insert(std::move(node));
        return;
    }
    camera.observation.firstInstanceId = cameraInstanceId(camera.observation);
    camera.observation.scopes = claim.scopes;
    camera.sender = claim.sender;
    camera.metadataVersion = claim.metadataVersion;
    camera.left = false;
    camera.missed = 0;
    camera.refusedClaims.clear();
    log.info() << configuration_ << ": camera " << uuid << " moved from " << camera.observation.serviceUrl
               << " to " << claim.url << " (" << claim.how << " from " << claim.sender
               << "; no answer at the old address: " << why << "); instance "
               << camera.observation.firstInstanceId << " kept";
    node.key() = newKey;
    cameras_.insert(std::move(node));
    query(newKey, claim.url);
}

// A call on the camera returned: claims that waited for it are checked now.
void OnvifCameras::checkWaitingClaims(const std::string& key) {
    auto it = cameras_.find(key);
    if (it != cameras_.end() && !it->second.claims.empty() && !it->second.busy) checkClaims(key);
}

// Whether a camera with this uuid was found at one of these service URLs.
bool OnvifCameras::knownAt(const std::string& uuid, const std::vector<std::string>& urls) const {
    for (const std::string& url : urls)
        if (cameras_.count(cameraKey(url, uuid))) return true;
    return false;
}

// A Resolve for the endpoint, unicast to the host that announced it, unless one went there
// a moment ago (or is about to, for this datagram).
void OnvifCameras::requestResolve(const DiscoveredEndpoint& endpoint, const std::string& from,
                                  TimePoint now) {
    const std::string uuid = endpointUuid(endpoint.address);
    for (const auto& [id, pending] : resolves_)
        if (pending.sender == from && pending.uuid == uuid && now - pending.sent < kResolveAgainAfter) return;
    for (const ResolveRequest& request : effects_.resolves)
        if (request.sender == from && request.uuid == uuid) return;
    effects_.resolves.push_back({from, endpoint.address, uuid});
}

CameraEffects OnvifCameras::resolveSent(const ResolveRequest& request, const std::string& messageId,
                                        TimePoint now) {
    if (resolveOrder_.size() >= kMaxPendingResolves) {
        resolves_.erase(resolveOrder_.front());
        resolveOrder_.pop_front();
    }
    resolves_[messageId] = PendingResolve{request.sender, request.uuid, now};
    resolveOrder_.push_back(messageId);
    log.debug() << configuration_ << ": camera " << request.uuid << " at " << request.sender
                << " named no XAddrs; sent a Resolve";
    return take();
}

CameraEffects OnvifCameras::resolveNotSent(const ResolveRequest& request, const std::string& why,
                                           TimePoint now) {
    ignore({request.sender, "", request.uuid, {}, why}, now);
    return take();
}

// ResolveMatches count only from the host the Resolve went to, for the endpoint it asked.
void OnvifCameras::resolved(const DiscoveryMessage& message, const std::string& from, TimePoint now) {
    auto it = resolves_.find(message.relatesTo);
    if (it == resolves_.end() || it->second.sender != from) {
        ignore({from, "ResolveMatches", uuidOf(message), {}, "answers no Resolve of ours to this address"},
               now);
        return;
    }
    const std::string uuid = it->second.uuid;
    resolves_.erase(it);
    std::erase(resolveOrder_, message.relatesTo);
    for (const DiscoveredEndpoint& endpoint : message.endpoints) {
        if (endpointUuid(endpoint.address) != uuid) {
            ignore({from, "ResolveMatches", endpointUuid(endpoint.address), endpoint.xaddrs,
                    "resolves an endpoint that was not asked for"},
                   now);
            continue;
        }
        if (endpoint.xaddrs.empty()) {
            ignore({from, "ResolveMatches", uuid, {}, "no XAddrs in the ResolveMatch either"}, now);
            continue;
        }
        found(endpoint, "ResolveMatches", from, now);
    }
}

// A Bye counts only from the address the camera was found at: anyone can send one.
void OnvifCameras::bye(const DiscoveredEndpoint& endpoint, const std::string& from, TimePoint now) {
    const std::string uuid = endpointUuid(endpoint.address);
    std::erase_if(excluded_, [&](const auto& entry) { return entry.second.uuid == uuid; });
    bool changed = false;
    bool elsewhere = false;
    for (auto& [key, camera] : cameras_) {
        if (camera.observation.uuid != uuid || camera.left) continue;
        if (camera.sender != from && !urlHostIs(camera.observation.serviceUrl, from)) {
            elsewhere = true;
            continue;
        }
        camera.left = true;
        changed = true;
    }
    if (elsewhere && !changed)
        ignore({from, "Bye", uuid, {}, "Bye for a camera found at another address"}, now);
    if (changed) {
        log.info() << configuration_ << ": camera " << uuid << " said Bye";
        report(now);
    }
}

// The full query, at the camera's service URL or, for a camera that moved, at its new one,
// with the credential for the host it contacts, within its scope.
void OnvifCameras::query(const std::string& key, std::optional<std::string> at) {
    Camera& camera = cameras_.at(key);
    camera.busy = true;
    CameraCall call;
    call.purpose = CameraCall::Purpose::Query;
    call.camera = key;
    call.url = at ? *at : camera.observation.serviceUrl;
    CredentialChoice choice =
        credentials_.find(camera.observation.uuid, urlHost(call.url), camera.observation.report.macAddress);
    call.credential = std::move(choice.credential);
    call.credentialWithheld = std::move(choice.withheld);
    call.authScheme = camera.observation.report.authScheme;
    effects_.calls.push_back(std::move(call));
}

CameraEffects OnvifCameras::callReturned(const CameraCall& call, CameraReport result, TimePoint now) {
    switch (call.purpose) {
        case CameraCall::Purpose::Query:
            queried(call.camera, call.url, std::move(result), now);
            checkWaitingClaims(call.camera);
            break;
        case CameraCall::Purpose::Liveness:
            checked(call.camera, result, now);
            checkWaitingClaims(call.camera);
            break;
        case CameraCall::Purpose::Claims:
            claimsChecked(call.camera, result, now);
            break;
    }
    return take();
}

void OnvifCameras::queried(const std::string& key, const std::string& url, CameraReport result,
                           TimePoint now) {
    auto it = cameras_.find(key);
    if (it == cameras_.end()) return;
    Camera& camera = it->second;
    camera.busy = false;
    camera.answered = true;
    if (url != camera.observation.serviceUrl) {
        // The first query after a move: the camera is known at its new address from now on.
        camera.observation.movedFrom = camera.observation.serviceUrl;
        camera.observation.serviceUrl = url;
    }
    if (!isUp(result)) {
        ++camera.missed;
        camera.lastCheck = result.state;
        camera.lastCheckError = result.error;
        log.debug() << configuration_ << ": camera " << camera.observation.uuid << " at "
                    << camera.observation.serviceUrl << " is " << describe(result.state) << ": "
                    << result.error;
        if (!camera.queried) camera.observation.report = result;
        report(now);
        return;
    }
    if (result.auth == AuthResult::Refused && !pass_)
        log.warning() << configuration_ << ": camera " << camera.observation.uuid << " at "
                      << camera.observation.serviceUrl << ": authentication failed";
    camera.missed = 0;
    camera.queried = true;
    camera.observation.report = std::move(result);
    report(now);
}

CameraEffects OnvifCameras::livenessDue(TimePoint) {
    std::erase_if(cameras_, [&](const auto& entry) {
        return !entry.second.busy && (entry.second.left || entry.second.missed >= kForgetAfterMisses);
    });
    for (auto& [key, camera] : cameras_) {
        if (camera.busy) continue;
        // A camera never fully queried, or back after missing, gets the full query.
        if (!camera.queried || camera.missed > 0) {
            query(key);
            continue;
        }
        camera.busy = true;
        CameraCall call;
        call.purpose = CameraCall::Purpose::Liveness;
        call.camera = key;
        call.url = camera.observation.serviceUrl;
        effects_.calls.push_back(std::move(call));
    }
    return take();
}

void OnvifCameras::checked(const std::string& key, const CameraReport& result, TimePoint now) {
    auto it = cameras_.find(key);
    if (it == cameras_.end()) return;
    Camera& camera = it->second;
    camera.busy = false;
    if (isUp(result)) {
        camera.missed = 0;
        camera.observation.report.clockOffset = result.clockOffset;
        return;
    }
    ++camera.missed;
    camera.lastCheck = result.state;
    camera.lastCheckError = result.error;
    if (camera.missed == details_.missedChecks) {
        log.info() << configuration_ << ": camera " << camera.observation.uuid << " at "
                   << camera.observation.serviceUrl << " stopped answering (" << result.error << ")";
        report(now);
    }
}

CameraEffects OnvifCameras::windowClosed(TimePoint now) {
    firstWindowDone_ = true;
    report(now, true);
    return take();
}

CameraEffects OnvifCameras::networkFailed(const std::string& message, TimePoint) {
    networkProblem_ = message;
    reportProblem({});
    return take();
}

bool OnvifCameras::callsInFlight() const {
    return std::any_of(cameras_.begin(), cameras_.end(), [](const auto& c) { return c.second.busy; });
}

std::vector<std::string> OnvifCameras::refusedCameras() const {
    std::vector<std::string> refused;
    for (const auto& [key, camera] : cameras_) {
        if (!camera.queried || gone(camera)) continue;
        if (camera.observation.report.auth == AuthResult::Refused) refused.push_back(camera.observation.uuid);
    }
    return refused;
}

// cycleEnd: a discovery cycle's answer window just closed, the end of a pass.
void OnvifCameras::report(TimePoint now, bool cycleEnd) {
    if (!firstWindowDone_) return;
    std::vector<CameraObservation> present;
    for (const auto& [key, camera] : cameras_) {
        if (!camera.queried || gone(camera)) continue;
        present.push_back(camera.observation);
    }
    reportProblem(refusedCameras());
    refreshStatuses();
    std::vector<Instance> instances = classifyOnvif(present, details_);
    if (!reported_ || !(*reported_ == instances)) {
        if (!reported_ || reported_->size() != instances.size())
            log.info() << configuration_ << ": " << instances.size() << " camera"
                       << (instances.size() == 1 ? "" : "s") << " offered";
        reported_ = instances;
        effects_.reports.emplace_back(OfferedSnapshot{std::move(instances)});
    }
    reportScan(now, cycleEnd);
}

// The status page's view of the cameras: the state of those offered, and why the others
// are not. Sent at the end of every cycle, and between cycles when it changed.
void OnvifCameras::reportScan(TimePoint now, bool cycleEnd) {
    ScanReport scan;
    for (const CameraStatus& camera : statuses_) {
        if (camera.offered) {
            scan.deviceStates[camera.instanceId] = describe(camera.status);
            if (std::vector<std::string> notes = addressNotes(camera); !notes.empty())
                scan.deviceNotes[camera.instanceId] = std::move(notes);
        } else if (camera.status != DeviceStatus::Querying) {
            scan.excluded.push_back(
                {camera.instanceId.empty() ? camera.uuid : camera.instanceId, camera.reason, 1});
        }
    }
    // Answers not used, but for retransmissions: every camera repeats itself.
    for (const IgnoredAnswer& answer : ignoredAnswers_)
        if (answer.reason != kDuplicate)
            scan.excluded.push_back({ignoredAnswerName(answer), answer.reason, 1});
    if (!cycleEnd && scan.excluded == scanned_.excluded && scan.deviceStates == scanned_.deviceStates &&
        scan.deviceNotes == scanned_.deviceNotes)
        return;
    scan.duration = now - cycleStart_;
    scanned_ = scan;
    effects_.reports.emplace_back(std::move(scan));
}

CameraStatus OnvifCameras::statusOf(const Camera& camera) const {
    CameraProgress progress;
    progress.answered = camera.answered;
    progress.left = camera.left;
    progress.gone = camera.queried && camera.missed >= details_.missedChecks;
    progress.lastCheck = camera.lastCheck;
    progress.lastCheckError = camera.lastCheckError;
    return queriedCameraStatus(details_, camera.observation, progress);
}

std::vector<CameraStatus> OnvifCameras::statuses() const {
    std::vector<CameraStatus> all;
    all.reserve(cameras_.size() + excluded_.size());
    for (const auto& [key, camera] : cameras_) all.push_back(statusOf(camera));
    for (const auto& [key, status] : excluded_) all.push_back(status);
    sortStatuses(all);
    return all;
}

// The one place each camera's state is kept for the status server (statuses_): a
// change of a camera's state or offer is also a log line a user can follow.
void OnvifCameras::refreshStatuses() {
    std::vector<CameraStatus> now = statuses();
    if (!pass_) {
        std::map<std::string, const CameraStatus*> before;
        for (const CameraStatus& s : statuses_) before[s.instanceId] = &s;
        for (const CameraStatus& s : now) {
            auto it = before.find(s.instanceId);
            if (s.status == DeviceStatus::Querying) continue;
            if (it != before.end() && it->second->status == s.status && it->second->offered == s.offered)
                continue;
            log.info() << configuration_ << ": camera " << s.uuid << " at " << s.serviceUrl << ": "
                       << describe(s.status)
                       << (s.offered ? std::string(", offered") : ", not offered: " + s.reason);
        }
    }
    statuses_ = std::move(now);
}

// The status page shows probe errors: an unusable credentials file and cameras that
// refuse their credentials ("authentication failed") are what a user must fix.
void OnvifCameras::reportProblem(const std::vector<std::string>& refused) {
    std::string problem = networkProblem_;
    if (!credentialsProblem_.empty()) problem += (problem.empty() ? "" : "; ") + credentialsProblem_;
    if (capIgnored_ > 0) problem += (problem.empty() ? "" : "; ") + capProblem();
    if (!refused.empty()) {
        if (!problem.empty()) problem += "; ";
        problem += "authentication failed for " + std::to_string(refused.size()) + " camera" +
                   (refused.size() == 1 ? "" : "s") + ":";
        for (std::size_t i = 0; i < refused.size() && i < 5; ++i) problem += " " + refused[i];
        if (refused.size() > 5) problem += " …";
    }
    if (problem == reportedProblem_) return;
    reportedProblem_ = problem;
    effects_.reports.emplace_back(ProbeProblem{problem});
}

// The cap keeps one host from making the node register cameras without end; reaching it
// is a configuration problem a user must see (a narrower configuration, or a filter).
std::string OnvifCameras::capProblem() const {
    if (capIgnored_ == 0) return "";
    return "camera cap of " + std::to_string(kMaxCameras) + " reached; " + std::to_string(capIgnored_) +
           " answer" + (capIgnored_ == 1 ? "" : "s") + " ignored";
}

}  // namespace devlet::onvif
