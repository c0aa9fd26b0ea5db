// Fuzz target for the parsing of WS-Discovery datagrams (decodeDiscovery). Built with
// clang and -DDEVLET_LIBFUZZER -fsanitize=fuzzer it is a libFuzzer target; otherwise its
// main() runs a fixed number of deterministic mutations of valid messages, as a unit test
// that any crash, hang or sanitizer report fails.

#include <cstddef>
#include <cstdint>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "probes/onvif/soap_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string error;
    auto message =
        devlet::onvif::decodeDiscovery(std::string_view(reinterpret_cast<const char*>(data), size), error);
    if (message) {
        for (const auto& endpoint : message->endpoints) {
            (void)devlet::onvif::isCamera(endpoint.types);
            (void)devlet::onvif::endpointUuid(endpoint.address);
        }
    }
    return 0;
}

#ifndef DEVLET_LIBFUZZER
int main(int argc, char** argv) {
    using namespace devlet::onvif;
    DiscoveredEndpoint endpoint;
    endpoint.address = "urn:uuid:3fa1fe68-b915-4053-a3e1-ac15a21f5f91";
    endpoint.types = {std::string("{") + kOnvifNetworkNamespace + "}NetworkVideoTransmitter"};
    endpoint.scopes = {"onvif://www.onvif.org/name/Lobby"};
    endpoint.xaddrs = {"http://192.0.2.10/onvif/device_service"};
    const std::vector<std::string> seeds = {encodeProbe("uuid:1"),
                                            encodeProbeMatches("uuid:2", "uuid:1", {endpoint}),
                                            encodeHello("uuid:3", endpoint), encodeBye("uuid:4", endpoint)};
    const long iterations = argc > 1 ? std::atol(argv[1]) : 20000;
    std::mt19937 random(20240501);
    const std::string tokens[] = {"<",    ">",          "</",           "/>",        "&",   "&amp;",
                                  "&#0;", "&#x110000;", "<!DOCTYPE a>", "<![CDATA[", "]]>", "xmlns:x=\"\"",
                                  "\"",   "'",          "\xff\xfe",     "<?xml?>"};
    long decoded = 0;
    for (long i = 0; i < iterations; ++i) {
        std::string input = seeds[random() % seeds.size()];
        const int edits = 1 + int(random() % 8);
        for (int e = 0; e < edits && !input.empty(); ++e) {
            const std::size_t at = random() % input.size();
            switch (random() % 5) {
                case 0:
                    input[at] = char(random());
                    break;
                case 1:
                    input.erase(at, random() % 16);
                    break;
                case 2:
                    input.insert(at, tokens[random() % std::size(tokens)]);
                    break;
                case 3:
                    input.insert(at, input.substr(random() % input.size(), random() % 256));
                    break;
                case 4:
                    input.resize(at);
                    break;
            }
        }
        std::string error;
        if (decodeDiscovery(input, error)) ++decoded;
    }
    std::cout << iterations << " mutated datagrams, " << decoded << " still decoded\n";
    return 0;
}
#endif
