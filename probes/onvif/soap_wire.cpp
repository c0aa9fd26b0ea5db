#include "probes/onvif/soap_wire.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <random>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "soapH.h"

// gSOAP's DOM parser (dom.cpp, in the library built WITH_DOM); stdsoap2.h leaves it undeclared.
// NOLINTNEXTLINE(bugprone-reserved-identifier): gSOAP's name
SOAP_FMAC1 struct soap_dom_element* SOAP_FMAC2 soap_in_xsd__anyType(struct soap*, const char*,
                                                                    struct soap_dom_element*, const char*);

// The namespace table every gSOAP context of devlet uses (soapcpp2's .nsmap files leave out
// prefixes that no declared type uses, such as the ONVIF network namespace of Types).
SOAP_NMAC struct Namespace namespaces[] = {
    {"SOAP-ENV", "http://www.w3.org/2003/05/soap-envelope", "http://schemas.xmlsoap.org/soap/envelope/",
     nullptr},
    {"SOAP-ENC", "http://www.w3.org/2003/05/soap-encoding", "http://schemas.xmlsoap.org/soap/encoding/",
     nullptr},
    {"xsi", "http://www.w3.org/2001/XMLSchema-instance", "http://www.w3.org/*/XMLSchema-instance", nullptr},
    {"xsd", "http://www.w3.org/2001/XMLSchema", "http://www.w3.org/*/XMLSchema", nullptr},
    {"wsu", "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-utility-1.0.xsd", nullptr,
     nullptr},
    {"wsse", "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd", nullptr,
     nullptr},
    {"wsa", "http://schemas.xmlsoap.org/ws/2004/08/addressing", nullptr, nullptr},
    {"wsdd", "http://schemas.xmlsoap.org/ws/2005/04/discovery", nullptr, nullptr},
    {"tt", "http://www.onvif.org/ver10/schema", nullptr, nullptr},
    {"tds", "http://www.onvif.org/ver10/device/wsdl", nullptr, nullptr},
    {"trt", "http://www.onvif.org/ver10/media/wsdl", nullptr, nullptr},
    {"tr2", "http://www.onvif.org/ver20/media/wsdl", nullptr, nullptr},
    {"tdn", "http://www.onvif.org/ver10/network/wsdl", nullptr, nullptr},
    {"ter", "http://www.onvif.org/ver10/error", nullptr, nullptr},
    {"wsdp", "http://schemas.xmlsoap.org/ws/2006/02/devprof", nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr},
};

