// ONVIF cameras end to end: the real devlet in a network namespace finds simulated cameras
// (each in its own namespace behind a bridge), queries them with credentials, and offers
// them through the kubelet simulator; a camera's Bye makes it Unhealthy at once; a camera
// that moves to a new address is followed by the live file of the pod holding it. Skips
// where network namespaces cannot be created (not root).

#include <csignal>
#include <filesystem>
#include <thread>

#include <boost/json.hpp>
#include <sys/stat.h>

#include "tests/integration/onvif_lab_test.h"
#include "tests/status/status_test_support.h"

namespace devlet::test {
namespace {

constexpr const char* kCl = "akri.sh/onvif-cams";

class OnvifCamerasTest : public OnvifLabTest {
protected:
    void SetUp() override {
        OnvifLabTest::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        const std::string credentials = (dir_.path() / "onvif-credentials.yaml").string();
        writeFile(credentials, "networks: [192.0.2.0/24]\ndefault: {username: admin, password: secret}\n");
        chmod(credentials.c_str(), 0600);
        writeFile(daemon_->confDir() / "onvif.yaml",
                  "apiVersion: akri.sh/v0\n"
                  "kind: Configuration\n"
                  "metadata:\n"
                  "  name: onvif-cams\n"
                  "spec:\n"
                  "  discoveryHandler:\n"
                  "    name: onvif\n"
                  "    discoveryDetails: |\n"
                  "      discoveryTimeoutSeconds: 1\n"
                  "      interfaces: [br0]\n"
                  "      livenessIntervalSeconds: 1\n"
                  "      credentialsFile: " +
                      credentials + "\n  capacity: 1\n");
        ASSERT_TRUE(kubelet_->start());
    }
    // A camera that wants the credentials devlet has, with `extra` options.
    pid_t camera(int host, const std::string& uuid, std::vector<std::string> extra = {}) {
        std::vector<std::string> options = {"--uuid", uuid, "--user", "admin", "--password", "secret"};
        options.insert(options.end(), extra.begin(), extra.end());
        return startCamera(host, options);
    }
};

TEST_F(OnvifCamerasTest, CamerasAreOfferedWithStreamUrisAndNoSecrets) {
    camera(11, "11111111-1111-4111-8111-111111111111");
    camera(12, "22222222-2222-4222-8222-222222222222");
    startDaemon();
    ASSERT_TRUE(waitForDevices(kCl, 2, 60s));
    auto result = kubelet_->allocate("default", "pod-a", "main", kCl, 1);
    ASSERT_TRUE(result.ok) << result.error;
    const auto& envs = result.response.envs();
    ASSERT_EQ(envs.count("ONVIF_DEVICE_SERVICE_URL"), 1u);
    EXPECT_TRUE(envs.at("ONVIF_STREAM_0_URI").starts_with("rtsp://192.0.2.1"));
    EXPECT_EQ(envs.count("ONVIF_DEVICE_MAC_ADDRESS"), 1u);
    for (const auto& [key, value] : envs) EXPECT_EQ(value.find("secret"), std::string::npos) << key;
    EXPECT_EQ(daemon_->log().find("secret"), std::string::npos);
}

TEST_F(OnvifCamerasTest, ByeMakesTheCameraUnhealthyAtOnce) {
    const pid_t pid = camera(13, "33333333-3333-4333-8333-333333333333", {"--hello"});
    startDaemon();
    ASSERT_TRUE(waitForDevices(kCl, 1, 60s));
    const std::string slot = health(kCl).begin()->first;
    lab_->terminate(pid);  // says Bye
    EXPECT_TRUE(waitForHealth(kCl, slot, "Unhealthy", 30s));
}

TEST_F(OnvifCamerasTest, StatusNamesEachCamerasStateAndWhyOneIsNotOffered) {
    camera(14, "44444444-4444-4444-8444-444444444444");
    // This one has another password than devlet knows: it answers, but refuses devlet.
    camera(15, "55555555-5555-4555-8555-555555555555", {"--password", "other"});
    // Only cameras that accept devlet's credentials are offered.
    std::string configuration = readFile(daemon_->confDir() / "onvif.yaml");
    configuration.insert(configuration.find("  capacity:"), "      offerUnauthenticated: false\n");
    writeFile(daemon_->confDir() / "onvif.yaml", configuration);
    startDaemon();
    ASSERT_TRUE(waitForDevices(kCl, 1, 60s));
    // The status server listens on loopback in the namespace devlet runs in.
    ASSERT_TRUE(lab_->enter());
    const unsigned short port = statusPortFromLog(daemon_->log());
    std::string instances;
    const bool explained = eventually(
        [&] {
            instances = httpGet(port, "/api/v1/instances").body;
            return instances.find("authentication failed") != std::string::npos;
        },
        60s);
    const std::string page = httpGet(port, "/api/v1/status").body;
    lab_->leave();
    ASSERT_TRUE(explained) << instances;
    EXPECT_NE(instances.find("\"deviceState\":\"up with authentication\""), std::string::npos) << instances;
    EXPECT_NE(instances.find("\"text\":\"camera http://192.0.2.15"), std::string::npos) << instances;
    EXPECT_NE(
        instances.find("55555555-5555-4555-8555-555555555555 is not offered: authentication failed, and "
                       "offerUnauthenticated is false"),
        std::string::npos)
        << instances;
    EXPECT_EQ(page.find("secret"), std::string::npos);
    EXPECT_EQ(page.find("other\""), std::string::npos);
}

// A camera behind NAT names its inside address for its services: the status API says, under
// the offered camera, that devlet called them at the contacted host instead.
TEST_F(OnvifCamerasTest, StatusSaysWhenACamerasServiceAddressWasRewritten) {
    camera(16, "66666666-6666-4666-8666-666666666666", {"--nat-address", "192.168.1.64"});
    startDaemon();
    ASSERT_TRUE(waitForDevices(kCl, 1, 60s));
    ASSERT_TRUE(lab_->enter());
    const unsigned short port = statusPortFromLog(daemon_->log());
    std::string instances;
    const bool told = eventually(
        [&] {
            instances = httpGet(port, "/api/v1/instances").body;
            return instances.find("\"deviceNotes\":[\"") != std::string::npos;
        },
        60s);
    lab_->leave();
    ASSERT_TRUE(told) << instances;
    EXPECT_NE(instances.find("service address rewritten to the contacted host: media: 192.168.1.64 -> "
                             "192.0.2.16:8080"),
              std::string::npos)
        << instances;
    EXPECT_NE(instances.find("stream URIs name 192.168.1.64, not the contacted host 192.0.2.16"),
              std::string::npos)
        << instances;
    EXPECT_NE(instances.find("ONVIF_STREAM_0_URI"), std::string::npos) << instances;
}

// The first device of a live file, as text properties with its health and instance; empty
// when the file cannot be read or holds no device.
std::map<std::string, std::string> liveDevice(const std::filesystem::path& file, std::uint64_t& generation) {
    boost::system::error_code ec;
    const boost::json::value value = boost::json::parse(readFile(file), ec);
    std::map<std::string, std::string> device;
    if (ec || !value.is_object()) return device;
    const boost::json::object& doc = value.get_object();
    const boost::json::value* g = doc.if_contains("generation");
    generation = g && g->is_number() ? g->to_number<std::uint64_t>() : 0;
    const boost::json::value* devices = doc.if_contains("devices");
    if (!devices || !devices->is_array() || devices->get_array().empty()) return device;
    const boost::json::value& first = devices->get_array().front();
    if (!first.is_object()) return device;
    for (const char* key : {"instance", "health", "slot"}) {
        const boost::json::value* v = first.get_object().if_contains(key);
        if (v && v->is_string()) device[key] = v->get_string();
    }
    const boost::json::value* properties = first.get_object().if_contains("properties");
    if (properties && properties->is_object())
        for (const auto& [key, v] : properties->get_object())
            if (v.is_string()) device[std::string(key)] = v.get_string();
    return device;
}

// A held camera gets a new address (a new DHCP lease, a Hello with a new MetadataVersion):
// the container's live file shows the new address and stream URIs, under the same instance
// and slot, while the environment the container started with keeps the old ones.
TEST_F(OnvifCamerasTest, LiveFileFollowsACameraThatMovesWhileTheEnvironmentKeepsTheOldAddress) {
    const pid_t pid = camera(17, "77777777-7777-4777-8777-777777777777");
    startDaemon();
    ASSERT_TRUE(waitForDevices(kCl, 1, 60s));
    const std::string slot = health(kCl).begin()->first;
    auto granted = kubelet_->allocate("default", "pod-a", "main", kCl, 1);
    ASSERT_TRUE(granted.ok) << granted.error;
    const auto& envs = granted.response.envs();
    EXPECT_EQ(envs.at("ONVIF_DEVICE_SERVICE_URL"), "http://192.0.2.17:8080/onvif/device_service");
    EXPECT_EQ(envs.at("ONVIF_STREAM_0_URI"), "rtsp://192.0.2.17:554/stream/main");
    std::filesystem::path file;
    for (const auto& mount : granted.response.mounts())
        if (mount.container_path() == "/run/devlet/info")
            file = std::filesystem::path(mount.host_path()) / "devices.json";
    ASSERT_FALSE(file.empty()) << "no live-info mount in the Allocate answer";
    std::uint64_t before = 0;
    const std::map<std::string, std::string> held = liveDevice(file, before);
    ASSERT_EQ(held.at("ONVIF_DEVICE_SERVICE_URL"), "http://192.0.2.17:8080/onvif/device_service");
    ASSERT_GT(before, 0u);

    ASSERT_TRUE(lab_->readdressCameraHost(hosts_[17], 17, 18));
    ::kill(pid, SIGUSR2);
    std::map<std::string, std::string> moved;
    std::uint64_t after = 0;
    const bool followed = eventually(
        [&] {
            moved = liveDevice(file, after);
            return moved.count("ONVIF_STREAM_0_URI") &&
                   moved.at("ONVIF_STREAM_0_URI") == "rtsp://192.0.2.18:554/stream2/main";
        },
        60s);
    ASSERT_TRUE(followed) << readFile(file) << daemon_->log();
    EXPECT_GT(after, before);
    EXPECT_EQ(moved.at("ONVIF_DEVICE_SERVICE_URL"), "http://192.0.2.18:8080/onvif/device_service");
    EXPECT_EQ(moved.at("ONVIF_DEVICE_IP_ADDRESS"), "192.0.2.18");
    EXPECT_EQ(moved.at("health"), "present");
    EXPECT_EQ(moved.at("instance"), held.at("instance"));
    EXPECT_EQ(moved.at("slot"), held.at("slot"));
    // The kubelet still sees the same device, healthy: the pod keeps its slot.
    EXPECT_EQ(health(kCl).count(slot), 1u);
    EXPECT_EQ(health(kCl).at(slot), "Healthy");
    // What the container started with is what the kubelet simulator got then.
    EXPECT_EQ(envs.at("ONVIF_DEVICE_SERVICE_URL"), "http://192.0.2.17:8080/onvif/device_service");
    EXPECT_EQ(envs.at("ONVIF_STREAM_0_URI"), "rtsp://192.0.2.17:554/stream/main");
    EXPECT_NE(daemon_->log().find("moved from http://192.0.2.17:8080/onvif/device_service to "
                                  "http://192.0.2.18:8080/onvif/device_service"),
              std::string::npos)
        << daemon_->log();
}

}  // namespace
}  // namespace devlet::test
