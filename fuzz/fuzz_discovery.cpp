// Fuzz target: WS-Discovery datagrams (Probe, ProbeMatches, Hello, Bye, Resolve,
// ResolveMatches) as a camera or anything else on the multicast group may send them,
// through gSOAP's DOM parser and decodeDiscovery's walk. What it accepts stays within the
// limits soap_wire.h promises.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "probes/onvif/soap_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace devlet::onvif;
    std::string error;
    const auto message = decodeDiscovery(std::string_view(reinterpret_cast<const char*>(data), size), error);
    if (!message) {
        if (error.empty()) std::abort();  // a refusal always says why
        return 0;
    }
    if (message->endpoints.size() > kMaxEndpointsPerMessage) std::abort();
    for (const auto& endpoint : message->endpoints) {
        if (endpoint.xaddrs.size() > kMaxXAddrsPerEndpoint ||
            endpoint.scopes.size() > kMaxScopesPerEndpoint || endpoint.types.size() > kMaxTypesPerEndpoint ||
            endpoint.address.empty())
            std::abort();
        for (const auto& xaddr : endpoint.xaddrs) {
            if (!isUsableServiceUrl(xaddr)) std::abort();
            (void)urlHostIs(xaddr, "192.0.2.10");
            (void)urlHostIs(xaddr, "fe80::1%eth0");
        }
        (void)isCamera(endpoint.types);
        (void)endpointUuid(endpoint.address);
        (void)urlHost(endpoint.address);
    }
    return 0;
}