namespace devlet::onvif {

namespace {

constexpr const char* kDiscoveryTo = "urn:schemas-xmlsoap-org:ws:2005:04:discovery";
constexpr const char* kActionBase = "http://schemas.xmlsoap.org/ws/2005/04/discovery/";
constexpr const char* kAnonymous = "http://schemas.xmlsoap.org/ws/2004/08/addressing/role/anonymous";

struct SoapDeleter {
    void operator()(struct soap* soap) const {
        soap_destroy(soap);
        soap_end(soap);
        soap_free(soap);
    }
};
using SoapPtr = std::unique_ptr<struct soap, SoapDeleter>;

struct Buffer {
    std::string_view input;
    std::size_t position = 0;
    std::string output;
};

size_t readBuffer(struct soap* soap, char* s, size_t n) {
    auto* buffer = static_cast<Buffer*>(soap->user);
    const std::size_t left = buffer->input.size() - buffer->position;
    const std::size_t count = std::min(n, left);
    std::memcpy(s, buffer->input.data() + buffer->position, count);
    buffer->position += count;
    return count;
}

int writeBuffer(struct soap* soap, const char* s, size_t n) {
    static_cast<Buffer*>(soap->user)->output.append(s, n);
    return SOAP_OK;
}

// One context per thread, reset between messages: parsing a datagram costs no allocation
// of a context.
struct soap* context(Buffer& buffer) {
    thread_local SoapPtr soap;
    if (!soap) {
        soap.reset(soap_new1(SOAP_C_UTFSTRING));
        soap_set_namespaces(soap.get(), namespaces);
    }
    soap_destroy(soap.get());
    soap_end(soap.get());
    soap->user = &buffer;
    soap->frecv = readBuffer;
    soap->fsend = writeBuffer;
    soap->header = nullptr;
    applyLimits(soap.get(), kMaxDatagram);
    return soap.get();
}

std::string qnameOut(const std::string& type) {
    // "{uri}Local" -> "\"uri\":Local": gSOAP declares the prefix on output.
    if (!type.starts_with("{")) return type;
    const auto close = type.find('}');
    if (close == std::string::npos) return type;
    return "\"" + type.substr(1, close - 1) + "\":" + type.substr(close + 1);
}

std::string joinList(const std::vector<std::string>& items) {
    std::string text;
    for (const std::string& item : items) text += (text.empty() ? "" : " ") + item;
    return text;
}

char* dup(struct soap* soap, const std::string& text) {
    return soap_strdup(soap, text.c_str());
}

void setHeader(struct soap* soap, SOAP_ENV__Header& header, const std::string& messageId,
               const std::string& action, const std::string& relatesTo, const char* to) {
    soap_default_SOAP_ENV__Header(soap, &header);
    header.wsa__MessageID = dup(soap, messageId);
    header.wsa__Action = dup(soap, std::string(kActionBase) + action);
    header.wsa__To = dup(soap, to);
    if (!relatesTo.empty()) {
        header.wsa__RelatesTo = soap_new_wsa__Relationship(soap);
        header.wsa__RelatesTo->__item = dup(soap, relatesTo);
    }
    soap->header = &header;
}

wsdd__ScopesType* scopesOut(struct soap* soap, const std::vector<std::string>& scopes) {
    if (scopes.empty()) return nullptr;
    auto* out = soap_new_wsdd__ScopesType(soap);
    out->__item = dup(soap, joinList(scopes));
    return out;
}

std::string typesOut(const std::vector<std::string>& types) {
    std::vector<std::string> out;
    out.reserve(types.size());
    for (const std::string& type : types) out.push_back(qnameOut(type));
    return joinList(out);
}

// Runs the serializer calls of one message into a string; empty on failure.
template <typename Wrapper, typename Serialize, typename Put>
std::string encode(struct soap* soap, Buffer& buffer, Wrapper& wrapper, Serialize serialize, Put put,
                   const char* tag) {
    soap_set_version(soap, 2);
    soap->encodingStyle = nullptr;
    soap_serializeheader(soap);
    serialize(soap, &wrapper);
    if (soap_begin_send(soap) || soap_envelope_begin_out(soap) || soap_putheader(soap) ||
        soap_body_begin_out(soap) || put(soap, &wrapper, tag, "") || soap_body_end_out(soap) ||
        soap_envelope_end_out(soap) || soap_end_send(soap)) {
        return "";
    }
    return std::move(buffer.output);
}

// --- Reading: a walk over gSOAP's DOM by namespace URI and local name ---

constexpr std::array kSoapEnvelopes{"http://www.w3.org/2003/05/soap-envelope",
                                    "http://schemas.xmlsoap.org/soap/envelope/"};
constexpr std::array kAddressing{"http://schemas.xmlsoap.org/ws/2004/08/addressing",
                                 "http://www.w3.org/2005/08/addressing"};
constexpr std::array kDiscovery{"http://schemas.xmlsoap.org/ws/2005/04/discovery",
                                "http://docs.oasis-open.org/ws-dd/ns/discovery/2009/01"};

template <std::size_t N>
bool inNamespaces(const char* uri, const std::array<const char*, N>& uris) {
    return uri &&
           std::any_of(uris.begin(), uris.end(), [&](const char* u) { return std::strcmp(uri, u) == 0; });
}

std::string_view localName(const soap_dom_element* element) {
    if (!element->name) return {};
    std::string_view name = element->name;
    if (const auto colon = name.rfind(':'); colon != std::string_view::npos) name.remove_prefix(colon + 1);
    return name;
}

// The element's name in one of `uris`; an element whose prefix is undeclared (no namespace
// at all) also matches by its local name: a camera that forgot a declaration is read.
template <std::size_t N>
bool isElement(const soap_dom_element* element, const std::array<const char*, N>& uris,
               std::string_view name) {
    return localName(element) == name && (!element->nstr || inNamespaces(element->nstr, uris));
}

template <std::size_t N>
const soap_dom_element* child(const soap_dom_element* parent, const std::array<const char*, N>& uris,
                              std::string_view name) {
    for (const soap_dom_element* e = parent->elts; e; e = e->next)
        if (isElement(e, uris, name)) return e;
    return nullptr;
}

std::string textOf(const soap_dom_element* element) {
    if (!element || !element->text) return "";
    std::string_view text = element->text;
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return "";
    const auto last = text.find_last_not_of(" \t\r\n");
    return std::string(text.substr(first, last - first + 1));
}

// The namespace a prefix ("" = the default namespace) is bound to where `element` is, from
// the xmlns attributes gSOAP's DOM keeps; nullopt when nothing declares it.
std::optional<std::string> namespaceOf(const soap_dom_element* element, const std::string& prefix) {
    const std::string attribute = prefix.empty() ? "xmlns" : "xmlns:" + prefix;
    for (const soap_dom_element* e = element; e; e = e->prnt) {
        for (const soap_dom_attribute* a = e->atts; a; a = a->next)
            if (a->name && attribute == a->name) return std::string(a->text ? a->text : "");
    }
    return std::nullopt;
}

// One QName of a Types list as "{namespace}Local" (see decodeDiscovery in soap_wire.h).
std::string expandType(const soap_dom_element* element, const std::string& qname) {
    const auto colon = qname.find(':');
    const std::string prefix = colon == std::string::npos ? "" : qname.substr(0, colon);
    const std::string local = colon == std::string::npos ? qname : qname.substr(colon + 1);
    std::optional<std::string> uri = namespaceOf(element, prefix);
    // An unprefixed name under a default namespace meant for the message's own elements
    // (WS-Discovery written with xmlns="…discovery…") was not meant to be in that namespace.
    const bool messageNamespace = uri && prefix.empty() && inNamespaces(uri->c_str(), kDiscovery);
    if (uri && !uri->empty() && !messageNamespace) return "{" + *uri + "}" + local;
    if (local == "NetworkVideoTransmitter") return "{" + std::string(kOnvifNetworkNamespace) + "}" + local;
    if (local == "Device" && prefix == "tds") return "{" + std::string(kOnvifDeviceNamespace) + "}" + local;
    return "{}" + local;
}

// An endpoint of a ProbeMatch, ResolveMatch, Hello, Bye or Resolve; nullopt with `error`
// when it names no endpoint address.
std::optional<DiscoveredEndpoint> readEndpoint(const soap_dom_element* element, const std::string& what,
                                               std::string& error) {
    DiscoveredEndpoint endpoint;
    const soap_dom_element* reference = child(element, kAddressing, "EndpointReference");
    const soap_dom_element* address = reference ? child(reference, kAddressing, "Address") : nullptr;
    endpoint.address = textOf(address);
    if (endpoint.address.empty()) {
        error = what + (reference ? " has no EndpointReference/Address" : " has no EndpointReference");
        return std::nullopt;
    }
    if (const soap_dom_element* types = child(element, kDiscovery, "Types")) {
        const std::string text = textOf(types);
        for (const std::string& type : splitList(text.c_str(), kMaxTypesPerEndpoint))
            endpoint.types.push_back(expandType(types, type));
    }
    if (const soap_dom_element* scopes = child(element, kDiscovery, "Scopes")) {
        const std::string text = textOf(scopes);
        endpoint.scopes = splitList(text.c_str(), kMaxScopesPerEndpoint);
    }
    if (endpoint.types.empty() &&
        std::any_of(endpoint.scopes.begin(), endpoint.scopes.end(),
                    [](const auto& s) { return s.starts_with("onvif://www.onvif.org/"); }))
        endpoint.types.push_back("{" + std::string(kOnvifNetworkNamespace) + "}NetworkVideoTransmitter");
    if (const soap_dom_element* xaddrs = child(element, kDiscovery, "XAddrs")) {
        const std::string text = textOf(xaddrs);
        for (std::string& url : splitList(text.c_str(), 1024)) {
            if (endpoint.xaddrs.size() >= kMaxXAddrsPerEndpoint) break;
            if (isUsableServiceUrl(url)) endpoint.xaddrs.push_back(std::move(url));
        }
    }
    if (const soap_dom_element* version = child(element, kDiscovery, "MetadataVersion")) {
        // Not a number: read as 0, the version of a camera that does not count.
        const std::string text = textOf(version);
        unsigned value = 0;
        if (std::from_chars(text.data(), text.data() + text.size(), value).ec == std::errc{})
            endpoint.metadataVersion = value;
    }
    return endpoint;
}

// What went wrong in gSOAP's XML parser, in words.
std::string xmlErrorOf(int code) {
    switch (code) {
        case SOAP_EOF:
            return "the datagram ends inside the document";
        case SOAP_SYNTAX_ERROR:
            return "not XML";
        case SOAP_TAG_MISMATCH:
            return "an end tag does not match its start tag";
        case SOAP_LEVEL:
            return "elements nested deeper than 32";
        case SOAP_LENGTH:
            return "a text longer than 16 KiB";
        case SOAP_UTF_ERROR:
            return "invalid UTF-8";
        case SOAP_NAMESPACE:
            return "an undeclared namespace prefix";
        default:
            return "gSOAP error " + std::to_string(code);
    }
}

std::optional<DiscoveryMessage> readDiscovery(const soap_dom_element* envelope, std::string& error) {
    if (!isElement(envelope, kSoapEnvelopes, "Envelope") || !envelope->nstr) {
        error = "not a SOAP envelope (the root element is " +
                std::string(envelope->name ? envelope->name : "?") + ")";
        return std::nullopt;
    }
    DiscoveryMessage message;
    if (const soap_dom_element* header = child(envelope, kSoapEnvelopes, "Header")) {
        message.messageId = textOf(child(header, kAddressing, "MessageID"));
        message.relatesTo = textOf(child(header, kAddressing, "RelatesTo"));
    }
    const soap_dom_element* body = child(envelope, kSoapEnvelopes, "Body");
    if (!body) {
        error = "malformed WS-Discovery message: no Body";
        return std::nullopt;
    }
    const soap_dom_element* content = body->elts;
    if (!content) {
        error = "malformed WS-Discovery message: an empty Body";
        return std::nullopt;
    }
    const std::string_view name = localName(content);
    if (!inNamespaces(content->nstr, kDiscovery)) {
        error = "not a WS-Discovery message (the Body holds " +
                std::string(content->nstr ? content->nstr : "") + (content->nstr ? " " : "") +
                std::string(name) + ")";
        return std::nullopt;
    }
    auto readMatches = [&](std::string_view matchName) -> bool {
        std::size_t index = 0;
        for (const soap_dom_element* e = content->elts; e; e = e->next) {
            if (!isElement(e, kDiscovery, matchName)) continue;
            ++index;
            if (message.endpoints.size() >= kMaxEndpointsPerMessage) {
                ++message.droppedEndpoints;
                continue;
            }
            std::string why;
            if (auto endpoint = readEndpoint(e, std::string(matchName) + " " + std::to_string(index), why)) {
                message.endpoints.push_back(std::move(*endpoint));
            } else {
                // One bad match of several: the others are still read.
                ++message.droppedEndpoints;
                if (error.empty()) error = why;
            }
        }
        if (message.endpoints.empty() && message.droppedEndpoints > 0) {
            error = "malformed WS-Discovery message: " + error;
            return false;
        }
        error.clear();
        return true;
    };
    auto readOne = [&](const char* what, bool full) -> bool {
        std::string why;
        auto endpoint = readEndpoint(content, what, why);
        if (!endpoint) {
            error = "malformed WS-Discovery message: " + why;
            return false;
        }
        if (!full) {
            endpoint->types.clear();
            endpoint->scopes.clear();
            endpoint->xaddrs.clear();
            endpoint->metadataVersion = 0;
        }
        message.endpoints.push_back(std::move(*endpoint));
        return true;
    };
    if (name == "ProbeMatches") {
        message.kind = DiscoveryKind::ProbeMatches;
        if (!readMatches("ProbeMatch")) return std::nullopt;
    } else if (name == "ResolveMatches") {
        message.kind = DiscoveryKind::ResolveMatches;
        if (!readMatches("ResolveMatch")) return std::nullopt;
    } else if (name == "Hello") {
        message.kind = DiscoveryKind::Hello;
        if (!readOne("Hello", true)) return std::nullopt;
    } else if (name == "Bye") {
        message.kind = DiscoveryKind::Bye;
        if (!readOne("Bye", false)) return std::nullopt;
    } else if (name == "Resolve") {
        message.kind = DiscoveryKind::Resolve;
        if (!readOne("Resolve", false)) return std::nullopt;
    } else if (name == "Probe") {
        message.kind = DiscoveryKind::Probe;
        if (const soap_dom_element* types = child(content, kDiscovery, "Types")) {
            const std::string text = textOf(types);
            for (const std::string& type : splitList(text.c_str(), kMaxTypesPerEndpoint))
                message.probeTypes.push_back(expandType(types, type));
        }
    } else {
        error = "not a WS-Discovery message we read (" + std::string(name) + ")";
        return std::nullopt;
    }
    return message;
}

}  // namespace

void applyLimits(struct soap* soap, std::size_t maxMessageBytes) {
    soap->maxlevel = 32;
    soap->maxlength = 16384;
    soap->maxoccurs = 1024;
    soap->recv_maxlength = maxMessageBytes;
}

std::vector<std::string> splitList(const char* text, std::size_t limit) {
    std::vector<std::string> items;
    if (!text) return items;
    const char* p = text;
    while (*p && items.size() < limit) {
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') ++p;
        const char* start = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') ++p;
        if (p > start) items.emplace_back(start, p);
    }
    return items;
}

std::string newUuid() {
    thread_local std::mt19937_64 random{std::random_device{}()};
    const std::uint64_t a = random(), b = random();
    unsigned char bytes[16];
    for (int i = 0; i < 8; ++i) {
        bytes[i] = static_cast<unsigned char>(a >> (8 * i));
        bytes[8 + i] = static_cast<unsigned char>(b >> (8 * i));
    }
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    char text[37];
    std::snprintf(text, sizeof text, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                  bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8],
                  bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]);
    return text;
}

