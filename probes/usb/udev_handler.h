#pragma once
// The `udev` discovery handler: checks Akri's udev discoveryDetails and runs one probe per
// configuration that keeps a full snapshot of the matching devices current from udev's
// netlink events, with a rare full rescan as a safety net. Probes live on the loop thread.

#include <memory>
#include <string>
#include <vector>

#include "runtime/discovery.h"

namespace devlet::usb {

class UdevHandler : public DiscoveryHandler {
public:
    std::string_view name() const override { return "udev"; }
    std::vector<DetailsProblem> check(const Configuration& configuration) const override;
    std::unique_ptr<Probe> createProbe(const Configuration& configuration, boost::asio::io_context& loop,
                                       ProbeSink& sink) override;
};

}  // namespace devlet::usb
