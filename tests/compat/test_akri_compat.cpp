// Akri's own Configurations, loaded as devlet loads files, with the real handlers: the
// configuration-level resource, the instance names Akri gives for known device ids, and
// the environment a container gets compared key by key with what Akri's agent sets
// (every device property and broker property as KEY and KEY_<HASH>, the broker property
// winning). The files and where each comes from: akri/README.md.

#include <chrono>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "probes/echo/echo_handler.h"
#include "probes/onvif/onvif_classifier.h"
#include "probes/onvif/onvif_handler.h"
#include "probes/usb/udev_classifier.h"
#include "probes/usb/udev_details.h"
#include "probes/usb/udev_handler.h"
#include "runtime/configuration.h"
#include "runtime/discovery.h"
#include "runtime/inventory.h"
#include "runtime/naming.h"
#include "tests/support/decide_now.h"

namespace devlet {
namespace {

constexpr char kNode[] = "node-a";
constexpr char kDomain[] = "akri.sh";

std::string path(const std::string& file) {
    return std::string(AKRI_COMPAT_DIR) + "/" + file;
}

std::string upper(std::string text) {
    for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return text;
}

std::string messages(const ParsedConfigurations& parsed) {
    std::string text;
    for (const ConfigProblem& p : parsed.problems) text += p.str() + "\n";
    for (const ConfigProblem& p : parsed.warnings) text += p.str() + " (warning)\n";
    return text;
}

class NullObserver : public InventoryObserver {
public:
    void resourceChanged(ResourceState) override {}
    void resourceWithdrawn(const std::string&) override {}
};

class AkriCompatTest : public ::testing::Test {
protected:
    AkriCompatTest() {
        handlers_.add(std::make_unique<echo::EchoHandler>());
        handlers_.add(std::make_unique<onvif::OnvifHandler>(1));
        handlers_.add(std::make_unique<usb::UdevHandler>());
    }

    // The file's one configuration, accepted; its warnings in `warnings`.
    Configuration load(const std::string& file, std::vector<ConfigProblem>* warnings = nullptr) {
        ParsedConfigurations parsed = loadConfigurationFile(path(file), handlers_, kDomain);
        EXPECT_TRUE(parsed.problems.empty()) << messages(parsed);
        EXPECT_EQ(parsed.configurations.size(), 1u) << messages(parsed);
        if (warnings) *warnings = parsed.warnings;
        return parsed.configurations.empty() ? Configuration{} : parsed.configurations.front();
    }

    // The environment a container gets for one unit of the configuration-level resource
    // given to `device`, as the kubelet would ask for it.
    std::map<std::string, std::string> environment(const Configuration& configuration,
                                                   const Instance& device) {
        NullObserver observer;
        Inventory inventory(kNode, kDomain, nullptr, observer);
        SlotArbiter arbiter(inventory);
        inventory.setHandlers(handlers_);
        inventory.applyConfigurations({configuration}, {{configuration.name, std::chrono::milliseconds(0)}});
        inventory.reportSnapshot(configuration.name, {device});
        const std::string instance =
            instanceName(configuration.name, instanceHash(device.id, kNode, device.shared));
        auto granted = test::allocateNow(arbiter, configurationLevelResource(configuration, kDomain),
                                         {slotId(instance, 0)});
        if (auto* refused = std::get_if<AllocationRefused>(&granted)) {
            ADD_FAILURE() << refused->message;
            return {};
        }
        return std::get<ContainerGrant>(granted).envs;
    }

    // What Akri's agent puts into the environment for this device (cdi_device_to_car):
    // the handler's properties, then brokerProperties (the later one stays), each as KEY
    // and KEY_<HASH>.
    static std::map<std::string, std::string> akriEnvironment(
        const std::map<std::string, std::string>& properties, const Configuration& configuration,
        const std::string& hash) {
        std::map<std::string, std::string> merged = properties;
        for (const auto& [key, value] : configuration.brokerProperties) merged[key] = value;
        std::map<std::string, std::string> env;
        for (const auto& [key, value] : merged) {
            env[key] = value;
            env[key + "_" + upper(hash)] = value;
        }
        return env;
    }

