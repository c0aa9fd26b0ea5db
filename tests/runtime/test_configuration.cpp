#include <filesystem>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "runtime/configuration.h"
#include "runtime/discovery.h"
#include "runtime/strict_yaml.h"
#include "tests/support/temp_dir.h"

namespace devlet {
namespace {

// Stands in for a real handler: its details are YAML with one known key, `descriptions`.
class FakeHandler : public DiscoveryHandler {
public:
    explicit FakeHandler(std::string name, bool throws = false, bool readsSecrets = false)
        : name_(std::move(name)), throws_(throws), readsSecrets_(readsSecrets) {}

    std::string_view name() const override { return name_; }
    bool readsReferencedProperties() const override { return readsSecrets_; }

    std::vector<DetailsProblem> check(const Configuration& configuration) const override {
        if (throws_) throw std::runtime_error("boom");
        checked_.push_back(configuration);
        std::vector<DetailsProblem> problems;
        try {
            YAML::Node details = YAML::Load(configuration.discoveryDetails);
            if (!details.IsMap()) return problems;
            for (auto it = details.begin(); it != details.end(); ++it) {
                if (it->first.Scalar() != "descriptions") {
                    problems.push_back(
                        {it->first.Mark().line + 1, "unknown key \"" + it->first.Scalar() + "\""});
                }
            }
        } catch (const YAML::Exception& e) {
            problems.push_back({e.mark.line + 1, e.msg});
        }
        return problems;
    }

    std::unique_ptr<Probe> createProbe(const Configuration&, boost::asio::io_context&, ProbeSink&) override {
        return nullptr;
    }

    mutable std::vector<Configuration> checked_;

private:
    std::string name_;
    bool throws_;
    bool readsSecrets_;
};

class ConfigurationTest : public ::testing::Test {
protected:
    ConfigurationTest() {
        auto echo = std::make_unique<FakeHandler>("debugEcho");
        echo_ = echo.get();
        handlers_.add(std::move(echo));
        handlers_.add(std::make_unique<FakeHandler>("udev"));
        handlers_.add(std::make_unique<FakeHandler>("broken", /*throws=*/true));
        handlers_.add(std::make_unique<FakeHandler>("cameras", false, /*readsSecrets=*/true));
    }

    ParsedConfigurations parse(const std::string& text, const std::string& domain = "akri.sh") {
        return parseConfigurations(text, "conf.d/test.yaml", handlers_, domain);
    }

    // A minimal valid document with the given spec lines (indented by the caller).
    static std::string document(const std::string& name, const std::string& specLines) {
        return "apiVersion: akri.sh/v0\n"
               "kind: Configuration\n"
               "metadata:\n"
               "  name: " +
               name +
               "\n"
               "spec:\n"
               "  discoveryHandler:\n"
               "    name: debugEcho\n"
               "    discoveryDetails: |\n"
               "      descriptions: [foo0]\n" +
               specLines;
    }

    static std::string allMessages(const ParsedConfigurations& parsed) {
        std::string all;
        for (const auto& problem : parsed.problems) all += problem.str() + "\n";
        return all;
    }

