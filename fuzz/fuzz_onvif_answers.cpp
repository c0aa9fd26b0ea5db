// Fuzz target: what a camera answers to devlet's device and media service calls
// (GetSystemDateAndTime, GetCapabilities, GetServices, GetDeviceInformation,
// GetNetworkInterfaces, GetProfiles and GetStreamUri of Media1 and Media2), HTTP headers
// included. An input is the camera's answers in call order, separated by kSeparator; they
// are played back to checkCamera and queryCamera (QueryOptions::playback), so the whole of
// gSOAP's HTTP and XML parsing and devlet's reading of the answers runs, without a network.
// Checked: the password never shows in the report unless the camera itself said it, no
// text in the report carries control characters (it is logged and shown), and the media
// service is called on the contacted host only.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "probes/onvif/onvif_client.h"

namespace {

constexpr std::string_view kSeparator = "\n--devlet-next-answer--\n";
constexpr std::string_view kPassword = "fuzz-Secret-Pa55word";
const std::string kServiceUrl = "http://192.0.2.10/onvif/device_service";

std::vector<std::string> answers(std::string_view input) {
    std::vector<std::string> out;
    while (true) {
        const std::size_t at = input.find(kSeparator);
        out.emplace_back(input.substr(0, at));
        if (at == std::string_view::npos) return out;
        input.remove_prefix(at + kSeparator.size());
    }
}

void check(const devlet::onvif::CameraReport& report, std::string_view input) {
    const bool said = input.find(kPassword) != std::string_view::npos;
    auto text = [&](const std::string& value, const char* what) {
        if (!said && value.find(kPassword) != std::string::npos) {
            std::cerr << "the password shows in " << what << "\n";
            std::abort();
        }
        for (const char c : value) {
            if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
                std::cerr << what << " holds a control character: \"" << value << "\"\n";
                std::abort();
            }
        }
    };
    text(report.error, "the error");
    text(report.manufacturer, "the manufacturer");
    text(report.model, "the model");
    text(report.firmware, "the firmware");
    text(report.serial, "the serial");
    text(report.hardwareId, "the hardware id");
    text(report.ipAddress, "the IP address");
    text(report.macAddress, "the MAC address");
    text(report.mediaUrl, "the media URL");
    for (const auto& rewrite : report.rewrittenServices) text(rewrite, "a rewritten service address");
    for (const auto& host : report.streamHostsElsewhere) text(host, "a stream host");
    // Every call goes to the contacted host: a camera's answer cannot send devlet's
    // credentials elsewhere.
    if (!report.mediaUrl.empty() &&
        (devlet::onvif::urlHost(report.mediaUrl) != devlet::onvif::urlHost(kServiceUrl) ||
         report.mediaUrl.find('@') != std::string::npos)) {
        std::cerr << "the media service is called on another host: " << report.mediaUrl << "\n";
        std::abort();
    }
    for (const auto& profile : report.profiles) {
        text(profile.token, "a profile token");
        text(profile.name, "a profile name");
        text(profile.encoding, "an encoding");
        text(profile.uri, "a stream URI");
        const std::size_t scheme = profile.uri.find("://");
        const std::string authority =
            scheme == std::string::npos
                ? ""
                : profile.uri.substr(scheme + 3, profile.uri.find_first_of("/?#", scheme + 3) - scheme - 3);
        if (authority.find('@') != std::string::npos) {
            std::cerr << "a stream URI keeps user information: " << profile.uri << "\n";
            std::abort();
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const std::vector<std::string> played = answers(input);
    devlet::onvif::QueryOptions options;
    options.playback = &played;
    check(devlet::onvif::checkCamera(kServiceUrl, options), input);
    check(devlet::onvif::queryCamera(kServiceUrl, devlet::onvif::Credential{"admin", std::string(kPassword)},
                                     options),
          input);
    return 0;
}
