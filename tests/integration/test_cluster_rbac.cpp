// The rights the packaged Role grants (packaging/cluster/rbac.yaml) are enough for cluster
// mode: a real daemon whose token the API double limits to those Lease verbs allocates a
// slot of a shared device and frees it without one refused request. Without `delete`, the
// freed slot's Lease cannot be deleted, and without `list` the API counts as unreachable:
// devlet says so, on its status too, and keeps running. With the rules of the packaged
// Role and ClusterRole, read from rbac.yaml, a broker Pod has the node's Node as its owner
// and nothing is refused.
// The daemon's kubeconfig is written by packaging/cluster/node-kubeconfig.
// The double's rules have no namespace: the token may use Leases in any namespace, and
// devlet uses one; a ClusterRole's rule is one like any other there.

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <boost/json.hpp>
#include <yaml-cpp/yaml.h>

#include "tests/cluster/kube_double_fixture.h"
#include "tests/cluster/lease_holders.h"
#include "tests/integration/fixture.h"
#include "tests/status/status_test_support.h"

namespace devlet::test {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

constexpr char kCl[] = "akri.sh/cams";
// The Role's verbs on leases.coordination.k8s.io, as rbac.yaml grants them.
constexpr char kRoleVerbs[] = "get,list,watch,create,update,delete";
const std::string kListing = "listing /apis/coordination.k8s.io/v1/namespaces/devlet/leases";

constexpr char kBrokerSpec[] = R"(  brokerSpec:
    brokerPodSpec:
      containers:
      - name: broker
        image: "nginx:stable-alpine"
        resources:
          limits:
            "{{PLACEHOLDER}}": "1"
)";

// The rules of rbac.yaml's Role and ClusterRole as the API double's token rules
// ("allow=RESOURCES:VERBS::NAMESPACE" for the Role's, "allow=RESOURCES:VERBS" for the
// ClusterRole's; the double has no API groups, and a resource's plural names it well
// enough here). rbac.yaml lies beside node-kubeconfig.
std::string packagedRules() {
    const char* script = std::getenv("DEVLET_NODE_KUBECONFIG");
    if (!script) return "";
    const auto manifest = std::filesystem::path(script).parent_path() / "rbac.yaml";
    std::string rules;
    for (const YAML::Node& document : YAML::LoadAllFromFile(manifest.string())) {
        const std::string kind = document["kind"].as<std::string>();
        if (kind != "Role" && kind != "ClusterRole") continue;
        for (const YAML::Node& rule : document["rules"]) {
            auto joined = [](const YAML::Node& list) {
                std::string out;
                for (const YAML::Node& item : list) out += (out.empty() ? "" : ",") + item.as<std::string>();
                return out;
            };
            // A Role's rules hold in its namespace only; resourceNames limit a rule to those.
            const std::string names = rule["resourceNames"] ? joined(rule["resourceNames"]) : "";
            const std::string where =
                kind == "Role" ? ":" + names + ":" + document["metadata"]["namespace"].as<std::string>()
                               : (names.empty() ? "" : ":" + names);
            rules += (rules.empty() ? "" : " ") + std::string("allow=") + joined(rule["resources"]) + ":" +
                     joined(rule["verbs"]) + where;
        }
    }
    return rules;
}

class ClusterRbacTest : public ::testing::Test {
protected:
    // Starts the API double with the node's token limited to `verbs` on Leases, and one
    // daemon in cluster mode that sees a shared camera of capacity 1.
    void start(const std::string& verbs, std::size_t healthySlots = 1) {
        startWithRules("allow=leases:" + verbs, healthySlots);
    }

