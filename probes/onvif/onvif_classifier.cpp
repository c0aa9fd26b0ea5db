#include "probes/onvif/onvif_classifier.h"

#include <algorithm>
#include <cctype>

namespace devlet::onvif {

namespace {

std::string lower(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
    return text;
}

bool equalsIgnoringCase(const std::string& a, const std::string& b) {
    return a.size() == b.size() && lower(a) == lower(b);
}

std::string upper(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::toupper(c); });
    return text;
}

}  // namespace

const char* describe(CameraState state) {
    switch (state) {
        case CameraState::UpWithAuth:
            return "up with authentication";
        case CameraState::UpWithoutAuth:
            return "up without authentication";
        case CameraState::Reachable:
            return "reachable";
        case CameraState::Unreachable:
            return "unreachable";
    }
    return "unknown";
}

bool isCamera(const std::vector<std::string>& types) {
    const std::string nvt = std::string("{") + kOnvifNetworkNamespace + "}NetworkVideoTransmitter";
    const std::string device = std::string("{") + kOnvifDeviceNamespace + "}Device";
    return std::any_of(types.begin(), types.end(),
                       [&](const std::string& type) { return type == nvt || type == device; });
}

std::string endpointUuid(const std::string& address) {
    std::string text = address;
    for (const char* prefix : {"urn:", "uuid:"}) {
        if (lower(text.substr(0, std::char_traits<char>::length(prefix))) == prefix)
            text = text.substr(std::char_traits<char>::length(prefix));
    }
    return lower(text);
}

bool isUsableServiceUrl(const std::string& url) {
    if (url.size() > 1024) return false;
    const std::string l = lower(url.substr(0, 8));
    std::size_t hostStart = 0;
    if (l.starts_with("http://")) {
        hostStart = 7;
    } else if (l.starts_with("https://")) {
        hostStart = 8;
    } else {
        return false;
    }
    if (std::any_of(url.begin(), url.end(), [](unsigned char c) { return c <= ' ' || c == 0x7f; }))
        return false;
    // gSOAP takes the host from after the first '@' anywhere in a URL, path and fragment
    // included ("http://192.0.2.7/x@198.51.100.9/" calls 198.51.100.9): a URL with one
    // would be called elsewhere than the host it seems to name.
    if (url.find('@') != std::string::npos) return false;
    return !urlHost(url).empty() && hostStart < url.size();
}

std::string urlHost(const std::string& url) {
    const auto scheme = url.find("://");
    if (scheme == std::string::npos) return "";
    std::string rest = url.substr(scheme + 3);
    rest = rest.substr(0, rest.find_first_of("/?#"));
    if (auto at = rest.rfind('@'); at != std::string::npos) rest = rest.substr(at + 1);
    if (rest.starts_with("[")) {
        const auto close = rest.find(']');
        return close == std::string::npos ? "" : rest.substr(1, close - 1);
    }
    return rest.substr(0, rest.find(':'));
}

std::string urlAuthority(const std::string& url) {
    const auto scheme = url.find("://");
    if (scheme == std::string::npos) return "";
    std::string rest = url.substr(scheme + 3);
    rest = rest.substr(0, rest.find_first_of("/?#"));
    if (auto at = rest.rfind('@'); at != std::string::npos) rest = rest.substr(at + 1);
    return rest;
}

std::string atContactedHost(const std::string& reported, const std::string& contacted) {
    if (lower(urlHost(reported)) == lower(urlHost(contacted))) return reported;
    const auto scheme = contacted.find("://");
    const auto reportedScheme = reported.find("://");
    if (scheme == std::string::npos || reportedScheme == std::string::npos) return contacted;
    const auto path = reported.find_first_of("/?#", reportedScheme + 3);
    return contacted.substr(0, scheme + 3) + urlAuthority(contacted) +
           (path == std::string::npos ? std::string("/") : reported.substr(path));
}

std::optional<std::string> filterOut(const std::optional<FilterList>& filter, const std::string& key,
                                     const std::string& what, const std::vector<std::string>& values) {
    if (!filter) return std::nullopt;
    if (filter->action == FilterAction::Exclude && filter->items.empty()) return std::nullopt;
    const bool known =
        std::any_of(values.begin(), values.end(), [](const std::string& v) { return !v.empty(); });
    if (!known) return what + " unknown, and the " + key + " filter needs it";
    bool matched = false;
    std::string hit;
    for (const std::string& item : filter->items) {
        for (const std::string& value : values) {
            if (!value.empty() && equalsIgnoringCase(item, value)) {
                matched = true;
                hit = value;
            }
        }
    }
    if (filter->action == FilterAction::Include && !matched)
        return what + " " + (values.size() == 1 ? values.front() : std::string("list")) +
               " is not included by the " + key + " filter";
    if (filter->action == FilterAction::Exclude && matched)
        return what + " " + hit + " is excluded by the " + key + " filter";
    return std::nullopt;
}

