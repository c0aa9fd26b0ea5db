// Akri's brokers and services in cluster mode: two real daemons (their own node names,
// kubelet simulators and state) against one Kubernetes API double. A shared debugEcho
// camera both nodes see, with a broker Pod spec and both Service specs, gets a broker Pod
// per node and its Services, named and labelled as Akri names them, owned by the Node; a
// restart applies them again and changes nothing; a camera that goes away takes its
// brokers and Services with it; a configuration that drops its brokerSpec takes its Pods
// away; a brokerJobSpec makes a Job; a failed broker shows on the status API; with the
// packaged Role's rights the Pods are made without an owner, and the status says why.

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "tests/cluster/kube_double_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/status/status_test_support.h"

namespace devlet::test {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

const std::vector<std::string> kNodes = {"node-a", "node-b"};

constexpr char kBrokerSpec[] = R"(  brokerSpec:
    brokerPodSpec:
      containers:
      - name: broker
        image: "nginx:stable-alpine"
        resources:
          requests:
            "{{PLACEHOLDER}}": "1"
            memory: 10Mi
          limits:
            "{{PLACEHOLDER}}": "1"
)";
constexpr char kServiceSpecs[] = R"(  instanceServiceSpec:
    type: ClusterIP
    ports:
    - name: stream
      port: 6052
      targetPort: 6052
  configurationServiceSpec:
    ports:
    - name: stream
      port: 6052
  devlet:
    removalGracePeriodSeconds: 1
)";

struct Node {
    std::string name;
    std::string uid;  // its Node object's
    std::unique_ptr<DaemonProcess> daemon;
    std::unique_ptr<KubeletSimulator> kubelet;
};

class ClusterBrokersTest : public ::testing::Test {
protected:
    // The API double's tokens: the first one makes the test's own requests, `nodeToken_`
    // is the daemons'.
    virtual KubeApiDouble::Options apiOptions() const { return {}; }
    // More lines of a node's `cluster:` settings.
    virtual std::string clusterSettings(const std::string& /*node*/) const { return ""; }

