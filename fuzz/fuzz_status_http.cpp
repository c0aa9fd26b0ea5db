// Fuzz target: HTTP requests to the status server. The input is what a client writes on
// one TCP connection (one request, several pipelined, or anything else) before it stops
// sending; the real StatusServer answers on its own loop, here on the fuzzer's thread,
// until it closes the connection. Two servers serve the same snapshot: one on loopback,
// and one on 0.0.0.0 (reached through loopback) that needs a bearer token, whose answers
// must never carry the snapshot's data unless the input holds the token.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <unistd.h>

#include "status/status_server.h"
#include "status/status_source.h"

namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace devlet::status;

// In every answer that shows the snapshot's data, never in /healthz's or /readyz's.
constexpr std::string_view kMarker = "fuzzmarker";
constexpr std::string_view kToken = "fuzz-token-3b1f0c9e";

class FixedSource : public StatusSource {
public:
    FixedSource() {
        auto made = std::make_shared<StatusSnapshot>();
        made->daemon.version = "0.1.0";
        made->daemon.nodeName = "node-" + std::string(kMarker);
        made->daemon.resourceDomain = "akri.sh";
        made->daemon.firstPassDone = true;
        made->daemon.nowMs = 1714560000000;
        made->daemon.startedAtMs = 1714550000000;
        made->kubelet.state = KubeletStatus::State::Connected;
        made->kubelet.pluginsOffered = made->kubelet.pluginsRegistered = 2;
        ConfigurationStatus configuration;
        configuration.name = "cams";
        configuration.handler = "onvif";
        configuration.resource = "akri.sh/cams";
        configuration.capacity = 2;
        InstanceStatus instance;
        instance.name = "cams-4294ea";
        instance.device.id = "http://192.0.2.10/onvif/device_service";
        instance.configuration = "cams";
        instance.resource = "akri.sh/cams-4294ea";
        instance.present = instance.offered = instance.registered = true;
        instance.device.properties = {{"ONVIF_DEVICE_SERVICE_URL", instance.device.id},
                                      {"ONVIF_STREAM_URI", "rtsp://192.0.2.10/" + std::string(kMarker)}};
        instance.device.nodes = {{"/dev/null", "", "rw"}};
        instance.capacity = 2;
        instance.slots = {{"cams-4294ea-0", "cams-4294ea", "cams", 0, "akri.sh/cams", 1714555000000,
                           "pod-" + std::string(kMarker), "default"},
                          {"cams-4294ea-1", "cams-4294ea", "cams", 1, "", 0, "", ""}};
        configuration.instances = {instance};
        made->configurations = {configuration};
        snapshot_ = made;
    }
    std::shared_ptr<const StatusSnapshot> statusSnapshot() override { return snapshot_; }
    std::vector<StatusEvent> recentEvents(std::size_t) override {
        return {{1714555000000, "info", "cams-4294ea",
                 "offered as akri.sh/cams-4294ea (" + std::string(kMarker) + ")"}};
    }

private:
    std::shared_ptr<const StatusSnapshot> snapshot_;
};

struct Servers {
    asio::io_context loop;
    FixedSource source;
    std::unique_ptr<StatusServer> open;
    std::unique_ptr<StatusServer> guarded;
    tcp::endpoint openEndpoint, guardedEndpoint;

    Servers() {
        char dir[] = "/tmp/devlet-fuzz-XXXXXX";
        if (!::mkdtemp(dir)) std::abort();
        const std::string tokenFile = std::string(dir) + "/status-token";
        std::ofstream(tokenFile) << kToken << "\n";
        std::filesystem::permissions(tokenFile, std::filesystem::perms::owner_read);
        StatusServer::Options options;
        options.listen = "127.0.0.1:0";
        open = std::make_unique<StatusServer>(loop, source, options);
        options.listen = "0.0.0.0:0";
        options.tokenFile = tokenFile;
        guarded = std::make_unique<StatusServer>(loop, source, options);
        if (!open->start().empty() || !guarded->start().empty() || !guarded->requiresToken()) std::abort();
        std::filesystem::remove_all(dir);
        openEndpoint = endpointOf(open->endpoint());
        guardedEndpoint = endpointOf(guarded->endpoint());
    }

    static tcp::endpoint endpointOf(const std::string& bound) {
        const auto port = static_cast<unsigned short>(std::stoi(bound.substr(bound.rfind(':') + 1)));
        return {asio::ip::make_address("127.0.0.1"), port};
    }

    // Writes `request`, half-closes, and reads until the server closes the connection;
    // `closed` says whether it did so in order (not with a reset, which may eat the answer).
    std::string exchange(const tcp::endpoint& endpoint, std::string_view request, bool& closed) {
        tcp::socket client(loop);
        client.connect(endpoint);
        std::string answer;
        bool done = false;
        asio::async_write(client, asio::buffer(request.data(), request.size()),
                          [&](boost::system::error_code ec, std::size_t) {
                              if (!ec) client.shutdown(tcp::socket::shutdown_send, ec);
                          });
        asio::async_read(client, asio::dynamic_buffer(answer),
                         [&](boost::system::error_code ec, std::size_t) {
                             done = true;
                             closed = ec == asio::error::eof;
                         });
        loop.restart();
        while (!done) loop.run_one();
        // What the server still has queued (its side of the close) runs now, not next time.
        loop.poll();
        return answer;
    }
};

Servers& servers() {
    static Servers* made = new Servers;
    return *made;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view request(reinterpret_cast<const char*>(data), size);
    Servers& s = servers();
    bool closed = false;
    const std::string open = s.exchange(s.openEndpoint, request, closed);
    // Beast skips empty lines before a request; anything else gets an answer.
    if (closed && request.find_first_not_of("\r\n") != std::string_view::npos &&
        !open.starts_with("HTTP/1.")) {
        std::cerr << "no HTTP answer to a request: \"" << open << "\"\n";
        std::abort();
    }
    const std::string guarded = s.exchange(s.guardedEndpoint, request, closed);
    if (request.find(kToken) == std::string_view::npos && guarded.find(kMarker) != std::string::npos) {
        std::cerr << "the snapshot's data went out without the token:\n" << guarded << "\n";
        std::abort();
    }
    return 0;
}