    HandlerRegistry handlers_;
    FakeHandler* echo_ = nullptr;
};

// Akri's own e2e configuration (test/e2e/yaml/debugEchoConfiguration.yaml), unchanged.
constexpr const char* kAkriE2eDebugEcho = R"(apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: akri-debug-echo-foo
spec:
  discoveryHandler: 
    name: debugEcho
    discoveryDetails: |+
      descriptions:
        - bar0
        - bar1
  brokerSpec:
    brokerPodSpec:
      containers:
      - name: akri-debug-echo-foo-broker
        image: "nginx:stable-alpine"
        resources:
          requests:
            "{{PLACEHOLDER}}" : "1"
            memory: 10Mi
            cpu: 10m
          limits:
            "{{PLACEHOLDER}}" : "1"
            memory: 30Mi
            cpu: 29m
  instanceServiceSpec:
    type: ClusterIP
    ports:
    - name: akri-debug-echo-foo-instance-service
      port: 6052
      protocol: TCP
      targetPort: 6052
  configurationServiceSpec:
    type: ClusterIP
    ports:
    - name: akri-debug-echo-foo-configuration-service
      port: 6052
      protocol: TCP
      targetPort: 6052
  brokerProperties:
    RESOLUTION_WIDTH: "800"
    RESOLUTION_HEIGHT: "600"
  capacity: 2
)";

TEST_F(ConfigurationTest, ParsesAkriDebugEchoConfiguration) {
    auto parsed = parse(kAkriE2eDebugEcho);
    ASSERT_TRUE(parsed.problems.empty()) << allMessages(parsed);
    ASSERT_EQ(parsed.configurations.size(), 1u);
    const Configuration& config = parsed.configurations[0];
    EXPECT_EQ(config.name, "akri-debug-echo-foo");
    EXPECT_EQ(config.handler, "debugEcho");
    EXPECT_EQ(config.discoveryDetails, "descriptions:\n  - bar0\n  - bar1\n");
    EXPECT_EQ(config.detailsLine, 9);
    EXPECT_EQ(config.capacity, 2);
    EXPECT_EQ(config.brokerProperties, (std::map<std::string, std::string>{{"RESOLUTION_HEIGHT", "600"},
                                                                           {"RESOLUTION_WIDTH", "800"}}));
    EXPECT_EQ(config.sourceFile, "conf.d/test.yaml");
    EXPECT_EQ(config.sourceLine, 1);
}

TEST_F(ConfigurationTest, MinimalConfigurationGetsDefaults) {
    auto parsed = parse(
        "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: cams\n"
        "spec:\n  discoveryHandler:\n    name: udev\n");
    ASSERT_TRUE(parsed.problems.empty()) << allMessages(parsed);
    ASSERT_EQ(parsed.configurations.size(), 1u);
    const Configuration& config = parsed.configurations[0];
    EXPECT_EQ(config.discoveryDetails, "");
    EXPECT_EQ(config.capacity, 1);
    EXPECT_EQ(config.allocationPolicy, AllocationPolicy::Spread);
    EXPECT_TRUE(config.uniqueDevices) << "as in Akri: N units of the configuration's resource are N devices";
    EXPECT_EQ(config.configurationResource, "");
    EXPECT_FALSE(config.removalGrace.has_value());
    EXPECT_TRUE(parsed.warnings.empty());
}

TEST_F(ConfigurationTest, BrokerSpecIsWarning) {
    auto parsed = parse(kAkriE2eDebugEcho);
    ASSERT_EQ(parsed.configurations.size(), 1u);
    ASSERT_EQ(parsed.warnings.size(), 3u);
    EXPECT_EQ(
        parsed.warnings[0].str(),
        "conf.d/test.yaml:12: spec.brokerSpec: devlet deploys brokers and services only in cluster mode "
        "(cluster.kubeconfig in the settings); ignored");
    EXPECT_TRUE(parsed.warnings[0].clusterOnly);
    EXPECT_EQ(parsed.warnings[1].line, 26);
    EXPECT_EQ(parsed.warnings[2].line, 33);
}

TEST_F(ConfigurationTest, BrokerAndServiceSpecsAreKeptAsJson) {
    auto parsed = parse(kAkriE2eDebugEcho);
    ASSERT_EQ(parsed.configurations.size(), 1u);
    const Configuration& config = parsed.configurations[0];
    EXPECT_EQ(config.brokerPodSpec,
              R"({"containers":[{"name":"akri-debug-echo-foo-broker","image":"nginx:stable-alpine",)"
              R"("resources":{"requests":{"{{PLACEHOLDER}}":"1","memory":"10Mi","cpu":"10m"},)"
              R"("limits":{"{{PLACEHOLDER}}":"1","memory":"30Mi","cpu":"29m"}}}]})");
    EXPECT_EQ(config.brokerJobSpec, "");
    EXPECT_EQ(config.instanceServiceSpec,
              R"({"type":"ClusterIP","ports":[{"name":"akri-debug-echo-foo-instance-service","port":6052,)"
              R"("protocol":"TCP","targetPort":6052}]})");
    EXPECT_NE(config.configurationServiceSpec.find(R"("port":6052)"), std::string::npos);
}

// Warnings other than the one saying brokers need cluster mode.
std::vector<ConfigProblem> fieldWarnings(const ParsedConfigurations& parsed) {
    std::vector<ConfigProblem> out;
    for (const auto& warning : parsed.warnings) {
        if (!warning.clusterOnly) out.push_back(warning);
    }
    return out;
}

TEST_F(ConfigurationTest, CommonBrokerPodSpecFieldsAreNotWarned) {
    auto parsed =
        parse(document("cams",
                       "  brokerSpec:\n"
                       "    brokerPodSpec:\n"
                       "      nodeSelector:\n"
                       "        any.example/label-key: x\n"
                       "      tolerations:\n"
                       "      - {key: k, operator: Exists, effect: NoSchedule}\n"
                       "      affinity:\n"
                       "        nodeAffinity:\n"
                       "          requiredDuringSchedulingIgnoredDuringExecution:\n"
                       "            nodeSelectorTerms:\n"
                       "            - matchExpressions:\n"
                       "              - {key: zone, operator: In, values: [a]}\n"
                       "      securityContext: {runAsUser: 1000, fsGroup: 44}\n"
                       "      containers:\n"
                       "      - name: broker\n"
                       "        image: nginx:stable-alpine\n"
                       "        imagePullPolicy: IfNotPresent\n"
                       "        command: [/bin/sh]\n"
                       "        env:\n"
                       "        - {name: A, value: b}\n"
                       "        - name: NODE\n"
                       "          valueFrom: {fieldRef: {fieldPath: spec.nodeName}}\n"
                       "        ports: [{containerPort: 8080, name: http}]\n"
                       "        volumeMounts: [{name: dev, mountPath: /dev/video0}]\n"
                       "        securityContext: {privileged: true, capabilities: {add: [SYS_ADMIN]}}\n"
                       "        resources:\n"
                       "          requests: {\"{{PLACEHOLDER}}\": \"1\", memory: 10Mi}\n"
                       "          limits: {\"{{PLACEHOLDER}}\": \"1\", any.vendor/gpu: 1}\n"
                       "        livenessProbe: {httpGet: {path: /, port: http}}\n"
                       "      volumes:\n"
                       "      - name: dev\n"
                       "        hostPath: {path: /dev/video0, type: CharDevice}\n"
                       "  instanceServiceSpec:\n"
                       "    type: ClusterIP\n"
                       "    ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]\n"));
    ASSERT_TRUE(parsed.problems.empty()) << allMessages(parsed);
    ASSERT_EQ(parsed.configurations.size(), 1u);
    for (const auto& warning : fieldWarnings(parsed)) ADD_FAILURE() << warning.str();
}

TEST_F(ConfigurationTest, UnknownBrokerPodSpecFieldsWarnedAtTheirLinesWithNearestName) {
    auto parsed = parse(document("cams",
                                 "  brokerSpec:\n"                              // 10
                                 "    brokerPodSpec:\n"                         // 11
                                 "      containers:\n"                          // 12
                                 "      - name: broker\n"                       // 13
                                 "        image: nginx\n"                       // 14
                                 "        imagePullPolicyy: Always\n"           // 15
                                 "        resources:\n"                         // 16
                                 "          limts: {memory: 30Mi}\n"            // 17
                                 "      volumes:\n"                             // 18
                                 "      - name: dev\n"                          // 19
                                 "        hostPath: {pth: /dev/video0}\n"       // 20
                                 "      nodeSelector: {imagePullPolicyy: x}\n"  // 21: free keys
                                 "      frobnicate: true\n"));                  // 22
    ASSERT_TRUE(parsed.problems.empty()) << allMessages(parsed);
    ASSERT_EQ(parsed.configurations.size(), 1u) << "warned, not refused: devlet's own use of it is unchanged";
    auto warnings = fieldWarnings(parsed);
    ASSERT_EQ(warnings.size(), 4u);
    std::map<int, std::string> byLine;
    for (const auto& warning : warnings) byLine[warning.line] = warning.message;
    EXPECT_EQ(byLine[15],
              "spec.brokerSpec.brokerPodSpec.containers[0].imagePullPolicyy: not a field of the Kubernetes "
              "Container (did you mean \"imagePullPolicy\"?); Akri's webhook refuses this Configuration, and "
              "devlet applies no broker from it");
    EXPECT_NE(byLine[17].find("spec.brokerSpec.brokerPodSpec.containers[0].resources.limts: not a field of "
                              "the Kubernetes ResourceRequirements (did you mean \"limits\"?)"),
              std::string::npos)
        << byLine[17];
    EXPECT_NE(byLine[20].find("spec.brokerSpec.brokerPodSpec.volumes[0].hostPath.pth: not a field of the "
                              "Kubernetes HostPathVolumeSource (did you mean \"path\"?)"),
              std::string::npos)
        << byLine[20];
    EXPECT_NE(byLine[22].find("spec.brokerSpec.brokerPodSpec.frobnicate: not a field of the Kubernetes "
                              "PodSpec;"),
              std::string::npos)
        << byLine[22];
}

TEST_F(ConfigurationTest, UnknownJobAndServiceSpecFieldsWarned) {
    auto parsed = parse(document("cams",
                                 "  brokerSpec:\n"                                        // 10
                                 "    brokerJobSpec:\n"                                   // 11
                                 "      backofLimit: 2\n"                                 // 12
                                 "      template:\n"                                      // 13
                                 "        metadata:\n"                                    // 14
                                 "          labels: {anything: goes}\n"                   // 15
                                 "          annotations: {any.key/x: y}\n"                // 16
                                 "        spec:\n"                                        // 17
                                 "          restartPolicy: Never\n"                       // 18
                                 "          containers: [{name: c, image: i, foo: 1}]\n"  // 19
                                 "  configurationServiceSpec:\n"                          // 20
                                 "    prots: [{port: 80}]\n"));                           // 21
    ASSERT_TRUE(parsed.problems.empty()) << allMessages(parsed);
    auto warnings = fieldWarnings(parsed);
    ASSERT_EQ(warnings.size(), 3u);
    std::map<int, std::string> byLine;
    for (const auto& warning : warnings) byLine[warning.line] = warning.message;
    EXPECT_NE(byLine[12].find("spec.brokerSpec.brokerJobSpec.backofLimit: not a field of the Kubernetes "
                              "JobSpec (did you mean \"backoffLimit\"?)"),
              std::string::npos)
        << byLine[12];
    EXPECT_NE(byLine[19].find("spec.brokerSpec.brokerJobSpec.template.spec.containers[0].foo: not a field"),
              std::string::npos)
        << byLine[19];
    EXPECT_NE(
        byLine[21].find("spec.configurationServiceSpec.prots: not a field of the Kubernetes ServiceSpec "
                        "(did you mean \"ports\"?); Akri's webhook refuses this Configuration, and "
                        "devlet applies no Service from it"),
        std::string::npos)
        << byLine[21];
}

TEST_F(ConfigurationTest, BothBrokerPodAndJobSpecIsError) {
    auto parsed = parse(document("cams",
                                 "  brokerSpec:\n    brokerPodSpec:\n      containers: []\n"
                                 "    brokerJobSpec:\n      template: {}\n"));
    ASSERT_EQ(parsed.problems.size(), 1u) << allMessages(parsed);
    EXPECT_NE(parsed.problems[0].message.find("both brokerPodSpec and brokerJobSpec"), std::string::npos);
}

TEST_F(ConfigurationTest, UnknownSpecKeyIsErrorWithLineAndSuggestion) {
    auto parsed = parse(document("cams", "  capcity: 2\n"));
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].str(),
              "conf.d/test.yaml:10: unknown key \"capcity\" in spec; did you mean \"capacity\"?");
    EXPECT_TRUE(parsed.configurations.empty());
}