    void SetUp() override {
        try {
            api_ = std::make_unique<KubeApiDouble>(dir_.dir("api"), apiOptions());
        } catch (const std::exception& e) {
            GTEST_SKIP() << "the Kubernetes API double cannot start: " << e.what();
        }
        for (const std::string& name : kNodes) {
            Node node;
            node.name = name;
            const auto made =
                api_->request("POST", "/api/v1/nodes",
                              R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")" + name + R"("}})");
            ASSERT_EQ(made.status, 201) << made.body;
            node.uid = std::string(json::parse(made.body).at("metadata").at("uid").as_string());
            node.daemon = std::make_unique<DaemonProcess>(dir_.dir(name));
            node.kubelet = std::make_unique<KubeletSimulator>(node.daemon->devicePluginDir(),
                                                              node.daemon->podResourcesSocket());
            const auto kubeconfig = api_->writeKubeconfig(dir_.path() / (name + ".kubeconfig"),
                                                          nodeToken_.empty() ? api_->token() : nodeToken_);
            writeFile(node.daemon->settingsFile(),
                      "kubelet:\n  podResourcesIntervalSeconds: 0.2\n  slotReleaseGraceSeconds: 0.5\n"
                      "cluster:\n  kubeconfig: " +
                          kubeconfig.string() + "\n  namespace: devlet\n  leaseDurationSeconds: 2\n" +
                          clusterSettings(name));
            writeCameras(node, true);
            nodes_.push_back(std::move(node));
        }
        // A device only node-a has: its broker Pod carries no node name.
        writeFile(nodes_[0].daemon->confDir() / "local.yaml",
                  echoDevicesConfiguration("local", "dev0", 1, "      shared: false\n", kBrokerSpec));
        for (Node& node : nodes_) {
            ASSERT_TRUE(node.kubelet->start());
            startDaemon(node);
        }
    }

    void TearDown() override {
        if (HasFailure()) {
            for (Node& node : nodes_) std::cerr << "--- " << node.name << " ---\n" << node.daemon->log();
        }
    }

    std::filesystem::path availability(const Node& node) const {
        return dir_.path() / (node.name + ".avail");
    }

    void writeCameras(const Node& node, bool withBroker) {
        writeFile(node.daemon->confDir() / "cams.yaml",
                  echoDevicesConfiguration(
                      "cams", "cam0", 2,
                      "      shared: true\n      availabilityFile: " + availability(node).string() + "\n",
                      std::string(withBroker ? kBrokerSpec : "") + kServiceSpecs));
    }

    static void startDaemon(Node& node) { node.daemon->start({"--node-name", node.name}); }

    // The objects of a kind in the devlet namespace, by name.
    std::map<std::string, json::object> objects(const std::string& collection) const {
        std::map<std::string, json::object> result;
        const auto answer = api_->request("GET", collection);
        boost::system::error_code ec;
        const json::value doc = json::parse(answer.body, ec);
        if (ec || !doc.is_object()) return result;
        for (const json::value& item : doc.at("items").as_array()) {
            result[std::string(item.at("metadata").at("name").as_string())] = item.as_object();
        }
        return result;
    }
    std::map<std::string, json::object> pods() const { return objects("/api/v1/namespaces/devlet/pods"); }
    std::map<std::string, json::object> services() const {
        return objects("/api/v1/namespaces/devlet/services");
    }
    static std::set<std::string> names(const std::map<std::string, json::object>& objects) {
        std::set<std::string> result;
        for (const auto& [name, object] : objects) result.insert(name);
        return result;
    }

    static bool waitUntil(const std::function<bool()>& done, std::chrono::milliseconds limit = 30s) {
        const auto deadline = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < deadline) {
            if (done()) return true;
            std::this_thread::sleep_for(100ms);
        }
        return done();
    }

    static std::string label(const json::object& object, const std::string& key) {
        const json::value* value = object.at("metadata").at("labels").as_object().if_contains(key);
        return value ? std::string(value->as_string()) : std::string();
    }

    // The camera's instance name: the label on any of its broker Pods.
    std::string cameraInstance() const {
        for (const auto& [name, pod] : pods()) {
            if (label(pod, "akri.sh/configuration") == "cams") return label(pod, "akri.sh/instance");
        }
        return {};
    }
    std::string localInstance() const {
        for (const auto& [name, pod] : pods()) {
            if (label(pod, "akri.sh/configuration") == "local") return label(pod, "akri.sh/instance");
        }
        return {};
    }

    // Waits until the three Pods and two Services are there; returns the camera's instance.
    std::string waitForEverything() {
        std::string camera;
        std::string local;
        EXPECT_TRUE(waitUntil([&] {
            camera = cameraInstance();
            local = localInstance();
            return !camera.empty() && !local.empty() && pods().size() == 3 && services().size() == 2;
        })) << "pods: "
            << names(pods()).size() << ", services: " << names(services()).size();
        return camera;
    }

    // The status API's `cluster` object of a node.
    static json::object clusterStatus(const Node& node) {
        const unsigned short port = statusPortFromLog(node.daemon->log());
        if (port == 0) return {};
        const status::HttpAnswer answer = httpGet(port, "/api/v1/status");
        boost::system::error_code ec;
        const json::value doc = json::parse(answer.body, ec);
        if (ec || !doc.is_object() || !doc.as_object().contains("cluster")) return {};
        return doc.at("cluster").as_object();
    }

    static std::string uid(const json::object& object) {
        return std::string(object.at("metadata").at("uid").as_string());
    }
    // The uid of the Pod of that name, or "" while there is none.
    std::string podUid(const std::string& pod) const {
        const auto all = pods();
        auto found = all.find(pod);
        return found == all.end() ? std::string() : uid(found->second);
    }

    // The kubelet's verdict on a Pod, written to its status subresource as the kubelet does.
    bool setPhase(const std::string& pod, const std::string& phase, const std::string& reason) const {
        json::object status{{"phase", phase}};
        if (!reason.empty()) status["reason"] = reason;
        const auto patched =
            api_->request("PATCH", "/api/v1/namespaces/devlet/pods/" + pod + "/status",
                          json::serialize(json::object{{"status", status}}), "application/merge-patch+json");
        EXPECT_EQ(patched.status, 200) << patched.body;
        return patched.status == 200;
    }

    // A broker Pod as a node's status API shows it; empty while it shows none of that name.
    static json::object brokerStatus(const Node& node, const std::string& pod) {
        const json::object cluster = clusterStatus(node);
        const json::value* brokers = cluster.if_contains("brokers");
        if (!brokers || !brokers->is_array()) return {};
        for (const json::value& b : brokers->as_array()) {
            if (b.at("pod").as_string() == pod) return b.as_object();
        }
        return {};
    }
    static std::int64_t recreations(const json::object& broker) {
        const json::value* count = broker.if_contains("recreations");
        return count && count->is_number() ? count->to_number<std::int64_t>() : -1;
    }
    static std::string text(const json::object& object, const char* key) {
        const json::value* value = object.if_contains(key);
        return value && value->is_string() ? std::string(value->as_string()) : std::string();
    }

    static std::string metrics(const Node& node) {
        const unsigned short port = statusPortFromLog(node.daemon->log());
        return port == 0 ? std::string() : httpGet(port, "/metrics").body;
    }
    static bool hasLine(const std::string& text, const std::string& line) {
        return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
    }

    TempDir dir_;
    std::unique_ptr<KubeApiDouble> api_;
    std::string nodeToken_;  // empty: api_->token()
    std::vector<Node> nodes_;
};

