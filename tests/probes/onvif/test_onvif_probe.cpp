// The onvif probe against simulated cameras, each in its own network namespace on a bridge
// (and one behind a router), with real multicast, unicast probes and HTTP. The probe runs in
// this process, its thread and workers moved into the client namespace. Skips without root.

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probes/onvif/onvif_handler.h"
#include "probes/onvif/soap_wire.h"
#include "runtime/configuration.h"
#include "tests/probes/onvif/network_lab.h"
#include "tests/support/temp_dir.h"

namespace devlet::onvif {
namespace {

using namespace std::chrono_literals;

class RecordingSink : public ProbeSink {
public:
    void reportSnapshot(const std::string&, std::vector<Instance> instances) override {
        snapshot = std::move(instances);
        ++snapshots;
    }
    void reportProbeError(const std::string&, const std::string& message) override { error = message; }
    void reportScan(const std::string&, ScanReport report) override {
        scan = std::move(report);
        ++scans;
    }
    std::vector<Instance> snapshot;
    ScanReport scan;
    int snapshots = 0;
    std::string error;
    int scans = 0;
};

constexpr const char* kUuidA = "11111111-1111-4111-8111-111111111111";
constexpr const char* kUuidB = "22222222-2222-4222-8222-222222222222";
constexpr const char* kUuidC = "33333333-3333-4333-8333-333333333333";

class OnvifProbeTest : public ::testing::Test {
protected:
    void SetUp() override {
        lab_ = std::make_unique<test::NetworkLab>();
        if (!lab_->unavailable().empty()) GTEST_SKIP() << "skipped: " << lab_->unavailable();
        ASSERT_TRUE(lab_->broken().empty()) << lab_->broken();
        credentials_ = (dir_.path() / "credentials.yaml").string();
        devlet::test::writeFile(credentials_,
                                "networks: [192.0.2.0/24, 198.51.100.0/24, '2001:db8::/64']\n"
                                "default: {username: admin, password: secret}\n"
                                "cameras:\n"
                                "  " +
                                    std::string(kUuidC) + ": {username: viewer, password: other}\n");
        chmod(credentials_.c_str(), 0600);
    }
    void TearDown() override {
        if (probe_) {
            probe_->stop();
            probe_.reset();
        }
        handler_.reset();
        if (lab_) lab_->leave();
        lab_.reset();
    }

    // Starts a simulated camera at 192.0.2.<host> (or behind the router) and waits until it listens.
    pid_t camera(int host, const std::string& uuid, std::vector<std::string> extra = {},
                 bool remote = false) {
        std::string& ns = hosts_[host];
        if (ns.empty()) ns = remote ? lab_->addRemoteHost(host) : lab_->addCameraHost(host);
        EXPECT_FALSE(ns.empty());
        const std::string ready = (dir_.path() / ("ready-" + uuid + std::to_string(host))).string();
        std::filesystem::remove(ready);
        std::vector<std::string> argv = {ONVIF_CAMERA,
                                         "--address",
                                         (remote ? "198.51.100." : "192.0.2.") + std::to_string(host),
                                         "--uuid",
                                         uuid,
                                         "--ready-file",
                                         ready,
                                         "--user",
                                         "admin",
                                         "--password",
                                         "secret",
                                         "--mac",
                                         "02:00:00:00:00:" + std::to_string(host)};
        for (std::string& e : extra) argv.push_back(std::move(e));
        const pid_t pid = lab_->start(ns, argv);
        const auto deadline = std::chrono::steady_clock::now() + 20s;
        while (!std::filesystem::exists(ready) && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(20ms);
        EXPECT_TRUE(std::filesystem::exists(ready)) << "camera " << uuid << " did not start";
        return pid;
    }

    void startProbe(const std::string& details) {
        ASSERT_TRUE(lab_->enter());
        Configuration configuration;
        configuration.name = "cams";
        configuration.handler = "onvif";
        configuration.discoveryDetails = details;
        handler_ = std::make_unique<OnvifHandler>(4);
        auto problems = handler_->check(configuration);
        ASSERT_TRUE(problems.empty()) << problems.front().message;
        probe_ = handler_->createProbe(configuration, loop_, sink_);
        probe_->start();
    }

    std::string details(const std::string& extra = "", int rescanSeconds = 5) const {
        return "discoveryTimeoutSeconds: 1\n"
               "interfaces: [br0]\n"
               "livenessIntervalSeconds: 1\n"
               "missedChecks: 2\n"
               "rescanIntervalSeconds: " +
               std::to_string(rescanSeconds) +
               "\n"
               "credentialsFile: " +
               credentials_ + "\n" + extra;
    }

    // Runs the loop until `done` holds for the last snapshot, or a generous deadline.
    bool runUntil(const std::function<bool(const std::vector<Instance>&)>& done,
                  std::chrono::seconds limit = 30s) {
        const auto deadline = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < deadline) {
            loop_.restart();
            loop_.run_for(50ms);
            if (sink_.snapshots > 0 && done(sink_.snapshot)) return true;
        }
        return false;
    }
    bool runUntilCount(std::size_t count, std::chrono::seconds limit = 30s) {
        return runUntil([&](const auto& s) { return s.size() == count; }, limit);
    }
    const Instance* byUuid(const std::string& uuid) const {
        for (const Instance& i : sink_.snapshot) {
            auto it = i.properties.find("ONVIF_DEVICE_UUID");
            if (it != i.properties.end() && it->second == uuid) return &i;
        }
        return nullptr;
    }
    std::string describe() const {
        std::string text;
        for (const Instance& i : sink_.snapshot) {
            text += i.id + "\n";
            for (const auto& [k, v] : i.properties) {
                text += "  " + k + "=";
                text += v + "\n";
            }
        }
        return text + (sink_.error.empty() ? "" : "error: " + sink_.error + "\n");
    }