    // Every variable Akri sets is there with Akri's value (devlet adds its own beside them).
    static void expectAkrisEnvironment(const std::map<std::string, std::string>& actual,
                                       const std::map<std::string, std::string>& akri) {
        for (const auto& [key, value] : akri) {
            auto it = actual.find(key);
            if (it == actual.end()) {
                ADD_FAILURE() << key << " is missing";
                continue;
            }
            EXPECT_EQ(it->second, value) << key;
        }
    }

    static Instance echoDevice(const Configuration& configuration, const std::string& description) {
        std::vector<DetailsProblem> problems;
        echo::EchoDetails details = echo::parseEchoDetails(configuration.discoveryDetails, problems);
        details.descriptions = {description};
        return echo::echoInstances(details, false).front();
    }

    // Checks the configuration-level resource, the names of foo0/foo1-like devices and the
    // environment of the first one.
    void expectEcho(const Configuration& configuration, const std::string& first,
                    const std::string& firstHash, const std::string& second, const std::string& secondHash) {
        EXPECT_EQ(configurationLevelResource(configuration, kDomain), "akri.sh/" + configuration.name);
        const Instance a = echoDevice(configuration, first);
        const Instance b = echoDevice(configuration, second);
        EXPECT_TRUE(a.shared) << "Akri's Helm chart installs debugEcho with DEBUG_ECHO_INSTANCES_SHARED=true";
        EXPECT_EQ(instanceName(configuration.name, instanceHash(a.id, kNode, a.shared)),
                  configuration.name + "-" + firstHash);
        EXPECT_EQ(instanceName(configuration.name, instanceHash(b.id, "another-node", b.shared)),
                  configuration.name + "-" + secondHash);
        const auto env = environment(configuration, a);
        expectAkrisEnvironment(
            env, akriEnvironment({{"DEBUG_ECHO_DESCRIPTION", first}}, configuration, firstHash));
    }