std::string newMessageId() {
    return "uuid:" + newUuid();
}

std::string encodeProbe(const std::string& messageId) {
    return encodeProbeForType(messageId, kOnvifNetworkNamespace, "NetworkVideoTransmitter");
}

std::string encodeProbeForType(const std::string& messageId, const std::string& namespaceUri,
                               const std::string& localName) {
    Buffer buffer;
    struct soap* soap = context(buffer);
    SOAP_ENV__Header header;
    setHeader(soap, header, messageId, "Probe", "", kDiscoveryTo);
    wsdd__ProbeType probe;
    soap_default_wsdd__ProbeType(soap, &probe);
    probe.Types = dup(soap, "\"" + namespaceUri + "\":" + localName);
    struct __wsdd__Probe wrapper;
    wrapper.wsdd__Probe = &probe;
    return encode(soap, buffer, wrapper, soap_serialize___wsdd__Probe, soap_put___wsdd__Probe, "-wsdd:Probe");
}

std::string encodeProbeMatches(const std::string& messageId, const std::string& relatesTo,
                               const std::vector<DiscoveredEndpoint>& endpoints) {
    Buffer buffer;
    struct soap* soap = context(buffer);
    SOAP_ENV__Header header;
    setHeader(soap, header, messageId, "ProbeMatches", relatesTo, kAnonymous);
    wsdd__ProbeMatchesType matches;
    soap_default_wsdd__ProbeMatchesType(soap, &matches);
    matches.__sizeProbeMatch = int(endpoints.size());
    matches.ProbeMatch = soap_new_wsdd__ProbeMatchType(soap, int(endpoints.size()));
    for (std::size_t i = 0; i < endpoints.size(); ++i) {
        wsdd__ProbeMatchType& match = matches.ProbeMatch[i];
        match.wsa__EndpointReference.Address = dup(soap, endpoints[i].address);
        match.Types = dup(soap, typesOut(endpoints[i].types));
        match.Scopes = scopesOut(soap, endpoints[i].scopes);
        match.XAddrs = dup(soap, joinList(endpoints[i].xaddrs));
        match.MetadataVersion = endpoints[i].metadataVersion;
    }
    struct __wsdd__ProbeMatches wrapper;
    wrapper.wsdd__ProbeMatches = &matches;
    return encode(soap, buffer, wrapper, soap_serialize___wsdd__ProbeMatches, soap_put___wsdd__ProbeMatches,
                  "-wsdd:ProbeMatches");
}

