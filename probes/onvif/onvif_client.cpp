#include "probes/onvif/onvif_client.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <string_view>

#include <arpa/inet.h>

#include "probes/onvif/http_digest.h"
#include "probes/onvif/soap_wire.h"
#include "probes/onvif/username_token.h"
#include "soapH.h"

namespace devlet::onvif {

namespace {

constexpr const char* kPasswordDigestType =
    "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0#PasswordDigest";
constexpr const char* kBase64Type =
    "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-soap-message-security-1.0#Base64Binary";

struct SoapDeleter {
    void operator()(struct soap* soap) const {
        soap_destroy(soap);
        soap_end(soap);
        soap_free(soap);
    }
};
using SoapPtr = std::unique_ptr<struct soap, SoapDeleter>;

// QueryOptions::playback: every connection a context opens gets the next answer, and
// a call on a kept-alive connection opens a new one, so each call reads one answer.
struct Playback {
    const std::vector<std::string>* answers = nullptr;
    std::size_t next = 0;
    std::string_view unread;  // of the open connection's answer
};

SOAP_SOCKET playbackOpen(struct soap* soap, const char*, const char*, int) {
    auto& playback = *static_cast<Playback*>(soap->user);
    if (playback.next == playback.answers->size()) {
        soap->error = SOAP_TCP_ERROR;
        return SOAP_INVALID_SOCKET;
    }
    playback.unread = (*playback.answers)[playback.next++];
    return 0;  // valid to gSOAP; no call reaches a real socket
}

size_t playbackRead(struct soap* soap, char* into, size_t size) {
    auto& playback = *static_cast<Playback*>(soap->user);
    const std::size_t count = std::min(size, playback.unread.size());
    std::memcpy(into, playback.unread.data(), count);
    playback.unread.remove_prefix(count);
    return count;
}

void usePlayback(struct soap* soap, Playback& playback) {
    soap->user = &playback;
    soap->fopen = playbackOpen;
    soap->frecv = playbackRead;
    soap->fsend = [](struct soap*, const char*, size_t) { return SOAP_OK; };
    soap->fpoll = [](struct soap*) { return SOAP_EOF; };
    soap->fclose = [](struct soap* s) {
        s->socket = SOAP_INVALID_SOCKET;
        return SOAP_OK;
    };
    soap->fclosesocket = [](struct soap*, SOAP_SOCKET) { return SOAP_OK; };
    soap->fshutdownsocket = [](struct soap*, SOAP_SOCKET, int) { return SOAP_OK; };
}

SoapPtr newContext(const QueryOptions& options, Playback& playback) {
    SoapPtr soap(soap_new1(SOAP_C_UTFSTRING | SOAP_IO_KEEPALIVE));
    soap_set_namespaces(soap.get(), namespaces);
    if (options.playback) {
        playback.answers = options.playback;
        usePlayback(soap.get(), playback);
    }
    applyLimits(soap.get(), options.maxAnswerBytes);
    const int usec = -int(std::chrono::duration_cast<std::chrono::microseconds>(options.timeout).count());
    soap->connect_timeout = usec;
    soap->send_timeout = usec;
    soap->recv_timeout = usec;
    soap->transfer_timeout = usec;
    return soap;
}

bool isHttps(const std::string& url) {
    std::string scheme = url.substr(0, 6);
    for (char& c : scheme) c = char(std::tolower(static_cast<unsigned char>(c)));
    return scheme == "https:";
}

// TLS for a context that calls an https URL. Cameras ship self-signed certificates that
// nothing could verify, so the server is not authenticated: TLS keeps what the camera
// says (stream URIs, identity) from eavesdroppers, and the digest keeps the password off
// the wire either way. Returns false when OpenSSL refuses the context.
bool enableTls(struct soap* soap, bool& enabled) {
    if (enabled) return true;
    static std::once_flag initialised;
    std::call_once(initialised, [] { soap_ssl_init(); });
    enabled = soap_ssl_client_context(soap, SOAP_SSL_NO_AUTHENTICATION | SOAP_TLSv1, nullptr, nullptr,
                                      nullptr, nullptr, nullptr) == SOAP_OK;
    return enabled;
}

// No answer at all. A failed TLS handshake is not one: the camera took the connection
// (EdgeX's "reachable").
bool isTransportError(struct soap* soap) {
    return soap->error == SOAP_TCP_ERROR || soap->error == SOAP_UDP_ERROR || soap->error == SOAP_EOF;
}

bool isAuthFault(struct soap* soap) {
    if (soap->error == 401 || soap->error == 403) return true;
    const char* subcode = soap_fault_subcode(soap);
    if (subcode && std::string(subcode).find("NotAuthorized") != std::string::npos) return true;
    const char* reason = *soap_faultstring(soap);
    if (reason) {
        const std::string text = reason;
        if (text.find("uthoriz") != std::string::npos || text.find("uthentic") != std::string::npos ||
            text.find("ender not") != std::string::npos)
            return true;
    }
    return false;
}

// Sets the SOAP header for the next call: a fresh UsernameToken, or none.
void authenticate(struct soap* soap, const std::optional<Credential>& credential,
                  std::chrono::milliseconds clockOffset) {
    soap->header = nullptr;
    if (!credential) return;
    const UsernameToken token = makeUsernameToken(credential->username, credential->password, clockOffset);
    auto* header = soap_new_SOAP_ENV__Header(soap);
    header->wsse__Security = soap_new__wsse__Security(soap);
    auto* ut = soap_new_wsse__UsernameTokenType(soap);
    ut->Username = soap_strdup(soap, token.username.c_str());
    ut->Password = soap_new_wsse__Password(soap);
    ut->Password->__item = soap_strdup(soap, token.passwordDigest.c_str());
    ut->Password->Type = soap_strdup(soap, kPasswordDigestType);
    ut->Nonce = soap_new_wsse__EncodedString(soap);
    ut->Nonce->__item = soap_strdup(soap, token.nonce.c_str());
    ut->Nonce->EncodingType = soap_strdup(soap, kBase64Type);
    ut->wsu__Created = soap_strdup(soap, token.created.c_str());
    header->wsse__Security->UsernameToken = ut;
    soap->header = header;
}

// How one query authenticates its calls: the credential, the camera's clock, the schemes
// known to work with the camera, and HTTP Digest's state for the query's context.
struct Authenticator {
    Authenticator(struct soap* soap, const std::optional<Credential>& credential, AuthScheme scheme)
        : soap(soap), credential(credential), scheme(scheme), digest(soap) {}
    struct soap* soap;
    const std::optional<Credential>& credential;
    AuthScheme scheme;
    std::chrono::milliseconds clockOffset{0};
    HttpDigest digest;
    std::string problem;  // a Digest challenge devlet cannot answer
};

// One call without credentials.
template <typename Call>
int unauthenticated(Authenticator& auth, Call&& call) {
    authenticate(auth.soap, std::nullopt, auth.clockOffset);
    auth.digest.sending(false);
    auth.digest.expectChallenge();
    return call();
}

// One call with the credential, as the camera takes it. Unknown: a UsernameToken; a 401 with
// a Digest challenge is answered with HTTP Digest alone, and where the camera then still
// refuses with a SOAP fault, with both. Once a scheme worked, it is sent first: a camera
// known to want Digest is sent no UsernameToken, and within a query the challenge's nonce is
// reused, so only the first call pays the 401.
template <typename Call>
int authenticated(Authenticator& auth, Call&& call) {
    if (!auth.credential) return unauthenticated(auth, call);
    auto attempt = [&](bool token, bool digest) {
        authenticate(auth.soap, token ? auth.credential : std::nullopt, auth.clockOffset);
        auth.digest.sending(digest);
        auth.digest.expectChallenge();
        return call();
    };
    const bool knownDigest = auth.scheme == AuthScheme::HttpDigest || auth.scheme == AuthScheme::Both;
    int result = attempt(auth.scheme != AuthScheme::HttpDigest, knownDigest && auth.digest.answered());
    if (result == SOAP_OK) {
        if (auth.scheme == AuthScheme::Unknown) auth.scheme = AuthScheme::UsernameToken;
        return result;
    }
    if (auth.soap->error != 401 || !auth.digest.challenged()) return result;
    if (!auth.digest.answer(*auth.credential, auth.problem)) return result;
    // A known scheme meets a new nonce (the first call of a query, or a stale one).
    if (knownDigest) return attempt(auth.scheme == AuthScheme::Both, true);
    result = attempt(false, true);
    if (result == SOAP_OK) {
        auth.scheme = AuthScheme::HttpDigest;
        return result;
    }
    if (auth.soap->error == 401 || !isAuthFault(auth.soap)) return result;
    result = attempt(true, true);
    if (result == SOAP_OK) auth.scheme = AuthScheme::Both;
    return result;
}

std::string text(const char* value, std::size_t limit = 256) {
    if (!value) return "";
    std::string s = value;
    if (s.size() > limit) s.resize(limit);
    // Values become container environment, log lines and the status page: no control
    // characters (a newline would forge a log line).
    for (char& c : s) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
    }
    return s;
}

std::string describeError(struct soap* soap, const char* operation) {
    std::string text = std::string(operation) + " failed";
    if (soap->error == SOAP_TCP_ERROR) return text + ": no connection";
    if (soap->error == SOAP_EOF) return text + ": connection closed or timed out";
    if (soap->error == SOAP_SSL_ERROR) return text + ": TLS handshake failed";
    const char* reason = *soap_faultstring(soap);
    text += " (gSOAP error " + std::to_string(soap->error) + ")";
    if (reason) text += ": " + onvif::text(reason, 200) + (std::strlen(reason) > 200 ? "…" : "");
    return text;
}

std::optional<std::chrono::system_clock::time_point> cameraTime(const tt__SystemDateAndTime* time) {
    if (!time || !time->UTCDateTime || !time->UTCDateTime->Date || !time->UTCDateTime->Time)
        return std::nullopt;
    const tt__Date& d = *time->UTCDateTime->Date;
    const tt__Time& t = *time->UTCDateTime->Time;
    if (d.Year < 1970 || d.Year > 2200 || d.Month < 1 || d.Month > 12 || d.Day < 1 || d.Day > 31 ||
        t.Hour < 0 || t.Hour > 23 || t.Minute < 0 || t.Minute > 59 || t.Second < 0 || t.Second > 60)
        return std::nullopt;
    std::tm tm{};
    tm.tm_year = d.Year - 1900;
    tm.tm_mon = d.Month - 1;
    tm.tm_mday = d.Day;
    tm.tm_hour = t.Hour;
    tm.tm_min = t.Minute;
    tm.tm_sec = t.Second;
    const std::time_t seconds = timegm(&tm);
    if (seconds == std::time_t(-1)) return std::nullopt;
    return std::chrono::system_clock::from_time_t(seconds);
}

std::string lowerMac(const char* value) {
    std::string mac = text(value, 64);
    for (char& c : mac) {
        if (c == '-') c = ':';
        c = char(std::tolower(static_cast<unsigned char>(c)));
    }
    return mac;
}

// GetSystemDateAndTime: state and clock offset.
bool checkTime(struct soap* soap, const std::string& serviceUrl, CameraReport& report) {
    _tds__GetSystemDateAndTime request;
    _tds__GetSystemDateAndTimeResponse response;
    soap_default__tds__GetSystemDateAndTime(soap, &request);
    soap->header = nullptr;
    const auto sent = std::chrono::system_clock::now();
    if (soap_call___tds__GetSystemDateAndTime(soap, serviceUrl.c_str(), nullptr, &request, &response) !=
        SOAP_OK) {
        report.state = isTransportError(soap) ? CameraState::Unreachable : CameraState::Reachable;
        report.error = describeError(soap, "GetSystemDateAndTime");
        return false;
    }
    const auto received = std::chrono::system_clock::now();
    report.state = CameraState::UpWithoutAuth;
    if (auto camera = cameraTime(response.SystemDateAndTime)) {
        const auto local = sent + (received - sent) / 2;
        report.clockOffset = std::chrono::duration_cast<std::chrono::milliseconds>(*camera - local);
    }
    return true;
}

constexpr const char* kMedia1Namespace = "http://www.onvif.org/ver10/media/wsdl";
constexpr const char* kMedia2Namespace = "http://www.onvif.org/ver20/media/wsdl";

// The media services the camera named: Media1 from GetCapabilities, else Media1 or Media2
// from GetServices.
struct MediaServices {
    std::string media1;
    std::string media2;
};

MediaServices readMediaServices(struct soap* soap, const std::string& serviceUrl, Authenticator& auth) {
    MediaServices found;
    _tds__GetCapabilities request;
    _tds__GetCapabilitiesResponse response;
    soap_default__tds__GetCapabilities(soap, &request);
    request.Category = soap_strdup(soap, "Media");
    auto getCapabilities = [&] {
        return soap_call___tds__GetCapabilities(soap, serviceUrl.c_str(), nullptr, &request, &response);
    };
    for (const bool withAuth : {false, true}) {
        if (withAuth && !auth.credential) break;
        if ((withAuth ? authenticated(auth, getCapabilities) : unauthenticated(auth, getCapabilities)) ==
            SOAP_OK) {
            if (response.Capabilities && response.Capabilities->Media && response.Capabilities->Media->XAddr)
                found.media1 = text(response.Capabilities->Media->XAddr, 1024);
            break;
        }
    }
    if (!found.media1.empty()) return found;
    // A Profile T camera without Media1 has no Media capability: only GetServices names its
    // Media2 service.
    _tds__GetServices services;
    _tds__GetServicesResponse servicesResponse;
    soap_default__tds__GetServices(soap, &services);
    services.IncludeCapability = soap_strdup(soap, "false");
    if (authenticated(auth, [&] {
            return soap_call___tds__GetServices(soap, serviceUrl.c_str(), nullptr, &services,
                                                &servicesResponse);
        }) == SOAP_OK) {
        for (int i = 0; i < servicesResponse.__sizeService; ++i) {
            const tds__Service& s = servicesResponse.Service[i];
            if (!s.Namespace || !s.XAddr) continue;
            if (std::strcmp(s.Namespace, kMedia1Namespace) == 0) found.media1 = text(s.XAddr, 1024);
            if (std::strcmp(s.Namespace, kMedia2Namespace) == 0) found.media2 = text(s.XAddr, 1024);
        }
    }
    return found;
}

// Media1 when the camera has it, Media2 otherwise. Akri's handler and the brokers written
// for it read Media1's profiles and stream URIs, so a camera with both gives the same
// instance as under Akri; Media2-only cameras (Profile T) are offered with theirs.
void readMediaUrl(struct soap* soap, const std::string& serviceUrl, Authenticator& auth,
                  CameraReport& report) {
    const MediaServices found = readMediaServices(soap, serviceUrl, auth);
    const bool media2 = !isUsableServiceUrl(found.media1) && isUsableServiceUrl(found.media2);
    const std::string named = media2 ? found.media2 : found.media1;
    // No usable address: the device service URL, which many cameras serve Media1 at too.
    if (!isUsableServiceUrl(named)) {
        report.mediaUrl = serviceUrl;
        return;
    }
    report.media2 = media2;
    // Credentials go only to the host that was contacted: a camera behind NAT names its
    // inside address, which is called at the contacted host and port instead.
    report.mediaUrl = atContactedHost(named, serviceUrl);
    if (!isUsableServiceUrl(report.mediaUrl)) {
        report.mediaUrl = serviceUrl;
        report.media2 = false;
        return;
    }
    if (report.mediaUrl != named)
        report.rewrittenServices.push_back(std::string(media2 ? "media2" : "media") + ": " +
                                           urlAuthority(named) + " -> " + urlAuthority(serviceUrl));
}

// GetDeviceInformation decides the authentication result.
void readDeviceInformation(struct soap* soap, const std::string& serviceUrl, Authenticator& auth,
                           const QueryOptions& options, CameraReport& report) {
    const std::optional<Credential>& credential = auth.credential;
    _tds__GetDeviceInformation request;
    _tds__GetDeviceInformationResponse response;
    soap_default__tds__GetDeviceInformation(soap, &request);
    if (authenticated(auth, [&] {
            return soap_call___tds__GetDeviceInformation(soap, serviceUrl.c_str(), nullptr, &request,
                                                         &response);
        }) != SOAP_OK) {
        if (isAuthFault(soap)) {
            report.auth = credential ? AuthResult::Refused : AuthResult::NoCredentials;
            report.error = credential ? "authentication failed" : "the camera needs credentials";
            if (!auth.problem.empty()) report.error += ": " + auth.problem;
            if (!credential && !options.credentialWithheld.empty())
                report.error += "; " + options.credentialWithheld;
            if (credential && !auth.digest.answered() &&
                report.clockOffset != tokenClockOffset(report.clockOffset))
                report.error +=
                    ": the camera's clock is more than a day ahead of devlet's, so the UsernameToken was "
                    "stamped with devlet's clock (set the camera's time)";
        } else {
            report.error = describeError(soap, "GetDeviceInformation");
            if (credential) report.auth = AuthResult::Refused;
        }
        return;
    }
    report.auth = credential ? AuthResult::Accepted : AuthResult::NoCredentials;
    if (credential) report.state = CameraState::UpWithAuth;
    report.authScheme = auth.scheme;
    report.manufacturer = text(response.Manufacturer);
    report.model = text(response.Model);
    report.firmware = text(response.FirmwareVersion);
    report.serial = text(response.SerialNumber);
    report.hardwareId = text(response.HardwareId);
}

std::string addressText(const tt__PrefixedIPv4Address* address) {
    return address && address->Address ? text(address->Address, 64) : "";
}

void readNetworkInterfaces(struct soap* soap, const std::string& serviceUrl, Authenticator& auth,
                           CameraReport& report) {
    _tds__GetNetworkInterfaces request;
    _tds__GetNetworkInterfacesResponse response;
    soap_default__tds__GetNetworkInterfaces(soap, &request);
    if (authenticated(auth, [&] {
            return soap_call___tds__GetNetworkInterfaces(soap, serviceUrl.c_str(), nullptr, &request,
                                                         &response);
        }) != SOAP_OK)
        return;
    // The first interface's hardware address, and the first IPv4 address in use (Akri takes
    // the first one listed, which on DHCP can be a stale manual one).
    for (int i = 0; i < response.__sizeNetworkInterfaces; ++i) {
        const tt__NetworkInterface& ni = response.NetworkInterfaces[i];
        if (report.macAddress.empty() && ni.Info && ni.Info->HwAddress)
            report.macAddress = lowerMac(ni.Info->HwAddress);
        if (report.ipAddress.empty() && ni.IPv4 && ni.IPv4->Config) {
            const tt__IPv4Configuration& c = *ni.IPv4->Config;
            Ipv4Configuration config;
            for (int m = 0; c.Manual && m < c.__sizeManual && m < 16; ++m)
                config.manual.push_back(addressText(&c.Manual[m]));
            config.linkLocal = addressText(c.LinkLocal);
            config.fromDhcp = addressText(c.FromDHCP);
            if (c.DHCP) config.dhcp = text(c.DHCP, 16);
            report.ipAddress = ipv4AddressInUse(config);
        }
    }
}

// A Media1 or Media2 video encoder configuration: the encoding, and a resolution that
// could be one.
template <typename Encoder>
void readEncoder(const Encoder* encoder, StreamProfile& profile) {
    if (!encoder) return;
    profile.encoding = text(encoder->Encoding, 16);
    const auto* resolution = encoder->Resolution;
    if (resolution && resolution->Width > 0 && resolution->Height > 0 && resolution->Width < 100000 &&
        resolution->Height < 100000) {
        profile.width = resolution->Width;
        profile.height = resolution->Height;
    }
}

void readProfiles(struct soap* soap, Authenticator& auth, const QueryOptions& options, CameraReport& report) {
    _trt__GetProfiles request;
    _trt__GetProfilesResponse response;
    soap_default__trt__GetProfiles(soap, &request);
    if (authenticated(auth, [&] {
            return soap_call___trt__GetProfiles(soap, report.mediaUrl.c_str(), nullptr, &request, &response);
        }) != SOAP_OK) {
        if (report.error.empty()) report.error = describeError(soap, "GetProfiles");
        return;
    }
    std::vector<StreamProfile> profiles;
    for (int i = 0; i < response.__sizeProfiles && profiles.size() < options.maxProfiles; ++i) {
        const tt__Profile& p = response.Profiles[i];
        if (!p.token) continue;
        StreamProfile profile;
        profile.token = text(p.token, 64);
        profile.name = text(p.Name, 64);
        readEncoder(p.VideoEncoderConfiguration, profile);
        profiles.push_back(std::move(profile));
    }
    // Each response lives in the context's memory; copied strings above outlive the next call.
    for (StreamProfile& profile : profiles) {
        _trt__GetStreamUri uriRequest;
        _trt__GetStreamUriResponse uriResponse;
        soap_default__trt__GetStreamUri(soap, &uriRequest);
        uriRequest.StreamSetup = soap_new_tt__StreamSetup(soap);
        uriRequest.StreamSetup->Stream = soap_strdup(soap, "RTP-Unicast");
        uriRequest.StreamSetup->Transport = soap_new_tt__Transport(soap);
        uriRequest.StreamSetup->Transport->Protocol = soap_strdup(soap, "RTSP");
        uriRequest.ProfileToken = soap_strdup(soap, profile.token.c_str());
        if (authenticated(auth,
                          [&] {
                              return soap_call___trt__GetStreamUri(soap, report.mediaUrl.c_str(), nullptr,
                                                                   &uriRequest, &uriResponse);
                          }) == SOAP_OK &&
            uriResponse.MediaUri && uriResponse.MediaUri->Uri) {
            profile.uri = withoutCredentials(text(uriResponse.MediaUri->Uri, 1024));
        }
    }
    report.profiles = std::move(profiles);
}

void readProfiles2(struct soap* soap, Authenticator& auth, const QueryOptions& options,
                   CameraReport& report) {
    _tr2__GetProfilesResponse response;
    // Without a Type a Media2 profile carries only its name and token. Some cameras refuse
    // a list of configuration types and take only "All".
    bool answered = false;
    for (const std::vector<const char*>& types :
         {std::vector<const char*>{"VideoSource", "VideoEncoder"}, std::vector<const char*>{"All"}}) {
        _tr2__GetProfiles request;
        soap_default__tr2__GetProfiles(soap, &request);
        request.__sizeType = int(types.size());
        request.Type = static_cast<char**>(soap_malloc(soap, types.size() * sizeof(char*)));
        for (std::size_t i = 0; i < types.size(); ++i) request.Type[i] = soap_strdup(soap, types[i]);
        answered = authenticated(auth, [&] {
                       return soap_call___tr2__GetProfiles(soap, report.mediaUrl.c_str(), nullptr, &request,
                                                           &response);
                   }) == SOAP_OK;
        if (answered || isTransportError(soap) || isAuthFault(soap)) break;
    }
    if (!answered) {
        if (report.error.empty()) report.error = describeError(soap, "Media2 GetProfiles");
        return;
    }
    std::vector<StreamProfile> profiles;
    for (int i = 0; i < response.__sizeProfiles && profiles.size() < options.maxProfiles; ++i) {
        const tr2__MediaProfile& p = response.Profiles[i];
        if (!p.token) continue;
        StreamProfile profile;
        profile.token = text(p.token, 64);
        profile.name = text(p.Name, 64);
        readEncoder(p.Configurations ? p.Configurations->VideoEncoder : nullptr, profile);
        profiles.push_back(std::move(profile));
    }
    for (StreamProfile& profile : profiles) {
        // RtspUnicast is Media2's name for RTSP over UDP or TCP; cameras built on early
        // drafts of the specification know only "RTSP".
        for (const char* protocol : {"RtspUnicast", "RTSP"}) {
            _tr2__GetStreamUri uriRequest;
            _tr2__GetStreamUriResponse uriResponse;
            soap_default__tr2__GetStreamUri(soap, &uriRequest);
            uriRequest.Protocol = soap_strdup(soap, protocol);
            uriRequest.ProfileToken = soap_strdup(soap, profile.token.c_str());
            if (authenticated(auth, [&] {
                    return soap_call___tr2__GetStreamUri(soap, report.mediaUrl.c_str(), nullptr, &uriRequest,
                                                         &uriResponse);
                }) == SOAP_OK) {
                if (uriResponse.Uri) profile.uri = withoutCredentials(text(uriResponse.Uri, 1024));
                break;
            }
            if (isTransportError(soap) || isAuthFault(soap)) break;
        }
    }
    report.profiles = std::move(profiles);
}

// Stream URIs on another host than the contacted one are kept (the RTSP port may be
// forwarded to another port, or not at all, and a rewritten URI that reaches nothing is
// worse than the camera's own), and said, so that a user behind NAT sees why a broker
// cannot connect.
void noteStreamHosts(const std::string& serviceUrl, CameraReport& report) {
    const std::string contacted = urlHost(serviceUrl);
    for (const StreamProfile& profile : report.profiles) {
        const std::string host = urlHost(profile.uri);
        if (host.empty() || host == contacted) continue;
        if (std::find(report.streamHostsElsewhere.begin(), report.streamHostsElsewhere.end(), host) ==
                report.streamHostsElsewhere.end() &&
            report.streamHostsElsewhere.size() < 4)
            report.streamHostsElsewhere.push_back(host);
    }
}

}  // namespace

