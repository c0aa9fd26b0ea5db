// A simulated ONVIF camera for the tests: answers WS-Discovery Probes for
// NetworkVideoTransmitter on 239.255.255.250:3702 (unicast to the sender), says Hello on
// start and Bye on SIGTERM, and serves the device and media calls devlet makes with gSOAP,
// enforcing WS-Security UsernameToken PasswordDigest against its own (possibly wrong) clock.
// --hostile MODE makes it misbehave instead (see usage). Field modes copy what real cameras
// do: --must-understand header blocks, a --message-id shared by several cameras, a Hello
// without XAddrs (--hello-without-xaddrs, then it answers Resolve); --spoof-uuid makes it a
// spoofer announcing another camera's uuid.
// --auth digest-md5 or digest-sha256 makes it a camera that wants HTTP Digest (RFC 7616,
// qop=auth) instead: a protected call without a valid Authorization header gets 401 and a
// challenge, and a UsernameToken is not looked at. --record-credentials FILE appends a line
// per request that carried a UsernameToken or an Authorization header (the sender and which).
// --media2-only serves profiles and stream URIs through Media2 alone (a Profile T camera);
// --nat-address names its service addresses at another host, as a camera behind NAT does.
// SIGUSR1 announces a new MetadataVersion (its streams moved); SIGUSR2 is a new DHCP lease:
// it takes the IPv4 address its interface has now (the test changes it with `ip addr`),
// serves there, and says Hello from it with a new MetadataVersion.
// One thread, poll() on its sockets.

#include <algorithm>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "probes/onvif/soap_wire.h"
#include "probes/onvif/username_token.h"
#include "soapH.h"

namespace {

using namespace devlet::onvif;

struct Options {
    std::string address;   // IPv4 of the camera's interface
    std::string address6;  // IPv6 of it: WS-Discovery on [FF02::C] and HTTP there too
    std::string interface6 = "eth0";
    int port = 8080;
    std::string tlsKeyFile;  // PEM with key and certificate: serve https
    int advertisePort = 0;   // the port named in XAddrs, when it is not `port` (a dead one)
    std::string uuid = "3fa1fe68-b915-4053-a3e1-ac15a21f5f91";
    std::string name = "SimCam";
    std::string user;
    std::string password;
    std::string mac = "02:00:00:00:00:01";
    long clockOffsetSeconds = 0;
    bool hello = false;
    bool bye = false;       // a Bye on SIGTERM (implied by --hello)
    int answerDelayMs = 0;  // WS-Discovery's APP_MAX_DELAY: answers to a multicast Probe wait up to this
    bool answerProbes = true;
    // Every Nth GetSystemDateAndTime (the liveness check) fails with a SOAP fault: a
    // camera that answers one check and misses the next. 0: all are answered.
    int failEvery = 0;
    // Created once the sockets are up; holds "hello <ns>" (CLOCK_MONOTONIC when the Hello
    // left, 0 without one) and gets "bye <ns>" appended when the Bye leaves: benchmarks time
    // from these.
    std::string readyFile;
    std::string auth = "usernametoken";  // or digest-md5, digest-sha256
    std::string recordCredentials;       // a file: one line per request that carried credentials
    // No Media1 service: GetCapabilities names none, GetServices names Media2 only.
    bool media2Only = false;
    // The authority (host or host:port) GetCapabilities and GetServices name the services at,
    // and the host stream URIs name, instead of the camera's own: its inside address behind NAT.
    std::string natAddress;
    bool mustUnderstand = false;  // mustUnderstand header blocks in every WS-Discovery message
    std::string messageId;        // the same MessageID in every message (firmware seeded alike)
    bool helloWithoutXAddrs = false;
    std::string spoofUuid;   // announced instead of --uuid
    std::string spoofXAddr;  // the XAddrs announced with it (default: its own)
    std::string hostile;     // "", udp-garbage, udp-wrong-relates, udp-many-xaddrs, udp-bomb, udp-flood,
                             // many-cameras, http-garbage, http-huge, http-silent, not-camera
};

Options options;
volatile std::sig_atomic_t stopping = 0;
// SIGUSR1: the camera's configuration changed (its streams move); it announces a new
// MetadataVersion with a Hello, as WS-Discovery asks.
volatile std::sig_atomic_t reconfigured = 0;
// SIGUSR2: the interface's IPv4 address changed; the camera moves to the new one.
volatile std::sig_atomic_t readdressed = 0;
unsigned metadataVersion = 1;
// Sends over IPv6 from --address6 (not the link-local address the kernel would pick for a
// link-local peer or group), as the XAddrs it announces name that address.
int udp6Send = -1;

void onSignal(int) {
    stopping = 1;
}

void onReconfigure(int) {
    reconfigured = 1;
}

void onReaddress(int) {
    readdressed = 1;
}

// The first IPv4 address of an interface other than loopback: where a camera's DHCP client
// put it.
std::string currentIpv4Address() {
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return "";
    std::string found;
    for (ifaddrs* i = list; i && found.empty(); i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK)) continue;
        char text[INET_ADDRSTRLEN] = {};
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
        found = text;
    }
    freeifaddrs(list);
    return found;
}

// The device service URL of one address family: a camera answers a Probe with the address
// it was asked on.
std::string serviceUrl(bool v6 = false) {
    const int port = options.advertisePort ? options.advertisePort : options.port;
    const std::string host = v6 ? "[" + options.address6 + "]" : options.address;
    return std::string(options.tlsKeyFile.empty() ? "http" : "https") + "://" + host + ":" +
           std::to_string(port) + "/onvif/device_service";
}

constexpr const char* kMediaPath = "/onvif/media_service";
constexpr const char* kMedia2Path = "/onvif/media2_service";