    // The same with the node's token limited to `rules`, the camera's configuration with
    // `extraSpec`; the Node node-a exists in the API.
    void startWithRules(const std::string& rules, std::size_t healthySlots,
                        const std::string& extraSpec = "") {
        KubeApiDouble::Options options;
        options.tokens = {"node-token system:serviceaccount:devlet:devlet-node " + rules,
                          "admin-token admin"};
        try {
            api_ = std::make_unique<KubeApiDouble>(dir_.dir("api"), options);
        } catch (const std::exception& e) {
            GTEST_SKIP() << "the Kubernetes API double cannot start: " << e.what();
        }
        const auto node = api_->request("POST", "/api/v1/nodes",
                                        R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"node-a"}})",
                                        "application/json", "admin-token");
        ASSERT_EQ(node.status, 201) << node.body;
        nodeUid_ = std::string(json::parse(node.body).at("metadata").at("uid").as_string());
        daemon_ = std::make_unique<DaemonProcess>(dir_.dir("node-a"));
        kubelet_ =
            std::make_unique<KubeletSimulator>(daemon_->devicePluginDir(), daemon_->podResourcesSocket());
        // The kubeconfig as the setup writes it: packaging/cluster/node-kubeconfig, given the
        // server, CA and token (the double makes no ServiceAccount tokens).
        const char* script = std::getenv("DEVLET_NODE_KUBECONFIG");
        ASSERT_NE(script, nullptr) << "DEVLET_NODE_KUBECONFIG is not set (meson sets it)";
        const auto kubeconfig = dir_.path() / "node-a.kubeconfig";
        const auto token = dir_.path() / "node.token";
        writeFile(token, "node-token\n");
        const CommandResult written =
            runProgram({script, "--kubectl", "false", "--server", api_->url(), "--ca-file",
                        api_->caPath().string(), "--token-file", token.string(), kubeconfig.string()});
        ASSERT_EQ(written.exitCode, 0) << written.output;
        ASSERT_EQ(written.output.find("node-token"), std::string::npos) << written.output;
        writeFile(daemon_->settingsFile(),
                  "kubelet:\n  podResourcesIntervalSeconds: 0.2\n  slotReleaseGraceSeconds: 0.5\n"
                  "cluster:\n  kubeconfig: " +
                      kubeconfig.string() + "\n  namespace: devlet\n  leaseDurationSeconds: 3\n");
        writeFile(daemon_->confDir() / "cams.yaml",
                  echoDevicesConfiguration("cams", "cam0", 1, "      shared: true\n", extraSpec));
        ASSERT_TRUE(kubelet_->start());
        port_ = freePort();
        daemon_->start({"--node-name", "node-a", "--listen", "127.0.0.1:" + std::to_string(port_)});
        ASSERT_TRUE(waitForHealthySlots(healthySlots)) << daemon_->log();
    }

    bool waitForHealthySlots(std::size_t healthy) {
        return kubelet_->waitFor(
            [&] {
                const auto devices = kubelet_->devices(kCl);
                std::size_t count = 0;
                for (const auto& [id, state] : devices) count += state.health == "Healthy" ? 1 : 0;
                return devices.size() == 1 && count == healthy;
            },
            20s);
    }

    // The devlet Leases the API holds (read as the administrator): name -> holder.
    std::map<std::string, std::string> leases() const { return leaseHolders(*api_, "devlet", "admin-token"); }

    json::object clusterStatus() const {
        const status::HttpAnswer answer = httpGet(port_, "/api/v1/status");
        boost::system::error_code ec;
        json::value doc = json::parse(answer.body, ec);
        if (ec || !doc.is_object() || !doc.as_object().contains("cluster")) return {};
        return doc.as_object().at("cluster").as_object();
    }

    // Requests the double refused the node's identity (its log: "... user=NAME 403").
    std::vector<std::string> refusedRequests() const {
        std::vector<std::string> refused;
        std::string line;
        std::istringstream log(api_->log());
        while (std::getline(log, line)) {
            if (line.find("user=system:serviceaccount:devlet:devlet-node 403") != std::string::npos)
                refused.push_back(line);
        }
        return refused;
    }

    std::string slotId() const {
        const auto devices = kubelet_->devices(kCl);
        return devices.empty() ? std::string() : devices.begin()->first;
    }

    // devlet's Pods, read as the administrator: name -> object.
    std::map<std::string, json::object> pods() const {
        std::map<std::string, json::object> result;
        const auto answer =
            api_->request("GET", "/api/v1/namespaces/devlet/pods", "", "application/json", "admin-token");
        boost::system::error_code ec;
        const json::value doc = json::parse(answer.body, ec);
        if (ec || !doc.is_object() || !doc.as_object().contains("items")) return result;
        for (const json::value& item : doc.at("items").as_array())
            result[std::string(item.at("metadata").at("name").as_string())] = item.as_object();
        return result;
    }

    TempDir dir_;
    std::string nodeUid_;
    std::unique_ptr<KubeApiDouble> api_;
    std::unique_ptr<DaemonProcess> daemon_;
    std::unique_ptr<KubeletSimulator> kubelet_;
    unsigned short port_ = 0;
};