// The daemons' token limited to what the packaged Role grants (packaging/cluster/rbac.yaml),
// as where its ClusterRole was not applied: no Node can be read, so the broker Pods have no
// owner, and nothing else is refused.
class ClusterBrokersRoleOnlyTest : public ClusterBrokersTest {
protected:
    ClusterBrokersRoleOnlyTest() { nodeToken_ = "node-token"; }
    KubeApiDouble::Options apiOptions() const override {
        KubeApiDouble::Options options;
        options.tokens = {"admin-token admin",
                          "node-token system:serviceaccount:devlet:devlet-node "
                          "allow=leases:get,list,watch,create,update,delete "
                          "allow=pods,services,jobs:list,watch,create,patch,delete"};
        return options;
    }
};

TEST_F(ClusterBrokersTest, BrokersAndServicesHaveAkriNamesLabelsNodesAndOwners) {
    const std::string camera = waitForEverything();
    ASSERT_FALSE(camera.empty());
    const std::string local = localInstance();
    EXPECT_EQ(names(pods()), (std::set<std::string>{"node-a-" + camera + "-pod", "node-b-" + camera + "-pod",
                                                    local + "-pod"}));
    EXPECT_EQ(names(services()), (std::set<std::string>{camera + "-svc", "cams-svc"}));

    for (const Node& node : nodes_) {
        const std::string name = node.name + "-" + camera + "-pod";
        const json::object pod = pods().at(name);
        EXPECT_EQ(label(pod, "app"), name);
        EXPECT_EQ(label(pod, "controller"), "akri.sh");
        EXPECT_EQ(label(pod, "akri.sh/configuration"), "cams");
        EXPECT_EQ(label(pod, "akri.sh/instance"), camera);
        EXPECT_EQ(label(pod, "akri.sh/target-node"), node.name);
        EXPECT_EQ(pod.at("spec").at("nodeName").as_string(), node.name);
        const json::object& resources =
            pod.at("spec").at("containers").as_array()[0].at("resources").as_object();
        EXPECT_EQ(resources.at("limits").at("akri.sh/" + camera).as_string(), "1");
        EXPECT_EQ(resources.at("requests").at("akri.sh/" + camera).as_string(), "1");
        EXPECT_EQ(resources.at("requests").at("memory").as_string(), "10Mi");
        EXPECT_FALSE(resources.at("limits").as_object().contains("{{PLACEHOLDER}}"));
        const json::array& owners = pod.at("metadata").at("ownerReferences").as_array();
        ASSERT_EQ(owners.size(), 1u);
        EXPECT_EQ(owners[0].at("kind").as_string(), "Node");
        EXPECT_EQ(owners[0].at("name").as_string(), node.name);
        EXPECT_EQ(owners[0].at("uid").as_string(), node.uid);
    }
    EXPECT_EQ(pods().at(local + "-pod").at("spec").at("nodeName").as_string(), "node-a");

    const json::object instanceService = services().at(camera + "-svc");
    EXPECT_EQ(instanceService.at("spec").at("selector"), (json::object{{"akri.sh/instance", camera}}));
    EXPECT_EQ(label(instanceService, "app"), camera + "-svc");
    EXPECT_EQ(label(instanceService, "controller"), "akri.sh");
    EXPECT_EQ(instanceService.at("spec").at("ports").as_array()[0].at("port").as_int64(), 6052);
    const json::object configurationService = services().at("cams-svc");
    EXPECT_EQ(configurationService.at("spec").at("selector"),
              (json::object{{"akri.sh/configuration", "cams"}}));

    // Every apply was server-side, under the node's own field manager.
    std::set<std::string> managers;
    for (const auto& [name, pod] : pods()) {
        for (const json::value& entry : pod.at("metadata").at("managedFields").as_array())
            managers.insert(std::string(entry.at("manager").as_string()));
    }
    EXPECT_EQ(managers, (std::set<std::string>{"devlet-node-a", "devlet-node-b"}));
    // Used, so not warned about as it is without cluster mode.
    for (const Node& node : nodes_)
        EXPECT_EQ(node.daemon->log().find("only in cluster mode"), std::string::npos) << node.name;
}