// A service's address as GetCapabilities and GetServices name it.
std::string namedServiceUrl(const char* path) {
    const std::string authority = options.natAddress.empty()
                                      ? options.address + ":" + std::to_string(options.port)
                                      : options.natAddress;
    return std::string(options.tlsKeyFile.empty() ? "http" : "https") + "://" + authority + path;
}

// The host stream URIs name.
std::string streamHost() {
    return options.natAddress.empty() ? options.address
                                      : options.natAddress.substr(0, options.natAddress.find(':'));
}

DiscoveredEndpoint endpoint(bool v6 = false) {
    DiscoveredEndpoint e;
    e.address = "urn:uuid:" + (options.spoofUuid.empty() ? options.uuid : options.spoofUuid);
    if (options.hostile == "not-camera") {
        e.types = {"{http://schemas.xmlsoap.org/ws/2006/02/devprof}Device"};
    } else {
        e.types = {std::string("{") + kOnvifNetworkNamespace + "}NetworkVideoTransmitter"};
    }
    e.scopes = {"onvif://www.onvif.org/type/video_encoder", "onvif://www.onvif.org/name/" + options.name,
                "onvif://www.onvif.org/hardware/SimCam"};
    e.xaddrs = {options.spoofXAddr.empty() ? serviceUrl(v6) : options.spoofXAddr};
    e.metadataVersion = metadataVersion;
    return e;
}

std::string messageId() {
    return options.messageId.empty() ? newMessageId() : options.messageId;
}

// What the cameras of one vendor send (its ProbeMatches reached devlet so): header blocks
// marked mustUnderstand that a discovery client does not model, on wsa:To and wsa:Action
// too. A client must read what it needs and ignore the rest.
std::string withMustUnderstand(std::string text) {
    if (!options.mustUnderstand) return text;
    const std::string header = "<SOAP-ENV:Header>";
    const auto at = text.find(header);
    if (at == std::string::npos) return text;
    text.insert(at + header.size(),
                "<wsa:ReplyTo SOAP-ENV:mustUnderstand=\"true\"><wsa:Address>"
                "http://schemas.xmlsoap.org/ws/2004/08/addressing/role/anonymous</wsa:Address></wsa:ReplyTo>"
                "<vendor:Session xmlns:vendor=\"urn:example:vendor\" "
                "SOAP-ENV:mustUnderstand=\"1\">7</vendor:Session>");
    for (const std::string tag : {"<wsa:To", "<wsa:Action"}) {
        const auto open = text.find(tag + ">");
        if (open != std::string::npos) text.insert(open + tag.size(), " SOAP-ENV:mustUnderstand=\"true\"");
    }
    return text;
}

std::chrono::system_clock::time_point cameraNow() {
    return std::chrono::system_clock::now() + std::chrono::seconds(options.clockOffsetSeconds);
}

int sendMulticast6(int fd, const std::string& text) {
    sockaddr_in6 group{};
    group.sin6_family = AF_INET6;
    group.sin6_port = htons(3702);
    inet_pton(AF_INET6, "ff02::c", &group.sin6_addr);
    group.sin6_scope_id = if_nametoindex(options.interface6.c_str());
    if (udp6Send >= 0) fd = udp6Send;
    const unsigned index = group.sin6_scope_id;
    setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, &index, sizeof index);
    return int(sendto(fd, text.data(), text.size(), 0, reinterpret_cast<sockaddr*>(&group), sizeof group));
}

int sendMulticast(int fd, const std::string& text) {
    sockaddr_in group{};
    group.sin_family = AF_INET;
    group.sin_port = htons(3702);
    inet_pton(AF_INET, "239.255.255.250", &group.sin_addr);
    return int(sendto(fd, text.data(), text.size(), 0, reinterpret_cast<sockaddr*>(&group), sizeof group));
}

long long monotonicNs() {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<long long>(now.tv_sec) * 1000000000LL + now.tv_nsec;
}

void appendLine(const std::string& path, const std::string& line, bool truncate) {
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : O_APPEND), 0644);
    if (fd < 0) return;
    const std::string text = line + "\n";
    (void)!write(fd, text.data(), text.size());
    close(fd);
}

std::string repeated(const std::string& unit, std::size_t count) {
    std::string text;
    text.reserve(unit.size() * count);
    for (std::size_t i = 0; i < count; ++i) text += unit;
    return text;
}

struct PendingAnswer {
    long long due;  // CLOCK_MONOTONIC ns
    int fd;
    std::string text;
    sockaddr_storage to;
    socklen_t length;
};
std::vector<PendingAnswer> pendingAnswers;