    devlet::test::TempDir dir_;
    std::unique_ptr<test::NetworkLab> lab_;
    std::map<int, std::string> hosts_;  // host number -> namespace
    std::string credentials_;
    boost::asio::io_context loop_;
    RecordingSink sink_;
    std::unique_ptr<OnvifHandler> handler_;
    std::unique_ptr<Probe> probe_;
};

TEST_F(OnvifProbeTest, CamerasOnTheSegmentAreOfferedWithStreamUris) {
    camera(11, kUuidA);
    camera(12, kUuidB);
    startProbe(details());
    ASSERT_TRUE(runUntilCount(2)) << describe();
    const Instance* a = byUuid(kUuidA);
    ASSERT_NE(a, nullptr) << describe();
    EXPECT_TRUE(a->shared);
    EXPECT_EQ(a->id, std::string("http://192.0.2.11:8080/onvif/device_service-") + kUuidA);
    const auto& p = a->properties;
    EXPECT_EQ(p.at("ONVIF_DEVICE_SERVICE_URL"), "http://192.0.2.11:8080/onvif/device_service");
    EXPECT_EQ(p.at("ONVIF_DEVICE_IP_ADDRESS"), "192.0.2.11");
    EXPECT_EQ(p.at("ONVIF_DEVICE_MAC_ADDRESS"), "02:00:00:00:00:11");
    EXPECT_EQ(p.at("ONVIF_DEVICE_MANUFACTURER"), "devlet");
    EXPECT_EQ(p.at("ONVIF_DEVICE_MODEL"), "SimCam");
    // The camera puts its credentials into the URI; devlet does not pass them on.
    EXPECT_EQ(p.at("ONVIF_STREAM_0_URI"), "rtsp://192.0.2.11:554/stream/main");
    EXPECT_EQ(p.at("ONVIF_STREAM_0_RESOLUTION"), "1920x1080");
    EXPECT_EQ(p.at("ONVIF_STREAM_1_URI"), "rtsp://192.0.2.11:554/stream/sub");
    for (const auto& [key, value] : p) EXPECT_EQ(value.find("secret"), std::string::npos) << key;
}

TEST_F(OnvifProbeTest, CameraClockOffsetIsUsedForTheDigest) {
    camera(13, kUuidA, {"--clock-offset", "-86400"});
    startProbe(details());
    ASSERT_TRUE(runUntil([&](const auto&) {
        return byUuid(kUuidA) && byUuid(kUuidA)->properties.count("ONVIF_STREAM_0_URI");
    })) << describe();
}

TEST_F(OnvifProbeTest, PerCameraCredentialsWinOverTheDefault) {
    camera(14, kUuidC, {"--user", "viewer", "--password", "other"});
    startProbe(details());
    ASSERT_TRUE(runUntil([&](const auto&) {
        return byUuid(kUuidC) && byUuid(kUuidC)->properties.count("ONVIF_STREAM_0_URI");
    })) << describe();
}

TEST_F(OnvifProbeTest, RefusedCredentialsOfferTheCameraWithoutDetails) {
    camera(15, kUuidA, {"--password", "changed"});
    startProbe(details());
    ASSERT_TRUE(runUntilCount(1)) << describe();
    const auto& p = sink_.snapshot.at(0).properties;
    EXPECT_EQ(p.count("ONVIF_DEVICE_MAC_ADDRESS"), 0u);
    EXPECT_EQ(p.count("ONVIF_STREAM_0_URI"), 0u);
    EXPECT_EQ(p.at("ONVIF_DEVICE_UUID"), kUuidA);
    EXPECT_NE(sink_.error.find("authentication failed"), std::string::npos) << sink_.error;
    EXPECT_EQ(sink_.error.find("changed"), std::string::npos);
}

TEST_F(OnvifProbeTest, RefusedCredentialsHideTheCameraWhenConfigured) {
    camera(16, kUuidA, {"--password", "changed"});
    camera(17, kUuidB);
    startProbe(details("offerUnauthenticated: false\n"));
    ASSERT_TRUE(runUntil([&](const auto& s) { return s.size() == 1 && byUuid(kUuidB); })) << describe();
    // Several liveness rounds later the refused camera is still not offered.
    runUntil([](const auto&) { return false; }, 3s);
    EXPECT_EQ(sink_.snapshot.size(), 1u) << describe();
}

TEST_F(OnvifProbeTest, UuidFilterKeepsOnlyTheIncludedCamera) {
    camera(18, kUuidA);
    camera(19, kUuidB);
    startProbe(details(std::string("uuids:\n  action: Include\n  items: [") + kUuidB + "]\n"));
    ASSERT_TRUE(runUntil([&](const auto& s) { return s.size() == 1 && byUuid(kUuidB); })) << describe();
    runUntil([](const auto&) { return false; }, 2s);
    EXPECT_EQ(sink_.snapshot.size(), 1u) << describe();
}

TEST_F(OnvifProbeTest, MacFilterExcludesACamera) {
    camera(20, kUuidA);
    camera(21, kUuidB);
    startProbe(details("macAddresses:\n  action: Exclude\n  items: ['02:00:00:00:00:20']\n"));
    ASSERT_TRUE(runUntil([&](const auto& s) { return s.size() == 1 && byUuid(kUuidB); })) << describe();
}

TEST_F(OnvifProbeTest, CameraOnAnotherSubnetIsFoundOnlyByUnicast) {
    camera(30, kUuidA, {}, true);
    camera(22, kUuidB);
    startProbe(details());
    ASSERT_TRUE(runUntil([&](const auto& s) { return s.size() == 1 && byUuid(kUuidB); })) << describe();
    probe_->stop();
    probe_.reset();
    sink_ = RecordingSink();
    startProbe(details("unicastTargets: [198.51.100.0/24]\n"));
    ASSERT_TRUE(runUntilCount(2)) << describe();
    ASSERT_NE(byUuid(kUuidA), nullptr);
    EXPECT_EQ(byUuid(kUuidA)->properties.at("ONVIF_DEVICE_IP_ADDRESS"), "198.51.100.30");
}

// A /24 behind the router with three cameras and 251 addresses where nothing answers: the
// one sweep of the probe (no rescan) finds all three. The sweep sends in bursts of
// unicastConcurrency and waits for no answer, so silent addresses cost one datagram each.
TEST_F(OnvifProbeTest, UnicastSweepFindsEveryCameraAmongSilentAddresses) {
    camera(2, kUuidA, {}, true);
    camera(128, kUuidB, {}, true);
    camera(254, kUuidC, {"--user", "viewer", "--password", "other"}, true);
    startProbe(details("unicastTargets: [198.51.100.0/24]\nunicastConcurrency: 16\n", 3600));
    ASSERT_TRUE(runUntilCount(3, 60s)) << describe();
    for (const char* uuid : {kUuidA, kUuidB, kUuidC})
        EXPECT_EQ(byUuid(uuid)->properties.count("ONVIF_STREAM_0_URI"), 1u) << uuid << "\n" << describe();
}

// One pass, as `devlet probe onvif --target` runs it: the multicast Probe and a sweep of a
// /24, then every camera's query; it returns by itself with each camera's state.
TEST_F(OnvifProbeTest, PassSweepsARangeAndReturnsEveryCamerasState) {
    camera(3, kUuidA, {}, true);
    camera(200, kUuidB, {"--password", "changed"}, true);
    camera(33, kUuidC, {"--user", "viewer", "--password", "other"});
    ASSERT_TRUE(lab_->enter());
    OnvifPassRequest request;
    request.configuration = "pass";
    std::vector<DetailsProblem> problems;
    request.details = parseOnvifDetails("interfaces: [br0]\nunicastTargets: [198.51.100.0/24]\n", problems);
    ASSERT_TRUE(problems.empty());
    request.credential = Credential{"admin", "secret"};
    const std::vector<OnvifPassResult> results = runOnvifPass({request}, 60s, 4);
    lab_->leave();
    ASSERT_EQ(results.size(), 1u);
    const OnvifPassResult& result = results[0];
    EXPECT_EQ(result.unicastProbes, 254u);
    EXPECT_FALSE(result.networkUnusable);
    std::map<std::string, CameraStatus> byUuid;
    for (const CameraStatus& camera : result.cameras) byUuid[camera.uuid] = camera;
    ASSERT_EQ(byUuid.size(), 3u);
    EXPECT_EQ(byUuid.at(kUuidA).status, DeviceStatus::UpWithAuth);
    EXPECT_EQ(byUuid.at(kUuidA).streams.size(), 2u);
    EXPECT_EQ(byUuid.at(kUuidB).status, DeviceStatus::AuthenticationFailed);
    // --user replaces the credentials file: the per-camera entry is not used.
    EXPECT_EQ(byUuid.at(kUuidC).status, DeviceStatus::AuthenticationFailed);
}

// WS-Discovery over IPv6: the Probe to [FF02::C] on the bridge is answered with the camera's
// IPv6 device service URL, which devlet queries over IPv6. One instance per URL, as Akri
// makes one per XAddr: the IPv4 Probe finds the same camera at its IPv4 URL.
TEST_F(OnvifProbeTest, Ipv6ProbeFindsTheCameraAtItsIpv6Url) {
    camera(34, kUuidA, {"--address6", "2001:db8::34"});
    startProbe(details("ipv6: true\n"));
    const std::string url = "http://[2001:db8::34]:8080/onvif/device_service";
    ASSERT_TRUE(runUntil([&](const auto& s) {
        return std::any_of(s.begin(), s.end(), [&](const Instance& i) {
            return i.id == url + "-" + kUuidA && i.properties.count("ONVIF_STREAM_0_URI") == 1;
        });
    })) << describe();
    ASSERT_TRUE(runUntilCount(2)) << describe();
}

TEST_F(OnvifProbeTest, Ipv6HelloAddsAndByeRemovesACamera) {
    startProbe(details("ipv6: true\n", 3600));
    ASSERT_TRUE(runUntilCount(0));
    // No Probe answers: only its Hellos (IPv4 and IPv6) make it known.
    const pid_t pid = camera(35, kUuidA, {"--address6", "2001:db8::35", "--hello", "--no-probe-answers"});
    const std::string id = std::string("http://[2001:db8::35]:8080/onvif/device_service-") + kUuidA;
    ASSERT_TRUE(runUntil([&](const auto& s) {
        return std::any_of(s.begin(), s.end(), [&](const Instance& i) { return i.id == id; });
    })) << describe();
    lab_->terminate(pid);  // says Bye on both
    ASSERT_TRUE(runUntilCount(0)) << describe();
}

// A camera whose services are https, with a self-signed certificate as cameras ship them:
// devlet speaks TLS to it (without verifying the certificate) and reads everything.
TEST_F(OnvifProbeTest, HttpsCameraIsQueriedOverTls) {
    if (access("/usr/bin/openssl", X_OK) != 0)
        GTEST_SKIP() << "skipped: the openssl command, which makes the camera's certificate, is missing";
    const std::string key = (dir_.path() / "key.pem").string();
    const std::string certificate = (dir_.path() / "certificate.pem").string();
    const std::string pem = (dir_.path() / "camera.pem").string();
    ASSERT_EQ(
        std::system(("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
                     "-subj /CN=camera -keyout " +
                     key + " -out " + certificate + " >/dev/null 2>&1 && cat " + certificate + " " + key +
                     " > " + pem)
                        .c_str()),
        0);
    camera(36, kUuidA, {"--https", pem});
    startProbe(details());
    ASSERT_TRUE(runUntil([&](const auto&) {
        return byUuid(kUuidA) && byUuid(kUuidA)->properties.count("ONVIF_STREAM_0_URI");
    })) << describe();
    EXPECT_EQ(byUuid(kUuidA)->properties.at("ONVIF_DEVICE_SERVICE_URL"),
              "https://192.0.2.36:8080/onvif/device_service");
    EXPECT_EQ(byUuid(kUuidA)->properties.at("ONVIF_DEVICE_MODEL"), "SimCam");
}

// A Profile T camera with Media2 alone: found through GetServices, its H.265 profile offered.
TEST_F(OnvifProbeTest, Media2OnlyCameraIsOfferedWithStreamUris) {
    camera(38, kUuidA, {"--media2-only"});
    startProbe(details());
    ASSERT_TRUE(runUntil([&](const auto&) {
        return byUuid(kUuidA) && byUuid(kUuidA)->properties.count("ONVIF_STREAM_1_URI");
    })) << describe();
    const auto& p = byUuid(kUuidA)->properties;
    EXPECT_EQ(p.at("ONVIF_STREAM_0_URI"), "rtsp://192.0.2.38:554/media2/main");
    EXPECT_EQ(p.at("ONVIF_STREAM_0_PROFILE"), "main");
    EXPECT_EQ(p.at("ONVIF_STREAM_0_ENCODING"), "H265");
    EXPECT_EQ(p.at("ONVIF_STREAM_0_RESOLUTION"), "1920x1080");
    EXPECT_EQ(p.at("ONVIF_STREAM_1_URI"), "rtsp://192.0.2.38:554/media2/sub");
    EXPECT_EQ(p.at("ONVIF_STREAM_1_ENCODING"), "H264");
    for (const auto& [key, value] : p) EXPECT_EQ(value.find("secret"), std::string::npos) << key;
}

// A camera behind NAT names its inside address for its services; the simulated camera serves
// media only at the path it named, so the streams come only from the rewritten address.
TEST_F(OnvifProbeTest, CameraBehindNatIsQueriedAtTheContactedHost) {
    camera(39, kUuidA, {"--nat-address", "192.168.1.64"});
    startProbe(details());
    ASSERT_TRUE(runUntil([&](const auto&) {
        return byUuid(kUuidA) && byUuid(kUuidA)->properties.count("ONVIF_STREAM_1_URI");
    })) << describe();
    // Stream URIs stay as the camera said them; the status says so.
    EXPECT_EQ(byUuid(kUuidA)->properties.at("ONVIF_STREAM_0_URI"), "rtsp://192.168.1.64:554/stream/main");
    ASSERT_TRUE(runUntil([&](const auto&) { return !sink_.scan.deviceNotes.empty(); })) << describe();
    const std::string id = byUuid(kUuidA)->id;
    ASSERT_EQ(sink_.scan.deviceNotes.count(id), 1u);
    EXPECT_EQ(sink_.scan.deviceNotes.at(id),
              (std::vector<std::string>{
                  "service address rewritten to the contacted host: media: 192.168.1.64 -> 192.0.2.39:8080",
                  "stream URIs name 192.168.1.64, not the contacted host 192.0.2.39; kept as the camera said "
                  "them"}));
}

// The same for Media2, through `devlet probe onvif`'s pass: offered, with the rewrite in its status.
TEST_F(OnvifProbeTest, Media2CameraBehindNatIsOfferedInAPass) {
    camera(40, kUuidB, {"--media2-only", "--nat-address", "192.168.1.65:80"});
    ASSERT_TRUE(lab_->enter());
    OnvifPassRequest request;
    request.configuration = "pass";
    std::vector<DetailsProblem> problems;
    request.details = parseOnvifDetails("interfaces: [br0]\n", problems);
    ASSERT_TRUE(problems.empty());
    request.credential = Credential{"admin", "secret"};
    const std::vector<OnvifPassResult> results = runOnvifPass({request}, 60s, 4);
    lab_->leave();
    ASSERT_EQ(results.size(), 1u);
    ASSERT_EQ(results[0].cameras.size(), 1u);
    const CameraStatus& camera = results[0].cameras[0];
    EXPECT_EQ(camera.status, DeviceStatus::UpWithAuth) << camera.error;
    EXPECT_TRUE(camera.offered) << camera.reason;
    EXPECT_TRUE(camera.media2);
    EXPECT_EQ(camera.mediaUrl, "http://192.0.2.40:8080/onvif/media2_service");
    EXPECT_EQ(camera.rewrittenServices,
              std::vector<std::string>{"media2: 192.168.1.65:80 -> 192.0.2.40:8080"});
    EXPECT_EQ(camera.streamHostsElsewhere, std::vector<std::string>{"192.168.1.65"});
    ASSERT_EQ(camera.streams.size(), 2u);
    EXPECT_EQ(camera.streams[0].uri, "rtsp://192.168.1.65:554/media2/main");
    EXPECT_EQ(camera.streams[0].encoding, "H265");
}

TEST_F(OnvifProbeTest, HelloAddsAndByeRemovesACamera) {
    startProbe(details("", 3600));
    ASSERT_TRUE(runUntilCount(0));
    // The camera answers no Probe: only its Hello can make it known.
    const pid_t pid = camera(23, kUuidA, {"--hello", "--no-probe-answers"});
    ASSERT_TRUE(runUntilCount(1)) << describe();
    lab_->terminate(pid);  // says Bye
    ASSERT_TRUE(runUntilCount(0)) << describe();
}

TEST_F(OnvifProbeTest, CameraThatStopsAnsweringLeavesAndComesBackUnchanged) {
    const pid_t pid = camera(24, kUuidA);
    startProbe(details());
    ASSERT_TRUE(runUntilCount(1)) << describe();
    const Instance before = sink_.snapshot.at(0);
    lab_->kill(pid);  // no Bye: the liveness checks notice
    ASSERT_TRUE(runUntilCount(0)) << describe();
    camera(24, kUuidA);  // the same camera starts again at the same address
    ASSERT_TRUE(runUntilCount(1)) << describe();
    EXPECT_EQ(sink_.snapshot.at(0), before);
}

TEST_F(OnvifProbeTest, NonCameraResponderIsIgnored) {
    camera(26, kUuidA, {"--hostile", "not-camera", "--hello"});
    camera(27, kUuidB);
    startProbe(details());
    ASSERT_TRUE(runUntil([&](const auto& s) { return s.size() == 1 && byUuid(kUuidB); })) << describe();
    runUntil([](const auto&) { return false; }, 2s);
    EXPECT_EQ(sink_.snapshot.size(), 1u) << describe();
}

// Samba's wsdd, a real third-party WS-Discovery responder (a Windows-style wsdp:Device
// host): its Hello must not become a camera, and its answers decode as a non-camera.
TEST_F(OnvifProbeTest, WsddHostIsNotACamera) {
    if (access("/usr/sbin/wsdd", X_OK) != 0) GTEST_SKIP() << "skipped: Debian's wsdd is not installed";
    const std::string ns = lab_->addCameraHost(29);
    ASSERT_FALSE(ns.empty());
    camera(31, kUuidB);
    startProbe(details());
    // Started after the probe listens, so its Hello is heard.
    lab_->start(ns, {"/usr/sbin/wsdd", "-4", "-i", "eth0", "-n", "wsddhost", "-U",
                     "55555555-5555-4555-8555-555555555555", "-t"});
    ASSERT_TRUE(runUntil([&](const auto& s) { return s.size() == 1 && byUuid(kUuidB); })) << describe();

    // Ask wsdd the way Windows does and read its answer with devlet's decoder.
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    in_addr bridge{};
    inet_pton(AF_INET, "192.0.2.1", &bridge);
    setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &bridge, sizeof bridge);
    sockaddr_in group{};
    group.sin_family = AF_INET;
    group.sin_port = htons(3702);
    inet_pton(AF_INET, "239.255.255.250", &group.sin_addr);
    std::optional<DiscoveryMessage> answer;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!answer && std::chrono::steady_clock::now() < deadline) {
        const std::string id = newMessageId();
        const std::string probe =
            encodeProbeForType(id, "http://schemas.xmlsoap.org/ws/2006/02/devprof", "Device");
        sendto(fd, probe.data(), probe.size(), 0, reinterpret_cast<sockaddr*>(&group), sizeof group);
        pollfd p{fd, POLLIN, 0};
        while (poll(&p, 1, 500) > 0) {
            char buffer[65536];
            const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
            if (n <= 0) break;
            std::string error;
            auto message = decodeDiscovery(std::string_view(buffer, std::size_t(n)), error);
            if (message && message->kind == DiscoveryKind::ProbeMatches && message->relatesTo == id) {
                answer = message;
                break;
            }
        }
        runUntil([](const auto&) { return false; }, 1s);
    }
    close(fd);
    ASSERT_TRUE(answer) << "wsdd did not answer a wsdp:Device Probe";
    ASSERT_FALSE(answer->endpoints.empty());
    EXPECT_EQ(endpointUuid(answer->endpoints[0].address), "55555555-5555-4555-8555-555555555555");
    EXPECT_FALSE(isCamera(answer->endpoints[0].types));
    EXPECT_EQ(sink_.snapshot.size(), 1u) << describe();
}