TEST_F(ConfigurationTest, UnknownKeyFarFromAllListsAllowedKeys) {
    auto parsed = parse(document("cams", "  replicas: 2\n"));
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_NE(parsed.problems[0].message.find("allowed: discoveryHandler, capacity"), std::string::npos)
        << parsed.problems[0].message;
}

TEST_F(ConfigurationTest, UnknownTopLevelKeyRejected) {
    auto parsed = parse("status: {}\n" + document("cams", ""));
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].line, 1);
    EXPECT_NE(parsed.problems[0].message.find("\"status\""), std::string::npos);
}

TEST_F(ConfigurationTest, UnknownDiscoveryHandlerKeyRejected) {
    auto parsed = parse(
        "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: cams\n"
        "spec:\n  discoveryHandler:\n    name: udev\n    discoveryDetail: x\n");
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].line, 8);
    EXPECT_NE(parsed.problems[0].message.find("did you mean \"discoveryDetails\"?"), std::string::npos);
}

TEST_F(ConfigurationTest, KubernetesMetadataAcceptedUnknownMetadataRejected) {
    auto accepted = parse(
        "apiVersion: akri.sh/v0\nkind: Configuration\n"
        "metadata:\n  name: cams\n  namespace: default\n  labels: {a: b}\n  annotations: {c: d}\n  uid: "
        "1234\n"
        "spec:\n  discoveryHandler:\n    name: udev\n");
    EXPECT_TRUE(accepted.problems.empty()) << allMessages(accepted);

    auto rejected = parse(
        "apiVersion: akri.sh/v0\nkind: Configuration\n"
        "metadata:\n  name: cams\n  lables: {a: b}\n"
        "spec:\n  discoveryHandler:\n    name: udev\n");
    ASSERT_EQ(rejected.problems.size(), 1u);
    EXPECT_EQ(rejected.problems[0].str(),
              "conf.d/test.yaml:5: unknown key \"lables\" in metadata; did you mean \"labels\"?");
}

TEST_F(ConfigurationTest, DuplicateKeyRejected) {
    auto parsed = parse(document("cams", "  capacity: 2\n  capacity: 3\n"));
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].line, 11);
    EXPECT_NE(parsed.problems[0].message.find("first at line 10"), std::string::npos);
}

TEST_F(ConfigurationTest, WrongApiVersionAndKindRejected) {
    auto parsed = parse(
        "apiVersion: akri.sh/v1\nkind: Instance\nmetadata:\n  name: cams\n"
        "spec:\n  discoveryHandler:\n    name: udev\n");
    ASSERT_EQ(parsed.problems.size(), 2u) << allMessages(parsed);
    EXPECT_EQ(parsed.problems[0].str(),
              "conf.d/test.yaml:1: apiVersion must be \"akri.sh/v0\" (got \"akri.sh/v1\")");
    EXPECT_EQ(parsed.problems[1].str(),
              "conf.d/test.yaml:2: kind must be \"Configuration\" (got \"Instance\")");
}