void answerProbe(int fd, const std::string& datagram, const sockaddr_storage& from, socklen_t length) {
    if (from.ss_family == AF_INET6 && udp6Send >= 0) fd = udp6Send;
    std::string error;
    auto message = decodeDiscovery(datagram, error);
    if (!message) return;
    const DiscoveredEndpoint me = endpoint(from.ss_family == AF_INET6);
    if (message->kind == DiscoveryKind::Resolve) {
        if (message->endpoints.empty() || message->endpoints[0].address != me.address) return;
        const std::string answer =
            withMustUnderstand(encodeResolveMatches(messageId(), message->messageId, me));
        sendto(fd, answer.data(), answer.size(), 0, reinterpret_cast<const sockaddr*>(&from), length);
        return;
    }
    if (message->kind != DiscoveryKind::Probe || !options.answerProbes) return;
    if (!message->probeTypes.empty()) {
        bool wanted = false;
        for (const std::string& type : message->probeTypes)
            for (const std::string& mine : me.types) wanted = wanted || type == mine;
        if (!wanted) return;
    }
    std::string answer;
    if (options.hostile == "udp-garbage") {
        answer = "<env:Envelope><<<" + std::string(2000, '\x01');
    } else if (options.hostile == "udp-wrong-relates") {
        answer = encodeProbeMatches(newMessageId(), "uuid:not-your-probe", {me});
    } else if (options.hostile == "udp-many-xaddrs") {
        DiscoveredEndpoint many = me;
        many.xaddrs.clear();
        for (int i = 0; i < 2000; ++i) many.xaddrs.push_back("http://192.0.2.254:1/x" + std::to_string(i));
        answer = encodeProbeMatches(newMessageId(), message->messageId, {many});
        answer.resize(std::min<std::size_t>(answer.size(), 65000));
    } else if (options.hostile == "udp-flood") {
        // The same answer 200 times over, each a new message: more than any camera sends.
        for (int i = 0; i < 199; ++i) {
            const std::string copy = encodeProbeMatches(newMessageId(), message->messageId, {me});
            sendto(fd, copy.data(), copy.size(), 0, reinterpret_cast<const sockaddr*>(&from), length);
        }
        answer = encodeProbeMatches(newMessageId(), message->messageId, {me});
    } else if (options.hostile == "many-cameras") {
        // One host announcing 1,100 cameras at its own address, 50 to a datagram.
        for (int first = 0; first < 1100; first += 50) {
            std::vector<DiscoveredEndpoint> many;
            for (int i = first; i < first + 50; ++i) {
                DiscoveredEndpoint e = me;
                char uuid[64];
                std::snprintf(uuid, sizeof uuid, "urn:uuid:66666666-6666-4666-8666-%012d", i);
                e.address = uuid;
                e.xaddrs = {serviceUrl() + "/" + std::to_string(i)};
                many.push_back(std::move(e));
            }
            const std::string text = encodeProbeMatches(newMessageId(), message->messageId, many);
            sendto(fd, text.data(), text.size(), 0, reinterpret_cast<const sockaddr*>(&from), length);
        }
        return;
    } else if (options.hostile == "udp-bomb") {
        answer =
            "<?xml version=\"1.0\"?><!DOCTYPE z [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;"
            "&a;&a;&a;\"><!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;\">]><z>" +
            repeated("&c;", 100) + "</z>";
    } else {
        answer = withMustUnderstand(encodeProbeMatches(messageId(), message->messageId, {me}));
    }
    if (options.answerDelayMs > 0) {
        const long long delay = static_cast<long long>(std::rand() % options.answerDelayMs) * 1000000LL;
        pendingAnswers.push_back({monotonicNs() + delay, fd, answer, from, length});
        return;
    }
    sendto(fd, answer.data(), answer.size(), 0, reinterpret_cast<const sockaddr*>(&from), length);
}

// Sends the delayed answers that are due; returns the milliseconds until the next one (or `idle`).
int sendDueAnswers(int idle) {
    const long long now = monotonicNs();
    int next = idle;
    for (auto it = pendingAnswers.begin(); it != pendingAnswers.end();) {
        if (it->due <= now) {
            sendto(it->fd, it->text.data(), it->text.size(), 0, reinterpret_cast<const sockaddr*>(&it->to),
                   it->length);
            it = pendingAnswers.erase(it);
        } else {
            next = std::min(next, int((it->due - now) / 1000000) + 1);
            ++it;
        }
    }
    return next;
}

int openUdp() {
    const int fd = socket(AF_INET, SOCK_DGRAM, 0);
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_port = htons(3702);
    if (bind(fd, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0) {
        std::perror("bind 3702");
        std::exit(1);
    }
    ip_mreq join{};
    inet_pton(AF_INET, "239.255.255.250", &join.imr_multiaddr);
    inet_pton(AF_INET, options.address.c_str(), &join.imr_interface);
    if (setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &join, sizeof join) != 0) {
        std::perror("join 239.255.255.250");
        std::exit(1);
    }
    in_addr iface{};
    inet_pton(AF_INET, options.address.c_str(), &iface);
    setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &iface, sizeof iface);
    return fd;
}

int openUdp6() {
    const int fd = socket(AF_INET6, SOCK_DGRAM, 0);
    const int one = 1;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in6 any{};
    any.sin6_family = AF_INET6;
    any.sin6_port = htons(3702);
    if (bind(fd, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0) {
        std::perror("bind [::]:3702");
        std::exit(1);
    }
    ipv6_mreq join{};
    inet_pton(AF_INET6, "ff02::c", &join.ipv6mr_multiaddr);
    join.ipv6mr_interface = if_nametoindex(options.interface6.c_str());
    if (setsockopt(fd, IPPROTO_IPV6, IPV6_ADD_MEMBERSHIP, &join, sizeof join) != 0) {
        std::perror("join ff02::c");
        std::exit(1);
    }
    return fd;
}

// Reads one datagram from a WS-Discovery socket and answers it if it is a Probe for us.
void readProbe(int fd, std::vector<char>& buffer) {
    sockaddr_storage from{};
    socklen_t length = sizeof from;
    const ssize_t n =
        recvfrom(fd, buffer.data(), buffer.size(), 0, reinterpret_cast<sockaddr*>(&from), &length);
    if (n > 0) answerProbe(fd, std::string(buffer.data(), std::size_t(n)), from, length);
}

void serveRawHttp(int listener) {
    const int client = accept(listener, nullptr, nullptr);
    if (client < 0) return;
    if (options.hostile == "http-silent") {
        // Keeps the connection open and says nothing; the client's deadline must end it.
        static std::vector<int> held;
        held.push_back(client);
        return;
    }
    char request[4096];
    (void)!read(client, request, sizeof request);
    std::string head = "HTTP/1.1 200 OK\r\nContent-Type: application/soap+xml\r\nConnection: close\r\n\r\n";
    (void)!write(client, head.data(), head.size());
    if (options.hostile == "http-huge") {
        const std::string chunk =
            "<env:Envelope xmlns:env=\"http://www.w3.org/2003/05/soap-envelope\"><env:Body>" +
            repeated("<a>", 1000);
        (void)!write(client, chunk.data(), chunk.size());
        const std::string filler(65536, 'x');
        for (int i = 0; i < 64; ++i)
            if (write(client, filler.data(), filler.size()) < 0) break;
    } else {
        const std::string junk = "<<<<not xml" + std::string(100, '\0');
        (void)!write(client, junk.data(), junk.size());
    }
    close(client);
}

// HTTP Digest, written here from RFC 7616 rather than taken from gSOAP's plugin: the camera
// checks devlet's use of the plugin with an implementation of its own (curl checks this one).
constexpr const char* kRealm = "SimCam";
std::string authorization;        // the request's Authorization header
std::vector<std::string> nonces;  // issued in challenges, newest last
int (*defaultParseHeader)(struct soap*, const char*, const char*) = nullptr;
int (*defaultPostHeader)(struct soap*, const char*, const char*) = nullptr;

bool digestMode() {
    return options.auth.starts_with("digest-");
}

std::string digestAlgorithm() {
    return options.auth == "digest-sha256" ? "SHA-256" : "MD5";
}

std::string hexDigest(const std::string& text) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned size = 0;
    EVP_Digest(text.data(), text.size(), digest, &size,
               options.auth == "digest-sha256" ? EVP_sha256() : EVP_md5(), nullptr);
    std::string hex;
    char byte[3];
    for (unsigned i = 0; i < size; ++i) {
        std::snprintf(byte, sizeof byte, "%02x", digest[i]);
        hex += byte;
    }
    return hex;
}

