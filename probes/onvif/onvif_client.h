#pragma once
// The device and media service calls devlet makes to one camera, over HTTP with gSOAP:
// blocking, so they run on the probe's worker threads, never on the event loop. Each call
// has a deadline and gSOAP's limits for untrusted input. Credentials are used here and
// nowhere else: they are not logged and not copied into what the call returns.

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "probes/onvif/onvif_classifier.h"

namespace devlet::onvif {

struct Credential {
    std::string username;
    std::string password;
};

struct QueryOptions {
    std::chrono::milliseconds timeout{2000};  // per call: connect, send and receive
    std::size_t maxAnswerBytes = 1 << 20;
    std::size_t maxProfiles = 16;
    // Checked between calls: set when devlet stops, so a worker does not finish a long query.
    const std::atomic<bool>* cancelled = nullptr;
    // Whole HTTP answers played back in place of the camera's, one per call in order (the
    // requests go nowhere; past the last one a call finds no connection). This is how the
    // parsing of what cameras say is fuzzed without a network; the daemon leaves it unset.
    const std::vector<std::string>* playback = nullptr;
    // What worked with this camera before (the previous report's authScheme): sent first.
    AuthScheme authScheme = AuthScheme::Unknown;
    // Why no credential is given although one exists (outside its scope): for the report.
    std::string credentialWithheld;
};

// GetSystemDateAndTime only: the liveness check. Fills state, clockOffset and error.
CameraReport checkCamera(const std::string& serviceUrl, const QueryOptions& options);

// The full enrichment: GetSystemDateAndTime, GetCapabilities (or GetServices),
// GetDeviceInformation, GetNetworkInterfaces, GetProfiles and GetStreamUri per profile
// (Media1, or Media2 when the camera has no Media1 service), authenticated with a
// UsernameToken stamped with the camera's clock when a credential is given. Every call
// goes to the host of `serviceUrl`: media addresses on other hosts are rewritten to it.
CameraReport queryCamera(const std::string& serviceUrl, const std::optional<Credential>& credential,
                         const QueryOptions& options);

// An RTSP (or HTTP) URI without user information and with the values of password
// parameters in its path and query left out ("…/user=admin_password=_channel=1…"); empty
// when it is not a usable URI.
std::string withoutCredentials(const std::string& uri);

// One network interface's IPv4 configuration as GetNetworkInterfaces lists it
// (tt:IPv4Configuration), text as the camera wrote it.
struct Ipv4Configuration {
    std::vector<std::string> manual = {};
    std::string linkLocal = {};
    std::string fromDhcp = {};
    std::optional<std::string> dhcp = {};  // xs:boolean; nullopt when left out
};

// The address the interface uses: FromDHCP (then LinkLocal) when DHCP is on, Manual (then
// LinkLocal) when it is off, and the first of Manual, FromDHCP, LinkLocal when the camera
// does not say. Empty when none is an IPv4 address other than 0.0.0.0.
std::string ipv4AddressInUse(const Ipv4Configuration& config);

}  // namespace devlet::onvif