TEST_F(ClusterBrokersTest, RestartAppliesAgainAndChangesNothing) {
    ASSERT_FALSE(waitForEverything().empty());
    auto versions = [&] {
        std::map<std::string, std::string> result;
        for (const auto& [name, o] : pods())
            result[name] = std::string(o.at("metadata").at("uid").as_string()) + "@" +
                           std::string(o.at("metadata").at("resourceVersion").as_string());
        for (const auto& [name, o] : services())
            result[name] = std::string(o.at("metadata").at("uid").as_string()) + "@" +
                           std::string(o.at("metadata").at("resourceVersion").as_string());
        return result;
    };
    const auto before = versions();
    ASSERT_EQ(api_->control("DELETE", "requests").status, 200);
    for (Node& node : nodes_) {
        node.daemon->kill9();
        startDaemon(node);
    }
    // Each node applies its Pods and Services again after the restart.
    auto applies = [&] { return api_->requestCount("patch pods") + api_->requestCount("patch services"); };
    // node-a: two Pods and two Services; node-b: one Pod and two Services.
    ASSERT_TRUE(waitUntil([&] { return applies() >= 7; })) << applies();
    EXPECT_EQ(versions(), before) << "the same apply again changes nothing";
}

TEST_F(ClusterBrokersTest, DeviceGoneTakesItsBrokersAndServices) {
    const std::string camera = waitForEverything();
    ASSERT_FALSE(camera.empty());
    const std::string local = localInstance();
    // Both nodes apply both Services (the field managers that own their spec).
    auto appliers = [](const json::object& service) {
        std::set<std::string> managers;
        for (const json::value& entry : service.at("metadata").at("managedFields").as_array()) {
            if (entry.at("fieldsV1").as_object().contains("f:spec"))
                managers.insert(std::string(entry.at("manager").as_string()));
        }
        return managers;
    };
    const std::set<std::string> both = {"devlet-node-a", "devlet-node-b"};
    ASSERT_TRUE(waitUntil([&] {
        const auto all = services();
        return all.size() == 2 &&
               std::all_of(all.begin(), all.end(), [&](const auto& s) { return appliers(s.second) == both; });
    })) << json::serialize(services().begin()->second.at("metadata"));
    std::map<std::string, std::string> uids;
    for (const auto& [name, service] : services())
        uids[name] = std::string(service.at("metadata").at("uid").as_string());
    writeFile(availability(nodes_[0]), "OFFLINE\n");
    ASSERT_TRUE(waitUntil([&] { return !pods().count("node-a-" + camera + "-pod"); }))
        << names(pods()).size();
    // node-b still sees the camera: its broker stays, and the Services are never deleted
    // under it; node-a only takes its own fields back.
    ASSERT_TRUE(nodes_[0].daemon->waitForLog("left services/" + camera + "-svc to devlet-node-b", 30s));
    ASSERT_TRUE(nodes_[0].daemon->waitForLog("left services/cams-svc to devlet-node-b", 30s));
    ASSERT_EQ(services().size(), 2u);
    for (const auto& [name, service] : services()) {
        EXPECT_EQ(std::string(service.at("metadata").at("uid").as_string()), uids[name]) << name;
        EXPECT_EQ(appliers(service), std::set<std::string>{"devlet-node-b"}) << name;
    }
    EXPECT_EQ(api_->requestCount("delete services"), 0);
    EXPECT_TRUE(pods().count("node-b-" + camera + "-pod"));
    EXPECT_TRUE(pods().count(local + "-pod"));

    writeFile(availability(nodes_[1]), "OFFLINE\n");
    ASSERT_TRUE(waitUntil([&] { return names(pods()) == std::set<std::string>{local + "-pod"}; }))
        << names(pods()).size();
    ASSERT_TRUE(waitUntil([&] { return services().empty(); })) << names(services()).size();
}