TEST_F(ClusterRbacTest, TheRolesVerbsAllocateAndFreeASharedSlot) {
    start(kRoleVerbs);
    if (!api_ || HasFatalFailure()) return;
    const std::string id = slotId();
    auto granted = kubelet_->allocateIds("default", "pod-a", "main", kCl, {id});
    ASSERT_TRUE(granted.ok) << granted.error << "\n" << daemon_->log();
    EXPECT_EQ(leases(), (std::map<std::string, std::string>{{id, "node-a"}}));
    // What docs/cluster.md's setup checks with.
    ASSERT_TRUE(eventually([&] { return clusterStatus()["leasesHeld"] == 1; }, 20s)) << daemon_->log();
    const CommandResult status = runDevlet({"status", "--listen", "127.0.0.1:" + std::to_string(port_)});
    EXPECT_EQ(status.exitCode, 0) << status.output;
    EXPECT_NE(status.output.find(
                  "cluster: API server " + api_->url() +
                  " reachable, namespace devlet; Leases held here 1 of 1, shared slots held on other "
                  "nodes 0\n"),
              std::string::npos)
        << status.output;

    kubelet_->removePod("default", "pod-a");
    ASSERT_TRUE(eventually([&] { return leases().empty(); }, 20s)) << daemon_->log() << api_->log();
    EXPECT_TRUE(waitForHealthySlots(1)) << daemon_->log();
    EXPECT_EQ(refusedRequests(), std::vector<std::string>{}) << api_->log();
    // A status code as a word: the status page's random port may hold the digits.
    EXPECT_FALSE(std::regex_search(daemon_->log(), std::regex(R"(\b403\b)"))) << daemon_->log();
    EXPECT_EQ(daemon_->log().find("Forbidden"), std::string::npos) << daemon_->log();
}

TEST_F(ClusterRbacTest, WithoutDeleteTheLeaseStaysAndDevletSaysWhy) {
    start("get,list,watch,create,update");
    if (!api_ || HasFatalFailure()) return;
    const std::string id = slotId();
    auto granted = kubelet_->allocateIds("default", "pod-a", "main", kCl, {id});
    ASSERT_TRUE(granted.ok) << granted.error << "\n" << daemon_->log();

    kubelet_->removePod("default", "pod-a");
    ASSERT_TRUE(daemon_->waitForLog("cannot delete the Lease of slot " + id, 20s)) << daemon_->log();
    EXPECT_NE(daemon_->log().find("cannot delete resource \"leases\""), std::string::npos) << daemon_->log();
    EXPECT_FALSE(refusedRequests().empty());
    // The Lease stays, still this node's; the daemon runs on and shows it held.
    EXPECT_EQ(leases(), (std::map<std::string, std::string>{{id, "node-a"}}));
    EXPECT_TRUE(daemon_->running());
    const json::object cluster = clusterStatus();
    ASSERT_FALSE(cluster.empty()) << daemon_->log();
    EXPECT_EQ(cluster.at("leasesHeld").to_number<int>(), 1) << json::serialize(cluster);
}

