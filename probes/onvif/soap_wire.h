#pragma once
// WS-Discovery messages to and from bytes. Written through the gSOAP serializers generated
// from onvif_interface.h; read through gSOAP's DOM and a walk by namespace URI and local
// name, because cameras send what strict deserializers fault on (mustUnderstand header
// blocks, WS-Addressing 2005/08, undeclared prefixes in Types). UDP datagrams are parsed
// here, never on a socket of gSOAP's own, so the probe keeps its sockets on the event loop.
// Every parse runs under gSOAP's limits (depth, string length, size): a datagram is hostile
// input. Stateless apart from thread-local gSOAP contexts; any thread.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "probes/onvif/onvif_classifier.h"

struct soap;  // NOLINT(readability-identifier-naming): gSOAP's name

namespace devlet::onvif {

inline constexpr std::size_t kMaxDatagram = 65536;
inline constexpr std::size_t kMaxEndpointsPerMessage = 64;
inline constexpr std::size_t kMaxXAddrsPerEndpoint = 8;
inline constexpr std::size_t kMaxScopesPerEndpoint = 64;

inline constexpr std::size_t kMaxTypesPerEndpoint = 32;

enum class DiscoveryKind { Probe, ProbeMatches, Hello, Bye, Resolve, ResolveMatches };
const char* describe(DiscoveryKind kind);  // "ProbeMatches", …

struct DiscoveryMessage {
    DiscoveryKind kind = DiscoveryKind::Probe;
    std::string messageId;
    std::string relatesTo;
    std::vector<std::string> probeTypes;  // of a Probe: "{namespace}LocalName"
    // ProbeMatch/ResolveMatch elements, or the one endpoint of a Hello, Bye or Resolve (its
    // address only for Bye and Resolve).
    std::vector<DiscoveredEndpoint> endpoints;
    std::size_t droppedEndpoints = 0;  // matches past kMaxEndpointsPerMessage or without an address
};

// "uuid:" and a random version 4 UUID.
std::string newMessageId();
// A random version 4 UUID without prefix.
std::string newUuid();

// A Probe for NetworkVideoTransmitter, its namespace declared.
std::string encodeProbe(const std::string& messageId);
// A Probe for any type (as wsdd:Device hosts want), for tests.
std::string encodeProbeForType(const std::string& messageId, const std::string& namespaceUri,
                               const std::string& localName);
std::string encodeProbeMatches(const std::string& messageId, const std::string& relatesTo,
                               const std::vector<DiscoveredEndpoint>& endpoints);
std::string encodeHello(const std::string& messageId, const DiscoveredEndpoint& endpoint);
std::string encodeBye(const std::string& messageId, const DiscoveredEndpoint& endpoint);
// A Resolve for one endpoint address, sent unicast to the host that said Hello without XAddrs.
std::string encodeResolve(const std::string& messageId, const std::string& endpointAddress);
std::string encodeResolveMatches(const std::string& messageId, const std::string& relatesTo,
                                 const DiscoveredEndpoint& endpoint);

// nullopt with `error` (naming the element at fault) for anything that is not a well-formed
// WS-Discovery message of the six kinds. Accepted: SOAP 1.1 and 1.2 envelopes, WS-Addressing
// 2004/08 and 2005/08, WS-Discovery 2005/04 and 2009/01, a UTF-8 byte order mark, any XML
// encoding gSOAP reads, trailing NUL bytes; header blocks other than MessageID and RelatesTo
// are ignored, mustUnderstand or not (a discovery client reads what it needs). Endpoints past
// the limits above are dropped, as are XAddrs that are not usable http(s) URLs.
//
// Types are expanded to "{namespace}LocalName". Cameras get Types wrong in two known ways,
// judged so (isCamera reads the result): a prefix that is not declared (or no prefix, with
// no default namespace) is resolved by the ONVIF convention, NetworkVideoTransmitter to the
// ONVIF network namespace and tds:Device to the device namespace; other undeclared names
// keep an empty namespace and match nothing. An endpoint with no Types at all that has an
// onvif:// scope is taken as a NetworkVideoTransmitter: only ONVIF devices publish those.
std::optional<DiscoveryMessage> decodeDiscovery(std::string_view datagram, std::string& error);

// Applies devlet's limits for untrusted input to a gSOAP context.
void applyLimits(struct soap* soap, std::size_t maxMessageBytes);

// Whether a service URL's host is this IP address (the datagram's sender): literal IPv4 and
// IPv6 addresses compare by value (an IPv6 zone is ignored, IPv4-mapped IPv6 equals IPv4);
// host names never match, as devlet does not resolve names a datagram names.
bool urlHostIs(const std::string& url, const std::string& ipAddress);

// Splits on XML whitespace, skipping empty tokens, at most `limit` tokens.
std::vector<std::string> splitList(const char* text, std::size_t limit);

}  // namespace devlet::onvif
