#include "probes/onvif/camera_status.h"

#include <algorithm>
#include <iterator>
#include <tuple>

namespace devlet::onvif {

const char* statusKey(DeviceStatus status) {
    switch (status) {
        case DeviceStatus::UpWithAuth:
            return "UpWithAuth";
        case DeviceStatus::UpWithoutAuth:
            return "UpWithoutAuth";
        case DeviceStatus::AuthenticationFailed:
            return "AuthenticationFailed";
        case DeviceStatus::Reachable:
            return "Reachable";
        case DeviceStatus::Unreachable:
            return "Unreachable";
        case DeviceStatus::Querying:
            return "Querying";
        case DeviceStatus::NotQueried:
            return "NotQueried";
    }
    return "Unknown";
}

const char* describe(DeviceStatus status) {
    switch (status) {
        case DeviceStatus::UpWithAuth:
            return "up with authentication";
        case DeviceStatus::UpWithoutAuth:
            return "up without authentication";
        case DeviceStatus::AuthenticationFailed:
            return "authentication failed";
        case DeviceStatus::Reachable:
            return "reachable";
        case DeviceStatus::Unreachable:
            return "unreachable";
        case DeviceStatus::Querying:
            return "being queried";
        case DeviceStatus::NotQueried:
            return "not queried";
    }
    return "unknown";
}

DeviceStatus deviceStatus(const CameraReport& report) {
    switch (report.state) {
        case CameraState::UpWithAuth:
            return DeviceStatus::UpWithAuth;
        case CameraState::UpWithoutAuth:
            return report.auth == AuthResult::Refused ? DeviceStatus::AuthenticationFailed
                                                      : DeviceStatus::UpWithoutAuth;
        case CameraState::Reachable:
            return DeviceStatus::Reachable;
        case CameraState::Unreachable:
            return DeviceStatus::Unreachable;
    }
    return DeviceStatus::Unreachable;
}

CameraStatus queriedCameraStatus(const OnvifDetails& details, const CameraObservation& camera,
                                 const CameraProgress& progress) {
    CameraStatus status;
    status.uuid = camera.uuid;
    status.serviceUrl = camera.serviceUrl;
    status.instanceId = cameraInstanceId(camera);
    status.movedFrom = camera.movedFrom;
    status.scopes = camera.scopes;
    if (!progress.answered) {
        status.status = DeviceStatus::Querying;
        status.reason = "its first query has not returned yet";
        return status;
    }
    const CameraReport& r = camera.report;
    status.status = deviceStatus(r);
    status.manufacturer = r.manufacturer;
    status.model = r.model;
    status.firmware = r.firmware;
    status.serial = r.serial;
    status.ipAddress = r.ipAddress;
    status.macAddress = r.macAddress;
    std::copy_if(r.profiles.begin(), r.profiles.end(), std::back_inserter(status.streams),
                 [](const StreamProfile& p) { return !p.uri.empty(); });
    status.error = r.error;
    status.mediaUrl = r.mediaUrl;
    status.media2 = r.media2;
    status.rewrittenServices = r.rewrittenServices;
    status.streamHostsElsewhere = r.streamHostsElsewhere;
    if (progress.gone) {
        CameraReport check;
        check.state = progress.lastCheck;
        status.status = deviceStatus(check);
        status.error = progress.lastCheckError;
        status.reason = "it missed " + std::to_string(details.missedChecks) + " liveness check" +
                        (details.missedChecks == 1 ? "" : "s") + " in a row";
    } else if (progress.left) {
        status.reason = "it said Bye";
    } else if (auto why = cameraFilterOut(details, camera)) {
        status.reason = *why;
    }
    status.offered = status.reason.empty();
    return status;
}

CameraStatus excludedCameraStatus(const std::string& uuid, const std::string& serviceUrl,
                                  const std::vector<std::string>& scopes, const std::string& reason) {
    CameraStatus status;
    status.uuid = uuid;
    status.serviceUrl = serviceUrl;
    status.instanceId = serviceUrl + "-" + uuid;
    status.scopes = scopes;
    status.status = DeviceStatus::NotQueried;
    status.reason = reason;
    return status;
}

std::vector<std::string> addressNotes(const CameraStatus& status) {
    std::vector<std::string> notes;
    if (!status.movedFrom.empty())
        notes.push_back("moved from " + status.movedFrom + " to " + status.serviceUrl +
                        " (no longer answering there); the instance keeps its name");
    for (const std::string& rewrite : status.rewrittenServices)
        notes.push_back("service address rewritten to the contacted host: " + rewrite);
    for (const std::string& host : status.streamHostsElsewhere)
        notes.push_back("stream URIs name " + host + ", not the contacted host " +
                        urlHost(status.serviceUrl) + "; kept as the camera said them");
    return notes;
}

void sortStatuses(std::vector<CameraStatus>& statuses) {
    std::sort(statuses.begin(), statuses.end(), [](const CameraStatus& a, const CameraStatus& b) {
        return std::tie(a.uuid, a.serviceUrl) < std::tie(b.uuid, b.serviceUrl);
    });
}

std::string ignoredAnswerName(const IgnoredAnswer& answer) {
    std::string name =
        (answer.message.empty() ? std::string("datagram") : answer.message) + " from " + answer.sender;
    if (!answer.uuid.empty()) name += " (uuid " + answer.uuid + ")";
    return name;
}

}  // namespace devlet::onvif
