#pragma once
// The `onvif` discovery handler: Akri's ONVIF discoveryDetails, one probe per configuration.
// A probe owns two UDP sockets on the event loop (Probe/ProbeMatches on an ephemeral port,
// Hello/Bye on 3702 joined to 239.255.255.250) and hands the blocking SOAP calls to the
// handler's worker pool; results come back to the loop by post. Cameras are shared devices.

#include <memory>
#include <string>
#include <vector>

#include "runtime/discovery.h"

namespace devlet::onvif {

class WorkerPool;

class OnvifHandler : public DiscoveryHandler {
public:
    explicit OnvifHandler(std::size_t workers = 8);
    ~OnvifHandler() override;
    std::string_view name() const override { return "onvif"; }
    std::vector<DetailsProblem> check(const Configuration& configuration) const override;
    // Akri's old grace for shared instances: cameras flap.
    std::chrono::milliseconds defaultRemovalGrace() const override { return std::chrono::minutes(5); }
    std::unique_ptr<Probe> createProbe(const Configuration& configuration, boost::asio::io_context& loop,
                                       ProbeSink& sink) override;

private:
    std::size_t workers_;
    std::shared_ptr<WorkerPool> pool_;  // started with the first probe
};

}  // namespace devlet::onvif
