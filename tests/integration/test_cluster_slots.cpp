// Cluster-wide capacity of a shared device: three real daemons, each with its own node
// name, kubelet simulator and state, against one Kubernetes API double. A shared debugEcho
// device of capacity 2 is seen by all three: at most two containers in the cluster hold
// it, whatever the nodes do at once; a node that dies gives its slots up after the Lease
// duration; an API that is cut gives no slot twice; restarts duplicate nothing.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "tests/cluster/kube_double_fixture.h"
#include "tests/integration/fixture.h"

namespace devlet::test {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

constexpr char kCl[] = "akri.sh/cams";
constexpr int kLeaseSeconds = 2;
const std::vector<std::string> kNodes = {"node-a", "node-b", "node-c"};

struct Node {
    std::string name;
    std::unique_ptr<DaemonProcess> daemon;
    std::unique_ptr<KubeletSimulator> kubelet;
};

class ClusterSlotsTest : public ::testing::Test {
protected:
    void SetUp() override {
        try {
            api_ = std::make_unique<KubeApiDouble>(dir_.dir("api"));
        } catch (const std::exception& e) {
            GTEST_SKIP() << "the Kubernetes API double cannot start: " << e.what();
        }
        for (const std::string& name : kNodes) {
            Node node;
            node.name = name;
            node.daemon = std::make_unique<DaemonProcess>(dir_.dir(name));
            node.kubelet = std::make_unique<KubeletSimulator>(node.daemon->devicePluginDir(),
                                                              node.daemon->podResourcesSocket());
            const auto kubeconfig =
                api_->writeKubeconfig(dir_.path() / (name + ".kubeconfig"), api_->token());
            writeFile(node.daemon->settingsFile(),
                      "kubelet:\n  podResourcesIntervalSeconds: 0.2\n  slotReleaseGraceSeconds: 0.5\n"
                      "cluster:\n  kubeconfig: " +
                          kubeconfig.string() + "\n  namespace: devlet\n  leaseDurationSeconds: " +
                          std::to_string(kLeaseSeconds) + "\n");
            // One camera every node sees: shared, so its instance has one name everywhere.
            writeFile(node.daemon->confDir() / "cams.yaml",
                      echoDevicesConfiguration("cams", "cam0", 2, "      shared: true\n"));
            nodes_.push_back(std::move(node));
        }
        for (Node& node : nodes_) {
            ASSERT_TRUE(node.kubelet->start());
            startDaemon(node);
        }
        for (Node& node : nodes_) ASSERT_TRUE(waitForSlots(node, 2)) << node.daemon->log();
    }

    void startDaemon(Node& node) { node.daemon->start({"--node-name", node.name}); }

    // Waits until the node's kubelet sees `healthy` Healthy slots in the configuration's
    // resource.
    static bool waitForSlots(Node& node, std::size_t healthy, std::chrono::milliseconds limit = 20s) {
        return node.kubelet->waitFor(
            [&] {
                const auto devices = node.kubelet->devices(kCl);
                std::size_t count = 0;
                for (const auto& [id, state] : devices) count += state.health == "Healthy" ? 1 : 0;
                return devices.size() == 2 && count == healthy;
            },
            limit);
    }

    std::vector<std::string> slotIds(Node& node) const {
        std::vector<std::string> ids;
        for (const auto& [id, state] : node.kubelet->devices(kCl)) ids.push_back(id);
        return ids;
    }

    // Every container in the cluster that holds a slot of the camera, by slot.
    std::map<std::string, std::vector<std::string>> clusterHolds() const {
        std::map<std::string, std::vector<std::string>> holds;
        for (const Node& node : nodes_) {
            for (const auto& allocation : node.kubelet->allocations()) {
                for (const std::string& id : allocation.deviceIds)
                    holds[id].push_back(node.name + ":" + allocation.podNamespace + "/" + allocation.pod);
            }
        }
        return holds;
    }

    // The devlet Leases the API holds: name -> holder.
    std::map<std::string, std::string> leases() const {
        const auto answer = api_->request("GET", "/apis/coordination.k8s.io/v1/namespaces/devlet/leases");
        std::map<std::string, std::string> result;
        boost::system::error_code ec;
        const json::value doc = json::parse(answer.body, ec);
        if (ec || !doc.is_object()) return result;
        for (const json::value& item : doc.at("items").as_array()) {
            const json::object& o = item.as_object();
            const json::value* holder = o.at("spec").as_object().if_contains("holderIdentity");
            result[std::string(o.at("metadata").at("name").as_string())] =
                holder && holder->is_string() ? std::string(holder->as_string()) : std::string();
        }
        return result;
    }

    // Every node tries every slot for a pod of its own at the same moment.
    int storm(const std::string& round) {
        std::atomic<int> granted{0};
        std::vector<std::thread> threads;
        const std::vector<std::string> ids = slotIds(nodes_[0]);
        for (Node& node : nodes_) {
            for (const std::string& id : ids) {
                threads.emplace_back([&, id, n = &node] {
                    auto result = n->kubelet->allocateIds("default", round + "-" + n->name + "-" + id, "main",
                                                          kCl, {id});
                    if (result.ok) ++granted;
                });
            }
        }
        for (auto& t : threads) t.join();
        return granted;
    }

    static void expectNoSlotTwice(const std::map<std::string, std::vector<std::string>>& holds) {
        for (const auto& [slot, holders] : holds) {
            EXPECT_EQ(holders.size(), 1u) << slot << " is held by " << holders.size() << " containers";
        }
    }

