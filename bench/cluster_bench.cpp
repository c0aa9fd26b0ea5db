// Cluster mode's cost: two real daemons (node-a, node-b), each with its own kubelet
// simulator, against the Kubernetes API double on loopback. Prints Allocate p50/p99 of a
// shared slot (one Lease taken through the API) beside a node-local one, the time from a
// slot taken on node-a to Unhealthy at node-b's kubelet, and the API requests a minute
// while nothing changes (with slots held: renewals and watches only). Figures only.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
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

constexpr char kShared[] = "akri.sh/cams";
constexpr char kLocal[] = "akri.sh/local";

struct Node {
    std::unique_ptr<test::DaemonProcess> daemon;
    std::unique_ptr<test::KubeletSimulator> kubelet;
};

std::string echoConfiguration(const std::string& name, bool shared, int capacity) {
    return "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: " + name +
           "\nspec:\n  discoveryHandler:\n    name: debugEcho\n    discoveryDetails: |\n      descriptions: "
           "[" +
           name + "0]\n" + (shared ? "      shared: true\n" : "      shared: false\n") +
           "  capacity: " + std::to_string(capacity) + "\n";
}

[[noreturn]] void fail(const std::string& why) {
    std::fprintf(stderr, "cluster_bench: %s\n", why.c_str());
    std::exit(1);
}

bool waitFor(test::KubeletSimulator& kubelet, const std::function<bool()>& predicate,
             std::chrono::milliseconds limit = 30s) {
    const auto deadline = Clock::now() + limit;
    while (!predicate()) {
        if (Clock::now() > deadline) return false;
        std::this_thread::sleep_for(100us);
    }
    (void)kubelet;
    return true;
}

std::map<std::string, double> requestCounts(const test::KubeApiDouble& api) {
    std::map<std::string, double> counts;
    const auto answer = api.control("GET", "requests");
    boost::system::error_code ec;
    const json::value doc = json::parse(answer.body, ec);
    if (ec || !doc.is_object()) return counts;
    for (const auto& [key, value] : doc.at("counts").as_object())
        counts[std::string(key)] = value.to_number<double>();
    return counts;
}

void run(int slots, int idleSeconds) {
    test::TempDir dir;
    test::KubeApiDouble api(dir.dir("api"));
    std::vector<Node> nodes;
    for (const std::string name : {"node-a", "node-b"}) {
        Node node;
        node.daemon = std::make_unique<test::DaemonProcess>(dir.dir(name));
        node.kubelet = std::make_unique<test::KubeletSimulator>(node.daemon->devicePluginDir(),
                                                                node.daemon->podResourcesSocket());
        const auto kubeconfig = api.writeKubeconfig(dir.path() / (name + ".kubeconfig"), api.token());
        test::writeFile(node.daemon->settingsFile(),
                        "cluster:\n  kubeconfig: " + kubeconfig.string() + "\n  namespace: devlet\n");
        test::writeFile(node.daemon->confDir() / "cams.yaml", echoConfiguration("cams", true, slots));
        test::writeFile(node.daemon->confDir() / "local.yaml", echoConfiguration("local", false, slots));
        if (!node.kubelet->start()) fail("the kubelet simulator cannot start");
        node.daemon->start({"--node-name", name});
        nodes.push_back(std::move(node));
    }
    auto healthy = [](test::KubeletSimulator& kubelet, const std::string& resource) {
        std::size_t count = 0;
        for (const auto& [id, state] : kubelet.devices(resource)) count += state.health == "Healthy";
        return count;
    };
    for (Node& node : nodes) {
        if (!waitFor(*node.kubelet, [&] {
                return healthy(*node.kubelet, kShared) == static_cast<std::size_t>(slots) &&
                       healthy(*node.kubelet, kLocal) == static_cast<std::size_t>(slots);
            }))
            fail("the slots were not offered:\n" + node.daemon->log());
    }
    Node& a = nodes[0];
    Node& b = nodes[1];

    auto allocateAll = [&](const std::string& resource, std::vector<double>* toUnhealthyAtB) {
        std::vector<double> samples;
        std::vector<std::string> ids;
        for (const auto& [id, state] : a.kubelet->devices(resource)) ids.push_back(id);
        int k = 0;
        for (const std::string& id : ids) {
            const auto start = Clock::now();
            auto result = a.kubelet->allocateIds("bench", resource.substr(7) + "-" + std::to_string(k++),
                                                 "main", resource, {id});
            const auto answered = Clock::now();
            if (!result.ok) fail("Allocate of " + id + " refused: " + result.error);
            samples.push_back(ms(answered - start));
            if (toUnhealthyAtB) {
                if (!waitFor(*b.kubelet,
                             [&] { return b.kubelet->devices(resource).at(id).health == "Unhealthy"; }))
                    fail(id + " never became Unhealthy at node-b");
                toUnhealthyAtB->push_back(ms(Clock::now() - start));
            }
        }
        return samples;
    };
    const std::vector<double> local = allocateAll(kLocal, nullptr);
    std::vector<double> toB;
    const std::vector<double> shared = allocateAll(kShared, &toB);

    // Nothing changes for a while: what reaches the API is counted.
    std::this_thread::sleep_for(2s);
    api.control("DELETE", "requests");
    std::this_thread::sleep_for(std::chrono::seconds(idleSeconds));
    const std::map<std::string, double> idle = requestCounts(api);
    double total = 0;
    for (const auto& [key, count] : idle) total += count;

    std::printf(
        "cluster_bench: 2 nodes, %d slots of one shared and one node-local device, API double on "
        "loopback\n\n",
        slots);
    std::printf("%-58s %10s %10s\n", "figure", "p50", "p99");
    std::printf("%-58s %8.2f ms %8.2f ms\n", "Allocate of a node-local slot", percentile(local, 50),
                percentile(local, 99));
    std::printf("%-58s %8.2f ms %8.2f ms\n", "Allocate of a shared slot (one Lease taken)",
                percentile(shared, 50), percentile(shared, 99));
    std::printf("%-58s %8.2f ms %8.2f ms\n", "slot taken on node-a -> Unhealthy at node-b's kubelet",
                percentile(toB, 50), percentile(toB, 99));
    std::printf("\nAPI requests while nothing changes, %d Leases held, over %d s: %.0f a minute\n", slots,
                idleSeconds, total * 60 / idleSeconds);
    for (const auto& [key, count] : idle)
        std::printf("  %-30s %8.0f a minute\n", key.c_str(), count * 60 / idleSeconds);
    for (Node& node : nodes) node.daemon->stop();
}

}  // namespace
}  // namespace devlet::bench

int main(int argc, char** argv) {
    int slots = 100;
    int idle = 30;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        const std::optional<int> value = devlet::bench::parseInt(argv[i + 1]);
        if (flag == "--slots" && value)
            slots = *value;
        else if (flag == "--idle-seconds" && value)
            idle = *value;
        else {
            std::fprintf(stderr, "usage: cluster_bench [--slots N] [--idle-seconds S]\n");
            return 2;
        }
    }
    devlet::bench::run(slots, idle);
    return 0;
}