// One parameter of a Digest header: name=value or name="value".
std::string digestParameter(const std::string& header, const std::string& name) {
    std::size_t at = 0;
    while ((at = header.find(name + "=", at)) != std::string::npos) {
        const bool start = at == 0 || header[at - 1] == ' ' || header[at - 1] == ',';
        at += name.size() + 1;
        if (!start) continue;
        if (header[at] == '"') {
            const auto end = header.find('"', at + 1);
            return end == std::string::npos ? "" : header.substr(at + 1, end - at - 1);
        }
        return header.substr(at, header.find_first_of(", ", at) - at);
    }
    return "";
}

bool validDigest(struct soap* soap) {
    if (!authorization.starts_with("Digest ")) return false;
    const std::string header = authorization.substr(7);
    auto get = [&](const char* name) { return digestParameter(header, name); };
    const std::string nonce = get("nonce"), uri = get("uri"), nc = get("nc"), cnonce = get("cnonce");
    if (get("username") != options.user || get("realm") != kRealm || get("qop") != "auth" ||
        get("algorithm") != digestAlgorithm() || uri != soap->path || nc.empty() || cnonce.empty() ||
        std::find(nonces.begin(), nonces.end(), nonce) == nonces.end())
        return false;
    const std::string ha1 = hexDigest(options.user + ":" + kRealm + ":" + options.password);
    const std::string ha2 = hexDigest("POST:" + uri);
    return get("response") == hexDigest(ha1 + ":" + nonce + ":" + nc + ":" + cnonce + ":auth:" + ha2);
}

int (*defaultParse)(struct soap*) = nullptr;

// A client that knows Digest may first send an empty POST to be challenged (curl does): the
// challenge comes before a body is looked for, as real cameras check it.
int parseHttp(struct soap* soap) {
    const int error = defaultParse(soap);
    if (error || !digestMode() || options.user.empty() || soap->length != 0) return error;
    return validDigest(soap) ? SOAP_OK : 401;
}

int parseHeader(struct soap* soap, const char* key, const char* value) {
    if (!strcasecmp(key, "Authorization")) authorization = value;
    return defaultParseHeader(soap, key, value);
}

// gSOAP answers 401 with a Basic challenge; a Digest camera sends its own.
int postHeader(struct soap* soap, const char* key, const char* value) {
    if (!key || strcmp(key, "WWW-Authenticate") != 0 || !digestMode())
        return defaultPostHeader(soap, key, value);
    unsigned char random[16];
    RAND_bytes(random, sizeof random);
    std::string nonce;
    char byte[3];
    for (unsigned char b : random) {
        std::snprintf(byte, sizeof byte, "%02x", b);
        nonce += byte;
    }
    nonces.push_back(nonce);
    if (nonces.size() > 64) nonces.erase(nonces.begin());
    const std::string challenge = std::string("Digest realm=\"") + kRealm +
                                  "\", qop=\"auth\", algorithm=" + digestAlgorithm() + ", nonce=\"" + nonce +
                                  "\", opaque=\"simcam\"";
    return defaultPostHeader(soap, key, challenge.c_str());
}

}  // namespace

// The camera's checks: none for GetSystemDateAndTime, GetCapabilities and GetServices, a
// UsernameToken (or HTTP Digest) for the rest.
int requireAuth(struct soap* soap) {
    if (options.user.empty()) return SOAP_OK;
    if (digestMode()) return validDigest(soap) ? SOAP_OK : 401;
    const SOAP_ENV__Header* header = soap->header;
    const wsse__UsernameTokenType* token =
        header && header->wsse__Security ? header->wsse__Security->UsernameToken : nullptr;
    bool ok = token && token->Username && token->Password && token->Password->__item && token->Nonce &&
              token->Nonce->__item && token->wsu__Created && options.user == token->Username;
    if (ok) {
        const std::string expected = passwordDigest(devlet::base64Decode(token->Nonce->__item).value_or(""),
                                                    token->wsu__Created, options.password);
        ok = expected == token->Password->__item;
    }
    if (ok) {
        // The token must be stamped with the camera's clock, within a minute.
        std::tm tm{};
        ok = strptime(token->wsu__Created, "%Y-%m-%dT%H:%M:%S", &tm) != nullptr;
        const auto created = std::chrono::system_clock::from_time_t(timegm(&tm));
        ok = ok && std::chrono::abs(created - cameraNow()) < std::chrono::seconds(60);
    }
    if (ok) return SOAP_OK;
    return soap_sender_fault_subcode(soap, "ter:NotAuthorized", "Sender not Authorized", nullptr);
}