TEST_F(ConfigurationTest, MissingRequiredFieldsRejected) {
    auto parsed = parse("apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  namespace: x\nspec: {}\n");
    std::string all = allMessages(parsed);
    EXPECT_NE(all.find(":3: metadata.name is missing"), std::string::npos) << all;
    EXPECT_NE(all.find(":5: spec.discoveryHandler is missing"), std::string::npos) << all;

    auto noSpec = parse("apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: cams\n");
    ASSERT_EQ(noSpec.problems.size(), 1u);
    EXPECT_EQ(noSpec.problems[0].str(), "conf.d/test.yaml:1: spec is missing");
}

TEST_F(ConfigurationTest, CapacityZeroRejected) {
    auto parsed = parse(document("cams", "  capacity: 0\n"));
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].str(), "conf.d/test.yaml:10: spec.capacity must be at least 1 (got 0)");
}

TEST_F(ConfigurationTest, NegativeCapacityRejected) {
    auto parsed = parse(document("cams", "  capacity: -3\n"));
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].line, 10);
    EXPECT_NE(parsed.problems[0].message.find("at least 1"), std::string::npos);
}

TEST_F(ConfigurationTest, CapacityAbove1024Rejected) {
    EXPECT_TRUE(parse(document("cams", "  capacity: 1024\n")).problems.empty());
    auto parsed = parse(document("cams", "  capacity: 1025\n"));
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_NE(parsed.problems[0].message.find("at most 1024"), std::string::npos);
}

TEST_F(ConfigurationTest, NonIntegerCapacityRejected) {
    for (const char* value : {"1.5", "two", "[1]", "99999999999999999999999"}) {
        auto parsed = parse(document("cams", std::string("  capacity: ") + value + "\n"));
        ASSERT_EQ(parsed.problems.size(), 1u) << value;
        EXPECT_EQ(parsed.problems[0].line, 10);
        EXPECT_NE(parsed.problems[0].message.find("whole number"), std::string::npos) << value;
    }
}

TEST_F(ConfigurationTest, BrokerPropertiesMustBeStrings) {
    auto parsed = parse(document("cams", "  brokerProperties:\n    WIDTH: 800\n    LIST: [1, 2]\n"));
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].line, 12);
    EXPECT_NE(parsed.problems[0].message.find("LIST must be a string"), std::string::npos);
}

TEST_F(ConfigurationTest, EmptyOptionalSectionsAccepted) {
    auto parsed = parse(
        "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: cams\n"
        "spec:\n  discoveryHandler:\n    name: udev\n    discoveryDetails:\n    discoveryProperties:\n"
        "  brokerProperties:\n  #  WIDTH: \"800\"\n  devlet:\n");
    ASSERT_TRUE(parsed.problems.empty()) << allMessages(parsed);
    ASSERT_EQ(parsed.configurations.size(), 1u);
    EXPECT_TRUE(parsed.configurations[0].brokerProperties.empty());
    EXPECT_EQ(parsed.configurations[0].discoveryDetails, "");
}

TEST_F(ConfigurationTest, DiscoveryPropertiesParsed) {
    auto parsed = parse(
        "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: cams\n"
        "spec:\n  discoveryHandler:\n    name: udev\n    discoveryProperties:\n"
        "    - name: MODE\n      value: fast\n    - name: EMPTY\n");
    ASSERT_TRUE(parsed.problems.empty()) << allMessages(parsed);
    ASSERT_EQ(parsed.configurations.size(), 1u);
    EXPECT_EQ(parsed.configurations[0].discoveryProperties,
              (std::map<std::string, std::string>{{"EMPTY", ""}, {"MODE", "fast"}}));
}

// Akri's schema wants value or valueFrom; devlet keeps the property, empty, and says so.
TEST_F(ConfigurationTest, DiscoveryPropertyWithoutValueIsWarnedAtItsLine) {
    auto parsed = parse(
        "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: cams\n"
        "spec:\n  discoveryHandler:\n    name: udev\n    discoveryProperties:\n"
        "    - name: MODE\n      value: fast\n    - name: EMPTY\n    - name: GIVEN\n      value: \"\"\n");
    ASSERT_TRUE(parsed.problems.empty()) << allMessages(parsed);
    ASSERT_EQ(parsed.configurations.size(), 1u);
    EXPECT_EQ(parsed.configurations[0].discoveryProperties,
              (std::map<std::string, std::string>{{"EMPTY", ""}, {"GIVEN", ""}, {"MODE", "fast"}}));
    std::vector<ConfigProblem> warned;
    for (const auto& warning : parsed.warnings) {
        if (warning.message.find("neither value nor valueFrom") != std::string::npos)
            warned.push_back(warning);
    }
    ASSERT_EQ(warned.size(), 1u);
    EXPECT_EQ(
        warned[0].str(),
        "conf.d/test.yaml:11: spec.discoveryHandler.discoveryProperties[1] (EMPTY) has neither value nor "
        "valueFrom: Akri's API server refuses this Configuration; devlet gives the property as empty "
        "(write value: \"\")");
    EXPECT_FALSE(warned[0].clusterOnly);
}

TEST_F(ConfigurationTest, ValueFromForAHandlerThatReadsNoSecretIsWarnedAndLeftOut) {
    auto parsed = parse(
        "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: cams\n"
        "spec:\n  discoveryHandler:\n    name: udev\n    discoveryProperties:\n"
        "    - name: USERNAME\n      valueFrom:\n        secretKeyRef:\n          name: creds\n          "
        "key: user\n");
    ASSERT_TRUE(parsed.problems.empty()) << allMessages(parsed);
    ASSERT_EQ(parsed.configurations.size(), 1u);
    EXPECT_TRUE(parsed.configurations[0].discoveryProperties.empty());
    EXPECT_TRUE(parsed.configurations[0].propertyReferences.empty());
    ASSERT_EQ(parsed.warnings.size(), 1u) << allMessages(parsed);
    EXPECT_EQ(parsed.warnings[0].line, 10);
    EXPECT_FALSE(parsed.warnings[0].clusterOnly);
    const std::string& message = parsed.warnings[0].message;
    EXPECT_NE(message.find("discoveryProperties[0].valueFrom (USERNAME): the udev handler reads no property "
                           "from a Secret"),
              std::string::npos)
        << message;
}