namespace {

// Names under which camera firmware puts a password into a stream URI's path or query
// (Xiongmai: /user=admin_password=…_channel=1_stream=0.sdp); matched in any case.
constexpr std::string_view kPasswordParameters[] = {"password", "passwd", "pass", "pwd"};

bool startsParameter(char c) {
    return c == '_' || c == '&' || c == ';' || c == '/' || c == '?';
}

// "_channel=": the next parameter of a path that joins them with '_'. A lone '_' belongs to
// the value, so a password with one in it is left out whole.
bool isUnderscoreParameter(std::string_view rest) {
    if (rest.size() < 3 || rest[0] != '_' || !std::isalpha(static_cast<unsigned char>(rest[1]))) return false;
    std::size_t i = 2;
    while (i < rest.size() && std::isalnum(static_cast<unsigned char>(rest[i]))) ++i;
    return i < rest.size() && rest[i] == '=';
}

// The password parameter whose name starts at `at` in a URI's path, query and fragment
// (`tail`), or nullopt.
std::optional<std::string_view> passwordParameterAt(std::string_view tail, std::size_t at) {
    if (at == 0 || !startsParameter(tail[at - 1])) return std::nullopt;
    for (std::string_view name : kPasswordParameters) {
        if (tail.size() <= at + name.size() || tail[at + name.size()] != '=') continue;
        if (std::equal(name.begin(), name.end(), tail.begin() + at,
                       [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); }))
            return name;
    }
    return std::nullopt;
}