TEST_F(ClusterBrokersTest, ConfigurationWithoutBrokerSpecLosesItsPods) {
    const std::string camera = waitForEverything();
    ASSERT_FALSE(camera.empty());
    const std::string local = localInstance();
    for (Node& node : nodes_) writeCameras(node, false);
    ASSERT_TRUE(waitUntil([&] { return names(pods()) == std::set<std::string>{local + "-pod"}; }))
        << names(pods()).size();
    EXPECT_EQ(names(services()), (std::set<std::string>{camera + "-svc", "cams-svc"}));
}

TEST_F(ClusterBrokersTest, BrokerJobSpecMakesOneJobPerInstance) {
    ASSERT_FALSE(waitForEverything().empty());
    const auto jobsFile = nodes_[0].daemon->confDir() / "jobs.yaml";
    writeFile(jobsFile, echoDevicesConfiguration("jobs", "task0", 1, "      shared: false\n",
                                                 "  brokerSpec:\n"
                                                 "    brokerJobSpec:\n"
                                                 "      template:\n"
                                                 "        spec:\n"
                                                 "          restartPolicy: Never\n"
                                                 "          containers:\n"
                                                 "          - name: task\n"
                                                 "            image: busybox\n"
                                                 "            resources:\n"
                                                 "              limits:\n"
                                                 "                \"{{PLACEHOLDER}}\": \"1\"\n"));
    std::map<std::string, json::object> jobs;
    ASSERT_TRUE(waitUntil([&] {
        jobs = objects("/apis/batch/v1/namespaces/devlet/jobs");
        return jobs.size() == 1;
    }));
    const auto& [name, job] = *jobs.begin();
    const std::string instance = label(job, "akri.sh/instance");
    ASSERT_EQ(name.rfind(instance + "-", 0), 0u) << name;
    EXPECT_EQ(name.size(), instance.size() + 1 + 8 + 4) << name << ": <instance>-<8 hex>-job";
    EXPECT_EQ(name.substr(name.size() - 4), "-job");
    EXPECT_EQ(label(job, "akri.sh/configuration"), "jobs");
    const json::object& podTemplate = job.at("spec").at("template").as_object();
    EXPECT_EQ(podTemplate.at("metadata").at("labels").at("akri.sh/instance").as_string(), instance);
    EXPECT_EQ(podTemplate.at("spec")
                  .at("containers")
                  .as_array()[0]
                  .at("resources")
                  .at("limits")
                  .at("akri.sh/" + instance)
                  .as_string(),
              "1");

    std::filesystem::remove(jobsFile);
    ASSERT_TRUE(waitUntil([&] { return objects("/apis/batch/v1/namespaces/devlet/jobs").empty(); }));
}