std::string encodeHello(const std::string& messageId, const DiscoveredEndpoint& endpoint) {
    Buffer buffer;
    struct soap* soap = context(buffer);
    SOAP_ENV__Header header;
    setHeader(soap, header, messageId, "Hello", "", kDiscoveryTo);
    wsdd__HelloType hello;
    soap_default_wsdd__HelloType(soap, &hello);
    hello.wsa__EndpointReference.Address = dup(soap, endpoint.address);
    hello.Types = dup(soap, typesOut(endpoint.types));
    hello.Scopes = scopesOut(soap, endpoint.scopes);
    hello.XAddrs = dup(soap, joinList(endpoint.xaddrs));
    hello.MetadataVersion = endpoint.metadataVersion;
    struct __wsdd__Hello wrapper;
    wrapper.wsdd__Hello = &hello;
    return encode(soap, buffer, wrapper, soap_serialize___wsdd__Hello, soap_put___wsdd__Hello, "-wsdd:Hello");
}

std::string encodeBye(const std::string& messageId, const DiscoveredEndpoint& endpoint) {
    Buffer buffer;
    struct soap* soap = context(buffer);
    SOAP_ENV__Header header;
    setHeader(soap, header, messageId, "Bye", "", kDiscoveryTo);
    wsdd__ByeType bye;
    soap_default_wsdd__ByeType(soap, &bye);
    bye.wsa__EndpointReference.Address = dup(soap, endpoint.address);
    struct __wsdd__Bye wrapper;
    wrapper.wsdd__Bye = &bye;
    return encode(soap, buffer, wrapper, soap_serialize___wsdd__Bye, soap_put___wsdd__Bye, "-wsdd:Bye");
}