// Where the value that starts at `from` ends: at the next parameter, or where the path,
// query or fragment ends. In the query, '/' and '?' may be part of a value.
std::size_t valueEnd(std::string_view tail, std::size_t from) {
    const std::size_t fragment = std::min(tail.find('#'), tail.size());
    const std::size_t query = std::min(tail.find('?'), fragment);
    for (std::size_t i = from; i < fragment; ++i) {
        const char c = tail[i];
        if (i == query || c == '&' || c == ';' || (i < query && c == '/')) return i;
        if (c == '_' && isUnderscoreParameter(tail.substr(i))) return i;
    }
    return fragment;
}

// The path, query and fragment with every password parameter's value left out; the
// parameters' names are added to `found` when given.
std::string withoutPasswordValues(std::string tail, std::vector<std::string_view>* found = nullptr) {
    for (std::size_t at = 1; at < std::min(tail.find('#'), tail.size()); ++at) {
        const auto name = passwordParameterAt(tail, at);
        if (!name) continue;
        const std::size_t value = at + name->size() + 1;
        tail.erase(value, valueEnd(tail, value) - value);
        if (found && std::find(found->begin(), found->end(), *name) == found->end()) found->push_back(*name);
        at = value;
    }
    return tail;
}

// Where a URI's path begins (its first '/', '?' or '#' after the authority), or npos.
std::size_t pathStart(const std::string& uri, std::size_t scheme) {
    return uri.find_first_of("/?#", scheme + 3);
}