TEST_F(ClusterBrokersTest, EndedBrokerIsMadeAgainAndTheStatusSaysWhy) {
    const std::string camera = waitForEverything();
    ASSERT_FALSE(camera.empty());
    const Node& a = nodes_[0];
    const Node& b = nodes_[1];
    const std::string pod = "node-a-" + camera + "-pod";
    const std::string podB = "node-b-" + camera + "-pod";
    const std::string first = podUid(pod);
    const std::string firstB = podUid(podB);
    // The kubelet's verdicts: a broker whose slot is held elsewhere, one that exited.
    ASSERT_TRUE(setPhase(pod, "Failed", "UnexpectedAdmissionError"));
    ASSERT_TRUE(setPhase(podB, "Succeeded", ""));

    // Made again at once: the same name, another Pod.
    json::object broker;
    ASSERT_TRUE(waitUntil([&] {
        const std::string now = podUid(pod);
        broker = brokerStatus(a, pod);
        return !now.empty() && now != first && recreations(broker) == 1 && text(broker, "phase") == "Pending";
    })) << json::serialize(broker);
    EXPECT_EQ(text(broker, "recreatedBecause"), "Failed (UnexpectedAdmissionError)");
    EXPECT_FALSE(broker.at("failed").as_bool());
    json::object brokerB;
    ASSERT_TRUE(waitUntil([&] {
        const std::string now = podUid(podB);
        brokerB = brokerStatus(b, podB);
        return !now.empty() && now != firstB && recreations(brokerB) == 1;
    })) << json::serialize(brokerB);
    EXPECT_EQ(text(brokerB, "recreatedBecause"), "Succeeded");
    std::string scraped;
    ASSERT_TRUE(waitUntil([&] {
        scraped = metrics(a);
        return hasLine(scraped, R"(devlet_cluster_broker_pods_recreated_total{reason="ended"} 1)");
    })) << scraped;
    EXPECT_TRUE(hasLine(scraped, R"(devlet_cluster_broker_pods_recreated_total{reason="pending"} 0)"))
        << scraped;
    EXPECT_TRUE(a.daemon->waitForLog(
        "deleted pods/" + pod + " to make it again: Failed (UnexpectedAdmissionError)", 10s));

    // Failing again at once: made again only after a backoff, and shown failed meanwhile.
    const std::string second = podUid(pod);
    ASSERT_TRUE(setPhase(pod, "Failed", "Error"));
    ASSERT_TRUE(waitUntil([&] {
        broker = brokerStatus(a, pod);
        return text(broker, "phase") == "Failed";
    })) << json::serialize(broker);
    EXPECT_TRUE(broker.at("failed").as_bool());
    EXPECT_EQ(text(broker, "reason"), "Error");
    EXPECT_EQ(recreations(broker), 1);
    scraped = metrics(a);
    EXPECT_TRUE(hasLine(scraped, "devlet_cluster_broker_pods_failed 1")) << scraped;
    // Akri's count leaves out a Pod that ended.
    EXPECT_TRUE(hasLine(scraped, R"(akri_broker_pod_count{configuration="cams",node="node-a"} 0)"))
        << scraped;
    ASSERT_TRUE(waitUntil(
        [&] {
            broker = brokerStatus(a, pod);
            const std::string now = podUid(pod);
            return !now.empty() && now != second && recreations(broker) == 2;
        },
        60s))
        << json::serialize(broker);
    EXPECT_EQ(text(broker, "recreatedBecause"), "Failed (Error)");
    // `devlet status` has a line for it.
    const CommandResult status =
        runDevlet({"status", "--listen", "127.0.0.1:" + std::to_string(statusPortFromLog(a.daemon->log()))});
    EXPECT_NE(status.output.find("\nbroker " + pod + " (cams): "), std::string::npos) << status.output;
    EXPECT_NE(status.output.find("; made again 2 time(s), last: Failed (Error)\n"), std::string::npos)
        << status.output;
}