// libonvif's onvif-util, a real third-party ONVIF client, discovers the simulated camera,
// logs in with the digest and reads its profiles and stream URI: the simulator is faithful.
TEST_F(OnvifProbeTest, ThirdPartyClientAgreesWithTheSimulatedCamera) {
    if (access("/usr/bin/onvif-util", X_OK) != 0)
        GTEST_SKIP() << "skipped: Debian's onvif-tools is not installed";
    camera(32, kUuidA, {"--port", "80", "--name", "Porch"});
    // The field modes stay valid WS-Discovery for a third-party client too.
    camera(
        33, kUuidB,
        {"--port", "80", "--must-understand", "--message-id", "uuid:00000000-0000-4000-8000-00000000000a"});
    const std::string found = lab_->output("timeout 20 onvif-util -a");
    EXPECT_NE(found.find("192.0.2.32"), std::string::npos) << found;
    EXPECT_NE(found.find("192.0.2.33"), std::string::npos) << found;
    const std::string session = lab_->output(
        "printf \"get profiles\\nget rtsp\\nquit\\n\" | timeout 20 onvif-util -u admin -p secret 192.0.2.32");
    EXPECT_NE(session.find("Token 0: main"), std::string::npos) << session;
    EXPECT_NE(session.find(":554/stream/main"), std::string::npos) << session;
    const std::string refused = lab_->output(
        "printf \"get profiles\\nquit\\n\" | timeout 20 onvif-util -u admin -p wrong 192.0.2.32");
    EXPECT_NE(refused.find("NotAuthorized"), std::string::npos) << refused;
}

