#include "probes/onvif/soap_wire.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>

#include "soapH.h"

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

// "{uri}Local" from gSOAP's normalized QName: "prefix:Local" for prefixes in the table,
// "\"uri\":Local" for others.
std::string expandQName(struct soap* soap, const std::string& qname) {
    if (qname.starts_with("\"")) {
        const auto close = qname.find("\":", 1);
        if (close == std::string::npos) return qname;
        return "{" + qname.substr(1, close - 1) + "}" + qname.substr(close + 2);
    }
    const auto colon = qname.find(':');
    if (colon == std::string::npos) return qname;
    const std::string prefix = qname.substr(0, colon);
    for (const Namespace* ns = soap->local_namespaces ? soap->local_namespaces : namespaces; ns && ns->id;
         ++ns) {
        if (prefix == ns->id) return "{" + std::string(ns->ns) + "}" + qname.substr(colon + 1);
    }
    return qname;
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

DiscoveredEndpoint endpointIn(struct soap* soap, const wsa__EndpointReferenceType& reference,
                              const char* types, const wsdd__ScopesType* scopes, const char* xaddrs,
                              unsigned metadataVersion) {
    DiscoveredEndpoint endpoint;
    endpoint.address = reference.Address ? reference.Address : "";
    for (const std::string& type : splitList(types, 32)) endpoint.types.push_back(expandQName(soap, type));
    if (scopes) endpoint.scopes = splitList(scopes->__item, kMaxScopesPerEndpoint);
    for (std::string& url : splitList(xaddrs, 1024)) {
        if (endpoint.xaddrs.size() >= kMaxXAddrsPerEndpoint) break;
        if (isUsableServiceUrl(url)) endpoint.xaddrs.push_back(std::move(url));
    }
    endpoint.metadataVersion = metadataVersion;
    return endpoint;
}

std::string errorOf(struct soap* soap) {
    const char* fault = *soap_faultstring(soap);
    return "malformed WS-Discovery message (gSOAP error " + std::to_string(soap->error) +
           (fault ? std::string(": ") + fault : "") + ")";
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

std::optional<DiscoveryMessage> decodeDiscovery(std::string_view datagram, std::string& error) {
    if (datagram.size() > kMaxDatagram) {
        error = "datagram too large";
        return std::nullopt;
    }
    Buffer buffer;
    buffer.input = datagram;
    struct soap* soap = context(buffer);
    if (soap_begin_recv(soap) || soap_envelope_begin_in(soap) || soap_recv_header(soap) ||
        soap_body_begin_in(soap)) {
        error = errorOf(soap);
        return std::nullopt;
    }
    (void)soap_peek_element(soap);
    DiscoveryMessage message;
    if (!soap_match_tag(soap, soap->tag, "wsdd:ProbeMatches")) {
        struct __wsdd__ProbeMatches in;
        soap_default___wsdd__ProbeMatches(soap, &in);
        if (!soap_get___wsdd__ProbeMatches(soap, &in, "-wsdd:ProbeMatches", nullptr) ||
            !in.wsdd__ProbeMatches) {
            error = errorOf(soap);
            return std::nullopt;
        }
        message.kind = DiscoveryKind::ProbeMatches;
        const int count =
            std::min<int>(in.wsdd__ProbeMatches->__sizeProbeMatch, int(kMaxEndpointsPerMessage));
        for (int i = 0; i < count; ++i) {
            const wsdd__ProbeMatchType& m = in.wsdd__ProbeMatches->ProbeMatch[i];
            message.endpoints.push_back(
                endpointIn(soap, m.wsa__EndpointReference, m.Types, m.Scopes, m.XAddrs, m.MetadataVersion));
        }
    } else if (!soap_match_tag(soap, soap->tag, "wsdd:Hello")) {
        struct __wsdd__Hello in;
        soap_default___wsdd__Hello(soap, &in);
        if (!soap_get___wsdd__Hello(soap, &in, "-wsdd:Hello", nullptr) || !in.wsdd__Hello) {
            error = errorOf(soap);
            return std::nullopt;
        }
        message.kind = DiscoveryKind::Hello;
        const wsdd__HelloType& h = *in.wsdd__Hello;
        message.endpoints.push_back(
            endpointIn(soap, h.wsa__EndpointReference, h.Types, h.Scopes, h.XAddrs, h.MetadataVersion));
    } else if (!soap_match_tag(soap, soap->tag, "wsdd:Bye")) {
        struct __wsdd__Bye in;
        soap_default___wsdd__Bye(soap, &in);
        if (!soap_get___wsdd__Bye(soap, &in, "-wsdd:Bye", nullptr) || !in.wsdd__Bye) {
            error = errorOf(soap);
            return std::nullopt;
        }
        message.kind = DiscoveryKind::Bye;
        message.endpoints.push_back(
            endpointIn(soap, in.wsdd__Bye->wsa__EndpointReference, nullptr, nullptr, nullptr, 0));
    } else if (!soap_match_tag(soap, soap->tag, "wsdd:Probe")) {
        struct __wsdd__Probe in;
        soap_default___wsdd__Probe(soap, &in);
        if (!soap_get___wsdd__Probe(soap, &in, "-wsdd:Probe", nullptr) || !in.wsdd__Probe) {
            error = errorOf(soap);
            return std::nullopt;
        }
        message.kind = DiscoveryKind::Probe;
        for (const std::string& type : splitList(in.wsdd__Probe->Types, 32))
            message.probeTypes.push_back(expandQName(soap, type));
    } else {
        error = "not a WS-Discovery message";
        return std::nullopt;
    }
    if (soap_body_end_in(soap) || soap_envelope_end_in(soap) || soap_end_recv(soap)) {
        error = errorOf(soap);
        return std::nullopt;
    }
    if (soap->header) {
        if (soap->header->wsa__MessageID) message.messageId = soap->header->wsa__MessageID;
        if (soap->header->wsa__RelatesTo && soap->header->wsa__RelatesTo->__item)
            message.relatesTo = soap->header->wsa__RelatesTo->__item;
    }
    return message;
}

}  // namespace devlet::onvif