TEST_F(ClusterBrokersTest, AkriBrokerPodCountCountsEachNodesPods) {
    const std::string camera = waitForEverything();
    ASSERT_FALSE(camera.empty());
    std::string a, b;
    ASSERT_TRUE(waitUntil([&] {
        a = metrics(nodes_[0]);
        b = metrics(nodes_[1]);
        return hasLine(a, R"(akri_broker_pod_count{configuration="cams",node="node-a"} 1)") &&
               hasLine(a, R"(akri_broker_pod_count{configuration="local",node="node-a"} 1)") &&
               hasLine(b, R"(akri_broker_pod_count{configuration="cams",node="node-b"} 1)");
    })) << a
        << b;
    // Each node counts only its own Pods.
    EXPECT_EQ(b.find("configuration=\"local\""), std::string::npos) << b;
    EXPECT_EQ(a.find("node=\"node-b\""), std::string::npos) << a;
}

TEST_F(ClusterBrokersTest, InvalidBrokerSpecIsReportedNotRetried) {
    ASSERT_FALSE(waitForEverything().empty());
    // A container without an image: the API refuses the Pod (422).
    writeFile(nodes_[0].daemon->confDir() / "broken.yaml",
              echoDevicesConfiguration("broken", "bad0", 1, "      shared: false\n",
                                       "  brokerSpec:\n    brokerPodSpec:\n      containers:\n"
                                       "      - name: broker\n"));
    json::object cluster;
    ASSERT_TRUE(waitUntil([&] {
        cluster = clusterStatus(nodes_[0]);
        const json::value* error = cluster.if_contains("brokersError");
        return error && error->is_string() && error->as_string().find("422") != json::string::npos;
    })) << json::serialize(cluster);
    EXPECT_NE(std::string(cluster.at("brokersError").as_string()).find("apply pods/broken-"),
              std::string::npos);
    EXPECT_TRUE(nodes_[0].daemon->waitForLog("not applied again until it changes", 10s));
    // Everything else still runs.
    EXPECT_EQ(pods().size(), 3u);
}

// The API server would drop (or, in an apply, refuse) a field the Kubernetes schema lacks:
// no broker is applied from such a spec, and the log and the status say what would be lost.
TEST_F(ClusterBrokersTest, UnknownBrokerFieldAppliesNoBrokerAndSaysWhatWouldBeLost) {
    ASSERT_FALSE(waitForEverything().empty());
    const auto file = nodes_[0].daemon->confDir() / "typo.yaml";
    auto write = [&](const std::string& pullPolicyKey) {
        writeFile(file, echoDevicesConfiguration("typo", "typo0", 1, "      shared: false\n",
                                                 "  brokerSpec:\n    brokerPodSpec:\n      containers:\n"
                                                 "      - name: broker\n        image: nginx\n        " +
                                                     pullPolicyKey + ": Always\n"));
    };
    write("imagePullPolicyy");
    const std::string lost =
        "configuration typo: spec.brokerSpec.brokerPodSpec has fields the Kubernetes PodSpec lacks, which "
        "the "
        "API server would drop or refuse: containers[0].imagePullPolicyy; no broker applied";
    json::object cluster;
    ASSERT_TRUE(waitUntil([&] {
        cluster = clusterStatus(nodes_[0]);
        return text(cluster, "brokersError") == lost;
    })) << json::serialize(cluster);
    EXPECT_TRUE(nodes_[0].daemon->waitForLog(lost, 10s));
    // The parser said it at its line too.
    EXPECT_TRUE(nodes_[0].daemon->waitForLog(
        "containers[0].imagePullPolicyy: not a field of the Kubernetes Container (did you mean "
        "\"imagePullPolicy\"?)",
        10s));
    std::this_thread::sleep_for(1s);
    for (const auto& [name, pod] : pods()) EXPECT_NE(label(pod, "akri.sh/configuration"), "typo") << name;
    EXPECT_EQ(pods().size(), 3u) << "everything else still runs";

    write("imagePullPolicy");
    ASSERT_TRUE(waitUntil([&] {
        for (const auto& [name, pod] : pods()) {
            if (label(pod, "akri.sh/configuration") == "typo") return true;
        }
        return false;
    }));
    EXPECT_TRUE(waitUntil([&] { return text(clusterStatus(nodes_[0]), "brokersError").empty(); }));
}