std::string encodeResolve(const std::string& messageId, const std::string& endpointAddress) {
    Buffer buffer;
    struct soap* soap = context(buffer);
    SOAP_ENV__Header header;
    setHeader(soap, header, messageId, "Resolve", "", kDiscoveryTo);
    wsdd__ResolveType resolve;
    soap_default_wsdd__ResolveType(soap, &resolve);
    resolve.wsa__EndpointReference.Address = dup(soap, endpointAddress);
    struct __wsdd__Resolve wrapper;
    wrapper.wsdd__Resolve = &resolve;
    return encode(soap, buffer, wrapper, soap_serialize___wsdd__Resolve, soap_put___wsdd__Resolve,
                  "-wsdd:Resolve");
}

std::string encodeResolveMatches(const std::string& messageId, const std::string& relatesTo,
                                 const DiscoveredEndpoint& endpoint) {
    Buffer buffer;
    struct soap* soap = context(buffer);
    SOAP_ENV__Header header;
    setHeader(soap, header, messageId, "ResolveMatches", relatesTo, kAnonymous);
    wsdd__ResolveMatchesType matches;
    soap_default_wsdd__ResolveMatchesType(soap, &matches);
    matches.ResolveMatch = soap_new_wsdd__ResolveMatchType(soap);
    matches.ResolveMatch->wsa__EndpointReference.Address = dup(soap, endpoint.address);
    matches.ResolveMatch->Types = dup(soap, typesOut(endpoint.types));
    matches.ResolveMatch->Scopes = scopesOut(soap, endpoint.scopes);
    matches.ResolveMatch->XAddrs = dup(soap, joinList(endpoint.xaddrs));
    matches.ResolveMatch->MetadataVersion = endpoint.metadataVersion;
    struct __wsdd__ResolveMatches wrapper;
    wrapper.wsdd__ResolveMatches = &matches;
    return encode(soap, buffer, wrapper, soap_serialize___wsdd__ResolveMatches,
                  soap_put___wsdd__ResolveMatches, "-wsdd:ResolveMatches");
}

