#pragma once
// The `onvif` discovery handler: Akri's ONVIF discoveryDetails, one probe per configuration.
// A probe owns two UDP sockets on the event loop (Probe/ProbeMatches on an ephemeral port,
// Hello/Bye on 3702 joined to 239.255.255.250) and hands the blocking SOAP calls to the
// handler's worker pool; results come back to the loop by post. Cameras are shared devices.
// What the answers mean is decided by each probe's OnvifCameras (onvif_cameras.h), which
// keeps a CameraStatus per camera it has heard of (camera_status.h), and an IgnoredAnswer
// for each WS-Discovery answer it did not use: a camera is queried only at the address its
// datagram came from (README.md, "Untrusted input").

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "probes/onvif/camera_status.h"
#include "probes/onvif/onvif_client.h"
#include "probes/onvif/onvif_details.h"
#include "runtime/discovery.h"

namespace devlet::onvif {

class WorkerPool;

class OnvifHandler : public DiscoveryHandler {
public:
    explicit OnvifHandler(std::size_t workers = 8);
    ~OnvifHandler() override;
    std::string_view name() const override { return "onvif"; }
    std::vector<DetailsProblem> check(const Configuration& configuration) const override;
    // Akri's credential properties are refused with the reason; every other one is ignored.
    std::vector<PropertyWarning> checkDiscoveryProperties(const Configuration& configuration) const override;
    // Akri's credential properties given by valueFrom.secretKeyRef: read in cluster mode.
    bool readsReferencedProperties() const override { return true; }
    // Akri's old grace for shared instances: cameras flap.
    std::chrono::milliseconds defaultRemovalGrace() const override { return std::chrono::minutes(5); }
    std::unique_ptr<Probe> createProbe(const Configuration& configuration, boost::asio::io_context& loop,
                                       ProbeSink& sink) override;

private:
    std::size_t workers_;
    std::shared_ptr<WorkerPool> pool_;  // started with the first probe
};

// One configuration's share of a single discovery pass (`devlet probe onvif`).
struct OnvifPassRequest {
    std::string configuration;  // a name for messages
    OnvifDetails details;
    // Replaces the configuration's credentials (`--user` and `--password-file`).
    std::optional<Credential> credential;
};

struct OnvifPassResult {
    std::string configuration;
    std::vector<CameraStatus> cameras;    // sorted by uuid and URL
    std::vector<std::string> problems;    // the credentials file, interfaces, failed sends
    std::vector<std::string> notCameras;  // endpoints that answered but are no camera (wsdp:Device hosts)
    std::vector<IgnoredAnswer> ignored;   // every answer not used, and why
    std::uint64_t ignoredUnlisted = 0;    // ignored answers past the list's bound
    bool networkUnusable = false;         // the WS-Discovery socket could not be opened
    std::uint64_t unicastProbes = 0;      // unicast Probes sent
};

// One discovery pass for each request, all at once on a loop of its own: the Probe (and the
// unicast sweep), the discovery window after the last Probe, then every camera's first
// query; no Hello listener, no rescans, no liveness checks. Blocks the calling thread until
// every query has returned, or `limit` after the window (cameras still being queried then
// are reported so).
std::vector<OnvifPassResult> runOnvifPass(const std::vector<OnvifPassRequest>& requests,
                                          std::chrono::milliseconds limit = std::chrono::seconds(60),
                                          std::size_t workers = 8);

}  // namespace devlet::onvif
