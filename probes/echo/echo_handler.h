#pragma once
// The debugEcho discovery handler, Akri-compatible: every description becomes a
// device (id = description, property DEBUG_ECHO_DESCRIPTION). devlet adds
// `shared` and `availabilityFile` (OFFLINE in it = no devices; watched).
// Devices are shared by default, as Akri's Helm chart installs its debugEcho handler
// (DEBUG_ECHO_INSTANCES_SHARED=true): `foo0` is `<configuration>-8120fe` on every node.

#include <memory>
#include <string>
#include <vector>

#include "runtime/discovery.h"

namespace devlet::echo {

struct EchoDetails {
    std::vector<std::string> descriptions;
    bool shared = true;            // Akri's Helm default
    std::string availabilityFile;  // empty = always available
};

// Parses discoveryDetails; problems carry lines relative to the text.
EchoDetails parseEchoDetails(const std::string& text, std::vector<DetailsProblem>& problems);

// The instances a configuration yields, given whether the availability file says OFFLINE.
std::vector<Instance> echoInstances(const EchoDetails& details, bool offline);

class EchoHandler : public DiscoveryHandler {
public:
    std::string_view name() const override { return "debugEcho"; }
    std::vector<DetailsProblem> check(const Configuration& configuration) const override;
    std::unique_ptr<Probe> createProbe(const Configuration& configuration, boost::asio::io_context& loop,
                                       ProbeSink& sink) override;
};

}  // namespace devlet::echo
