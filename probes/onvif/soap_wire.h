#pragma once
// WS-Discovery messages to and from bytes, through the gSOAP serializers generated from
// onvif_interface.h. UDP datagrams are parsed here, never on a socket of gSOAP's own, so
// the probe keeps its sockets on the event loop. Every parse runs under gSOAP's limits
// (depth, string length, repetitions, size): a datagram is hostile input.
// Stateless apart from thread-local gSOAP contexts; any thread.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "probes/onvif/onvif_classifier.h"

struct soap;

namespace devlet::onvif {

inline constexpr std::size_t kMaxDatagram = 65536;
inline constexpr std::size_t kMaxEndpointsPerMessage = 64;
inline constexpr std::size_t kMaxXAddrsPerEndpoint = 8;
inline constexpr std::size_t kMaxScopesPerEndpoint = 64;

enum class DiscoveryKind { Probe, ProbeMatches, Hello, Bye };

struct DiscoveryMessage {
    DiscoveryKind kind = DiscoveryKind::Probe;
    std::string messageId;
    std::string relatesTo;
    std::vector<std::string> probeTypes;  // of a Probe: "{namespace}LocalName"
    std::vector<DiscoveredEndpoint> endpoints;
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

// nullopt with `error` for anything that is not a well-formed WS-Discovery message of the
// four kinds. Endpoints past the limits above are dropped, as are XAddrs that are not
// usable http(s) URLs.
std::optional<DiscoveryMessage> decodeDiscovery(std::string_view datagram, std::string& error);

// Applies devlet's limits for untrusted input to a gSOAP context.
void applyLimits(struct soap* soap, std::size_t maxMessageBytes);

// Splits on XML whitespace, skipping empty tokens, at most `limit` tokens.
std::vector<std::string> splitList(const char* text, std::size_t limit);

}  // namespace devlet::onvif