TEST_F(ClusterBrokersRoleOnlyTest, WithoutTheClusterRoleBrokersHaveNoOwnerAndDevletSaysWhy) {
    ASSERT_FALSE(waitForEverything().empty());
    for (const auto& [name, pod] : pods())
        EXPECT_FALSE(pod.at("metadata").as_object().contains("ownerReferences")) << name;
    json::object cluster;
    ASSERT_TRUE(waitUntil([&] {
        cluster = clusterStatus(nodes_[0]);
        const json::value* error = cluster.if_contains("brokersError");
        return error && error->is_string();
    }));
    EXPECT_NE(std::string(cluster.at("brokersError").as_string()).find("the Node node-a cannot be read (403"),
              std::string::npos)
        << cluster.at("brokersError");
    // The Node's read is the one call the Role does not cover.
    const json::value requests = json::parse(api_->control("GET", "requests").body);
    for (const json::value& r : requests.at("recent").as_array()) {
        if (r.at("code").as_int64() != 403) continue;
        EXPECT_EQ(r.at("key").as_string(), "get nodes") << json::serialize(r);
    }
}

// node-a makes its broker Pods again after 2 s Pending; node-b keeps the default 300 s.
class ClusterBrokersPendingTest : public ClusterBrokersTest {
protected:
    std::string clusterSettings(const std::string& node) const override {
        return node == "node-a" ? "  brokerPendingSeconds: 2\n" : "";
    }
};

TEST_F(ClusterBrokersPendingTest, PendingPastTheGraceIsMadeAgainWithinItIsNot) {
    const std::string camera = waitForEverything();
    ASSERT_FALSE(camera.empty());
    const std::string local = localInstance() + "-pod";
    const std::string podA = "node-a-" + camera + "-pod";
    const std::string podB = "node-b-" + camera + "-pod";
    const std::string uidB = podUid(podB);
    // Nothing runs Pods in the API double: they all stay Pending.
    json::object broker;
    ASSERT_TRUE(waitUntil(
        [&] {
            broker = brokerStatus(nodes_[0], podA);
            return recreations(broker) >= 1;
        },
        60s))
        << json::serialize(broker);
    EXPECT_EQ(text(broker, "recreatedBecause"), "Pending for more than 2 s");

    // The Pod now there starts running: it is left alone from then on.
    std::string running;
    ASSERT_TRUE(waitUntil([&] { return !(running = podUid(podA)).empty(); }));
    ASSERT_TRUE(setPhase(podA, "Running", ""));
    std::int64_t made = 0;
    ASSERT_TRUE(waitUntil([&] {
        broker = brokerStatus(nodes_[0], podA);
        made = recreations(broker);
        return text(broker, "phase") == "Running";
    })) << json::serialize(broker);
    // Wait for node-a to make its other Pod, still Pending, again after its backoff: by then it
    // has looked at the running one too.
    std::int64_t localMade = recreations(brokerStatus(nodes_[0], local));
    ASSERT_TRUE(waitUntil([&] { return recreations(brokerStatus(nodes_[0], local)) > localMade; }, 120s));
    EXPECT_EQ(podUid(podA), running);
    EXPECT_EQ(recreations(brokerStatus(nodes_[0], podA)), made);
    const std::string text = metrics(nodes_[0]);
    EXPECT_EQ(text.find(R"(devlet_cluster_broker_pods_recreated_total{reason="pending"} 0)"),
              std::string::npos)
        << text;

    // node-b's Pod, Pending all along but within its 300 s, is the one it first made.
    EXPECT_EQ(podUid(podB), uidB);
    EXPECT_EQ(recreations(brokerStatus(nodes_[1], podB)), 0);
}

}  // namespace
}  // namespace devlet::test