// One pass over the segment and 198.51.100.0/24 with the configuration's credentials file:
// each camera's state by uuid.
std::map<std::string, CameraStatus> passStatuses(test::NetworkLab& lab, const std::string& credentials) {
    EXPECT_TRUE(lab.enter());
    OnvifPassRequest request;
    request.configuration = "pass";
    std::vector<DetailsProblem> problems;
    request.details = parseOnvifDetails(
        "interfaces: [br0]\nunicastTargets: [198.51.100.0/24]\ncredentialsFile: " + credentials + "\n",
        problems);
    EXPECT_TRUE(problems.empty());
    const std::vector<OnvifPassResult> results = runOnvifPass({request}, 60s, 4);
    lab.leave();
    std::map<std::string, CameraStatus> byUuid;
    for (const CameraStatus& camera : results.at(0).cameras) byUuid[camera.uuid] = camera;
    for (const std::string& problem : results.at(0).problems) ADD_FAILURE() << problem;
    return byUuid;
}

std::string readAll(const std::filesystem::path& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// Cameras that want HTTP Digest (MD5, SHA-256) and ignore UsernameTokens are queried in
// full; the scheme each wanted is remembered.
TEST_F(OnvifProbeTest, DigestOnlyCamerasAreUpWithAuth) {
    const auto md5 = dir_.path() / "md5.log";
    const auto sha256 = dir_.path() / "sha256.log";
    camera(60, kUuidA, {"--auth", "digest-md5", "--record-credentials", md5.string()});
    camera(61, kUuidB, {"--auth", "digest-sha256", "--record-credentials", sha256.string()});
    camera(62, kUuidC, {"--auth", "digest-sha256", "--password", "changed"});
    std::map<std::string, CameraStatus> byUuid = passStatuses(*lab_, credentials_);
    ASSERT_EQ(byUuid.size(), 3u);
    for (const char* uuid : {kUuidA, kUuidB}) {
        EXPECT_EQ(byUuid.at(uuid).status, DeviceStatus::UpWithAuth) << uuid << ": " << byUuid.at(uuid).error;
        EXPECT_EQ(byUuid.at(uuid).streams.size(), 2u) << uuid;
        EXPECT_EQ(byUuid.at(uuid).manufacturer, "devlet") << uuid;
    }
    EXPECT_NE(readAll(md5).find("192.0.2.1 Authorization"), std::string::npos) << readAll(md5);
    EXPECT_NE(readAll(sha256).find("192.0.2.1 Authorization"), std::string::npos) << readAll(sha256);
    // The credentials file's default is for kUuidA and kUuidB; kUuidC's password differs.
    EXPECT_EQ(byUuid.at(kUuidC).status, DeviceStatus::AuthenticationFailed) << byUuid.at(kUuidC).error;
}

// Media2's calls take HTTP Digest as Media1's do; the NAT'd address is called at the
// contacted host, the only one the credential reaches.
TEST_F(OnvifProbeTest, Media2DigestCameraBehindNatIsUpWithAuth) {
    const auto log = dir_.path() / "media2-digest.log";
    camera(63, kUuidA,
           {"--media2-only", "--nat-address", "192.168.1.63", "--auth", "digest-sha256",
            "--record-credentials", log.string()});
    std::map<std::string, CameraStatus> byUuid = passStatuses(*lab_, credentials_);
    ASSERT_EQ(byUuid.size(), 1u);
    const CameraStatus& camera = byUuid.at(kUuidA);
    EXPECT_EQ(camera.status, DeviceStatus::UpWithAuth) << camera.error;
    EXPECT_TRUE(camera.media2);
    EXPECT_EQ(camera.mediaUrl, "http://192.0.2.63:8080/onvif/media2_service");
    ASSERT_EQ(camera.streams.size(), 2u) << camera.error;
    EXPECT_EQ(camera.streams[0].encoding, "H265");
    EXPECT_NE(readAll(log).find("192.0.2.1 Authorization"), std::string::npos) << readAll(log);
}

// A Digest camera is queried again after it missed a liveness check: the second query sends
// no UsernameToken (the first one learned that the camera wants Digest alone).
TEST_F(OnvifProbeTest, TheSchemeThatWorkedIsRememberedForTheNextQuery) {
    const auto log = dir_.path() / "digest.log";
    camera(66, kUuidA,
           {"--auth", "digest-sha256", "--fail-every", "2", "--record-credentials", log.string()});
    startProbe(details());
    auto count = [&](const std::string& word) {
        const std::string text = readAll(log);
        std::size_t n = 0;
        for (auto at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
        return n;
    };
    // Each full query makes five authenticated calls (device information, interfaces,
    // profiles, two stream URIs).
    ASSERT_TRUE(runUntil([&](const auto&) { return count("Authorization") >= 10; }, 60s)) << readAll(log);
    EXPECT_EQ(count("UsernameToken"), 1u) << readAll(log);
    ASSERT_NE(byUuid(kUuidA), nullptr) << describe();
    EXPECT_EQ(byUuid(kUuidA)->properties.count("ONVIF_STREAM_0_URI"), 1u) << describe();
}

// A camera whose clock is days ahead: its time is not used for the UsernameToken (a
// spoofer could choose it for a later replay), so a camera that checks it refuses, and the
// status says why. One a day behind is served with its own time.
TEST_F(OnvifProbeTest, ACameraClockFarAheadIsNotUsedForTheToken) {
    camera(67, kUuidA, {"--clock-offset", "259200"});
    camera(68, kUuidB, {"--clock-offset", "-86400"});
    std::map<std::string, CameraStatus> byUuid = passStatuses(*lab_, credentials_);
    ASSERT_EQ(byUuid.size(), 2u);
    EXPECT_EQ(byUuid.at(kUuidA).status, DeviceStatus::AuthenticationFailed);
    EXPECT_NE(byUuid.at(kUuidA).error.find("more than a day ahead"), std::string::npos)
        << byUuid.at(kUuidA).error;
    EXPECT_EQ(byUuid.at(kUuidB).status, DeviceStatus::UpWithAuth) << byUuid.at(kUuidB).error;
}

// A camera outside the credentials file's networks is queried without credentials and says
// why; an entry by IP address reaches its address even outside them.
TEST_F(OnvifProbeTest, CameraOutsideTheCredentialScopeGetsNoCredential) {
    const std::string scoped = (dir_.path() / "scoped.yaml").string();
    devlet::test::writeFile(scoped,
                            "networks: [192.0.2.0/24]\n"
                            "default: {username: admin, password: secret}\n"
                            "cameras:\n"
                            "  " +
                                std::string(kUuidB) +
                                ": {username: admin, password: secret}\n"
                                "  198.51.100.52: {username: admin, password: secret}\n");
    chmod(scoped.c_str(), 0600);
    const auto inside = dir_.path() / "inside.log";
    const auto outside = dir_.path() / "outside.log";
    const auto byAddress = dir_.path() / "address.log";
    camera(63, kUuidA, {"--record-credentials", inside.string()});
    camera(50, kUuidB, {"--record-credentials", outside.string()}, true);
    camera(52, kUuidC, {"--auth", "digest-md5", "--record-credentials", byAddress.string()}, true);
    std::map<std::string, CameraStatus> byUuid = passStatuses(*lab_, scoped);
    ASSERT_EQ(byUuid.size(), 3u);
    EXPECT_EQ(byUuid.at(kUuidA).status, DeviceStatus::UpWithAuth) << byUuid.at(kUuidA).error;
    EXPECT_FALSE(readAll(inside).empty());
    EXPECT_EQ(byUuid.at(kUuidB).status, DeviceStatus::UpWithoutAuth);
    EXPECT_NE(byUuid.at(kUuidB).error.find(
                  "no credential for this address: outside the credentials file's networks"),
              std::string::npos)
        << byUuid.at(kUuidB).error;
    EXPECT_FALSE(std::filesystem::exists(outside)) << readAll(outside);
    EXPECT_EQ(byUuid.at(kUuidC).status, DeviceStatus::UpWithAuth) << byUuid.at(kUuidC).error;
    EXPECT_FALSE(readAll(byAddress).empty());
}

// curl, a third-party HTTP Digest client, logs in to the simulated Digest cameras (MD5 and
// SHA-256) and is refused with a wrong password: the simulator's Digest is RFC 7616's.
TEST_F(OnvifProbeTest, ThirdPartyDigestClientAgreesWithTheSimulatedCamera) {
    if (access("/usr/bin/curl", X_OK) != 0) GTEST_SKIP() << "skipped: curl is not installed";
    camera(64, kUuidA, {"--auth", "digest-md5"});
    camera(65, kUuidB, {"--auth", "digest-sha256"});
    const std::string body = (dir_.path() / "request.xml").string();
    devlet::test::writeFile(
        body,
        "<?xml version=\"1.0\"?><s:Envelope xmlns:s=\"http://www.w3.org/2003/05/soap-envelope\" "
        "xmlns:tds=\"http://www.onvif.org/ver10/device/wsdl\"><s:Body><tds:GetDeviceInformation/>"
        "</s:Body></s:Envelope>");
    for (int host : {64, 65}) {
        const std::string url = "http://192.0.2." + std::to_string(host) + ":8080/onvif/device_service";
        const std::string curl = "timeout 20 curl -s -H Content-Type:application/soap+xml -d @" + body + " ";
        const std::string plain = lab_->output((curl + "-o /dev/null -w %{http_code} ").append(url));
        EXPECT_EQ(plain, "401") << host;
        const std::string answer = lab_->output((curl + "--digest -u admin:secret ").append(url));
        EXPECT_NE(answer.find("<tds:Manufacturer>devlet</tds:Manufacturer>"), std::string::npos) << answer;
        const std::string wrong =
            lab_->output((curl + "--digest -u admin:wrong -o /dev/null -w %{http_code} ").append(url));
        EXPECT_EQ(wrong, "401") << host;
    }
}

// Cameras of one firmware seed their MessageID generator alike: two send the same one.
// A message is a retransmission only from the same sender; both cameras are found.
TEST_F(OnvifProbeTest, TwoCamerasWithTheSameMessageIdAreBothFound) {
    camera(50, kUuidA, {"--message-id", "uuid:00000000-0000-4000-8000-000000000001"});
    camera(51, kUuidB, {"--message-id", "uuid:00000000-0000-4000-8000-000000000001"});
    startProbe(details());
    ASSERT_TRUE(runUntil([&](const auto&) { return byUuid(kUuidA) && byUuid(kUuidB); })) << describe();
}

// Answers with header blocks marked mustUnderstand (ReplyTo, To, Action, a vendor's own):
// a discovery client reads what it needs and ignores the rest.
TEST_F(OnvifProbeTest, AnswersWithMustUnderstandHeaderBlocksAreFound) {
    camera(52, kUuidA, {"--must-understand"});
    startProbe(details());
    ASSERT_TRUE(runUntil([&](const auto&) {
        return byUuid(kUuidA) && byUuid(kUuidA)->properties.count("ONVIF_STREAM_0_URI");
    })) << describe();
}

// A Hello without XAddrs is answered with a Resolve to its sender; the ResolveMatches
// names the service URL.
TEST_F(OnvifProbeTest, HelloWithoutXAddrsIsResolved) {
    startProbe(details("", 3600));
    ASSERT_TRUE(runUntilCount(0));
    camera(53, kUuidA, {"--hello-without-xaddrs", "--no-probe-answers"});
    ASSERT_TRUE(runUntil([&](const auto&) { return byUuid(kUuidA) != nullptr; })) << describe();
    EXPECT_EQ(byUuid(kUuidA)->properties.at("ONVIF_DEVICE_SERVICE_URL"),
              "http://192.0.2.53:8080/onvif/device_service");
}

// Any host on the segment can answer a Probe or say Hello. Two spoofers announce a real
// camera's uuid, one with XAddrs at itself, one with XAddrs at a third address. Neither
// becomes an instance, and no credential reaches either: they record every request that
// carries a UsernameToken or an HTTP Authorization header.
TEST_F(OnvifProbeTest, SpoofingHostsGetNoInstanceAndNoCredential) {
    // The real camera records the credentials it gets too: the recorder works.
    const std::string real = (dir_.path() / "credentials-real").string();
    camera(54, kUuidA, {"--record-credentials", real});
    startProbe(details());
    ASSERT_TRUE(runUntil([&](const auto&) {
        return byUuid(kUuidA) && byUuid(kUuidA)->properties.count("ONVIF_STREAM_0_URI");
    })) << describe();

    const std::string atItself = (dir_.path() / "credentials-at-itself").string();
    const std::string elsewhere = (dir_.path() / "credentials-elsewhere").string();
    camera(55, kUuidB, {"--spoof-uuid", kUuidA, "--hello", "--record-credentials", atItself});
    camera(56, kUuidC,
           {"--spoof-uuid", kUuidA, "--spoof-xaddr", "http://192.0.2.57:8080/onvif/device_service", "--hello",
            "--record-credentials", elsewhere});
    // Both announcements (Hello, then the answers to the next Probe) are reported as ignored.
    auto reported = [&](const std::string& sender, const std::string& reason) {
        return std::any_of(sink_.scan.excluded.begin(), sink_.scan.excluded.end(),
                           [&](const ExcludedDevice& d) {
                               return d.id.find("from " + sender + " ") != std::string::npos &&
                                      d.reason.find(reason) != std::string::npos;
                           });
    };
    ASSERT_TRUE(runUntil([&](const auto&) {
        return reported("192.0.2.55", "uuid already announced by 192.0.2.54") &&
               reported("192.0.2.56", "XAddrs not at the sender's address") && sink_.snapshots > 0;
    })) << describe();
    // One more cycle: the spoofers have answered a Probe of the rescan too.
    const int before = sink_.scans;
    ASSERT_TRUE(runUntil([&](const auto&) { return sink_.scans > before + 1; })) << describe();

    for (const Instance& instance : sink_.snapshot) {
        const std::string url = instance.properties.at("ONVIF_DEVICE_SERVICE_URL");
        EXPECT_EQ(url.find("192.0.2.55"), std::string::npos) << describe();
        EXPECT_EQ(url.find("192.0.2.56"), std::string::npos) << describe();
        EXPECT_EQ(url.find("192.0.2.57"), std::string::npos) << describe();
    }
    ASSERT_NE(byUuid(kUuidA), nullptr) << describe();
    EXPECT_EQ(byUuid(kUuidA)->properties.at("ONVIF_DEVICE_SERVICE_URL"),
              "http://192.0.2.54:8080/onvif/device_service");
    EXPECT_TRUE(std::filesystem::exists(real));
    EXPECT_FALSE(std::filesystem::exists(atItself)) << "a credential reached the spoofer at its own address";
    EXPECT_FALSE(std::filesystem::exists(elsewhere)) << "a credential reached the spoofer";
}

// A camera whose configuration changed says Hello with a new MetadataVersion: devlet queries
// it again and offers its new stream URIs (liveness checks alone would never read them).
TEST_F(OnvifProbeTest, NewMetadataVersionQueriesTheCameraAgain) {
    const pid_t pid = camera(64, kUuidA);
    startProbe(details("", 3600));
    ASSERT_TRUE(runUntil([&](const auto&) {
        return byUuid(kUuidA) && byUuid(kUuidA)->properties.count("ONVIF_STREAM_0_URI");
    })) << describe();
    EXPECT_EQ(byUuid(kUuidA)->properties.at("ONVIF_STREAM_0_URI"), "rtsp://192.0.2.64:554/stream/main");
    ::kill(pid, SIGUSR1);
    ASSERT_TRUE(runUntil([&](const auto&) {
        return byUuid(kUuidA) &&
               byUuid(kUuidA)->properties.at("ONVIF_STREAM_0_URI") == "rtsp://192.0.2.64:554/stream2/main";
    })) << describe();
}

// A camera's DHCP lease changes: it says Hello from its new address with a new
// MetadataVersion and no longer answers at the old one. It keeps its instance (id, and so
// its name and slots) with the new address and stream URIs, and the status says it moved.
TEST_F(OnvifProbeTest, CameraThatMovesKeepsItsInstanceWithNewProperties) {
    const pid_t pid = camera(70, kUuidA);
    startProbe(details("", 3600));
    ASSERT_TRUE(runUntil([&](const auto&) {
        return byUuid(kUuidA) && byUuid(kUuidA)->properties.count("ONVIF_STREAM_0_URI");
    })) << describe();
    const Instance before = *byUuid(kUuidA);
    EXPECT_EQ(before.properties.at("ONVIF_STREAM_0_URI"), "rtsp://192.0.2.70:554/stream/main");

    ASSERT_TRUE(lab_->readdressCameraHost(hosts_[70], 70, 71));
    ::kill(pid, SIGUSR2);
    ASSERT_TRUE(runUntil([&](const auto&) {
        return byUuid(kUuidA) && byUuid(kUuidA)->properties.at("ONVIF_DEVICE_SERVICE_URL") ==
                                     "http://192.0.2.71:8080/onvif/device_service";
    })) << describe();
    ASSERT_EQ(sink_.snapshot.size(), 1u) << describe();
    const Instance& after = sink_.snapshot.front();
    EXPECT_EQ(after.id, before.id);
    EXPECT_EQ(after.properties.at("ONVIF_DEVICE_IP_ADDRESS"), "192.0.2.71");
    EXPECT_EQ(after.properties.at("ONVIF_STREAM_0_URI"), "rtsp://192.0.2.71:554/stream2/main");
    EXPECT_EQ(after.properties.at("ONVIF_STREAM_1_URI"), "rtsp://192.0.2.71:554/stream2/sub");
    EXPECT_EQ(after.properties.at("ONVIF_DEVICE_MAC_ADDRESS"), "02:00:00:00:00:70");
    ASSERT_TRUE(runUntil([&](const auto&) { return sink_.scan.deviceNotes.count(before.id) > 0; }))
        << describe();
    const std::vector<std::string>& notes = sink_.scan.deviceNotes.at(before.id);
    EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string& note) {
        return note.starts_with(
            "moved from http://192.0.2.70:8080/onvif/device_service to "
            "http://192.0.2.71:8080/onvif/device_service");
    })) << (notes.empty() ? "" : notes.front());
    EXPECT_EQ(sink_.scan.deviceStates.at(before.id), "up with authentication");
}