const char* describe(DiscoveryKind kind) {
    switch (kind) {
        case DiscoveryKind::Probe:
            return "Probe";
        case DiscoveryKind::ProbeMatches:
            return "ProbeMatches";
        case DiscoveryKind::Hello:
            return "Hello";
        case DiscoveryKind::Bye:
            return "Bye";
        case DiscoveryKind::Resolve:
            return "Resolve";
        case DiscoveryKind::ResolveMatches:
            return "ResolveMatches";
    }
    return "?";
}

bool urlHostIs(const std::string& url, const std::string& ipAddress) {
    std::string host = urlHost(url);
    // An IPv6 zone in a URL is percent-encoded ("%25eth0", RFC 6874); cameras also write "%eth0".
    if (const auto zone = host.find('%'); zone != std::string::npos) host.resize(zone);
    std::string sender = ipAddress;
    if (const auto zone = sender.find('%'); zone != std::string::npos) sender.resize(zone);
    const auto bytes = [](const std::string& text) -> std::optional<std::array<unsigned char, 16>> {
        std::array<unsigned char, 16> out{};
        in_addr v4{};
        if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
            // As IPv4-mapped IPv6, so that ::ffff:192.0.2.7 and 192.0.2.7 compare equal.
            out[10] = out[11] = 0xff;
            std::memcpy(out.data() + 12, &v4, 4);
            return out;
        }
        in6_addr v6{};
        if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
            std::memcpy(out.data(), &v6, 16);
            return out;
        }
        return std::nullopt;
    };
    const auto a = bytes(host), b = bytes(sender);
    return a && b && *a == *b;
}

std::optional<DiscoveryMessage> decodeDiscovery(std::string_view datagram, std::string& error) {
    if (datagram.size() > kMaxDatagram) {
        error = "datagram too large";
        return std::nullopt;
    }
    // Some cameras pad datagrams with NUL bytes (a fixed-size buffer sent whole).
    while (!datagram.empty() && datagram.back() == '\0') datagram.remove_suffix(1);
    if (datagram.empty()) {
        error = "empty datagram";
        return std::nullopt;
    }
    Buffer buffer;
    buffer.input = datagram;
    struct soap* soap = context(buffer);
    soap_dom_element root(soap);
    if (soap_begin_recv(soap) || !soap_in_xsd__anyType(soap, nullptr, &root, nullptr) ||
        soap_end_recv(soap)) {
        const std::size_t unread = soap->buflen > soap->bufidx ? soap->buflen - soap->bufidx : 0;
        const std::size_t at = buffer.position > unread ? buffer.position - unread : 0;
        error = "malformed XML near byte " + std::to_string(at) + ": " + xmlErrorOf(soap->error);
        return std::nullopt;
    }
    return readDiscovery(&root, error);
}

}  // namespace devlet::onvif