int __wsdd__Probe(struct soap*, struct wsdd__ProbeType*) {
    return SOAP_NO_METHOD;
}
int __wsdd__ProbeMatches(struct soap*, struct wsdd__ProbeMatchesType*) {
    return SOAP_NO_METHOD;
}
int __wsdd__Hello(struct soap*, struct wsdd__HelloType*) {
    return SOAP_NO_METHOD;
}
int __wsdd__Bye(struct soap*, struct wsdd__ByeType*) {
    return SOAP_NO_METHOD;
}

int __wsdd__Resolve(struct soap*, struct wsdd__ResolveType*) {
    return SOAP_NO_METHOD;
}

int __wsdd__ResolveMatches(struct soap*, struct wsdd__ResolveMatchesType*) {
    return SOAP_NO_METHOD;
}

int __tds__GetSystemDateAndTime(struct soap* soap, struct _tds__GetSystemDateAndTime*,
                                struct _tds__GetSystemDateAndTimeResponse* response) {
    static int calls = 0;
    if (options.failEvery > 0 && ++calls % options.failEvery == 0)
        return soap_receiver_fault(soap, "Busy", nullptr);
    const std::time_t now = std::chrono::system_clock::to_time_t(cameraNow());
    std::tm utc{};
    gmtime_r(&now, &utc);
    response->SystemDateAndTime = soap_new_tt__SystemDateAndTime(soap);
    auto* dt = response->SystemDateAndTime->UTCDateTime = soap_new_tt__DateTime(soap);
    dt->Date = soap_new_tt__Date(soap);
    dt->Date->Year = utc.tm_year + 1900;
    dt->Date->Month = utc.tm_mon + 1;
    dt->Date->Day = utc.tm_mday;
    dt->Time = soap_new_tt__Time(soap);
    dt->Time->Hour = utc.tm_hour;
    dt->Time->Minute = utc.tm_min;
    dt->Time->Second = utc.tm_sec;
    return SOAP_OK;
}

int __tds__GetCapabilities(struct soap* soap, struct _tds__GetCapabilities*,
                           struct _tds__GetCapabilitiesResponse* response) {
    response->Capabilities = soap_new_tt__Capabilities(soap);
    if (options.media2Only) return SOAP_OK;  // GetCapabilities knows Media1 only
    response->Capabilities->Media = soap_new_tt__MediaCapabilities(soap);
    response->Capabilities->Media->XAddr = soap_strdup(soap, namedServiceUrl(kMediaPath).c_str());
    return SOAP_OK;
}

// Without authentication, as the ONVIF core specification has it (PRE_AUTH).
int __tds__GetServices(struct soap* soap, struct _tds__GetServices*,
                       struct _tds__GetServicesResponse* response) {
    std::vector<std::pair<const char*, const char*>> services = {
        {"http://www.onvif.org/ver10/device/wsdl", "/onvif/device_service"},
        {"http://www.onvif.org/ver20/media/wsdl", kMedia2Path}};
    if (!options.media2Only) services.push_back({"http://www.onvif.org/ver10/media/wsdl", kMediaPath});
    response->__sizeService = int(services.size());
    response->Service = soap_new_tds__Service(soap, int(services.size()));
    for (std::size_t i = 0; i < services.size(); ++i) {
        response->Service[i].Namespace = soap_strdup(soap, services[i].first);
        response->Service[i].XAddr = soap_strdup(soap, namedServiceUrl(services[i].second).c_str());
    }
    return SOAP_OK;
}

int __tds__GetDeviceInformation(struct soap* soap, struct _tds__GetDeviceInformation*,
                                struct _tds__GetDeviceInformationResponse* response) {
    if (int error = requireAuth(soap)) return error;
    response->Manufacturer = soap_strdup(soap, "devlet");
    response->Model = soap_strdup(soap, "SimCam");
    response->FirmwareVersion = soap_strdup(soap, "1.0");
    response->SerialNumber = soap_strdup(soap, options.uuid.substr(0, 8).c_str());
    response->HardwareId = soap_strdup(soap, "sim");
    return SOAP_OK;
}

int __tds__GetNetworkInterfaces(struct soap* soap, struct _tds__GetNetworkInterfaces*,
                                struct _tds__GetNetworkInterfacesResponse* response) {
    if (int error = requireAuth(soap)) return error;
    response->__sizeNetworkInterfaces = 1;
    response->NetworkInterfaces = soap_new_tt__NetworkInterface(soap, 1);
    tt__NetworkInterface& ni = response->NetworkInterfaces[0];
    ni.token = soap_strdup(soap, "eth0");
    ni.Enabled = soap_strdup(soap, "true");
    ni.Info = soap_new_tt__NetworkInterfaceInfo(soap);
    ni.Info->Name = soap_strdup(soap, "eth0");
    ni.Info->HwAddress = soap_strdup(soap, options.mac.c_str());
    ni.IPv4 = soap_new_tt__IPv4NetworkInterface(soap);
    ni.IPv4->Enabled = soap_strdup(soap, "true");
    ni.IPv4->Config = soap_new_tt__IPv4Configuration(soap);
    ni.IPv4->Config->__sizeManual = 1;
    ni.IPv4->Config->Manual = soap_new_tt__PrefixedIPv4Address(soap, 1);
    ni.IPv4->Config->Manual[0].Address = soap_strdup(soap, options.address.c_str());
    ni.IPv4->Config->Manual[0].PrefixLength = 24;
    ni.IPv4->Config->DHCP = soap_strdup(soap, "false");  // required by tt:IPv4Configuration
    return SOAP_OK;
}

