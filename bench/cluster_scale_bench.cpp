// Cluster mode at fleet scale, on one machine: N real daemons (100 by default), each with
// its own kubelet simulator, state and token, against one Kubernetes API double, all in one
// namespace. Each node sees ten shared cameras of its own and its neighbour's ten (a camera
// two nodes see), capacity 1, and holds its own ten: ten held shared slots per node. Prints the API requests
// a minute while nothing changes (in all and per node, by verb), each daemon's memory and CPU at rest, the
// time from a node's death to its slots taken over by another node, and an allocation storm on every node at
// once for one device of capacity C (exactly C given; p50/p99 of every Allocate).
// Figures only; no assertion about time.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "bench/command_line.h"
#include "bench/figures.h"
#include "tests/cluster/kube_double_fixture.h"
#include "tests/support/daemon_process.h"
#include "tests/support/kubelet_simulator.h"
#include "tests/support/temp_dir.h"

namespace devlet::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
namespace json = boost::json;

constexpr char kHeld[] = "akri.sh/held";    // each node's ten cameras and its neighbour's
constexpr char kStorm[] = "akri.sh/storm";  // one shared device the storm is about
constexpr int kHeldDevices = 10;

struct Node {
    std::string name;
    std::unique_ptr<test::DaemonProcess> daemon;
    std::unique_ptr<test::KubeletSimulator> kubelet;
};

[[noreturn]] void fail(const std::string& why) {
    std::fprintf(stderr, "cluster_scale_bench: %s\n", why.c_str());
    std::exit(1);
}

bool waitFor(const std::function<bool()>& predicate, std::chrono::milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    while (!predicate()) {
        if (Clock::now() > deadline) return false;
        std::this_thread::sleep_for(20ms);
    }
    return true;
}

std::string configuration(const std::string& name, const std::string& descriptions, int capacity) {
    return "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: " + name +
           "\nspec:\n  discoveryHandler:\n    name: debugEcho\n    discoveryDetails: |\n      descriptions: "
           "[" +
           descriptions + "]\n      shared: true\n  capacity: " + std::to_string(capacity) + "\n";
}

std::size_t healthy(test::KubeletSimulator& kubelet, const std::string& resource) {
    std::size_t count = 0;
    for (const auto& [id, state] : kubelet.devices(resource)) count += state.health == "Healthy";
    return count;
}

// The double's request counts: in all, or of one user.
std::map<std::string, double> requestCounts(const test::KubeApiDouble& api, const std::string& user = "") {
    std::map<std::string, double> counts;
    boost::system::error_code ec;
    const json::value doc = json::parse(api.control("GET", "requests").body, ec);
    if (ec || !doc.is_object()) return counts;
    const json::value* from = &doc.at("counts");
    if (!user.empty()) {
        const json::value* users = doc.as_object().if_contains("users");
        from = users && users->is_object() ? users->as_object().if_contains(user) : nullptr;
        if (!from) return counts;
    }
    for (const auto& [key, value] : from->as_object()) counts[std::string(key)] = value.to_number<double>();
    return counts;
}