// The camera's error text says which stream URIs have a password parameter, never its value
// (withoutCredentials has left it out): a user reading the URI learns why it does not play as
// shown, and where a broker that has the password puts it.
void notePasswordParameters(CameraReport& report) {
    std::vector<std::string_view> names;
    std::vector<std::string> profiles;
    for (const StreamProfile& profile : report.profiles) {
        const auto scheme = profile.uri.find("://");
        if (scheme == std::string::npos) continue;
        const auto path = pathStart(profile.uri, scheme);
        if (path == std::string::npos) continue;
        std::vector<std::string_view> here;
        withoutPasswordValues(profile.uri.substr(path), &here);
        if (here.empty()) continue;
        for (std::string_view name : here) {
            if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
        }
        profiles.push_back(profile.token);
    }
    if (profiles.empty()) return;
    std::string note = profiles.size() == 1 ? "the stream URI of profile " : "the stream URIs of profiles ";
    for (std::size_t i = 0; i < profiles.size(); ++i) note += (i ? ", " : "") + profiles[i];
    note += profiles.size() == 1 ? " has" : " have";
    note += " a password parameter in the path or query (";
    for (std::size_t i = 0; i < names.size(); ++i) note += (i ? ", " : "") + std::string(names[i]) + "=";
    note += "): shown without its value, where a broker that has the camera's password puts it";
    report.error += (report.error.empty() ? "" : "; ") + note;
}

}  // namespace