// A host claiming a camera's uuid while the camera still answers where it was found takes
// nothing over; when the real camera then moves, the instance follows it, not the claimant.
TEST_F(OnvifProbeTest, ClaimOfAnAnsweringCamerasUuidDoesNotMoveIt) {
    const std::string real = (dir_.path() / "credentials-real").string();
    const pid_t pid = camera(72, kUuidA, {"--record-credentials", real});
    startProbe(details("", 3600));
    ASSERT_TRUE(runUntil([&](const auto&) {
        return byUuid(kUuidA) && byUuid(kUuidA)->properties.count("ONVIF_STREAM_0_URI");
    })) << describe();
    const Instance before = *byUuid(kUuidA);

    const std::string spoofed = (dir_.path() / "credentials-spoofer").string();
    camera(73, kUuidB, {"--spoof-uuid", kUuidA, "--hello", "--record-credentials", spoofed});
    ASSERT_TRUE(runUntil([&](const auto&) {
        return std::any_of(sink_.scan.excluded.begin(), sink_.scan.excluded.end(),
                           [](const ExcludedDevice& d) {
                               return d.id.find("from 192.0.2.73 ") != std::string::npos &&
                                      d.reason == "uuid already announced by 192.0.2.72, which still answers";
                           });
    })) << describe();
    ASSERT_EQ(sink_.snapshot.size(), 1u) << describe();
    EXPECT_EQ(sink_.snapshot.front(), before);

    ASSERT_TRUE(lab_->readdressCameraHost(hosts_[72], 72, 74));
    ::kill(pid, SIGUSR2);
    ASSERT_TRUE(runUntil([&](const auto&) {
        return byUuid(kUuidA) &&
               byUuid(kUuidA)->properties.at("ONVIF_STREAM_0_URI") == "rtsp://192.0.2.74:554/stream2/main";
    })) << describe();
    ASSERT_EQ(sink_.snapshot.size(), 1u) << describe();
    EXPECT_EQ(sink_.snapshot.front().id, before.id);
    EXPECT_EQ(sink_.snapshot.front().properties.at("ONVIF_DEVICE_SERVICE_URL"),
              "http://192.0.2.74:8080/onvif/device_service");
    EXPECT_FALSE(std::filesystem::exists(spoofed)) << "a credential reached the claimant";
}