namespace {
// In the modes that name service addresses, a media call must come to the path named, as
// on a camera whose services are separate handlers: a client that ignored the address
// (or used the device service's) is refused.
int requirePath(struct soap* soap, const char* path) {
    if (!options.media2Only && options.natAddress.empty()) return SOAP_OK;
    if (std::string(soap->path) == path) return SOAP_OK;
    return soap_sender_fault_subcode(soap, "ter:ActionNotSupported", "No such service at this address",
                                     nullptr);
}

void fillProfile(struct soap* soap, tt__Profile& p, int index) {
    const char* tokens[] = {"main", "sub"};
    const int sizes[][2] = {{1920, 1080}, {640, 360}};
    p.token = soap_strdup(soap, tokens[index]);
    p.Name = soap_strdup(soap, tokens[index]);
    p.VideoEncoderConfiguration = soap_new_tt__VideoEncoderConfiguration(soap);
    p.VideoEncoderConfiguration->token = soap_strdup(soap, tokens[index]);
    p.VideoEncoderConfiguration->Encoding = soap_strdup(soap, "H264");
    p.VideoEncoderConfiguration->Resolution = soap_new_tt__VideoResolution(soap);
    p.VideoEncoderConfiguration->Resolution->Width = sizes[index][0];
    p.VideoEncoderConfiguration->Resolution->Height = sizes[index][1];
}
}  // namespace

int __trt__GetProfiles(struct soap* soap, struct _trt__GetProfiles*,
                       struct _trt__GetProfilesResponse* response) {
    if (options.media2Only)
        return soap_sender_fault_subcode(soap, "ter:ActionNotSupported", "No Media1", nullptr);
    if (int error = requirePath(soap, kMediaPath)) return error;
    if (int error = requireAuth(soap)) return error;
    response->__sizeProfiles = 2;
    response->Profiles = soap_new_tt__Profile(soap, 2);
    for (int i = 0; i < 2; ++i) fillProfile(soap, response->Profiles[i], i);
    return SOAP_OK;
}

int __trt__GetProfile(struct soap* soap, struct _trt__GetProfile* request,
                      struct _trt__GetProfileResponse* response) {
    if (options.media2Only)
        return soap_sender_fault_subcode(soap, "ter:ActionNotSupported", "No Media1", nullptr);
    if (int error = requirePath(soap, kMediaPath)) return error;
    if (int error = requireAuth(soap)) return error;
    const std::string token = request->ProfileToken ? request->ProfileToken : "";
    if (token != "main" && token != "sub")
        return soap_sender_fault_subcode(soap, "ter:InvalidArgVal", "No such profile", nullptr);
    response->Profile = soap_new_tt__Profile(soap);
    fillProfile(soap, *response->Profile, token == "main" ? 0 : 1);
    return SOAP_OK;
}

int __trt__GetStreamUri(struct soap* soap, struct _trt__GetStreamUri* request,
                        struct _trt__GetStreamUriResponse* response) {
    if (options.media2Only)
        return soap_sender_fault_subcode(soap, "ter:ActionNotSupported", "No Media1", nullptr);
    if (int error = requirePath(soap, kMediaPath)) return error;
    if (int error = requireAuth(soap)) return error;
    const std::string token = request->ProfileToken ? request->ProfileToken : "none";
    // Like many cameras, the URI carries the credentials; devlet must strip them.
    const std::string userinfo = options.user.empty() ? "" : options.user + ":" + options.password + "@";
    const std::string path =
        metadataVersion == 1 ? "/stream/" : "/stream" + std::to_string(metadataVersion) + "/";
    const std::string uri = "rtsp://" + userinfo + streamHost() + ":554" + path + token;
    response->MediaUri = soap_new_tt__MediaUri(soap);
    response->MediaUri->Uri = soap_strdup(soap, uri.c_str());
    return SOAP_OK;
}

// Media2: the main profile is H.265, which Media1 cannot describe.
int __tr2__GetProfiles(struct soap* soap, struct _tr2__GetProfiles* request,
                       struct _tr2__GetProfilesResponse* response) {
    if (int error = requirePath(soap, kMedia2Path)) return error;
    if (int error = requireAuth(soap)) return error;
    bool withEncoder = false;
    for (int i = 0; i < request->__sizeType; ++i) {
        const std::string type = request->Type[i] ? request->Type[i] : "";
        withEncoder = withEncoder || type == "All" || type == "VideoEncoder";
    }
    const char* tokens[] = {"main", "sub"};
    const char* encodings[] = {"H265", "H264"};
    const int sizes[][2] = {{1920, 1080}, {640, 360}};
    response->__sizeProfiles = 2;
    response->Profiles = soap_new_tr2__MediaProfile(soap, 2);
    for (int i = 0; i < 2; ++i) {
        tr2__MediaProfile& p = response->Profiles[i];
        p.token = soap_strdup(soap, tokens[i]);
        p.Name = soap_strdup(soap, tokens[i]);
        // Without a Type a profile carries only its name and token.
        if (!withEncoder) continue;
        p.Configurations = soap_new_tr2__ConfigurationSet(soap);
        auto* encoder = p.Configurations->VideoEncoder = soap_new_tt__VideoEncoder2Configuration(soap);
        encoder->token = soap_strdup(soap, tokens[i]);
        encoder->Name = soap_strdup(soap, tokens[i]);
        encoder->Encoding = soap_strdup(soap, encodings[i]);
        encoder->Resolution = soap_new_tt__VideoResolution2(soap);
        encoder->Resolution->Width = sizes[i][0];
        encoder->Resolution->Height = sizes[i][1];
    }
    return SOAP_OK;
}