    HandlerRegistry handlers_;
};

bool mentions(const std::vector<ConfigProblem>& warnings, const std::string& text) {
    for (const ConfigProblem& w : warnings)
        if (w.message.find(text) != std::string::npos) return true;
    return false;
}

// --- debugEcho ------------------------------------------------------------------------

TEST_F(AkriCompatTest, HelmDebugEchoDefaultsGiveAkrisNames) {
    std::vector<ConfigProblem> warnings;
    const Configuration configuration = load("helm-debug-echo.yaml", &warnings);
    EXPECT_TRUE(warnings.empty());
    EXPECT_EQ(configuration.name, "akri-debug-echo");
    EXPECT_EQ(configuration.capacity, 2);
    EXPECT_TRUE(configuration.uniqueDevices);
    expectEcho(configuration, "foo0", "8120fe", "foo1", "a19705");
}

TEST_F(AkriCompatTest, HelmDebugEchoWithBrokerWarnsOfBrokerAndServices) {
    std::vector<ConfigProblem> warnings;
    const Configuration configuration = load("helm-debug-echo-nginx.yaml", &warnings);
    EXPECT_TRUE(mentions(warnings, "spec.brokerSpec")) << warnings.size();
    EXPECT_TRUE(mentions(warnings, "spec.instanceServiceSpec"));
    EXPECT_TRUE(mentions(warnings, "spec.configurationServiceSpec"));
    expectEcho(configuration, "foo0", "8120fe", "foo1", "a19705");
}

TEST_F(AkriCompatTest, HelmDebugEchoWithoutDescriptionsHasNoDevicesAndSaysSo) {
    std::vector<ConfigProblem> warnings;
    const Configuration configuration = load("helm-debug-echo-no-descriptions.yaml", &warnings);
    EXPECT_TRUE(mentions(warnings, "\"descriptions\" is empty: this configuration has no devices"));
    std::vector<DetailsProblem> problems;
    EXPECT_TRUE(echo::parseEchoDetails(configuration.discoveryDetails, problems).descriptions.empty());
}

TEST_F(AkriCompatTest, TestYamlDebugEchoPodAndJobConfigurations) {
    const Configuration pod = load("test-yaml-akri-debug-echo-pod-configuration.yaml");
    EXPECT_EQ(pod.capacity, 5);
    expectEcho(pod, "foo0", "8120fe", "foo1", "a19705");
    const Configuration job = load("test-yaml-akri-debug-echo-job-configuration.yaml");
    expectEcho(job, "fee0", instanceHash("fee0", "", true), "fee1", instanceHash("fee1", "", true));
}

TEST_F(AkriCompatTest, TestYamlConfigAAndBCarryBrokerProperties) {
    for (const char* file : {"test-yaml-config-a.yaml", "test-yaml-config-b.yaml"}) {
        const Configuration configuration = load(file);
        EXPECT_EQ(
            configuration.brokerProperties,
            (std::map<std::string, std::string>{{"RESOLUTION_WIDTH", "800"}, {"RESOLUTION_HEIGHT", "600"}}));
        const std::string hash = instanceHash("filter1", "", true);
        expectEcho(configuration, "filter1", hash, "filter2", instanceHash("filter2", "", true));
        const auto env = environment(configuration, echoDevice(configuration, "filter1"));
        EXPECT_EQ(env.at("RESOLUTION_WIDTH_" + upper(hash)), "800");
    }
}

TEST_F(AkriCompatTest, E2eDebugEchoConfigurations) {
    const Configuration e2e = load("e2e-debugEchoConfiguration.yaml");
    EXPECT_EQ(configurationLevelResource(e2e, kDomain), "akri.sh/akri-debug-echo-foo");
    expectEcho(e2e, "bar0", instanceHash("bar0", "", true), "bar1", instanceHash("bar1", "", true));
    // kubectl's object metadata (annotations, managedFields, uid, ...) loads.
    const Configuration webhook = load("e2e-webhookValidConfiguration.yaml");
    EXPECT_EQ(webhook.name, "broker");
    expectEcho(webhook, "foo", instanceHash("foo", "", true), "bar", instanceHash("bar", "", true));
}

// Helm's `debugEcho.configuration.shared=false` sets the handler's environment, not the
// Configuration; in devlet it is `shared: false` in discoveryDetails: node-local names.
TEST_F(AkriCompatTest, DebugEchoSharedFalseGivesNodeLocalNames) {
    Configuration configuration = load("helm-debug-echo.yaml");
    configuration.discoveryDetails += "shared: false\n";
    const Instance foo0 = echoDevice(configuration, "foo0");
    EXPECT_FALSE(foo0.shared);
    EXPECT_EQ(instanceHash(foo0.id, kNode, foo0.shared), instanceHash("foo0" + std::string(kNode), "", true));
    EXPECT_NE(instanceHash(foo0.id, kNode, foo0.shared), "8120fe");
    const std::string hash = instanceHash("foo0", kNode, false);
    expectAkrisEnvironment(environment(configuration, foo0),
                           akriEnvironment({{"DEBUG_ECHO_DESCRIPTION", "foo0"}}, configuration, hash));
}

// --- udev -----------------------------------------------------------------------------

usb::UdevObservation videoNode() {
    usb::UdevObservation seen;
    seen.device.devpath = "/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/video4linux/video0";
    seen.device.subsystem = "video4linux";
    seen.device.kernel = "video0";
    seen.devnode = "/dev/video0";
    seen.properties["ID_PATH"] = "pci-0000:00:14.0-usb-0:1:1.0";
    return seen;
}

TEST_F(AkriCompatTest, UdevConfigurationsFindAVideoNodeWithAkrisNameAndEnvironment) {
    for (const char* file : {"helm-udev-video.yaml", "test-yaml-akri-udev-video-configuration.yaml"}) {
        SCOPED_TRACE(file);
        std::vector<ConfigProblem> warnings;
        const Configuration configuration = load(file, &warnings);
        EXPECT_TRUE(mentions(warnings, "spec.brokerSpec"));
        EXPECT_EQ(configurationLevelResource(configuration, kDomain), "akri.sh/akri-udev-video");
        std::vector<DetailsProblem> problems;
        const usb::UdevDetails details = usb::parseUdevDetails(configuration.discoveryDetails, problems);
        ASSERT_TRUE(problems.empty());
        const std::vector<Instance> found = usb::classifyUdev({videoNode()}, details);
        ASSERT_EQ(found.size(), 1u);
        const Instance& device = found.front();
        EXPECT_EQ(device.id, videoNode().device.devpath) << "Akri's udev id is the devpath";
        EXPECT_FALSE(device.shared);
        const std::string hash = instanceHash(device.id, kNode, false);
        expectAkrisEnvironment(environment(configuration, device),
                               akriEnvironment({{"UDEV_DEVNODE", "/dev/video0"}, {"UDEV_DEVPATH", device.id}},
                                               configuration, hash));
    }
}

TEST_F(AkriCompatTest, E2eUdevConfigurationsLoad) {
    const Configuration devNull = load("e2e-udevDevNullConfiguration.yaml");
    EXPECT_EQ(configurationLevelResource(devNull, kDomain), "akri.sh/akri-udev-dev-null");
    const Configuration grouped = load("e2e-udevGroupedConfiguration.yaml");
    EXPECT_EQ(configurationLevelResource(grouped, kDomain), "akri.sh/akri-udev-grouped");
    std::vector<DetailsProblem> problems;
    const usb::UdevDetails details = usb::parseUdevDetails(grouped.discoveryDetails, problems);
    ASSERT_TRUE(problems.empty());
    const std::vector<Instance> found = usb::classifyUdev({videoNode()}, details);
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0].properties.at("UDEV_DEVPATH"), videoNode().device.devpath);
}