// Read from the API in cluster mode; outside it, warned (clusterOnly) and left out.
TEST_F(ConfigurationTest, SecretKeyRefIsKeptForClusterModeWithAkriDefaults) {
    auto parsed = parse(
        "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: cams\n"
        "spec:\n  discoveryHandler:\n    name: cameras\n    discoveryProperties:\n"
        "    - name: username_default\n      valueFrom:\n        secretKeyRef: {name: creds, key: user}\n"
        "    - name: password_default\n      valueFrom:\n        secretKeyRef:\n"
        "          {name: creds, key: pass, namespace: cams, optional: true}\n"
        "    - name: MODE\n      value: fast\n");
    ASSERT_TRUE(parsed.problems.empty()) << allMessages(parsed);
    ASSERT_EQ(parsed.configurations.size(), 1u);
    const Configuration& c = parsed.configurations[0];
    EXPECT_EQ(c.discoveryProperties, (std::map<std::string, std::string>{{"MODE", "fast"}}));
    ASSERT_EQ(c.propertyReferences.size(), 2u);
    EXPECT_EQ(c.propertyReferences[0],
              (PropertyReference{"username_default", true, "default", "creds", "user", false, 10,
                                 "spec.discoveryHandler.discoveryProperties[0].valueFrom"}));
    EXPECT_EQ(c.propertyReferences[1],
              (PropertyReference{"password_default", true, "cams", "creds", "pass", true, 13,
                                 "spec.discoveryHandler.discoveryProperties[1].valueFrom"}));
    // The third: the handler reads no MODE.
    ASSERT_EQ(parsed.warnings.size(), 3u) << allMessages(parsed);
    for (std::size_t i = 0; i < 2; ++i) {
        const ConfigProblem& warning = parsed.warnings[i];
        EXPECT_TRUE(warning.clusterOnly);
        EXPECT_NE(warning.message.find("devlet reads Secrets only in cluster mode"), std::string::npos);
        EXPECT_NE(warning.message.find("root-only files or systemd credentials"), std::string::npos);
    }
    EXPECT_EQ(parsed.warnings[0].line, 10);
    EXPECT_EQ(parsed.warnings[1].line, 13);
}

TEST_F(ConfigurationTest, ValueFromShapesAkriRefusesOrCannotRead) {
    const std::string head =
        "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: cams\n"
        "spec:\n  discoveryHandler:\n    name: cameras\n    discoveryProperties:\n    - name: P\n";
    // Refused, as Akri's schema refuses them (oneOf).
    for (const char* item :
         {"      value: x\n      valueFrom: {secretKeyRef: {name: s, key: k}}\n", "      valueFrom: {}\n",
          "      valueFrom: {secretKeyRef: {name: s, key: k}, configMapKeyRef: "
          "{name: c, key: k}}\n",
          "      valueFrom: {secretKeyRef: {name: s, key: k, optional: maybe}}\n"}) {
        auto parsed = parse(head + item);
        EXPECT_FALSE(parsed.problems.empty()) << item;
    }
    // Accepted by Akri's schema, but nothing to read: warned and left out.
    for (const char* item : {"      valueFrom: {secretKeyRef: {name: s}}\n",
                             "      valueFrom: {configMapKeyRef: {name: c, key: k}}\n"}) {
        auto parsed = parse(head + item);
        ASSERT_TRUE(parsed.problems.empty()) << allMessages(parsed);
        ASSERT_EQ(parsed.configurations.size(), 1u);
        EXPECT_TRUE(parsed.configurations[0].propertyReferences.empty()) << item;
        ASSERT_EQ(parsed.warnings.size(), 1u) << allMessages(parsed);
        EXPECT_FALSE(parsed.warnings[0].clusterOnly);
        EXPECT_NE(parsed.warnings[0].message.find("left out"), std::string::npos);
    }
}

TEST_F(ConfigurationTest, DiscoveryPropertyProblemsRejected) {
    auto parsed = parse(
        "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: cams\n"
        "spec:\n  discoveryHandler:\n    name: udev\n    discoveryProperties:\n"
        "    - name: 1BAD\n      value: x\n"
        "    - name: TYPO\n      vaule: x\n"
        "    - name: OK\n      value: y\n"
        "    - name: OK\n      value: z\n");
    std::string all = allMessages(parsed);
    ASSERT_EQ(parsed.problems.size(), 3u) << all;
    EXPECT_EQ(parsed.problems[0].line, 9);  // not a C identifier
    EXPECT_EQ(parsed.problems[1].line, 12);
    EXPECT_NE(parsed.problems[1].message.find("did you mean \"value\"?"), std::string::npos) << all;
    EXPECT_EQ(parsed.problems[2].line, 15);  // duplicate of line 13
    EXPECT_NE(parsed.problems[2].message.find("first at line 13"), std::string::npos) << all;
}

TEST_F(ConfigurationTest, DevletAdditionsParsed) {
    auto parsed = parse(
        document("gpus",
                 "  devlet:\n    allocationPolicy: pack\n    uniqueDevices: true\n"
                 "    configurationResource: gpu.intel.com/i915\n    removalGracePeriodSeconds: 2.5\n"));
    ASSERT_TRUE(parsed.problems.empty()) << allMessages(parsed);
    ASSERT_EQ(parsed.configurations.size(), 1u);
    const Configuration& config = parsed.configurations[0];
    EXPECT_EQ(config.allocationPolicy, AllocationPolicy::Pack);
    EXPECT_TRUE(config.uniqueDevices);
    EXPECT_EQ(config.configurationResource, "gpu.intel.com/i915");
    ASSERT_TRUE(config.removalGrace.has_value());
    EXPECT_EQ(*config.removalGrace, std::chrono::milliseconds(2500));
}

TEST_F(ConfigurationTest, UnknownDevletKeyRejectedWithSuggestion) {
    auto parsed = parse(document("cams", "  devlet:\n    uniqueDevice: true\n"));
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(
        parsed.problems[0].str(),
        "conf.d/test.yaml:11: unknown key \"uniqueDevice\" in spec.devlet; did you mean \"uniqueDevices\"?");
}