// The camera stops answering at its address and two hosts claim its uuid at once: neither
// is believed, and the instance stays with the address it was found at.
TEST_F(OnvifProbeTest, TwoClaimantsOfASilentCameraTakeNothingOver) {
    const pid_t pid = camera(77, kUuidA);
    startProbe(details("", 3600));
    ASSERT_TRUE(runUntil([&](const auto&) {
        return byUuid(kUuidA) && byUuid(kUuidA)->properties.count("ONVIF_STREAM_0_URI");
    })) << describe();
    const Instance before = *byUuid(kUuidA);
    ::kill(pid, SIGSTOP);  // takes connections, answers nothing
    // Both Hellos wait in the probe's socket until the loop runs again: they arrive together.
    camera(78, kUuidB, {"--spoof-uuid", kUuidA, "--hello", "--no-probe-answers"});
    camera(79, kUuidC, {"--spoof-uuid", kUuidA, "--hello", "--no-probe-answers"});
    auto refused = [&](const std::string& sender) {
        return std::any_of(sink_.scan.excluded.begin(), sink_.scan.excluded.end(),
                           [&](const ExcludedDevice& d) {
                               return d.id.find("from " + sender + " ") != std::string::npos &&
                                      d.reason.starts_with("uuid claimed by several hosts at once");
                           });
    };
    const bool bothRefused =
        runUntil([&](const auto&) { return refused("192.0.2.78") && refused("192.0.2.79"); });
    ::kill(pid, SIGCONT);
    ASSERT_TRUE(bothRefused) << describe();
    for (const Instance& instance : sink_.snapshot) {
        EXPECT_EQ(instance.id, before.id);
        EXPECT_EQ(instance.properties.at("ONVIF_DEVICE_SERVICE_URL"),
                  "http://192.0.2.77:8080/onvif/device_service");
    }
}