std::string withoutCredentials(const std::string& uri) {
    const auto scheme = uri.find("://");
    if (scheme == std::string::npos || scheme == 0 || uri.size() > 1024) return "";
    for (char c : uri) {
        if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return "";
    }
    const std::string name = uri.substr(0, scheme);
    if (name != "rtsp" && name != "rtsps" && name != "http" && name != "https" && name != "rtspu") return "";
    const auto authorityEnd = pathStart(uri, scheme);
    const std::string authority = uri.substr(
        scheme + 3, authorityEnd == std::string::npos ? std::string::npos : authorityEnd - scheme - 3);
    const auto at = authority.rfind('@');
    return name + "://" + (at == std::string::npos ? authority : authority.substr(at + 1)) +
           (authorityEnd == std::string::npos ? std::string()
                                              : withoutPasswordValues(uri.substr(authorityEnd)));
}

std::string ipv4AddressInUse(const Ipv4Configuration& config) {
    auto usable = [](std::string address) -> std::string {
        const auto first = address.find_first_not_of(" \t\r\n");
        if (first == std::string::npos) return "";
        address = address.substr(first, address.find_last_not_of(" \t\r\n") - first + 1);
        in_addr parsed{};
        if (inet_pton(AF_INET, address.c_str(), &parsed) != 1 || parsed.s_addr == 0) return "";
        return address;
    };
    auto firstManual = [&] {
        for (const std::string& address : config.manual) {
            if (std::string a = usable(address); !a.empty()) return a;
        }
        return std::string();
    };
    std::optional<bool> dhcp;
    if (config.dhcp) {
        std::string value;
        for (char c : *config.dhcp) {
            if (!std::isspace(static_cast<unsigned char>(c)))
                value += char(std::tolower(static_cast<unsigned char>(c)));
        }
        if (value == "true" || value == "1") dhcp = true;
        if (value == "false" || value == "0") dhcp = false;
    }
    std::vector<std::string> candidates;
    if (dhcp == true) {
        candidates = {usable(config.fromDhcp), usable(config.linkLocal)};
    } else if (dhcp == false) {
        candidates = {firstManual(), usable(config.linkLocal)};
    } else {
        candidates = {firstManual(), usable(config.fromDhcp), usable(config.linkLocal)};
    }
    for (const std::string& address : candidates) {
        if (!address.empty()) return address;
    }
    return "";
}