void run(int nodeCount, int idleSeconds, int stormCapacity, int leaseSeconds) {
    test::TempDir dir;
    test::KubeApiDouble::Options options;
    options.tokens = {"admin-token admin"};
    for (int k = 0; k < nodeCount; ++k)
        options.tokens.push_back("node-" + std::to_string(k) + "-token node-" + std::to_string(k));
    test::KubeApiDouble api(dir.dir("api"), options);
    // Node k's cameras: cam-k-0 .. cam-k-9; it also sees node k-1's (node 0 the last node's).
    auto cameras = [&](int k) {
        std::string list;
        for (int d = 0; d < kHeldDevices; ++d)
            list += (list.empty() ? "" : ", ") + std::string("cam-") + std::to_string(k) + "-" +
                    std::to_string(d);
        return list;
    };

    std::vector<Node> nodes;
    const auto startAll = Clock::now();
    for (int k = 0; k < nodeCount; ++k) {
        Node node;
        node.name = "node-" + std::to_string(k);
        node.daemon = std::make_unique<test::DaemonProcess>(dir.dir(node.name));
        node.kubelet = std::make_unique<test::KubeletSimulator>(node.daemon->devicePluginDir(),
                                                                node.daemon->podResourcesSocket());
        const auto kubeconfig =
            api.writeKubeconfig(dir.path() / (node.name + ".kubeconfig"), node.name + "-token");
        test::writeFile(node.daemon->settingsFile(), "cluster:\n  kubeconfig: " + kubeconfig.string() +
                                                         "\n  namespace: devlet\n  leaseDurationSeconds: " +
                                                         std::to_string(leaseSeconds) + "\n");
        test::writeFile(
            node.daemon->confDir() / "held.yaml",
            configuration("held", cameras(k) + ", " + cameras((k + nodeCount - 1) % nodeCount), 1));
        test::writeFile(node.daemon->confDir() / "storm.yaml",
                        configuration("storm", "storm0", stormCapacity));
        if (!node.kubelet->start()) fail("a kubelet simulator cannot start");
        node.daemon->start({"--node-name", node.name});
        nodes.push_back(std::move(node));
    }
    for (Node& node : nodes) {
        if (!waitFor(
                [&] { return healthy(*node.kubelet, kHeld) == 2 * static_cast<std::size_t>(kHeldDevices); },
                120s))
            fail(node.name + ": the shared slots were not offered\n" + node.daemon->log());
    }
    const double startedS = ms(Clock::now() - startAll) / 1000;

    // Node k's own cameras are the ones node k+1 sees too; it holds them.
    std::vector<std::vector<std::string>> own(nodeCount);
    for (int k = 0; k < nodeCount; ++k) {
        const auto next = nodes[(k + 1) % nodeCount].kubelet->devices(kHeld);
        for (const auto& [id, state] : nodes[k].kubelet->devices(kHeld))
            if (next.count(id)) own[k].push_back(id);
    }
    std::vector<double> takes;
    int refusedTakes = 0;
    for (int k = 0; k < nodeCount; ++k) {
        for (const std::string& id : own[k]) {
            // Refused under load (Allocate answers within its deadline whatever the API
            // does): counted, and asked again as the kubelet would for a new pod.
            for (int attempt = 0;; ++attempt) {
                const auto start = Clock::now();
                auto result = nodes[k].kubelet->allocateIds(
                    "bench", "hold-" + id + "-" + std::to_string(attempt), "main", kHeld, {id});
                takes.push_back(ms(Clock::now() - start));
                if (result.ok) break;
                ++refusedTakes;
                if (attempt == 5) fail(nodes[k].name + " could not take " + id + ": " + result.error);
                std::this_thread::sleep_for(500ms);
            }
        }
    }

    // At rest: what reaches the API, and what each daemon costs.
    std::this_thread::sleep_for(std::chrono::seconds(leaseSeconds));
    api.control("DELETE", "requests");
    std::vector<double> cpuBefore;
    cpuBefore.reserve(nodes.size());
    for (Node& node : nodes) cpuBefore.push_back(cpuMs(node.daemon->pid()));
    std::this_thread::sleep_for(std::chrono::seconds(idleSeconds));
    const std::map<std::string, double> idle = requestCounts(api);
    std::vector<double> cpuShare, rss;
    for (std::size_t k = 0; k < nodes.size(); ++k) {
        cpuShare.push_back((cpuMs(nodes[k].daemon->pid()) - cpuBefore[k]) / (idleSeconds * 10.0));  // percent
        rss.push_back(statusMiB(nodes[k].daemon->pid(), "VmRSS"));
    }
    const std::map<std::string, double> oneNode = requestCounts(api, nodes[1].name);
    double total = 0;
    for (const auto& [key, count] : idle) total += count;

    // A node dies: how long until another node has taken one of its slots over.
    Node& dead = nodes[0];
    Node& heir = nodes[1];
    const std::string deadSlot = own[0].at(0);
    const auto killed = Clock::now();
    dead.daemon->kill9();
    if (!waitFor([&] { return heir.kubelet->devices(kHeld).at(deadSlot).health == "Healthy"; }, 120s))
        fail("the dead node's slot was never offered again at " + heir.name);
    auto taken = heir.kubelet->allocateIds("bench", "heir", "main", kHeld, {deadSlot});
    const double takeoverS = ms(Clock::now() - killed) / 1000;
    if (!taken.ok) fail("the dead node's slot could not be taken over: " + taken.error);

    // A storm: every live node asks for every slot of one device at once.
    std::vector<std::string> stormIds;
    for (const auto& [id, state] : heir.kubelet->devices(kStorm)) stormIds.push_back(id);
    std::atomic<int> granted{0};
    std::mutex samplesMutex;
    std::vector<double> stormSamples;
    std::vector<std::thread> threads;
    for (std::size_t k = 1; k < nodes.size(); ++k) {
        threads.emplace_back([&, k] {
            std::vector<std::string> order = stormIds;
            std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(k)));
            for (const std::string& id : order) {
                const auto start = Clock::now();
                auto result = nodes[k].kubelet->allocateIds("bench", "storm-" + id, "main", kStorm, {id});
                const double took = ms(Clock::now() - start);
                if (result.ok) ++granted;
                std::lock_guard lock(samplesMutex);
                stormSamples.push_back(took);
            }
        });
    }
    for (auto& t : threads) t.join();
    std::map<std::string, int> holders;
    for (std::size_t k = 1; k < nodes.size(); ++k) {
        for (const auto& allocation : nodes[k].kubelet->allocations())
            for (const std::string& id : allocation.deviceIds)
                if (id.starts_with("storm-")) ++holders[id];
    }
    int twice = 0;
    for (const auto& [id, n] : holders) twice += n > 1;

    std::printf(
        "cluster_scale_bench: %d daemons, one API double on loopback, leaseDurationSeconds %d; "
        "%d held shared slots per node (cameras each seen by two nodes); all offering %.1f s after the first "
        "started\n\n",
        nodeCount, leaseSeconds, kHeldDevices, startedS);
    std::printf(
        "Allocate taking a shared slot, %zu of them one after another: p50 %.2f ms, p99 %.2f ms, "
        "max %.2f ms; %d refused at the deadline and asked again\n",
        takes.size(), percentile(takes, 50), percentile(takes, 99), percentile(takes, 100), refusedTakes);
    std::printf(
        "\nAPI requests while nothing changes, over %d s: %.0f a minute in all, %.1f a minute per node\n",
        idleSeconds, total * 60 / idleSeconds, total * 60 / idleSeconds / nodeCount);
    for (const auto& [key, count] : idle)
        std::printf("  %-30s %10.0f a minute\n", key.c_str(), count * 60 / idleSeconds);
    std::printf("  one node (%s):", nodes[1].name.c_str());
    for (const auto& [key, count] : oneNode)
        std::printf(" %s %.1f/min;", key.c_str(), count * 60 / idleSeconds);
    std::printf(
        "\n\nper daemon at rest: RSS p50 %.1f MiB, max %.1f MiB; CPU p50 %.2f %%, max %.2f %% of one core\n",
        percentile(rss, 50), percentile(rss, 100), percentile(cpuShare, 50), percentile(cpuShare, 100));
    std::printf("\nnode killed -> one of its slots taken over on another node: %.1f s\n", takeoverS);
    std::printf(
        "\nstorm: %zu nodes ask for each of the %d slots of one device at once: %d granted, %d slot(s) "
        "given twice; Allocate p50 %.2f ms, p99 %.2f ms, max %.2f ms over %zu calls\n",
        nodes.size() - 1, stormCapacity, granted.load(), twice, percentile(stormSamples, 50),
        percentile(stormSamples, 99), percentile(stormSamples, 100), stormSamples.size());
    for (Node& node : nodes) node.daemon->stop();
}

}  // namespace
}  // namespace devlet::bench

int main(int argc, char** argv) {
    int nodes = 100, idle = 60, storm = 10, lease = 15;
    const std::string bad = devlet::bench::parseNumberFlags(argc, argv,
                                                            {{"--nodes", &nodes},
                                                             {"--idle-seconds", &idle},
                                                             {"--storm-capacity", &storm},
                                                             {"--lease-seconds", &lease}});
    if (!bad.empty() || nodes < 3) {
        std::fprintf(stderr,
                     "usage: cluster_scale_bench [--nodes N] [--idle-seconds S] [--storm-capacity C] "
                     "[--lease-seconds S]\n");
        return 2;
    }
    devlet::bench::useThisBuildsDevlet();
    devlet::bench::run(nodes, idle, storm, lease);
    return 0;
}