// A camera that moves out of the credentials file's networks is queried at its new address
// without the credential, as any camera found there would be.
TEST_F(OnvifProbeTest, CameraThatMovesOutOfTheCredentialScopeGetsNoCredentialThere) {
    devlet::test::writeFile(credentials_,
                            "networks: [192.0.2.75]\ndefault: {username: admin, password: secret}\n");
    chmod(credentials_.c_str(), 0600);
    const std::string recorded = (dir_.path() / "credentials-recorded").string();
    const pid_t pid = camera(75, kUuidA, {"--record-credentials", recorded});
    startProbe(details("", 3600));
    ASSERT_TRUE(runUntil([&](const auto&) {
        return byUuid(kUuidA) && byUuid(kUuidA)->properties.count("ONVIF_STREAM_0_URI");
    })) << describe();
    const std::string id = byUuid(kUuidA)->id;
    const std::string sent = devlet::test::readFile(recorded);
    ASSERT_FALSE(sent.empty());

    ASSERT_TRUE(lab_->readdressCameraHost(hosts_[75], 75, 76));
    ::kill(pid, SIGUSR2);
    ASSERT_TRUE(runUntil([&](const auto&) {
        return byUuid(kUuidA) && byUuid(kUuidA)->properties.at("ONVIF_DEVICE_SERVICE_URL") ==
                                     "http://192.0.2.76:8080/onvif/device_service";
    })) << describe();
    EXPECT_EQ(byUuid(kUuidA)->id, id);
    EXPECT_EQ(sink_.scan.deviceStates.at(id), "up without authentication");
    EXPECT_EQ(devlet::test::readFile(recorded), sent) << "a credential went outside its networks";
}