std::optional<std::string> discoveryFilterOut(const OnvifDetails& details, const std::string& uuid,
                                              const std::vector<std::string>& scopes) {
    if (auto why = filterOut(details.uuids, "uuids", "uuid", {uuid})) return why;
    // Akri compares scopes exactly (not case-insensitively) against any token.
    if (details.scopes) {
        const FilterList& filter = *details.scopes;
        if (!(filter.action == FilterAction::Exclude && filter.items.empty())) {
            auto hit = std::find_if(filter.items.begin(), filter.items.end(), [&](const std::string& item) {
                return std::find(scopes.begin(), scopes.end(), item) != scopes.end();
            });
            if (filter.action == FilterAction::Include && hit == filter.items.end())
                return std::string("no scope is included by the scopes filter");
            if (filter.action == FilterAction::Exclude && hit != filter.items.end())
                return "scope " + *hit + " is excluded by the scopes filter";
        }
    }
    return std::nullopt;
}

std::optional<std::string> cameraFilterOut(const OnvifDetails& details, const CameraObservation& camera) {
    if (auto why = discoveryFilterOut(details, camera.uuid, camera.scopes)) return why;
    const std::string ip =
        camera.report.ipAddress.empty() ? urlHost(camera.serviceUrl) : camera.report.ipAddress;
    if (auto why = filterOut(details.ipAddresses, "ipAddresses", "IP address", {ip})) return why;
    if (auto why = filterOut(details.macAddresses, "macAddresses", "MAC address", {camera.report.macAddress}))
        return why;
    if (camera.report.state == CameraState::Unreachable || camera.report.state == CameraState::Reachable)
        return std::string("the camera does not answer: ") + describe(camera.report.state);
    if (camera.report.auth == AuthResult::Refused && !details.offerUnauthenticated)
        return std::string("authentication failed, and offerUnauthenticated is false");
    return std::nullopt;
}

std::string cameraInstanceId(const CameraObservation& camera) {
    return camera.firstInstanceId.empty() ? camera.serviceUrl + "-" + camera.uuid : camera.firstInstanceId;
}

Instance cameraInstance(const CameraObservation& camera) {
    Instance instance;
    instance.id = cameraInstanceId(camera);
    instance.shared = true;
    auto& p = instance.properties;
    p["ONVIF_DEVICE_SERVICE_URL"] = camera.serviceUrl;
    p["ONVIF_DEVICE_UUID"] = camera.uuid;
    const CameraReport& r = camera.report;
    if (!r.ipAddress.empty()) p["ONVIF_DEVICE_IP_ADDRESS"] = r.ipAddress;
    if (!r.macAddress.empty()) p["ONVIF_DEVICE_MAC_ADDRESS"] = r.macAddress;
    if (!r.manufacturer.empty()) p["ONVIF_DEVICE_MANUFACTURER"] = r.manufacturer;
    if (!r.model.empty()) p["ONVIF_DEVICE_MODEL"] = r.model;
    if (!r.firmware.empty()) p["ONVIF_DEVICE_FIRMWARE_VERSION"] = r.firmware;
    if (!r.serial.empty()) p["ONVIF_DEVICE_SERIAL_NUMBER"] = r.serial;
    if (!r.hardwareId.empty()) p["ONVIF_DEVICE_HARDWARE_ID"] = r.hardwareId;
    std::size_t index = 0;
    for (const StreamProfile& profile : r.profiles) {
        if (profile.uri.empty()) continue;
        // Tokens are free text: the environment name uses the profile's position.
        const std::string prefix = "ONVIF_STREAM_" + std::to_string(index++);
        p[prefix + "_URI"] = profile.uri;
        p[prefix + "_PROFILE"] = profile.token;
        if (profile.width > 0 && profile.height > 0)
            p[prefix + "_RESOLUTION"] = std::to_string(profile.width) + "x" + std::to_string(profile.height);
        if (!profile.encoding.empty()) p[prefix + "_ENCODING"] = upper(profile.encoding);
    }
    if (index > 0) p["ONVIF_STREAM_URI"] = p["ONVIF_STREAM_0_URI"];
    return instance;
}

std::vector<Instance> classifyOnvif(const std::vector<CameraObservation>& cameras,
                                    const OnvifDetails& details) {
    std::vector<Instance> instances;
    for (const CameraObservation& camera : cameras) {
        if (cameraFilterOut(details, camera)) continue;
        instances.push_back(cameraInstance(camera));
    }
    std::sort(instances.begin(), instances.end(),
              [](const Instance& a, const Instance& b) { return a.id < b.id; });
    return instances;
}

}  // namespace devlet::onvif