int __tr2__GetStreamUri(struct soap* soap, struct _tr2__GetStreamUri* request,
                        struct _tr2__GetStreamUriResponse* response) {
    if (int error = requirePath(soap, kMedia2Path)) return error;
    if (int error = requireAuth(soap)) return error;
    const std::string protocol = request->Protocol ? request->Protocol : "";
    if (protocol != "RtspUnicast" && protocol != "RTSP")
        return soap_sender_fault_subcode(soap, "ter:InvalidArgVal", "Unsupported protocol", nullptr);
    const std::string token = request->ProfileToken ? request->ProfileToken : "none";
    if (token != "main" && token != "sub")
        return soap_sender_fault_subcode(soap, "ter:InvalidArgVal", "No such profile", nullptr);
    const std::string userinfo = options.user.empty() ? "" : options.user + ":" + options.password + "@";
    response->Uri = soap_strdup(soap, ("rtsp://" + userinfo + streamHost() + ":554/media2/" + token).c_str());
    return SOAP_OK;
}

// The HTTP server of one address, or nullptr (the reason printed).
struct soap* openHttp(const std::string& address) {
    struct soap* http = soap_new1(SOAP_C_UTFSTRING);
    soap_set_namespaces(http, namespaces);
    http->bind_flags = SO_REUSEADDR;
    http->accept_timeout = 1;
    http->recv_timeout = 5;
    http->send_timeout = 5;
    if ((!options.tlsKeyFile.empty() &&
         soap_ssl_server_context(http, SOAP_SSL_DEFAULT, options.tlsKeyFile.c_str(), nullptr, nullptr,
                                 nullptr, nullptr, nullptr, nullptr) != SOAP_OK) ||
        !soap_valid_socket(soap_bind(http, address.c_str(), options.port, 16))) {
        soap_print_fault(http, stderr);
        soap_free(http);
        return nullptr;
    }
    defaultParseHeader = http->fparsehdr;
    defaultPostHeader = http->fposthdr;
    http->fparsehdr = parseHeader;
    defaultParse = http->fparse;
    http->fparse = parseHttp;
    http->fposthdr = postHeader;
    return http;
}

// Moves the camera to the address its interface has now: WS-Discovery goes out from there,
// the IPv4 HTTP server listens there, and XAddrs, GetNetworkInterfaces and stream URIs name
// it. Then the Hello a camera sends when its address changes, with a new MetadataVersion.
bool moveToCurrentAddress(int udp, std::vector<struct soap*>& servers) {
    const std::string address = currentIpv4Address();
    if (address.empty() || address == options.address) {
        std::cerr << "onvif_camera: no new IPv4 address to move to\n";
        return false;
    }
    struct soap* http = openHttp(address);
    if (!http) return false;
    soap_free(servers.front());
    servers.front() = http;
    options.address = address;
    ip_mreq join{};
    inet_pton(AF_INET, "239.255.255.250", &join.imr_multiaddr);
    inet_pton(AF_INET, address.c_str(), &join.imr_interface);
    setsockopt(udp, IPPROTO_IP, IP_ADD_MEMBERSHIP, &join, sizeof join);  // EADDRINUSE: joined on eth0 already
    setsockopt(udp, IPPROTO_IP, IP_MULTICAST_IF, &join.imr_interface, sizeof join.imr_interface);
    ++metadataVersion;
    return true;
}