// A Bye is honoured only from the address the camera was found at.
TEST_F(OnvifProbeTest, ByeFromAnotherHostDoesNotRemoveACamera) {
    camera(58, kUuidA);
    startProbe(details("", 3600));
    ASSERT_TRUE(runUntilCount(1)) << describe();
    const pid_t spoofer = camera(59, kUuidB, {"--spoof-uuid", kUuidA, "--bye", "--no-probe-answers"});
    lab_->terminate(spoofer);  // says Bye for the real camera's uuid
    ASSERT_TRUE(runUntil([&](const auto&) {
        return std::any_of(
            sink_.scan.excluded.begin(), sink_.scan.excluded.end(),
            [](const ExcludedDevice& d) { return d.id.find("Bye from 192.0.2.59") != std::string::npos; });
    })) << describe();
    EXPECT_NE(byUuid(kUuidA), nullptr) << describe();
}

TEST_F(OnvifProbeTest, HostileRespondersDoNotStopDiscovery) {
    int host = 40;
    for (const char* mode : {"udp-garbage", "udp-wrong-relates", "udp-many-xaddrs", "udp-bomb",
                             "http-garbage", "http-huge", "http-silent"}) {
        camera(host, "44444444-4444-4444-8444-0000000000" + std::to_string(host), {"--hostile", mode});
        ++host;
    }
    camera(28, kUuidB);
    startProbe(details());
    ASSERT_TRUE(runUntil([&](const auto& s) { return s.size() == 1 && byUuid(kUuidB); })) << describe();
    // Liveness rounds against the hostile ones go on; the good camera stays, nothing else comes.
    runUntil([](const auto&) { return false; }, 5s);
    EXPECT_EQ(sink_.snapshot.size(), 1u) << describe();
    EXPECT_NE(byUuid(kUuidB), nullptr);
}

}  // namespace
}  // namespace devlet::onvif