TEST_F(ConfigurationTest, BadDevletValuesRejected) {
    auto parsed = parse(document("cams",
                                 "  devlet:\n    allocationPolicy: Pack\n    uniqueDevices: maybe\n"
                                 "    configurationResource: cameras\n    removalGracePeriodSeconds: -1\n"));
    std::string all = allMessages(parsed);
    ASSERT_EQ(parsed.problems.size(), 4u) << all;
    EXPECT_NE(parsed.problems[0].message.find("did you mean \"pack\"?"), std::string::npos) << all;
    EXPECT_NE(parsed.problems[1].message.find("true or false"), std::string::npos) << all;
    EXPECT_NE(parsed.problems[2].message.find("<domain>/<name>"), std::string::npos) << all;
    EXPECT_NE(parsed.problems[3].message.find("between 0 and 86400"), std::string::npos) << all;
}

TEST_F(ConfigurationTest, UpperCaseNameRejected) {
    auto parsed = parse(document("Cams", ""));
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].line, 4);
    EXPECT_NE(parsed.problems[0].message.find("must be lower case"), std::string::npos)
        << parsed.problems[0].message;
}

TEST_F(ConfigurationTest, UniqueDevicesFalseIsKept) {
    auto parsed = parse(document("cams", "  devlet:\n    uniqueDevices: false\n"));
    ASSERT_EQ(parsed.configurations.size(), 1u) << allMessages(parsed);
    EXPECT_FALSE(parsed.configurations[0].uniqueDevices);
}

// A handler whose peers share one device within a pod (gpu: Intel's GPU plugin) sets the
// default; the configuration still decides.
class SharingHandler : public FakeHandler {
public:
    using FakeHandler::FakeHandler;
    bool defaultUniqueDevices() const override { return false; }
};

TEST_F(ConfigurationTest, HandlerThatSharesWithinAPodSetsTheDefault) {
    HandlerRegistry handlers;
    handlers.add(std::make_unique<SharingHandler>("gpu"));
    const std::string gpu =
        "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: gpus\n"
        "spec:\n  discoveryHandler:\n    name: gpu\n";
    auto parsed = parseConfigurations(gpu, "conf.d/gpu.yaml", handlers, "akri.sh");
    ASSERT_EQ(parsed.configurations.size(), 1u) << allMessages(parsed);
    EXPECT_FALSE(parsed.configurations[0].uniqueDevices);
    parsed = parseConfigurations(gpu + "  devlet:\n    uniqueDevices: true\n", "conf.d/gpu.yaml", handlers,
                                 "akri.sh");
    ASSERT_EQ(parsed.configurations.size(), 1u) << allMessages(parsed);
    EXPECT_TRUE(parsed.configurations[0].uniqueDevices);
}

// Akri's limit: akri.sh/<name>-<hash> has at most 63 characters after '/', so 56.
TEST_F(ConfigurationTest, NameLongerThanAkriAllowsRejectedWithWhy) {
    std::string name(57, 'a');
    auto parsed = parse(document(name, ""));
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].line, 4);
    EXPECT_EQ(parsed.problems[0].message,
              "metadata.name \"" + name +
                  "\" has 57 characters; at most 56 fit: the instance-level resource "
                  "<domain>/" +
                  name +
                  "-<6 hex digits> would have 64 characters after '/', and the kubelet allows 63 "
                  "there (Akri has the same limit)");
    auto longest = parse(document(std::string(56, 'a'), ""));
    EXPECT_TRUE(longest.problems.empty()) << allMessages(longest);
    // Its slot id aaa…-xxxxxx-0 has 65 characters: said, as below.
    EXPECT_EQ(longest.warnings.size(), 1u) << allMessages(longest);
}

// Kubernetes allows '.' in object names and Akri registers akri.sh/<name> unchanged.
TEST_F(ConfigurationTest, NameWithDotsAccepted) {
    auto parsed = parse(document("cams.lab-1", ""));
    ASSERT_TRUE(parsed.problems.empty()) << allMessages(parsed);
    ASSERT_EQ(parsed.configurations.size(), 1u);
    EXPECT_EQ(parsed.configurations[0].name, "cams.lab-1");
    EXPECT_EQ(configurationLevelResource(parsed.configurations[0], "akri.sh"), "akri.sh/cams.lab-1");
}

TEST_F(ConfigurationTest, NameThatIsNoObjectNameRejectedWithWhy) {
    for (const char* bad : {"cams..lab", ".cams", "cams.", "cams_lab", "cams.-lab"}) {
        auto parsed = parse(document(std::string("\"") + bad + "\"", ""));
        ASSERT_EQ(parsed.problems.size(), 1u) << bad;
        EXPECT_NE(parsed.problems[0].message.find("is not a Kubernetes object name: it "), std::string::npos)
            << parsed.problems[0].message;
    }
    auto parsed = parse(document("cams_lab", ""));
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_NE(parsed.problems[0].message.find("contains \"_\""), std::string::npos)
        << parsed.problems[0].message;
}

// Akri accepts these names with any capacity; the slot ids go past the 63 characters the
// device-plugin API's comment gives, which is said, not refused.
TEST_F(ConfigurationTest, SlotIdsLongerThanTheApiDocumentsAreAWarning) {
    std::string name(56, 'a');
    auto parsed = parse(document(name, "  capacity: 1024\n"));
    ASSERT_TRUE(parsed.problems.empty()) << allMessages(parsed);
    ASSERT_EQ(parsed.configurations.size(), 1u);
    ASSERT_EQ(parsed.warnings.size(), 1u);
    EXPECT_EQ(parsed.warnings[0].line, 4);
    EXPECT_EQ(parsed.warnings[0].message,
              "slot ids up to " + name +
                  "-xxxxxx-1023 have 68 characters, more than the 63 the device-plugin "
                  "API documents for a device id; the kubelet is not known to check it, and Akri gives the "
                  "same ids");
    EXPECT_TRUE(parse(document(std::string(54, 'a'), "  capacity: 10\n")).warnings.empty());
}

TEST_F(ConfigurationTest, ResourceNameTheKubeletRefusesSaysWhy) {
    auto parsed = parse(document("cams", ""), "kubernetes.io");
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].message,
              "the instance-level resource name kubernetes.io/cams-xxxxxx is not valid for the kubelet: the "
              "kubernetes.io domain is reserved for native resources");
}