TEST_F(ClusterRbacTest, WithoutListTheApiIsUnreachableAndStatusSaysWhy) {
    start("get,watch,create,update,delete", 0);
    if (!api_ || HasFatalFailure()) return;
    ASSERT_TRUE(daemon_->waitForLog("cluster API unreachable: " + kListing + ": 403 Forbidden", 20s))
        << daemon_->log();
    const CommandResult status = runDevlet({"status", "--listen", "127.0.0.1:" + std::to_string(port_)});
    EXPECT_EQ(status.exitCode, 0) << status.output;
    EXPECT_NE(status.output.find(
                  " unreachable, namespace devlet; Leases held here 0 of 0, shared slots held on other "
                  "nodes 0; last error: " +
                  kListing + ": 403 Forbidden"),
              std::string::npos)
        << status.output;
    EXPECT_NE(status.output.find("cannot list resource \"leases\""), std::string::npos) << status.output;
    // No shared slot is offered while nobody can say who holds it.
    EXPECT_FALSE(kubelet_->allocateIds("default", "pod-a", "main", kCl, {slotId()}).ok);
    EXPECT_TRUE(daemon_->running());
}

TEST_F(ClusterRbacTest, ThePackagedRulesGiveBrokerPodsTheNodeAsOwner) {
    const std::string rules = packagedRules();
    ASSERT_NE(rules.find("allow=nodes:get"), std::string::npos) << rules;
    startWithRules(rules, 1, kBrokerSpec);
    if (!api_ || HasFatalFailure()) return;
    std::map<std::string, json::object> made;
    ASSERT_TRUE(eventually([&] { return (made = pods()).size() == 1; }, 20s))
        << daemon_->log() << api_->log();
    const auto& [name, pod] = *made.begin();
    EXPECT_EQ(
        name,
        "node-a-" + std::string(pod.at("metadata").at("labels").at("akri.sh/instance").as_string()) + "-pod");
    const json::value* owners = pod.at("metadata").as_object().if_contains("ownerReferences");
    ASSERT_NE(owners, nullptr) << json::serialize(pod) << daemon_->log();
    ASSERT_EQ(owners->as_array().size(), 1u);
    const json::object& owner = owners->as_array()[0].as_object();
    EXPECT_EQ(owner.at("kind").as_string(), "Node");
    EXPECT_EQ(owner.at("name").as_string(), "node-a");
    EXPECT_EQ(owner.at("uid").as_string(), nodeUid_);
    ASSERT_TRUE(eventually(
        [&] {
            const json::object cluster = clusterStatus();
            const json::value* brokers = cluster.if_contains("brokers");
            return brokers && brokers->is_array() && brokers->as_array().size() == 1;
        },
        20s));
    EXPECT_TRUE(clusterStatus().at("brokersError").is_null()) << json::serialize(clusterStatus());
    EXPECT_EQ(refusedRequests(), std::vector<std::string>{}) << api_->log();
}

TEST_F(ClusterRbacTest, ThePackagedRulesRenewTheOwnTokenOnly) {
    const std::string rules = packagedRules();
    ASSERT_NE(rules.find("allow=serviceaccounts/token:create:devlet-node:devlet"), std::string::npos)
        << rules;
    startWithRules(rules, 1);
    if (!api_ || HasFatalFailure()) return;
    for (const char* name : {"devlet-node", "admin-robot"}) {
        const auto made = api_->request(
            "POST", "/api/v1/namespaces/devlet/serviceaccounts",
            std::string(R"({"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":")") + name + "\"}}",
            "application/json", "admin-token");
        ASSERT_EQ(made.status, 201) << made.body;
    }
    const std::string request =
        R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}})";
    const auto own = api_->request("POST", "/api/v1/namespaces/devlet/serviceaccounts/devlet-node/token",
                                   request, "application/json", "node-token");
    EXPECT_EQ(own.status, 201) << own.body;
    // Another ServiceAccount's token (one with more rights, say) is refused.
    const auto other = api_->request("POST", "/api/v1/namespaces/devlet/serviceaccounts/admin-robot/token",
                                     request, "application/json", "node-token");
    EXPECT_EQ(other.status, 403) << other.body;
    EXPECT_NE(other.body.find("cannot create resource \\\"serviceaccounts/token\\\""), std::string::npos)
        << other.body;
}

}  // namespace
}  // namespace devlet::test
