// `devlet probe onvif`, the real binary in a network namespace, against simulated cameras in
// their own namespaces (one behind a router): each camera's state, identity and stream URIs,
// the filter that excluded a camera, unicast targets, and passwords that never show. Skips
// where network namespaces cannot be created (not root).

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <sys/stat.h>

// Boost.JSON's implementation, compiled into this test program.
#include <boost/json/src.hpp>

#include "tests/probes/onvif/network_lab.h"
#include "tests/support/daemon_process.h"
#include "tests/support/temp_dir.h"

namespace devlet::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* kUuidA = "11111111-1111-4111-8111-111111111111";
constexpr const char* kUuidB = "22222222-2222-4222-8222-222222222222";
constexpr const char* kUuidC = "33333333-3333-4333-8333-333333333333";

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// The lines of the text block that describes one camera (up to the next line that is not
// indented further than "  camera").
std::string cameraBlock(const std::string& output, const std::string& uuid) {
    auto start = output.find("  camera " + uuid);
    if (start == std::string::npos) return "";
    std::string block;
    for (std::size_t line = start; line < output.size();) {
        const std::size_t end = std::min(output.find('\n', line), output.size());
        const std::string text = output.substr(line, end - line);
        if (line != start && !text.starts_with("    ")) break;
        block += text + "\n";
        line = end + 1;
    }
    return block;
}

class OnvifProbeCommandTest : public ::testing::Test {
protected:
    void SetUp() override {
        lab_ = std::make_unique<onvif::test::NetworkLab>();
        if (!lab_->unavailable().empty()) GTEST_SKIP() << "skipped: " << lab_->unavailable();
        ASSERT_TRUE(lab_->broken().empty()) << lab_->broken();
        password_ = (dir_.path() / "password").string();
        writeFile(password_, "secret\n");
        chmod(password_.c_str(), 0600);
    }
    void TearDown() override { lab_.reset(); }