TEST_F(ConfigurationTest, InvalidResourceDomainReported) {
    std::string longDomain = std::string(60, 'a') + "." + std::string(60, 'b') + "." + std::string(60, 'c') +
                             "." + std::string(66, 'd');
    auto parsed = parse(document("cams", ""), longDomain);
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_NE(parsed.problems[0].message.find("is not valid"), std::string::npos);
    EXPECT_TRUE(parse(document("cams", ""), "devices.example.com").problems.empty());
}

TEST_F(ConfigurationTest, DuplicateNamesRejected) {
    auto parsed = parse(document("cams", "") + "---\n" + document("cams", ""));
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].str(),
              "conf.d/test.yaml:14: duplicate configuration name \"cams\" (lines 4 and 14)");
    EXPECT_TRUE(parsed.configurations.empty());
}

TEST_F(ConfigurationTest, MultipleDocumentsParsedEmptyOnesSkipped) {
    auto parsed =
        parse("---\n# nothing here\n---\n" + document("a", "") + "---\n---\n" + document("b", "") + "...\n");
    ASSERT_TRUE(parsed.problems.empty()) << allMessages(parsed);
    ASSERT_EQ(parsed.configurations.size(), 2u);
    EXPECT_EQ(parsed.configurations[0].name, "a");
    EXPECT_EQ(parsed.configurations[0].sourceLine, 4);
    EXPECT_EQ(parsed.configurations[1].name, "b");
    EXPECT_EQ(parsed.configurations[1].sourceLine, 15);
    EXPECT_EQ(parsed.configurations[1].detailsLine, 23);
}

TEST_F(ConfigurationTest, EmptyFileHasNoConfigurations) {
    auto parsed = parse("# only a comment\n");
    EXPECT_TRUE(parsed.problems.empty());
    EXPECT_TRUE(parsed.configurations.empty());
}

TEST_F(ConfigurationTest, OneBadDocumentRejectsWholeFile) {
    auto parsed = parse(document("good", "") + "---\n" + document("bad", "  capacity: 0\n"));
    EXPECT_EQ(parsed.problems.size(), 1u);
    EXPECT_TRUE(parsed.configurations.empty());
}

TEST_F(ConfigurationTest, BadYamlReportsLine) {
    auto parsed = parse("apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: [cams\nspec: {}\n");
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].file, "conf.d/test.yaml");
    EXPECT_GE(parsed.problems[0].line, 4);
    EXPECT_NE(parsed.problems[0].message.find("YAML syntax error"), std::string::npos);

    auto badIndent = parse("apiVersion: akri.sh/v0\n  kind: Configuration\n");
    ASSERT_EQ(badIndent.problems.size(), 1u);
    EXPECT_EQ(badIndent.problems[0].line, 2);
}

// yaml-cpp 0.7's LoadAll loops forever, taking memory, on a stray ',' where a document
// starts (found by fuzz/fuzz_configuration): the file is refused with the line instead.
TEST_F(ConfigurationTest, StrayCommaIsSyntaxErrorNotEndlessLoop) {
    auto parsed = parse(",x");
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].line, 1);
    EXPECT_NE(parsed.problems[0].message.find("YAML syntax error"), std::string::npos);

    auto later = parse(document("good", "") + "---\n  ,\n");
    ASSERT_EQ(later.problems.size(), 1u);
    EXPECT_GT(later.problems[0].line, 1);
    EXPECT_TRUE(later.configurations.empty());
}

TEST_F(ConfigurationTest, CheckedLoadRefusesStrayComma) {
    EXPECT_THROW(yaml::load(","), YAML::ParserException);
    EXPECT_EQ(yaml::loadAll("a: 1\n---\nb: 2\n").size(), 2u);
    EXPECT_TRUE(yaml::load("").IsNull());
}

TEST_F(ConfigurationTest, UndefinedAliasIsProblemNotException) {
    auto parsed = parse("apiVersion: *missing\n");
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].line, 1);
}

TEST_F(ConfigurationTest, NonMappingDocumentRejected) {
    auto parsed = parse("- just\n- a list\n");
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].line, 1);
    EXPECT_NE(parsed.problems[0].message.find("expected a Configuration"), std::string::npos);
}

TEST_F(ConfigurationTest, UnknownHandlerListsKnownNamesAndSuggests) {
    auto parsed = parse(
        "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: cams\n"
        "spec:\n  discoveryHandler:\n    name: debugecho\n");
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].str(),
              "conf.d/test.yaml:7: unknown discovery handler \"debugecho\"; did you mean \"debugEcho\"? "
              "(known: debugEcho, udev, broken, cameras)");
}

TEST_F(ConfigurationTest, HandlerChecksParsedConfiguration) {
    auto parsed = parse(document("cams", "  capacity: 3\n"));
    ASSERT_TRUE(parsed.problems.empty()) << allMessages(parsed);
    ASSERT_EQ(echo_->checked_.size(), 1u);
    EXPECT_EQ(echo_->checked_[0].name, "cams");
    EXPECT_EQ(echo_->checked_[0].discoveryDetails, "descriptions: [foo0]\n");
    EXPECT_EQ(echo_->checked_[0].capacity, 3);
}

TEST_F(ConfigurationTest, DetailsProblemLineMapsIntoFile) {
    auto parsed = parse(
        "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: cams\n"
        "spec:\n  discoveryHandler:\n    name: debugEcho\n    discoveryDetails: |\n"
        "      descriptions:\n      - foo0\n      descripton: typo\n");
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].line, 11);
    EXPECT_NE(parsed.problems[0].message.find("unknown key \"descripton\""), std::string::npos);
}

TEST_F(ConfigurationTest, DetailsLineSkipsTagAndComment) {
    auto parsed = parse(
        "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: cams\n"
        "spec:\n  discoveryHandler:\n    name: debugEcho\n    discoveryDetails: !!str |-  # details\n"
        "      descriptions: [foo0]\n");
    ASSERT_TRUE(parsed.problems.empty()) << allMessages(parsed);
    EXPECT_EQ(parsed.configurations[0].detailsLine, 9);
}