int main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::cerr << "onvif_camera: " << arg << " needs a value\n";
                std::exit(2);
            }
            return argv[++i];
        };
        // The next argument as a whole number of `target`'s type, or the camera does not start.
        auto number = [&](auto& target) {
            const std::string text = value();
            const auto [stop, error] = std::from_chars(text.data(), text.data() + text.size(), target);
            if (error != std::errc() || stop != text.data() + text.size()) {
                std::cerr << "onvif_camera: " << arg << " needs a whole number, not \"" << text << "\"\n";
                std::exit(2);
            }
        };
        if (arg == "--address")
            options.address = value();
        else if (arg == "--port")
            number(options.port);
        else if (arg == "--address6")
            options.address6 = value();
        else if (arg == "--interface6")
            options.interface6 = value();
        else if (arg == "--https")
            options.tlsKeyFile = value();
        else if (arg == "--advertise-port")
            number(options.advertisePort);
        else if (arg == "--uuid")
            options.uuid = value();
        else if (arg == "--name")
            options.name = value();
        else if (arg == "--user")
            options.user = value();
        else if (arg == "--password")
            options.password = value();
        else if (arg == "--mac")
            options.mac = value();
        else if (arg == "--clock-offset")
            number(options.clockOffsetSeconds);
        else if (arg == "--hello")
            options.hello = options.bye = true;
        else if (arg == "--bye")
            options.bye = true;
        else if (arg == "--answer-delay-ms")
            number(options.answerDelayMs);
        else if (arg == "--no-probe-answers")
            options.answerProbes = false;
        else if (arg == "--fail-every")
            number(options.failEvery);
        else if (arg == "--auth")
            options.auth = value();
        else if (arg == "--record-credentials")
            options.recordCredentials = value();
        else if (arg == "--media2-only")
            options.media2Only = true;
        else if (arg == "--nat-address")
            options.natAddress = value();
        else if (arg == "--hostile")
            options.hostile = value();
        else if (arg == "--must-understand")
            options.mustUnderstand = true;
        else if (arg == "--message-id")
            options.messageId = value();
        else if (arg == "--hello-without-xaddrs")
            options.helloWithoutXAddrs = options.hello = options.bye = true;
        else if (arg == "--spoof-uuid")
            options.spoofUuid = value();
        else if (arg == "--spoof-xaddr")
            options.spoofXAddr = value();
        else if (arg == "--ready-file")
            options.readyFile = value();
        else {
            std::cerr << "usage: onvif_camera --address IP [--address6 IP [--interface6 NAME]] [--port N] "
                         "[--https PEM] [--advertise-port N] [--uuid U] "
                         "[--name N] [--user U "
                         "--password P]\n"
                         "  [--mac M] [--clock-offset S] [--hello] [--bye] [--answer-delay-ms N] "
                         "[--no-probe-answers] [--fail-every N]\n"
                         "  [--auth usernametoken|digest-md5|digest-sha256] [--record-credentials FILE]\n"
                         "  [--media2-only] [--nat-address HOST[:PORT]]\n"
                         "  [--hostile MODE] [--must-understand] [--message-id ID] [--hello-without-xaddrs]\n"
                         "  [--spoof-uuid U [--spoof-xaddr URL]] [--ready-file F]\n";
            return 2;
        }
    }
    if (options.address.empty()) return 2;
    std::srand(unsigned(getpid()));  // cameras started together answer at different moments
    std::signal(SIGTERM, onSignal);
    std::signal(SIGINT, onSignal);
    std::signal(SIGUSR1, onReconfigure);
    std::signal(SIGUSR2, onReaddress);
    std::signal(SIGPIPE, SIG_IGN);

    const int udp = openUdp();
    const int udp6 = options.address6.empty() ? -1 : openUdp6();
    if (udp6 >= 0) {
        udp6Send = socket(AF_INET6, SOCK_DGRAM, 0);
        sockaddr_in6 source{};
        source.sin6_family = AF_INET6;
        inet_pton(AF_INET6, options.address6.c_str(), &source.sin6_addr);
        if (bind(udp6Send, reinterpret_cast<sockaddr*>(&source), sizeof source) != 0) {
            std::perror("bind --address6");
            return 1;
        }
    }
    // One HTTP server per address family (the second only with --address6); the IPv4 one first.
    std::vector<struct soap*> servers;
    for (const std::string& address : {options.address, options.address6}) {
        if (address.empty()) continue;
        struct soap* http = openHttp(address);
        if (!http) return 1;
        servers.push_back(http);
    }
    long long helloAt = 0;
    auto announced = [](bool v6) {
        DiscoveredEndpoint e = endpoint(v6);
        if (options.helloWithoutXAddrs) e.xaddrs.clear();
        return e;
    };
    if (options.hello) {
        const std::string hello = withMustUnderstand(encodeHello(messageId(), announced(false)));
        helloAt = monotonicNs();
        sendMulticast(udp, hello);
        if (udp6 >= 0) sendMulticast6(udp6, withMustUnderstand(encodeHello(messageId(), announced(true))));
    }
    if (!options.readyFile.empty()) {
        // Written aside and renamed: whoever waits for the file reads it whole.
        const std::string partial = options.readyFile + ".partial";
        appendLine(partial, "hello " + std::to_string(helloAt), true);
        std::rename(partial.c_str(), options.readyFile.c_str());
    }

    std::vector<char> buffer(65536);
    while (!stopping) {
        if (reconfigured) {
            reconfigured = 0;
            ++metadataVersion;
            sendMulticast(udp, withMustUnderstand(encodeHello(messageId(), announced(false))));
        }
        if (readdressed) {
            readdressed = 0;
            if (moveToCurrentAddress(udp, servers))
                sendMulticast(udp, withMustUnderstand(encodeHello(messageId(), announced(false))));
        }
        std::vector<pollfd> fds = {{udp, POLLIN, 0}};
        if (udp6 >= 0) fds.push_back({udp6, POLLIN, 0});
        for (struct soap* http : servers) fds.push_back({http->master, POLLIN, 0});
        if (poll(fds.data(), fds.size(), sendDueAnswers(200)) <= 0) continue;
        for (const pollfd& ready : fds) {
            if (!(ready.revents & POLLIN)) continue;
            if (ready.fd == udp || ready.fd == udp6) {
                readProbe(ready.fd, buffer);
                continue;
            }
            struct soap* http = *std::find_if(servers.begin(), servers.end(),
                                              [&](struct soap* h) { return h->master == ready.fd; });
            if (options.hostile.starts_with("http-")) {
                serveRawHttp(http->master);
                continue;
            }
            if (soap_valid_socket(soap_accept(http))) {
                authorization.clear();
                http->header = nullptr;
                if (options.tlsKeyFile.empty() || soap_ssl_accept(http) == SOAP_OK) soap_serve(http);
                const bool token = http->header && http->header->wsse__Security &&
                                   http->header->wsse__Security->UsernameToken;
                if (!options.recordCredentials.empty() && (token || !authorization.empty()))
                    appendLine(options.recordCredentials,
                               std::string(http->host) + (token ? " UsernameToken" : "") +
                                   (authorization.empty() ? "" : " Authorization"),
                               false);
                soap_destroy(http);
                soap_end(http);
            }
        }
    }
    if (options.bye) {
        const std::string bye = withMustUnderstand(encodeBye(messageId(), endpoint()));
        const long long byeAt = monotonicNs();
        sendMulticast(udp, bye);
        if (udp6 >= 0) sendMulticast6(udp6, withMustUnderstand(encodeBye(messageId(), endpoint(true))));
        if (!options.readyFile.empty()) appendLine(options.readyFile, "bye " + std::to_string(byeAt), false);
    }
    for (struct soap* http : servers) soap_free(http);
    if (udp6 >= 0) close(udp6);
    close(udp);
    return 0;
}
