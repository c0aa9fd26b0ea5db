#pragma once
// The `udev` discovery handler: checks Akri's udev discoveryDetails and runs one probe per
// configuration that keeps a full snapshot of the matching devices current from udev's
// netlink events, with a rare full rescan as a safety net. Probes live on the loop thread.

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "probes/usb/usb_string_reader.h"
#include "runtime/discovery.h"

namespace devlet::usb {

inline constexpr std::chrono::milliseconds kDefaultRemovalGrace{5000};

class UdevHandler : public DiscoveryHandler {
public:
    // `readStrings` reads a USB device's string descriptors on the probes' worker threads:
    // libusb (readUsbStrings) unless a test gives another.
    explicit UdevHandler(UsbStringReader::ReadFunction readStrings = {})
        : readStrings_(std::move(readStrings)) {}

    std::string_view name() const override { return "udev"; }
    std::vector<DetailsProblem> check(const Configuration& configuration) const override;
    // devicePluginResourceName and vfioPassthrough, as Akri's udev handler reads them.
    std::vector<PropertyWarning> checkDiscoveryProperties(const Configuration& configuration) const override;
    // A replugged cable, a camera moved to another port or a device that re-enumerates
    // comes back within a few seconds; until then its slots are Unhealthy.
    std::chrono::milliseconds defaultRemovalGrace() const override { return kDefaultRemovalGrace; }
    std::unique_ptr<Probe> createProbe(const Configuration& configuration, boost::asio::io_context& loop,
                                       ProbeSink& sink) override;

private:
    UsbStringReader::ReadFunction readStrings_;
};

}  // namespace devlet::usb
