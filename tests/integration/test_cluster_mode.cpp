// The real daemon in cluster mode against an HTTPS API server with a test CA: it loads the
// kubeconfig, watches the namespace's Leases, says on the status API whether the server
// answers, and refuses to start with a kubeconfig others can read.
#include <boost/json.hpp>
#include <sys/stat.h>

#include "tests/cluster/tls_api_server.h"
#include "tests/integration/fixture.h"
#include "tests/status/status_test_support.h"

namespace devlet::test {
namespace {

namespace json = boost::json;

const std::string kLeases = "/apis/coordination.k8s.io/v1/namespaces/edge/leases";

class ClusterModeTest : public DaemonTest {
protected:
    void SetUp() override {
        DaemonTest::SetUp();
        certificates_ = makeTestCertificates(dir_.dir("pki"));
        server_ = std::make_unique<TlsApiServer>(certificates_, std::set<std::string>{"node-token"});
        server_->addCollection(kLeases);
        port_ = freePort();
    }

    std::string writeKubeconfig(mode_t mode) {
        const std::string ca = dir_.file("pki/ca-only.pem", certificates_.caPem);
        const std::string path =
            dir_.file("kubeconfig",
                      "apiVersion: v1\nkind: Config\ncurrent-context: edge\n"
                      "contexts:\n- name: edge\n  context: {cluster: test, user: devlet}\n"
                      "clusters:\n- name: test\n  cluster:\n    server: https://127.0.0.1:" +
                          std::to_string(server_->port()) + "\n    certificate-authority: " + ca +
                          "\nusers:\n- name: devlet\n  user:\n    token: node-token\n");
        ::chmod(path.c_str(), mode);
        writeFile(daemon_->settingsFile(), "cluster:\n  kubeconfig: " + path + "\n  namespace: edge\n");
        return path;
    }

    json::object cluster() {
        const status::HttpAnswer answer = httpGet(port_, "/api/v1/status");
        boost::system::error_code ec;
        json::value doc = json::parse(answer.body, ec);
        if (ec || !doc.is_object() || !doc.as_object().contains("cluster")) return {};
        return doc.as_object().at("cluster").as_object();
    }

    TestCertificates certificates_;
    std::unique_ptr<TlsApiServer> server_;
    unsigned short port_ = 0;
};

TEST_F(ClusterModeTest, WatchesLeasesAndShowsTheApiServerReachable) {
    writeKubeconfig(0600);
    daemon_->start({"--listen", "127.0.0.1:" + std::to_string(port_)});
    ASSERT_TRUE(daemon_->waitForLog("cluster API reachable; watching Leases in namespace edge", 20s))
        << daemon_->log();
    ASSERT_TRUE(eventually([&] {
        json::object c = cluster();
        return c.contains("reachable") && c.at("reachable") == true && c.at("watchCurrent") == true;
    }));
    EXPECT_EQ(cluster().at("namespace"), "edge");
    const std::string metrics = httpGet(port_, "/metrics").body;
    EXPECT_NE(metrics.find("devlet_cluster_api_up 1"), std::string::npos) << metrics;
    // One list, then a watch, and this node's own Lease written (its heartbeat, every third
    // of the Lease duration): nothing is polled.
    std::vector<RecordedRequest> requests;
    for (const auto& request : server_->requests())
        if (request.method == "GET") requests.push_back(request);
    ASSERT_EQ(requests.size(), 2u);
    EXPECT_EQ(requests[0].target.rfind(kLeases + "?limit=500", 0), 0u) << requests[0].target;
    EXPECT_NE(requests[1].target.find("watch=1"), std::string::npos) << requests[1].target;
    for (const auto& request : server_->requests()) {
        if (request.method == "GET") continue;
        EXPECT_TRUE((request.method == "POST" && request.target == kLeases) ||
                    (request.method == "PUT" && request.target.rfind(kLeases + "/node.", 0) == 0))
            << request.method << " " << request.target;
    }

    // The server refuses for a while: devlet says so, then recovers by itself.
    server_->failNext(503, 3);
    server_->endWatches();
    ASSERT_TRUE(daemon_->waitForLog("cluster API unreachable", 20s)) << daemon_->log();
    ASSERT_TRUE(eventually([&] {
        const std::string log = daemon_->log();
        return log.rfind("cluster API reachable") > log.find("cluster API unreachable");
    }));
    EXPECT_EQ(daemon_->log().find("node-token"), std::string::npos);
}

TEST_F(ClusterModeTest, RefusesAKubeconfigOthersCanRead) {
    writeKubeconfig(0644);
    daemon_->start({"--listen", "127.0.0.1:" + std::to_string(port_)});
    EXPECT_EQ(daemon_->wait(), 1);
    EXPECT_NE(daemon_->log().find("cluster mode: kubeconfig: "), std::string::npos) << daemon_->log();
    EXPECT_NE(daemon_->log().find("(mode 0644)"), std::string::npos) << daemon_->log();
    EXPECT_TRUE(server_->requests().empty());
}

TEST_F(ClusterModeTest, WithoutAKubeconfigNothingTouchesTheApi) {
    daemon_->start({"--listen", "127.0.0.1:" + std::to_string(port_)});
    ASSERT_TRUE(eventually([&] { return cluster().contains("enabled"); }));
    EXPECT_EQ(cluster().at("enabled"), false);
    EXPECT_EQ(httpGet(port_, "/metrics").body.find("devlet_cluster"), std::string::npos);
    EXPECT_EQ(daemon_->log().find("cluster"), std::string::npos) << daemon_->log();
    EXPECT_TRUE(server_->requests().empty());
}

}  // namespace
}  // namespace devlet::test