CameraReport checkCamera(const std::string& serviceUrl, const QueryOptions& options) {
    CameraReport report;
    Playback playback;
    SoapPtr soap = newContext(options, playback);
    bool tls = false;
    if (isHttps(serviceUrl) && !enableTls(soap.get(), tls)) {
        report.error = "GetSystemDateAndTime failed: no TLS context";
        return report;
    }
    checkTime(soap.get(), serviceUrl, report);
    return report;
}

CameraReport queryCamera(const std::string& serviceUrl, const std::optional<Credential>& credential,
                         const QueryOptions& options) {
    CameraReport report;
    Playback playback;
    SoapPtr soap = newContext(options, playback);
    auto cancelled = [&] { return options.cancelled && options.cancelled->load(); };
    bool tls = false;
    if (isHttps(serviceUrl) && !enableTls(soap.get(), tls)) {
        report.error = "GetSystemDateAndTime failed: no TLS context";
        return report;
    }
    if (!checkTime(soap.get(), serviceUrl, report) || cancelled()) return report;
    // Declared after the context: its destructor forgets the credential while the context lives.
    Authenticator auth(soap.get(), credential, options.authScheme);
    auth.clockOffset = report.clockOffset;
    readMediaUrl(soap.get(), serviceUrl, auth, report);
    if (cancelled()) return report;
    // A camera may name an https media service beside an http device service.
    if (isHttps(report.mediaUrl) && !enableTls(soap.get(), tls)) {
        report.mediaUrl = serviceUrl;
        report.media2 = false;
    }
    readDeviceInformation(soap.get(), serviceUrl, auth, options, report);
    if (report.auth == AuthResult::Refused || cancelled()) return report;
    readNetworkInterfaces(soap.get(), serviceUrl, auth, report);
    if (cancelled()) return report;
    if (report.media2) {
        readProfiles2(soap.get(), auth, options, report);
    } else {
        readProfiles(soap.get(), auth, options, report);
    }
    noteStreamHosts(serviceUrl, report);
    notePasswordParameters(report);
    return report;
}

}  // namespace devlet::onvif