// --- onvif ----------------------------------------------------------------------------

onvif::CameraObservation camera() {
    onvif::CameraObservation seen;
    seen.uuid = "3fa1fe68-b915-4053-a3e1-ac15a21f5f91";
    seen.serviceUrl = "http://192.0.2.7:8080/onvif/device_service";
    seen.report.state = onvif::CameraState::UpWithAuth;
    seen.report.ipAddress = "192.0.2.7";
    seen.report.macAddress = "00:11:22:33:44:55";
    return seen;
}

TEST_F(AkriCompatTest, OnvifConfigurationsGiveAkrisNameAndEnvironment) {
    for (const char* file : {"helm-onvif.yaml", "test-yaml-akri-onvif-video-configuration.yaml"}) {
        SCOPED_TRACE(file);
        const Configuration configuration = load(file);
        EXPECT_EQ(configurationLevelResource(configuration, kDomain), "akri.sh/" + configuration.name);
        const Instance device = onvif::cameraInstance(camera());
        EXPECT_EQ(device.id, camera().serviceUrl + "-" + camera().uuid) << "Akri's onvif id";
        EXPECT_TRUE(device.shared);
        const std::string hash = instanceHash(device.id, "", true);
        EXPECT_EQ(instanceHash(device.id, "another-node", true), hash);
        expectAkrisEnvironment(environment(configuration, device),
                               akriEnvironment({{"ONVIF_DEVICE_SERVICE_URL", camera().serviceUrl},
                                                {"ONVIF_DEVICE_UUID", camera().uuid},
                                                {"ONVIF_DEVICE_IP_ADDRESS", "192.0.2.7"},
                                                {"ONVIF_DEVICE_MAC_ADDRESS", "00:11:22:33:44:55"}},
                                               configuration, hash));
    }
}

// --- handlers devlet does not have ----------------------------------------------------

TEST_F(AkriCompatTest, OpcuaAndCustomHandlersAreRefusedWithTheKnownNames) {
    const std::map<std::string, std::string> refused = {
        {"helm-opcua.yaml", "unknown discovery handler \"opcua\" (known: debugEcho, onvif, udev)"},
        {"test-yaml-akri-opcua-configuration.yaml",
         "unknown discovery handler \"opcua\" (known: debugEcho, onvif, udev)"},
        {"helm-custom.yaml", "unknown discovery handler \"http\" (known: debugEcho, onvif, udev)"},
    };
    for (const auto& [file, message] : refused) {
        ParsedConfigurations parsed = loadConfigurationFile(path(file), handlers_, kDomain);
        ASSERT_EQ(parsed.problems.size(), 1u) << file << "\n" << messages(parsed);
        EXPECT_EQ(parsed.problems[0].message, message) << file;
        EXPECT_TRUE(parsed.configurations.empty());
    }
}

}  // namespace
}  // namespace devlet