    TempDir dir_;
    std::unique_ptr<KubeApiDouble> api_;
    std::vector<Node> nodes_;
};

TEST_F(ClusterSlotsTest, AllocationStormsOnEveryNodeGiveExactlyCapacityContainers) {
    for (int round = 0; round < 3; ++round) {
        const std::string name = "r" + std::to_string(round);
        const int granted = storm(name);
        const auto holds = clusterHolds();
        std::printf("round %d: %d of %zu attempts granted\n", round, granted, kNodes.size() * 2);
        EXPECT_EQ(granted, 2);
        EXPECT_EQ(holds.size(), 2u);
        expectNoSlotTwice(holds);
        // Every other node lists both slots Unhealthy, naming the holder on its status.
        const auto held = leases();
        EXPECT_EQ(held.size(), 2u);
        for (Node& node : nodes_) {
            bool holdsOne = false;
            for (const auto& [slot, holder] : held) holdsOne = holdsOne || holder == node.name;
            if (!holdsOne) {
                EXPECT_TRUE(waitForSlots(node, 0)) << node.name << "\n" << node.daemon->log();
            }
        }
        // The pods end: the Leases go, and every node offers both slots again.
        for (Node& node : nodes_) {
            for (const auto& allocation : node.kubelet->allocations())
                node.kubelet->removePod(allocation.podNamespace, allocation.pod);
        }
        for (Node& node : nodes_)
            ASSERT_TRUE(waitForSlots(node, 2)) << node.name << "\n" << node.daemon->log();
        EXPECT_TRUE(leases().empty());
    }
}

TEST_F(ClusterSlotsTest, SlotsOfANodeThatDiesAreTakenOverAfterTheLeaseDuration) {
    Node& a = nodes_[0];
    Node& b = nodes_[1];
    const std::vector<std::string> ids = slotIds(a);
    ASSERT_TRUE(a.kubelet->allocateIds("default", "pod-a", "main", kCl, {ids[0]}).ok);
    ASSERT_TRUE(waitForSlots(b, 1)) << b.daemon->log();
    auto refused = b.kubelet->allocateIds("default", "pod-b", "main", kCl, {ids[0]});
    EXPECT_FALSE(refused.ok);
    EXPECT_NE(refused.error.find("held on node node-a"), std::string::npos) << refused.error;

    a.daemon->kill9();
    // Nobody renews node-a's Lease: after its duration, as node-b observes it, the slot is
    // node-b's to give.
    ASSERT_TRUE(waitForSlots(b, 2, 20s)) << b.daemon->log();
    auto taken = b.kubelet->allocateIds("default", "pod-b2", "main", kCl, {ids[0]});
    EXPECT_TRUE(taken.ok) << taken.error;
    EXPECT_EQ(leases().at(ids[0]), "node-b");
}

TEST_F(ClusterSlotsTest, CutApiGivesNoSharedSlotAndRecovers) {
    Node& a = nodes_[0];
    Node& b = nodes_[1];
    const std::vector<std::string> ids = slotIds(a);
    ASSERT_TRUE(a.kubelet->allocateIds("default", "pod-a", "main", kCl, {ids[0]}).ok);
    api_->refuseConnections();
    // Nobody can see who holds what: no node offers a shared slot it does not hold.
    for (Node& node : nodes_) ASSERT_TRUE(waitForSlots(node, &node == &a ? 1 : 0)) << node.daemon->log();
    auto refused = b.kubelet->allocateIds("default", "pod-b", "main", kCl, {ids[1]});
    EXPECT_FALSE(refused.ok);
    EXPECT_NE(refused.error.find("Kubernetes API"), std::string::npos) << refused.error;

    api_->acceptConnections();
    ASSERT_TRUE(waitForSlots(b, 1, 30s)) << b.daemon->log();
    EXPECT_TRUE(b.kubelet->allocateIds("default", "pod-b2", "main", kCl, {ids[1]}).ok);
    expectNoSlotTwice(clusterHolds());
    EXPECT_EQ(leases(), (std::map<std::string, std::string>{{ids[0], "node-a"}, {ids[1], "node-b"}}));
}

TEST_F(ClusterSlotsTest, RestartingEveryNodeDuplicatesNothing) {
    const std::vector<std::string> ids = slotIds(nodes_[0]);
    ASSERT_TRUE(nodes_[0].kubelet->allocateIds("default", "pod-a", "main", kCl, {ids[0]}).ok);
    ASSERT_TRUE(nodes_[2].kubelet->allocateIds("default", "pod-c", "main", kCl, {ids[1]}).ok);
    const auto before = leases();
    for (Node& node : nodes_) {
        node.daemon->kill9();
        startDaemon(node);
    }
    for (Node& node : nodes_) {
        const std::size_t healthy = node.name == "node-b" ? 0 : 1;
        ASSERT_TRUE(waitForSlots(node, healthy, 30s)) << node.name << "\n" << node.daemon->log();
    }
    // Renewals have run since: the same two Leases, the same holders.
    std::this_thread::sleep_for(std::chrono::seconds(kLeaseSeconds));
    EXPECT_EQ(leases(), before);
    expectNoSlotTwice(clusterHolds());
    EXPECT_FALSE(nodes_[1].kubelet->allocateIds("default", "pod-b", "main", kCl, {ids[0]}).ok);
}

}  // namespace
}  // namespace devlet::test