TEST_F(ConfigurationTest, DetailsInQuotedStringMapToItsLine) {
    auto parsed = parse(
        "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: cams\n"
        "spec:\n  discoveryHandler:\n    name: debugEcho\n    discoveryDetails: \"other: 1\"\n");
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].line, 8);
}

TEST_F(ConfigurationTest, HandlerThatThrowsBecomesProblem) {
    auto parsed = parse(
        "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: cams\n"
        "spec:\n  discoveryHandler:\n    name: broken\n    discoveryDetails: x\n");
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].line, 8);
    EXPECT_NE(parsed.problems[0].message.find("boom"), std::string::npos);
}

TEST(ConfigProblem, StrFormatsFileAndLine) {
    EXPECT_EQ((ConfigProblem{"a.yaml", 3, "bad"}).str(), "a.yaml:3: bad");
    EXPECT_EQ((ConfigProblem{"a.yaml", 0, "unreadable"}).str(), "a.yaml: unreadable");
}

TEST(NearMiss, SuggestsClosestWithinTwoEdits) {
    std::vector<std::string> keys = {"capacity", "brokerProperties", "discoveryHandler"};
    EXPECT_EQ(yaml::nearMiss("capcity", keys), "capacity");
    EXPECT_EQ(yaml::nearMiss("capaicty", keys), "capacity");  // a transposition is one edit
    EXPECT_EQ(yaml::nearMiss("Capacity", keys), "capacity");
    EXPECT_EQ(yaml::nearMiss("brokerProps", keys), "");
    EXPECT_EQ(yaml::nearMiss("x", {"y", "id"}), "");
}

using test::TempDir;

TEST_F(ConfigurationTest, LoadConfigurationFileParsesFile) {
    TempDir dir;
    std::string path = dir.file("echo.yaml", document("cams", "  capacity: 0\n"));
    auto parsed = loadConfigurationFile(path, handlers_, "akri.sh");
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].file, path);
    EXPECT_EQ(parsed.problems[0].line, 10);
}

TEST_F(ConfigurationTest, UnreadableFileReportsReason) {
    TempDir dir;
    auto parsed = loadConfigurationFile(dir.path().string() + "/missing.yaml", handlers_, "akri.sh");
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].str(),
              dir.path().string() + "/missing.yaml: cannot read: No such file or directory");
}

TEST(ConfigurationFiles, YamlFilesSortedByName) {
    TempDir dir;
    dir.file("b.yml");
    dir.file("a.yaml");
    dir.file("c.yaml");
    dir.file("README.md");
    dir.file("notes.txt");
    std::filesystem::create_directory(dir.path().string() + "/d.yaml");
    std::filesystem::create_symlink(dir.path().string() + "/a.yaml", dir.path().string() + "/e.yaml");
    std::filesystem::create_symlink(dir.path().string() + "/nowhere.yaml", dir.path().string() + "/f.yaml");
    std::vector<std::string> expected = {dir.path().string() + "/a.yaml", dir.path().string() + "/b.yml",
                                         dir.path().string() + "/c.yaml", dir.path().string() + "/e.yaml"};
    EXPECT_EQ(configurationFiles(dir.path()), expected);
}

TEST(ConfigurationFiles, TempFilesSkipped) {
    TempDir dir;
    dir.file("cams.yaml");
    for (const char* name : {".cams.yaml", ".cams.yaml.swp", "cams.yaml~", "#cams.yaml#", "cams.yaml.tmp",
                             "cams.yaml.dpkg-new", "cams.yaml.dpkg-old", "cams.dpkg-dist.yaml", ".#cams.yaml",
                             "cams.swp.yaml", "cams~.yaml", "cams.tmp.yaml"}) {
        dir.file(name);
    }
    EXPECT_EQ(configurationFiles(dir.path()), std::vector<std::string>{dir.path().string() + "/cams.yaml"});
}

TEST(ConfigurationFiles, MissingDirectoryIsEmpty) {
    EXPECT_TRUE(configurationFiles("/nonexistent/devlet/conf.d").empty());
}

Configuration named(const std::string& name, const std::string& resource = "") {
    Configuration c;
    c.name = name;
    c.configurationResource = resource;
    c.sourceFile = name + ".yaml";
    c.sourceLine = 4;
    return c;
}

TEST(ResourceConflict, DistinctNamesDoNotConflict) {
    EXPECT_EQ(resourceConflict(named("cams-north"), {named("cams")}, "akri.sh"), "");
    EXPECT_EQ(resourceConflict(named("usb"), {named("cams"), named("gpus", "gpu.intel.com/i915")}, "akri.sh"),
              "");
}

TEST(ResourceConflict, SharedConfigurationResourceConflictsNamingTheOwner) {
    const std::string why = resourceConflict(named("other", "akri.sh/cams"), {named("cams")}, "akri.sh");
    EXPECT_NE(
        why.find("resource \"akri.sh/cams\" is already offered by configuration \"cams\" (cams.yaml:4)"),
        std::string::npos)
        << why;
}

TEST(ResourceConflict, NameShapedLikeAnotherConfigurationsInstanceResourceConflicts) {
    const std::string why = resourceConflict(named("cams-8120fe"), {named("cams")}, "akri.sh");
    EXPECT_NE(why.find("has the form of an instance resource of configuration \"cams\""), std::string::npos)
        << why;
}

TEST(ResourceConflict, InstanceShapedNameConflictsInEitherOrderOfLoading) {
    // "cams-8120fe" loaded first, "cams" second: "cams"' instance of foo0 would be offered
    // under the first one's resource.
    const std::string why = resourceConflict(named("cams"), {named("cams-8120fe")}, "akri.sh");
    EXPECT_NE(
        why.find(
            "configuration \"cams-8120fe\" (cams-8120fe.yaml:4) offers \"akri.sh/cams-8120fe\", which has "
            "the form of an instance resource of this one"),
        std::string::npos)
        << why;
}

TEST(ResourceConflict, OverrideShapedLikeItsOwnInstanceResourceConflicts) {
    EXPECT_NE(resourceConflict(named("cams", "akri.sh/cams-abcdef"), {}, "akri.sh"), "");
}

TEST(ResourceConflict, OtherDomainNeverClashesWithInstanceResources) {
    EXPECT_EQ(resourceConflict(named("x", "gpu.intel.com/cams-8120fe"), {named("cams")}, "akri.sh"), "");
}

}  // namespace
}  // namespace devlet
