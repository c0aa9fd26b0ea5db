#pragma once
// What devlet knows about a camera (plain values read from WS-Discovery and the device and
// media services) and the pure decisions made on it: is a responder a camera, does a
// configuration's filter keep it, which instance does it become. No I/O; any thread.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "probes/onvif/onvif_details.h"
#include "runtime/instance.h"

namespace devlet::onvif {

// One WS-Discovery endpoint as a ProbeMatch or Hello describes it.
struct DiscoveredEndpoint {
    std::string address;              // EndpointReference/Address, e.g. urn:uuid:…
    std::vector<std::string> types;   // "{namespace}LocalName"
    std::vector<std::string> scopes;  // whitespace-separated Scopes
    std::vector<std::string> xaddrs;  // device service URLs
    unsigned metadataVersion = 0;
    bool operator==(const DiscoveredEndpoint&) const = default;
};

// EdgeX's states, best first.
enum class CameraState {
    UpWithAuth,     // an authenticated call worked
    UpWithoutAuth,  // GetSystemDateAndTime answers; credentials missing or refused
    Reachable,      // the service URL takes TCP connections but does not answer SOAP
    Unreachable,
};
const char* describe(CameraState state);

enum class AuthResult { NotTried, NoCredentials, Accepted, Refused };

// How a camera takes credentials, once a call with them worked: a WS-Security UsernameToken,
// HTTP Digest, or both in one request. Remembered so that later queries send what works.
enum class AuthScheme { Unknown, UsernameToken, HttpDigest, Both };

struct StreamProfile {
    std::string token;
    std::string name;
    std::string encoding;
    int width = 0;
    int height = 0;
    std::string uri;  // RTSP URI, without credentials
    bool operator==(const StreamProfile&) const = default;
};

// What the device and media services said about one device service URL.
struct CameraReport {
    CameraState state = CameraState::Unreachable;
    AuthResult auth = AuthResult::NotTried;
    AuthScheme authScheme = AuthScheme::Unknown;
    std::string error;                         // why a call failed, for people
    std::chrono::milliseconds clockOffset{0};  // camera clock - local clock
    std::string manufacturer, model, firmware, serial, hardwareId;
    std::string ipAddress;   // from GetNetworkInterfaces
    std::string macAddress;  // from GetNetworkInterfaces, lower case, colons
    std::string mediaUrl;
    bool media2 = false;  // profiles and stream URIs came from the Media2 (ver20) service
    std::vector<StreamProfile> profiles;
    // Service addresses the camera named on another host than the one contacted (a camera
    // behind NAT or port forwarding names its inside address), called at the contacted
    // host instead: "media: 192.168.1.64 -> 203.0.113.5:8080".
    std::vector<std::string> rewrittenServices;
    // Hosts that stream URIs name other than the contacted one, each once. The URIs are
    // kept as the camera said them: the RTSP port may be forwarded elsewhere or not at all.
    std::vector<std::string> streamHostsElsewhere;
    bool operator==(const CameraReport&) const = default;
};

// One device service URL of one endpoint: Akri's unit of discovery.
struct CameraObservation {
    std::string uuid;        // endpoint address without urn: and uuid:, lower case
    std::string serviceUrl;  // one XAddr
    std::vector<std::string> scopes;
    CameraReport report;
    // The instance id the camera was first offered under, kept when it moves to another
    // address (its DHCP lease changed): the held slots stay with it. Empty: not moved.
    std::string firstInstanceId;
    std::string movedFrom;  // the service URL it answered at before it moved, for people
};

inline constexpr const char* kOnvifNetworkNamespace = "http://www.onvif.org/ver10/network/wsdl";
inline constexpr const char* kOnvifDeviceNamespace = "http://www.onvif.org/ver10/device/wsdl";

// A NetworkVideoTransmitter (or an ONVIF device service); hosts that answer as
// wsdp:Device (Windows, Samba's wsdd) are not cameras.
bool isCamera(const std::vector<std::string>& types);

// Akri's uuid: the endpoint address without "urn:" and "uuid:", lower case.
std::string endpointUuid(const std::string& address);

// An http(s) URL with a host, short enough, without spaces, control characters or '@'.
bool isUsableServiceUrl(const std::string& url);

// The host part of a URL ("192.0.2.7" for http://192.0.2.7:8080/onvif/device_service).
std::string urlHost(const std::string& url);

// The authority of a URL without user information ("192.0.2.7:8080", "[fe80::1]", "cam.local").
std::string urlAuthority(const std::string& url);

// The URL to call a service the camera named at: `reported` itself when it is on the
// contacted device service's host; otherwise the contacted URL's scheme, host and port with
// the reported path, so that credentials go only to the host devlet chose to contact.
std::string atContactedHost(const std::string& reported, const std::string& contacted);

// Akri's execute_filter on one value: nullopt = kept, else why it was dropped, naming the
// filter by its discoveryDetails key. `value` empty = unknown (a lookup failed).
std::optional<std::string> filterOut(const std::optional<FilterList>& filter, const std::string& key,
                                     const std::string& what, const std::vector<std::string>& values);

// The filters that need only WS-Discovery (uuids, scopes): why the endpoint is dropped.
std::optional<std::string> discoveryFilterOut(const OnvifDetails& details, const std::string& uuid,
                                              const std::vector<std::string>& scopes);

// All filters and the offer rule: why the camera is not offered, or nullopt.
std::optional<std::string> cameraFilterOut(const OnvifDetails& details, const CameraObservation& camera);

// Akri's instance id, <service URL>-<uuid>, or the one the camera had before it moved.
std::string cameraInstanceId(const CameraObservation& camera);

// The instance a camera becomes: Akri's id and properties, plus devlet's.
Instance cameraInstance(const CameraObservation& camera);

// Instances for every camera the filters keep, in a stable order.
std::vector<Instance> classifyOnvif(const std::vector<CameraObservation>& cameras,
                                    const OnvifDetails& details);

}  // namespace devlet::onvif
