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
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "tests/cluster/kube_double_fixture.h"
#include "tests/cluster/lease_holders.h"
#include "tests/integration/fixture.h"
#include "tests/status/status_test_support.h"

namespace devlet::test {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

constexpr char kCl[] = "akri.sh/cams";
constexpr int kLeaseSeconds = 2;
const std::vector<std::string> kNodes = {"node-a", "node-b", "node-c"};

// The name of the broker pod a node runs for an instance.
std::string brokerPod(const std::string& node, const std::string& instance) {
    return node + "-" + instance + "-pod";
}

struct Node {
    std::string name;
    unsigned short port = 0;  // its status server
    std::unique_ptr<DaemonProcess> daemon;
    std::unique_ptr<KubeletSimulator> kubelet;
};

class ClusterSlotsTest : public ::testing::Test {
protected:
    void SetUp() override {
        try {
            // Each node its own token and user, so that one node alone can be cut off; the
            // tests read as the administrator (the first token).
            KubeApiDouble::Options options;
            options.tokens = {"admin-token admin"};
            for (const std::string& name : kNodes) options.tokens.push_back((name + "-token ").append(name));
            api_ = std::make_unique<KubeApiDouble>(dir_.dir("api"), options);
        } catch (const std::exception& e) {
            GTEST_SKIP() << "the Kubernetes API double cannot start: " << e.what();
        }
        for (const std::string& name : kNodes) {
            Node node;
            node.name = name;
            node.port = freePort();
            node.daemon = std::make_unique<DaemonProcess>(dir_.dir(name));
            node.kubelet = std::make_unique<KubeletSimulator>(node.daemon->devicePluginDir(),
                                                              node.daemon->podResourcesSocket());
            const auto kubeconfig =
                api_->writeKubeconfig(dir_.path() / (name + ".kubeconfig"), name + "-token");
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

    void startDaemon(Node& node) {
        node.daemon->start({"--node-name", node.name, "--listen", "127.0.0.1:" + std::to_string(node.port)});
    }

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

    // One Lease as the API has it; an empty object if none.
    json::object lease(const std::string& name) const {
        const auto answer =
            api_->request("GET", "/apis/coordination.k8s.io/v1/namespaces/devlet/leases/" + name);
        boost::system::error_code ec;
        const json::value doc = json::parse(answer.body, ec);
        if (ec || answer.status != 200 || !doc.is_object()) return {};
        return doc.as_object();
    }
    static std::string renewTimeOf(const json::object& lease) {
        if (lease.empty()) return {};
        const json::value* t = lease.at("spec").as_object().if_contains("renewTime");
        return t && t->is_string() ? std::string(t->as_string()) : std::string();
    }
    // Waits until the Lease has been renewed since `renewTime`.
    bool waitForRenewal(const std::string& name, const std::string& renewTime,
                        std::chrono::milliseconds limit = 20s) const {
        const auto deadline = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < deadline) {
            const std::string now = renewTimeOf(lease(name));
            if (!now.empty() && now != renewTime) return true;
            std::this_thread::sleep_for(50ms);
        }
        return false;
    }

    // The devlet Leases the API holds: name -> holder.
    std::map<std::string, std::string> leases() const { return leaseHolders(*api_); }

    // Every node tries every slot for a pod of its own at the same moment.
    int storm(const std::string& round) {
        std::atomic<int> granted{0};
        std::vector<std::thread> threads;
        const std::vector<std::string> ids = slotIds(nodes_[0]);
        for (Node& node : nodes_) {
            for (const std::string& id : ids) {
                threads.emplace_back([&, id, n = &node] {
                    auto result = n->kubelet->allocateIds("default", (round + "-" + n->name + "-").append(id),
                                                          "main", kCl, {id});
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

// What `devlet status` and the status API say on the holder and on another node.
TEST_F(ClusterSlotsTest, StatusShowsLeasesAndSlotsHeldElsewhere) {
    Node& a = nodes_[0];
    Node& b = nodes_[1];
    const std::vector<std::string> ids = slotIds(a);
    ASSERT_TRUE(a.kubelet->allocateIds("default", "pod-a", "main", kCl, {ids[0]}).ok);
    ASSERT_TRUE(waitForSlots(b, 1)) << b.daemon->log();
    ASSERT_TRUE(eventually([&] {
        return runDevlet({"status", "--listen", "127.0.0.1:" + std::to_string(a.port)})
                   .output.find("Leases held here 1 of 1") != std::string::npos;
    })) << runDevlet({"status", "--listen", "127.0.0.1:" + std::to_string(a.port)}).output;
    const CommandResult status = runDevlet({"status", "--listen", "127.0.0.1:" + std::to_string(b.port)});
    EXPECT_NE(status.output.find("reachable, namespace devlet; Leases held here 0 of 1, shared slots held on "
                                 "other nodes 1"),
              std::string::npos)
        << status.output;
    const auto answer = httpGet(b.port, "/api/v1/instances");
    const json::value doc = json::parse(answer.body);
    bool shown = false;
    for (const json::value& slot : doc.at("instances").as_array().at(0).at("slots").as_array()) {
        if (slot.at("id").as_string() != ids[0]) continue;
        EXPECT_EQ(slot.at("state"), "elsewhere");
        EXPECT_EQ(slot.at("elsewhere"), "held on node node-a");
        shown = true;
    }
    EXPECT_TRUE(shown) << answer.body;
    EXPECT_NE(httpGet(b.port, "/metrics").body.find("devlet_cluster_slots_held_elsewhere 1"),
              std::string::npos);
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

TEST_F(ClusterSlotsTest, KubeletRestartKeepsHoldsAndLeases) {
    Node& a = nodes_[0];
    const std::vector<std::string> ids = slotIds(a);
    ASSERT_TRUE(a.kubelet->allocateIds("default", "pod-a", "main", kCl, {ids[0]}).ok);
    const auto before = leases();
    ASSERT_TRUE(a.kubelet->restart());
    ASSERT_TRUE(waitForSlots(a, 2)) << a.daemon->log();  // the holder's own slot is Healthy to it
    // Its node Lease is renewed on: the slot stays node-a's.
    ASSERT_TRUE(waitForRenewal("node.node-a", renewTimeOf(lease("node.node-a"))));
    EXPECT_EQ(leases(), before);
    EXPECT_TRUE(waitForSlots(nodes_[1], 1)) << nodes_[1].daemon->log();
}

// The API server loses every object (etcd restored from nothing): each node takes a Lease
// again for the slots its containers hold, and the others see them held.
TEST_F(ClusterSlotsTest, WipedApiGetsTheHeldSlotsLeasesBack) {
    const std::vector<std::string> ids = slotIds(nodes_[0]);
    ASSERT_TRUE(nodes_[0].kubelet->allocateIds("default", "pod-a", "main", kCl, {ids[0]}).ok);
    ASSERT_TRUE(nodes_[2].kubelet->allocateIds("default", "pod-c", "main", kCl, {ids[1]}).ok);
    const auto before = leases();
    api_->restart();
    ASSERT_TRUE(eventually([&] { return leases() == before; }, 30s)) << nodes_[0].daemon->log();
    EXPECT_TRUE(waitForSlots(nodes_[1], 0)) << nodes_[1].daemon->log();
    expectNoSlotTwice(clusterHolds());
}

// What made Akri's agents loop on 409 (a write at a stale resourceVersion after someone
// else changed the object): the Leases changed or deleted behind devlet's back.
TEST_F(ClusterSlotsTest, LeaseChangedOrDeletedBehindItsBackDoesNotStallRenewal) {
    Node& a = nodes_[0];
    const std::vector<std::string> ids = slotIds(a);
    ASSERT_TRUE(a.kubelet->allocateIds("default", "pod-a", "main", kCl, {ids[0]}).ok);
    // Another writer labels node-a's own Lease: its next renewal at its old resourceVersion
    // conflicts; it reads the Lease and renews from what it is.
    const std::string own = "node.node-a";
    json::object changed = lease(own);
    ASSERT_FALSE(changed.empty());
    changed["metadata"].as_object()["labels"].as_object()["example.com/touched"] = "yes";
    ASSERT_EQ(api_->request("PUT", "/apis/coordination.k8s.io/v1/namespaces/devlet/leases/" + own,
                            json::serialize(changed))
                  .status,
              200);
    std::string renewed = renewTimeOf(lease(own));
    ASSERT_TRUE(waitForRenewal(own, renewed)) << a.daemon->log();
    renewed = renewTimeOf(lease(own));
    ASSERT_TRUE(waitForRenewal(own, renewed)) << a.daemon->log();

    // The slot's Lease deleted under it: taken again, by the node whose container holds the
    // slot; so is the node's own Lease.
    ASSERT_EQ(
        api_->request("DELETE", "/apis/coordination.k8s.io/v1/namespaces/devlet/leases/" + ids[0]).status,
        200);
    ASSERT_TRUE(eventually([&] { return leases()[ids[0]] == "node-a"; }, 20s)) << a.daemon->log();
    ASSERT_EQ(api_->request("DELETE", "/apis/coordination.k8s.io/v1/namespaces/devlet/leases/" + own).status,
              200);
    ASSERT_TRUE(eventually([&] { return nodeLeaseHolders(*api_)[own] == "node-a"; }, 20s)) << a.daemon->log();
    EXPECT_TRUE(waitForSlots(nodes_[1], 1));
    expectNoSlotTwice(clusterHolds());
}

// The API server sheds load: Allocate waits out Retry-After and then succeeds.
TEST_F(ClusterSlotsTest, TooManyRequestsDelaysTheLeaseButTheSlotIsGiven) {
    Node& b = nodes_[1];
    const std::vector<std::string> ids = slotIds(b);
    ASSERT_EQ(api_->control("POST", "fail",
                            R"({"count":2,"code":429,"retryAfter":1,"verb":"create","resource":"leases"})")
                  .status,
              200);
    auto granted = b.kubelet->allocateIds("default", "pod-b", "main", kCl, {ids[0]});
    EXPECT_TRUE(granted.ok) << granted.error << "\n" << b.daemon->log();
    EXPECT_EQ(leases()[ids[0]], "node-b");
}

// Nodes' clocks disagree: a holder whose clock is an hour behind writes renewTimes that
// look long past to everyone else, yet while it renews, no node takes its slot.
TEST_F(ClusterSlotsTest, HolderWithASkewedClockKeepsItsSlotWhileItRenews) {
    const std::vector<std::string> ids = slotIds(nodes_[0]);
    auto write = [&](const std::string& renewTime, const std::string& resourceVersion) {
        json::object spec{{"holderIdentity", "node-skewed"},
                          {"leaseDurationSeconds", kLeaseSeconds},
                          {"acquireTime", "2026-11-25T09:00:00.000000Z"},
                          {"renewTime", renewTime}};
        json::object metadata{{"name", ids[0]},
                              {"namespace", "devlet"},
                              {"labels", json::object{{"app.kubernetes.io/managed-by", "devlet"}}}};
        if (!resourceVersion.empty()) metadata["resourceVersion"] = resourceVersion;
        json::object body{{"apiVersion", "coordination.k8s.io/v1"},
                          {"kind", "Lease"},
                          {"metadata", metadata},
                          {"spec", spec}};
        const std::string path = "/apis/coordination.k8s.io/v1/namespaces/devlet/leases";
        return resourceVersion.empty() ? api_->request("POST", path, json::serialize(body))
                                       : api_->request("PUT", path + "/" + ids[0], json::serialize(body));
    };
    ASSERT_EQ(write("2026-11-25T09:00:00.000000Z", "").status, 201);
    for (Node& node : nodes_) ASSERT_TRUE(waitForSlots(node, 1)) << node.daemon->log();
    // Renewed for three Lease durations, each time an hour behind everyone's clock.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3 * kLeaseSeconds);
    for (int k = 1; std::chrono::steady_clock::now() < until; ++k) {
        std::this_thread::sleep_for(500ms);
        const std::string rv(lease(ids[0]).at("metadata").at("resourceVersion").as_string());
        ASSERT_EQ(write("2026-11-25T09:00:0" + std::to_string(k % 10) + ".000000Z", rv).status, 200);
        for (Node& node : nodes_) {
            auto refused =
                node.kubelet->allocateIds("default", "try-" + std::to_string(k), "main", kCl, {ids[0]});
            EXPECT_FALSE(refused.ok) << node.name << " took a slot that node-skewed renews";
        }
    }
    // It stops renewing: after the Lease duration, as each node sees it, the slot is free.
    for (Node& node : nodes_) EXPECT_TRUE(waitForSlots(node, 2)) << node.daemon->log();
    EXPECT_TRUE(nodes_[2].kubelet->allocateIds("default", "pod-c", "main", kCl, {ids[0]}).ok);
    EXPECT_EQ(leases()[ids[0]], "node-c");
}

std::string statusText(const Node& node) {
    return runDevlet({"status", "--listen", "127.0.0.1:" + std::to_string(node.port)}).output;
}

// One number from a node's /metrics ("devlet_cluster_holds_unconfirmed"); -1 if absent.
double metric(const Node& node, const std::string& name) {
    const std::string body = httpGet(node.port, "/metrics").body;
    std::size_t at = 0;
    while ((at = body.find(name + " ", at)) != std::string::npos) {
        if (at == 0 || body[at - 1] == '\n') return std::stod(body.substr(at + name.size() + 1));
        at += name.size();
    }
    return -1;
}

// The live file of the container holding `slot` on the node, as the status API names it.
json::object liveFileOf(const Node& node, const std::string& slot) {
    const json::value doc = json::parse(httpGet(node.port, "/api/v1/instances").body);
    for (const json::value& instance : doc.at("instances").as_array()) {
        for (const json::value& s : instance.at("slots").as_array()) {
            if (s.at("id").as_string() != slot || !s.at("holder").is_object()) continue;
            const json::value* file = s.at("holder").as_object().if_contains("liveFile");
            if (!file || !file->is_object()) return {};
            return json::parse(readFile(std::string(file->at("path").as_string()))).as_object();
        }
    }
    return {};
}

// What a partition makes (docs/cluster.md, "A partitioned node"): node-a holds a slot for
// a1 and is cut off from the API alone (its requests hang, its watch goes silent without
// closing). It says its hold is unconfirmed; node-b sees node-a's Lease lapse and takes the
// slot over for b1; a1 ends on node-a and a2 asks for the slot there at once (within the
// release grace), later, and after the partition heals. The slot is never given twice.
TEST_F(ClusterSlotsTest, PartitionedNodeNeverGivesASlotAnotherNodeTookOver) {
    Node& a = nodes_[0];
    Node& b = nodes_[1];
    const std::vector<std::string> ids = slotIds(a);
    ASSERT_TRUE(a.kubelet->allocateIds("default", "a1", "main", kCl, {ids[0]}).ok);
    ASSERT_TRUE(waitForSlots(b, 1)) << b.daemon->log();
    api_->partition("node-a");

    // node-a says so: per held slot, on the status API and page, in metrics, in the live file.
    ASSERT_TRUE(eventually([&] { return statusText(a).find("not confirmed") != std::string::npos; }))
        << statusText(a) << a.daemon->log();
    EXPECT_NE(statusText(a).find("cluster: API server " + api_->url() + " unreachable"), std::string::npos)
        << statusText(a);
    EXPECT_EQ(metric(a, "devlet_cluster_holds_unconfirmed"), 1);
    EXPECT_EQ(metric(a, "devlet_cluster_node_lease_confirmed"), 0);
    ASSERT_TRUE(eventually([&] {
        const json::object live = liveFileOf(a, ids[0]);
        return !live.empty() && live.at("devices").at(0).at("clusterHold").at("confirmed") == false;
    })) << json::serialize(liveFileOf(a, ids[0]));

    // node-b takes the slot over once node-a's Lease has lapsed as node-b sees it.
    ASSERT_TRUE(waitForSlots(b, 2, 30s)) << b.daemon->log();
    auto b1 = b.kubelet->allocateIds("default", "b1", "main", kCl, {ids[0]});
    ASSERT_TRUE(b1.ok) << b1.error << "\n" << b.daemon->log();

    // a1 ends; a2 asks at once, while node-a still counts the slot as a1's.
    a.kubelet->removePod("default", "a1");
    const auto asked = std::chrono::steady_clock::now();
    auto early = a.kubelet->allocateIds("default", "a2", "main", kCl, {ids[0]});
    std::printf("Allocate during the partition answered in %lld ms\n",
                static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::steady_clock::now() - asked)
                                           .count()));
    EXPECT_FALSE(early.ok) << "node-a gave " << ids[0] << " while node-b holds it";
    EXPECT_NE(early.error.find("Kubernetes API"), std::string::npos) << early.error;
    // And after the release grace, still cut off.
    std::this_thread::sleep_for(1500ms);
    auto later = a.kubelet->allocateIds("default", "a3", "main", kCl, {ids[0]});
    EXPECT_FALSE(later.ok) << "node-a gave " << ids[0] << " while node-b holds it";
    expectNoSlotTwice(clusterHolds());

    // Healed: node-a's old Lease is node-b's now; node-a learns it and refuses, naming it.
    api_->heal("node-a");
    ASSERT_TRUE(eventually([&] { return statusText(a).find(" reachable,") != std::string::npos; }, 30s))
        << statusText(a) << a.daemon->log();
    ASSERT_TRUE(waitForSlots(a, 1, 30s)) << a.daemon->log();
    auto healed = a.kubelet->allocateIds("default", "a4", "main", kCl, {ids[0]});
    EXPECT_FALSE(healed.ok) << "node-a gave " << ids[0] << " while node-b holds it";
    EXPECT_NE(healed.error.find("node-b"), std::string::npos) << healed.error;
    expectNoSlotTwice(clusterHolds());
    EXPECT_EQ(leases()[ids[0]], "node-b");
    EXPECT_EQ(metric(a, "devlet_cluster_holds_unconfirmed"), 0);
}

// An API server that accepts connections and never answers: free shared slots become
// Unhealthy on every node (within two thirds of the Lease duration of the last answer),
// and `devlet status` says why; when it answers again they come back.
TEST_F(ClusterSlotsTest, HangingApiServerMakesFreeSharedSlotsUnhealthy) {
    ASSERT_EQ(api_->control("POST", "pause").status, 200);
    for (Node& node : nodes_)
        ASSERT_TRUE(waitForSlots(node, 0, 30s)) << node.name << "\n" << node.daemon->log();
    const std::string status = statusText(nodes_[1]);
    EXPECT_NE(status.find("unreachable"), std::string::npos) << status;
    EXPECT_NE(status.find("has not confirmed this node's Lease"), std::string::npos) << status;
    auto refused = nodes_[1].kubelet->allocateIds("default", "pod-b", "main", kCl, {slotIds(nodes_[1])[0]});
    EXPECT_FALSE(refused.ok);
    ASSERT_EQ(api_->control("POST", "resume").status, 200);
    for (Node& node : nodes_)
        ASSERT_TRUE(waitForSlots(node, 2, 30s)) << node.name << "\n" << node.daemon->log();
    EXPECT_TRUE(nodes_[1].kubelet->allocateIds("default", "pod-b2", "main", kCl, {slotIds(nodes_[1])[0]}).ok);
}

// A watch that stays open and delivers nothing (a half-open connection): the node notices
// that its own renewal does not show up on it, lists again, and sees the slot held.
TEST_F(ClusterSlotsTest, HalfOpenWatchIsNoticedAndRelisted) {
    Node& a = nodes_[0];
    Node& b = nodes_[1];
    api_->silenceWatches("node-b");
    const std::vector<std::string> ids = slotIds(a);
    ASSERT_TRUE(a.kubelet->allocateIds("default", "pod-a", "main", kCl, {ids[0]}).ok);
    ASSERT_TRUE(waitForSlots(b, 1, 30s)) << b.daemon->log();
    EXPECT_GE(metric(b, "devlet_cluster_watch_relists_total"), 1);
    EXPECT_FALSE(b.kubelet->allocateIds("default", "pod-b", "main", kCl, {ids[0]}).ok);
}

// The API comes back without its state (an etcd restore: objects and resourceVersions
// gone): the other nodes relist instead of watching blind from their old version, so they
// keep seeing the slots held for Lease durations on end, and never list them Healthy.
TEST_F(ClusterSlotsTest, ApiRestartedWithoutItsStateIsRelistedNotWatchedBlind) {
    const std::vector<std::string> ids = slotIds(nodes_[0]);
    ASSERT_TRUE(nodes_[0].kubelet->allocateIds("default", "pod-a", "main", kCl, {ids[0]}).ok);
    ASSERT_TRUE(nodes_[2].kubelet->allocateIds("default", "pod-c", "main", kCl, {ids[1]}).ok);
    ASSERT_TRUE(waitForSlots(nodes_[1], 0)) << nodes_[1].daemon->log();
    api_->restart();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(4 * kLeaseSeconds);
    while (std::chrono::steady_clock::now() < until) {
        for (const auto& [id, state] : nodes_[1].kubelet->devices(kCl))
            EXPECT_NE(state.health, "Healthy") << id << " listed free on node-b while held";
        std::this_thread::sleep_for(100ms);
    }
    EXPECT_EQ(leases(), (std::map<std::string, std::string>{{ids[0], "node-a"}, {ids[1], "node-c"}}));
    // And it sees what changes after: node-a's pod ends, the slot is free on node-b.
    nodes_[0].kubelet->removePod("default", "pod-a");
    ASSERT_TRUE(waitForSlots(nodes_[1], 1, 30s)) << nodes_[1].daemon->log();
    EXPECT_TRUE(nodes_[1].kubelet->allocateIds("default", "pod-b", "main", kCl, {ids[0]}).ok);
    expectNoSlotTwice(clusterHolds());
}

// A silent outage of many renewal periods (30 of them; 10 minutes at the default 15 s
// duration is 120): at most one renewal is on its way at a time, so the requests waiting
// for the API stay few, and nothing stale is sent after it.
TEST_F(ClusterSlotsTest, RenewalsStayBoundedThroughASilentOutage) {
    Node& a = nodes_[0];
    const std::vector<std::string> ids = slotIds(a);
    ASSERT_TRUE(a.kubelet->allocateIds("default", "pod-a", "main", kCl, {ids[0]}).ok);
    api_->partition("node-a");
    std::int64_t mostHeld = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10 * kLeaseSeconds);
    while (std::chrono::steady_clock::now() < until) {
        const auto answer = api_->control("GET", "requests");
        const json::value doc = json::parse(answer.body);
        mostHeld = std::max<std::int64_t>(mostHeld, doc.at("heldRequests").to_number<std::int64_t>());
        std::this_thread::sleep_for(250ms);
    }
    std::printf("requests of node-a waiting at the API at most: %lld\n", static_cast<long long>(mostHeld));
    EXPECT_LE(mostHeld, 4);
    ASSERT_EQ(api_->control("DELETE", "requests").status, 200);
    api_->heal("node-a");
    ASSERT_TRUE(eventually([&] { return metric(a, "devlet_cluster_holds_unconfirmed") == 0; }, 30s))
        << a.daemon->log();
    const std::int64_t updates = api_->requestCount("update leases", "node-a");
    std::printf("Lease updates of node-a once healed and confirmed: %lld\n", static_cast<long long>(updates));
    EXPECT_LE(updates, 4);
    EXPECT_EQ(leases()[ids[0]], "node-a");
    expectNoSlotTwice(clusterHolds());
}

// The README's multi-node example (examples/deployments/cluster-cameras): a camera of
// capacity 1 that three nodes see, a broker per camera. A debugEcho device stands in for
// the camera; everything else is the example's file. Every node applies its broker Pod
// and the Services; the three brokers' admissions race for the camera, and one wins.
TEST_F(ClusterSlotsTest, ReadmeClusterCamerasExampleGivesTheCameraToOneBroker) {
    const char* examples = std::getenv("DEVLET_EXAMPLES_DIR");
    ASSERT_NE(examples, nullptr) << "meson sets DEVLET_EXAMPLES_DIR";
    const std::string example =
        readFile(std::filesystem::path(examples) / "deployments/cluster-cameras/conf.d/cluster-cameras.yaml");
    ASSERT_NE(example.find("brokerPodSpec"), std::string::npos);
    const std::string standIn = std::regex_replace(
        example, std::regex("  discoveryHandler:[\\s\\S]*?\n  capacity:"),
        "  discoveryHandler:\n    name: debugEcho\n    discoveryDetails: |\n      descriptions: [camera0]\n"
        "      shared: true\n  capacity:");
    ASSERT_NE(standIn.find("debugEcho"), std::string::npos);
    for (Node& node : nodes_) writeFile(node.daemon->confDir() / "cluster-cameras.yaml", standIn);

    std::map<std::string, json::object> pods;
    auto list = [&](const std::string& path) {
        std::map<std::string, json::object> found;
        boost::system::error_code ec;
        const json::value doc = json::parse(api_->request("GET", path).body, ec);
        if (ec || !doc.is_object()) return found;
        for (const json::value& item : doc.at("items").as_array())
            found[std::string(item.at("metadata").at("name").as_string())] = item.as_object();
        return found;
    };
    // The example's broker Pods, on every node.
    auto brokers = [&] {
        return list("/api/v1/namespaces/devlet/pods?labelSelector=akri.sh%2Fconfiguration%3Dcluster-cameras");
    };
    ASSERT_TRUE(eventually(
        [&] {
            pods = brokers();
            return pods.size() == 3;
        },
        30s))
        << nodes_[0].daemon->log();
    std::string instance;
    for (const auto& [name, pod] : pods) {
        instance = std::string(pod.at("metadata").at("labels").at("akri.sh/instance").as_string());
        const std::string node(pod.at("spec").at("nodeName").as_string());
        EXPECT_EQ(name, brokerPod(node, instance));
        EXPECT_EQ(pod.at("spec").at("containers").at(0).at("image"),
                  "ghcr.io/project-akri/akri/onvif-video-broker:latest");
    }
    ASSERT_TRUE(eventually(
        [&] {
            const auto services = list("/api/v1/namespaces/devlet/services");
            return services.count(instance + "-svc") && services.count("cluster-cameras-svc");
        },
        30s));

    // The three brokers' Allocate calls, at once: the camera goes to one of them.
    const std::string resource = "akri.sh/" + instance;
    std::atomic<int> granted{0};
    std::vector<std::thread> admissions;
    for (Node& node : nodes_) {
        admissions.emplace_back([&, n = &node] {
            if (n->kubelet
                    ->allocateIds("devlet", brokerPod(n->name, instance), "onvif-video-broker", resource,
                                  {instance + "-0"})
                    .ok)
                ++granted;
        });
    }
    for (auto& t : admissions) t.join();
    EXPECT_EQ(granted.load(), 1);
    expectNoSlotTwice(clusterHolds());

    // The nodes that lost take their brokers back (the kubelet could only refuse them, and
    // Akri would make them again and again); the winner's broker stays.
    std::string winner;
    ASSERT_TRUE(eventually(
        [&] {
            pods = brokers();
            if (pods.size() != 1) return false;
            winner = std::string(pods.begin()->second.at("spec").at("nodeName").as_string());
            return true;
        },
        30s))
        << pods.size();
    // The winner's broker ends: the camera is free, and every node offers a broker again.
    for (Node& node : nodes_) {
        if (node.name == winner) node.kubelet->removePod("devlet", brokerPod(winner, instance));
    }
    EXPECT_TRUE(eventually(
        [&] {
            pods = brokers();
            return pods.size() == 3;
        },
        60s))
        << pods.size();
}

}  // namespace
}  // namespace devlet::test