    // A simulated camera at 192.0.2.<host> (or 198.51.100.<host> behind the router).
    void camera(int host, const std::string& uuid, std::vector<std::string> extra = {}, bool remote = false) {
        const std::string ns = remote ? lab_->addRemoteHost(host) : lab_->addCameraHost(host);
        ASSERT_FALSE(ns.empty());
        const std::string ready = (dir_.path() / ("ready-" + std::to_string(host))).string();
        std::vector<std::string> argv = {ONVIF_CAMERA,
                                         "--address",
                                         (remote ? "198.51.100." : "192.0.2.") + std::to_string(host),
                                         "--uuid",
                                         uuid,
                                         "--user",
                                         "admin",
                                         "--password",
                                         "secret",
                                         "--mac",
                                         "02:00:00:00:00:" + std::to_string(host),
                                         "--ready-file",
                                         ready};
        argv.insert(argv.end(), extra.begin(), extra.end());
        lab_->start(ns, argv);
        const auto deadline = std::chrono::steady_clock::now() + 20s;
        while (!std::filesystem::exists(ready) && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(20ms);
        ASSERT_TRUE(std::filesystem::exists(ready)) << "camera " << uuid << " did not start";
    }

    // `devlet probe onvif ARGS` inside the client namespace, where multicast reaches the cameras.
    CommandResult probe(std::vector<std::string> args) {
        args.insert(args.begin(), {"probe", "onvif", "--interface", "br0"});
        EXPECT_TRUE(lab_->enter());
        CommandResult result = runDevlet(args);
        lab_->leave();
        return result;
    }

    TempDir dir_;
    std::unique_ptr<onvif::test::NetworkLab> lab_;
    std::string password_;
};

TEST_F(OnvifProbeCommandTest, PrintsEachCameraWithItsStateIdentityAndStreams) {
    camera(11, kUuidA);
    camera(12, kUuidB, {"--password", "changed"});
    const CommandResult result = probe({"--user", "admin", "--password-file", password_});
    ASSERT_EQ(result.exitCode, 0) << result.output;

    const std::string a = cameraBlock(result.output, kUuidA);
    EXPECT_TRUE(contains(a, "service:   http://192.0.2.11:8080/onvif/device_service")) << result.output;
    EXPECT_TRUE(contains(a, "state:     up with authentication")) << result.output;
    EXPECT_TRUE(contains(a, "device:    devlet SimCam, firmware 1.0")) << result.output;
    EXPECT_TRUE(contains(a, "MAC 02:00:00:00:00:11")) << result.output;
    EXPECT_TRUE(contains(a, "stream:    main 1920x1080 H264 rtsp://192.0.2.11:554/stream/main"))
        << result.output;
    EXPECT_TRUE(contains(a, "stream:    sub 640x360 H264 rtsp://192.0.2.11:554/stream/sub")) << result.output;
    EXPECT_TRUE(contains(a, "offered:   yes")) << result.output;

    const std::string b = cameraBlock(result.output, kUuidB);
    EXPECT_TRUE(contains(b, "state:     authentication failed")) << result.output;
    EXPECT_FALSE(contains(b, "stream:")) << result.output;

    // The camera puts the credentials into its stream URIs; they never show.
    EXPECT_FALSE(contains(result.output, "secret")) << result.output;
    EXPECT_FALSE(contains(result.output, "admin:")) << result.output;
}

TEST_F(OnvifProbeCommandTest, WithoutCredentialsACameraIsUpWithoutAuthentication) {
    camera(13, kUuidA);
    const CommandResult result = probe({});
    ASSERT_EQ(result.exitCode, 0) << result.output;
    const std::string a = cameraBlock(result.output, kUuidA);
    EXPECT_TRUE(contains(a, "state:     up without authentication")) << result.output;
    EXPECT_TRUE(contains(a, "offered:   yes")) << result.output;
}

TEST_F(OnvifProbeCommandTest, ReachableAndUnreachableCamerasAreTold) {
    camera(14, kUuidA, {"--hostile", "http-garbage"});
    camera(15, kUuidB, {"--advertise-port", "9"});  // nothing listens there
    const CommandResult result = probe({"--user", "admin", "--password-file", password_});
    ASSERT_EQ(result.exitCode, 0) << result.output;
    EXPECT_TRUE(contains(cameraBlock(result.output, kUuidA), "state:     reachable")) << result.output;
    const std::string b = cameraBlock(result.output, kUuidB);
    EXPECT_TRUE(contains(b, "state:     unreachable")) << result.output;
    EXPECT_TRUE(contains(b, "offered:   no, the camera does not answer")) << result.output;
}

TEST_F(OnvifProbeCommandTest, ConfiguredFiltersSayWhichFilterExcludedACamera) {
    camera(16, kUuidA);
    camera(17, kUuidB);
    camera(18, kUuidC);
    const std::filesystem::path confDir = dir_.path() / "conf.d";
    std::filesystem::create_directories(confDir);
    writeFile(confDir / "onvif.yaml",
              "apiVersion: akri.sh/v0\n"
              "kind: Configuration\n"
              "metadata:\n"
              "  name: lobby\n"
              "spec:\n"
              "  discoveryHandler:\n"
              "    name: onvif\n"
              "    discoveryDetails: |\n"
              "      uuids: {action: Exclude, items: [" +
                  std::string(kUuidB) +
                  "]}\n"
                  "      macAddresses: {action: Exclude, items: ['02:00:00:00:00:18']}\n");
    const CommandResult result =
        probe({"--conf-dir", confDir.string(), "--user", "admin", "--password-file", password_});
    ASSERT_EQ(result.exitCode, 0) << result.output;
    EXPECT_TRUE(contains(result.output, "configuration lobby")) << result.output;
    EXPECT_TRUE(contains(cameraBlock(result.output, kUuidA), "offered:   yes, as lobby-")) << result.output;
    const std::string b = cameraBlock(result.output, kUuidB);
    EXPECT_TRUE(contains(b, "state:     not queried")) << result.output;
    EXPECT_TRUE(contains(b, "excluded by the uuids filter")) << result.output;
    const std::string c = cameraBlock(result.output, kUuidC);
    EXPECT_TRUE(contains(c, "state:     up with authentication")) << result.output;
    EXPECT_TRUE(contains(c, "MAC address 02:00:00:00:00:18 is excluded by the macAddresses filter"))
        << result.output;
}

TEST_F(OnvifProbeCommandTest, TargetReachesACameraBehindARouter) {
    camera(30, kUuidA, {}, true);
    const CommandResult without = probe({});
    ASSERT_EQ(without.exitCode, 0) << without.output;
    EXPECT_FALSE(contains(without.output, kUuidA)) << without.output;

    const CommandResult with =
        probe({"--target", "198.51.100.0/24", "--user", "admin", "--password-file", password_});
    ASSERT_EQ(with.exitCode, 0) << with.output;
    EXPECT_TRUE(contains(with.output, "unicast to 254 addresses")) << with.output;
    const std::string a = cameraBlock(with.output, kUuidA);
    EXPECT_TRUE(contains(a, "state:     up with authentication")) << with.output;
    EXPECT_TRUE(contains(a, "rtsp://198.51.100.30:554/stream/main")) << with.output;
}

TEST_F(OnvifProbeCommandTest, Ipv6FindsTheCameraAtItsIpv6Url) {
    camera(21, kUuidA, {"--address6", "2001:db8::21"});
    const CommandResult result = probe({"--ipv6", "--user", "admin", "--password-file", password_});
    ASSERT_EQ(result.exitCode, 0) << result.output;
    EXPECT_TRUE(contains(result.output, "probed:    IPv4 and IPv6 multicast")) << result.output;
    const auto v6 = result.output.find("service:   http://[2001:db8::21]:8080/onvif/device_service");
    ASSERT_NE(v6, std::string::npos) << result.output;
    EXPECT_TRUE(contains(result.output.substr(v6, 400), "state:     up with authentication"))
        << result.output;
}

TEST_F(OnvifProbeCommandTest, JsonHoldsStatesStreamsAndReasons) {
    camera(19, kUuidA);
    camera(20, kUuidB, {"--password", "changed"});
    const CommandResult result = probe({"--json", "--user", "admin", "--password-file", password_});
    ASSERT_EQ(result.exitCode, 0) << result.output;
    boost::system::error_code error;
    const boost::json::value document = boost::json::parse(result.output, error);
    ASSERT_FALSE(error) << error.message() << ": " << result.output;
    std::map<std::string, boost::json::object> cameras;
    for (const auto& camera : document.at("configurations").at(0).at("cameras").as_array())
        cameras[std::string(camera.at("uuid").as_string())] = camera.as_object();
    ASSERT_EQ(cameras.size(), 2u) << result.output;
    const auto& a = cameras.at(kUuidA);
    EXPECT_EQ(a.at("state").as_string(), "UpWithAuth");
    EXPECT_TRUE(a.at("offered").as_bool());
    EXPECT_EQ(a.at("model").as_string(), "SimCam");
    EXPECT_EQ(a.at("streams").at(0).at("uri").as_string(), "rtsp://192.0.2.19:554/stream/main");
    EXPECT_EQ(a.at("streams").at(0).at("resolution").as_string(), "1920x1080");
    EXPECT_EQ(cameras.at(kUuidB).at("state").as_string(), "AuthenticationFailed");
    EXPECT_FALSE(contains(result.output, "secret"));
}

// A Media2-only camera behind NAT: its media service is called at the contacted host, and
// the text and the JSON say that its addresses named another host.
TEST_F(OnvifProbeCommandTest, RewrittenServiceAddressesAreTold) {
    camera(22, kUuidA, {"--media2-only", "--nat-address", "192.168.1.64"});
    const CommandResult text = probe({"--user", "admin", "--password-file", password_});
    ASSERT_EQ(text.exitCode, 0) << text.output;
    const std::string a = cameraBlock(text.output, kUuidA);
    EXPECT_TRUE(contains(a, "media:     Media2 at http://192.0.2.22:8080/onvif/media2_service"))
        << text.output;
    EXPECT_TRUE(
        contains(a,
                 "address:   service address rewritten to the contacted host: media2: 192.168.1.64 -> "
                 "192.0.2.22:8080"))
        << text.output;
    EXPECT_TRUE(contains(a, "address:   stream URIs name 192.168.1.64, not the contacted host 192.0.2.22"))
        << text.output;
    EXPECT_TRUE(contains(a, "stream:    main 1920x1080 H265 rtsp://192.168.1.64:554/media2/main"))
        << text.output;
    EXPECT_TRUE(contains(a, "offered:   yes")) << text.output;

    const CommandResult json = probe({"--json", "--user", "admin", "--password-file", password_});
    ASSERT_EQ(json.exitCode, 0) << json.output;
    boost::system::error_code error;
    const boost::json::value document = boost::json::parse(json.output, error);
    ASSERT_FALSE(error) << error.message() << ": " << json.output;
    const auto& camera = document.at("configurations").at(0).at("cameras").at(0).as_object();
    EXPECT_EQ(camera.at("mediaService").as_string(), "media2");
    EXPECT_EQ(camera.at("rewrittenServices").at(0).as_string(), "media2: 192.168.1.64 -> 192.0.2.22:8080");
    EXPECT_EQ(camera.at("streamHostsElsewhere").at(0).as_string(), "192.168.1.64");
    EXPECT_FALSE(contains(json.output, "secret"));
}

// Cameras as some firmware ships them: header blocks marked mustUnderstand, and two cameras
// that send the same MessageID (their generators seeded alike). Both are found.
TEST_F(OnvifProbeCommandTest, CamerasSharingAMessageIdWithMustUnderstandBlocksAreBothFound) {
    const std::vector<std::string> firmware = {"--must-understand", "--message-id",
                                               "uuid:00000000-0000-4000-8000-000000000001"};
    camera(22, kUuidA, firmware);
    camera(23, kUuidB, firmware);
    const CommandResult result = probe({"--user", "admin", "--password-file", password_});
    ASSERT_EQ(result.exitCode, 0) << result.output;
    EXPECT_TRUE(contains(cameraBlock(result.output, kUuidA), "state:     up with authentication"))
        << result.output;
    EXPECT_TRUE(contains(cameraBlock(result.output, kUuidB), "state:     up with authentication"))
        << result.output;
}

// Every answer not used is named: who sent it, what it announced, and why.
TEST_F(OnvifProbeCommandTest, IgnoredAnswersNameSenderAnnouncementAndReason) {
    camera(24, kUuidA);
    // Announces a camera at another host's address.
    camera(25, kUuidB,
           {"--spoof-uuid", kUuidC, "--spoof-xaddr", "http://192.0.2.99:8080/onvif/device_service"});
    camera(27, "55555555-5555-4555-8555-555555555555", {"--hostile", "udp-garbage"});
    const CommandResult text = probe({});
    ASSERT_EQ(text.exitCode, 0) << text.output;
    EXPECT_TRUE(contains(cameraBlock(text.output, kUuidA), "offered:   yes")) << text.output;
    EXPECT_FALSE(contains(text.output, "  camera " + std::string(kUuidC))) << text.output;
    EXPECT_TRUE(
        contains(text.output, "ignored:   ProbeMatches from 192.0.2.25 (uuid " + std::string(kUuidC) + ")"))
        << text.output;
    EXPECT_TRUE(contains(text.output, "XAddrs not at the sender's address")) << text.output;
    EXPECT_TRUE(contains(text.output, "announced: http://192.0.2.99:8080/onvif/device_service"))
        << text.output;
    EXPECT_TRUE(contains(text.output, "ignored:   datagram from 192.0.2.27")) << text.output;
    EXPECT_TRUE(contains(text.output, "malformed XML")) << text.output;

    const CommandResult json = probe({"--json"});
    ASSERT_EQ(json.exitCode, 0) << json.output;
    boost::system::error_code error;
    const boost::json::value document = boost::json::parse(json.output, error);
    ASSERT_FALSE(error) << error.message() << ": " << json.output;
    bool spoofer = false;
    for (const auto& answer : document.at("configurations").at(0).at("ignored").as_array()) {
        if (answer.at("sender").as_string() != "192.0.2.25") continue;
        spoofer = true;
        EXPECT_EQ(answer.at("uuid").as_string(), kUuidC);
        EXPECT_EQ(answer.at("message").as_string(), "ProbeMatches");
        EXPECT_EQ(answer.at("reason").as_string(), "XAddrs not at the sender's address");
        EXPECT_EQ(answer.at("xaddrs").at(0).as_string(), "http://192.0.2.99:8080/onvif/device_service");
    }
    EXPECT_TRUE(spoofer) << json.output;
}

// A host that floods answers has its datagrams parsed only at its share; a camera beside it
// is found as ever.
TEST_F(OnvifProbeCommandTest, AFloodingHostIsRateLimited) {
    camera(28, kUuidA);
    camera(29, kUuidB, {"--hostile", "udp-flood"});
    const CommandResult result = probe({});
    ASSERT_EQ(result.exitCode, 0) << result.output;
    EXPECT_TRUE(contains(cameraBlock(result.output, kUuidA), "offered:   yes")) << result.output;
    EXPECT_TRUE(contains(result.output, "ignored:   datagram from 192.0.2.29")) << result.output;
    EXPECT_TRUE(contains(result.output, "rate-limited")) << result.output;
}

// One host announcing more cameras than a configuration takes: the cap is a problem the
// output names, with the number of answers it cost.
TEST_F(OnvifProbeCommandTest, TheCameraCapIsReported) {
    camera(30, kUuidA, {"--hostile", "many-cameras", "--advertise-port", "9"});
    const CommandResult result = probe({"--json"});
    ASSERT_EQ(result.exitCode, 0) << result.output.substr(0, 2000);
    boost::system::error_code error;
    const boost::json::value document = boost::json::parse(result.output, error);
    ASSERT_FALSE(error) << error.message();
    const auto& configuration = document.at("configurations").at(0);
    EXPECT_EQ(configuration.at("cameras").as_array().size(), 1024u);
    bool capped = false;
    for (const auto& problem : configuration.at("problems").as_array())
        capped = capped || contains(std::string(problem.as_string()), "camera cap of 1024 reached; ");
    EXPECT_TRUE(capped) << boost::json::serialize(configuration.at("problems"));
}

TEST_F(OnvifProbeCommandTest, PasswordsAreRefusedOnTheCommandLine) {
    const CommandResult onCommandLine = probe({"--user", "admin", "--password", "secret"});
    EXPECT_EQ(onCommandLine.exitCode, 2) << onCommandLine.output;
    EXPECT_TRUE(contains(onCommandLine.output, "--password-file")) << onCommandLine.output;
    const CommandResult noFile = probe({"--user", "admin"});
    EXPECT_EQ(noFile.exitCode, 2) << noFile.output;
    const CommandResult missing =
        probe({"--user", "admin", "--password-file", (dir_.path() / "missing").string()});
    EXPECT_EQ(missing.exitCode, 2) << missing.output;
    const CommandResult badTarget = probe({"--target", "192.0.2.0/33"});
    EXPECT_EQ(badTarget.exitCode, 2) << badTarget.output;
}

}  // namespace
}  // namespace devlet::test
