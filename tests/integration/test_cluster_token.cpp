// The kubeconfig's ServiceAccount token renewed before it expires: the real daemon starts
// with a token the API double made to last a minute, asks for a new one with the right the
// packaged Role grants (create on serviceaccounts/token, its own account only), goes on
// working after the double refuses the old token, and writes the new one into the
// kubeconfig (mode 0600, nothing else changed). The status shows when the token expires.
// A token already expired at start is named as the cause of the 401.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <boost/json.hpp>
#include <sys/stat.h>

#include "tests/cluster/kube_double_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/status/status_test_support.h"

namespace devlet::test {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

// What the packaged Role grants for the node Lease and the token, as the double's rules.
const std::string kNodeRules =
    "allow=leases:get,list,watch,create,update,delete::devlet "
    "allow=serviceaccounts/token:create:devlet-node:devlet";

std::string readAll(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

class ClusterTokenTest : public ::testing::Test {
protected:
    void SetUp() override {
        KubeApiDouble::Options options;
        // The issued tokens get the rules of their ServiceAccount's line.
        options.tokens = {"unused-token system:serviceaccount:devlet:devlet-node " + kNodeRules,
                          "admin-token admin"};
        try {
            api_ = std::make_unique<KubeApiDouble>(dir_.dir("api"), options);
        } catch (const std::exception& e) {
            GTEST_SKIP() << "the Kubernetes API double cannot start: " << e.what();
        }
        const auto account =
            api_->request("POST", "/api/v1/namespaces/devlet/serviceaccounts",
                          R"({"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"devlet-node"}})",
                          "application/json", "admin-token");
        ASSERT_EQ(account.status, 201) << account.body;
        daemon_ = std::make_unique<DaemonProcess>(dir_.dir("node-a"));
        kubelet_ =
            std::make_unique<KubeletSimulator>(daemon_->devicePluginDir(), daemon_->podResourcesSocket());
        port_ = freePort();
    }

    // A token of devlet-node as `kubectl create token` gets it, its lifetime cut to
    // `lifetime` by the server's maximum.
    std::string issueToken(int lifetime) {
        api_->control("POST", "token-lifetime",
                      "{\"maxExpirationSeconds\":" + std::to_string(lifetime) + "}");
        const auto answer =
            api_->request("POST", "/api/v1/namespaces/devlet/serviceaccounts/devlet-node/token",
                          R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest",)"
                          R"("spec":{"expirationSeconds":31536000}})",
                          "application/json", "admin-token");
        EXPECT_EQ(answer.status, 201) << answer.body;
        if (answer.status != 201) return "";
        return std::string(json::parse(answer.body).at("status").at("token").as_string());
    }

    // The kubeconfig as node-kubeconfig writes it, and the daemon started with it.
    void startWith(const std::string& token) {
        const char* script = std::getenv("DEVLET_NODE_KUBECONFIG");
        ASSERT_NE(script, nullptr) << "DEVLET_NODE_KUBECONFIG is not set (meson sets it)";
        kubeconfig_ = dir_.path() / "node-a.kubeconfig";
        const auto tokenFile = dir_.path() / "node.token";
        writeFile(tokenFile, token + "\n");
        const CommandResult written =
            runProgram({script, "--kubectl", "false", "--server", api_->url(), "--ca-file",
                        api_->caPath().string(), "--token-file", tokenFile.string(), kubeconfig_.string()});
        ASSERT_EQ(written.exitCode, 0) << written.output;
        std::filesystem::remove(tokenFile);
        writeFile(daemon_->settingsFile(), "cluster:\n  kubeconfig: " + kubeconfig_.string() +
                                               "\n  namespace: devlet\n  leaseDurationSeconds: 3\n");
        ASSERT_TRUE(kubelet_->start());
        daemon_->start({"--node-name", "node-a", "--listen", "127.0.0.1:" + std::to_string(port_)});
    }

    json::object cluster() const {
        const status::HttpAnswer answer = httpGet(port_, "/api/v1/status");
        boost::system::error_code ec;
        json::value doc = json::parse(answer.body, ec);
        if (ec || !doc.is_object() || !doc.as_object().contains("cluster")) return {};
        return doc.as_object().at("cluster").as_object();
    }

    json::object token() const {
        const json::object c = cluster();
        const json::value* t = c.if_contains("token");
        return t && t->is_object() ? t->as_object() : json::object{};
    }

    // The node Lease's renewTime, read as the administrator.
    std::string nodeLeaseRenewal() const {
        const auto answer =
            api_->request("GET", "/apis/coordination.k8s.io/v1/namespaces/devlet/leases/node.node-a", "",
                          "application/json", "admin-token");
        if (answer.status != 200) return "";
        const json::value doc = json::parse(answer.body);
        const json::value* renew = doc.at("spec").as_object().if_contains("renewTime");
        return renew && renew->is_string() ? std::string(renew->as_string()) : "";
    }

    int statusWith(const std::string& bearer) const {
        return api_
            ->request("GET", "/apis/coordination.k8s.io/v1/namespaces/devlet/leases", "", "application/json",
                      bearer)
            .status;
    }

    TempDir dir_;
    std::unique_ptr<KubeApiDouble> api_;
    std::unique_ptr<DaemonProcess> daemon_;
    std::unique_ptr<KubeletSimulator> kubelet_;
    std::filesystem::path kubeconfig_;
    unsigned short port_ = 0;
};

TEST_F(ClusterTokenTest, AShortLivedTokenIsRenewedBeforeItExpiresAndWrittenBack) {
    if (!api_) return;
    const std::string first = issueToken(60);
    ASSERT_FALSE(first.empty());
    startWith(first);
    if (HasFatalFailure()) return;
    const std::string before = readAll(kubeconfig_);
    ASSERT_NE(before.find(first), std::string::npos);

    // The status says when it expires, before any renewal.
    ASSERT_TRUE(eventually([&] { return token()["kind"] == "expiring"; }, 20s)) << daemon_->log();
    EXPECT_EQ(token()["serviceAccount"], "devlet/devlet-node");
    EXPECT_TRUE(token()["expiresAt"].is_string()) << json::serialize(token());
    const CommandResult status = runDevlet({"status", "--listen", "127.0.0.1:" + std::to_string(port_)});
    EXPECT_NE(status.output.find("cluster: token of ServiceAccount devlet/devlet-node expires "),
              std::string::npos)
        << status.output;
    const std::string metrics = httpGet(port_, "/metrics").body;
    EXPECT_NE(metrics.find("devlet_cluster_token_expiry_seconds "), std::string::npos) << metrics;

    // Renewed at 80 % of the minute, with the old token still valid.
    ASSERT_TRUE(daemon_->waitForLog("cluster token of ServiceAccount devlet/devlet-node renewed", 120s))
        << daemon_->log() << api_->log();
    std::string after;
    ASSERT_TRUE(eventually([&] { return (after = readAll(kubeconfig_)) != before; }, 20s));
    // Only the token changed.
    const auto at = before.find(first);
    const std::string head = before.substr(0, at), tail = before.substr(at + first.size());
    ASSERT_EQ(after.substr(0, head.size()), head);
    ASSERT_GE(after.size(), head.size() + tail.size());
    ASSERT_EQ(after.substr(after.size() - tail.size()), tail);
    const std::string second = after.substr(head.size(), after.size() - head.size() - tail.size());
    EXPECT_NE(second, first);
    EXPECT_EQ(second.find_first_of(" \n\t"), std::string::npos);
    struct stat info {};
    ASSERT_EQ(::stat(kubeconfig_.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 07777, 0600u);
    EXPECT_EQ(statusWith(second), 200);

    // The double refuses the old token a minute after it expires, as the API server does;
    // the daemon goes on with the new one.
    ASSERT_TRUE(eventually([&] { return statusWith(first) == 401; }, 180s));
    const std::string renewal = nodeLeaseRenewal();
    ASSERT_TRUE(eventually([&] { return nodeLeaseRenewal() != renewal && !nodeLeaseRenewal().empty(); }, 20s))
        << daemon_->log() << api_->log();
    ASSERT_TRUE(eventually([&] { return cluster()["reachable"] == true; }, 20s)) << daemon_->log();
    EXPECT_GE(token()["renewals"].to_number<int>(), 1);
    EXPECT_TRUE(token()["lastRenewal"].is_string());
    EXPECT_TRUE(daemon_->running());
    // Never in a log.
    EXPECT_EQ(daemon_->log().find(first), std::string::npos);
    EXPECT_EQ(daemon_->log().find(second), std::string::npos);
    EXPECT_EQ(api_->log().find("user=system:serviceaccount:devlet:devlet-node 401"), std::string::npos)
        << api_->log();
    EXPECT_EQ(api_->log().find("user=system:serviceaccount:devlet:devlet-node 403"), std::string::npos)
        << api_->log();
}

TEST_F(ClusterTokenTest, ATokenForAnotherServiceAccountIsRefused) {
    if (!api_) return;
    const std::string mine = issueToken(3600);
    ASSERT_FALSE(mine.empty());
    const auto other =
        api_->request("POST", "/api/v1/namespaces/devlet/serviceaccounts",
                      R"({"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"admin-robot"}})",
                      "application/json", "admin-token");
    ASSERT_EQ(other.status, 201) << other.body;
    const std::string body = R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}})";
    const auto refused = api_->request("POST", "/api/v1/namespaces/devlet/serviceaccounts/admin-robot/token",
                                       body, "application/json", mine);
    EXPECT_EQ(refused.status, 403) << refused.body;
    EXPECT_NE(refused.body.find("cannot create resource \\\"serviceaccounts/token\\\""), std::string::npos)
        << refused.body;
    const auto own = api_->request("POST", "/api/v1/namespaces/devlet/serviceaccounts/devlet-node/token",
                                   body, "application/json", mine);
    EXPECT_EQ(own.status, 201) << own.body;
}

TEST_F(ClusterTokenTest, ATokenExpiredAtStartIsNamedAsTheCause) {
    if (!api_) return;
    // A JWT of devlet-node whose exp has passed (the double no longer knows it: 401).
    const std::string expired =
        "eyJhbGciOiJSUzI1NiJ9."
        // {"exp":1600000000,"iat":1599996400,"sub":"system:serviceaccount:devlet:devlet-node"}
        "eyJleHAiOjE2MDAwMDAwMDAsImlhdCI6MTU5OTk5NjQwMCwic3ViIjoic3lzdGVtOnNlcnZpY2VhY2NvdW50OmRldmxldDpk"
        "ZXZsZXQtbm9kZSJ9.c2ln";
    startWith(expired);
    if (HasFatalFailure()) return;
    ASSERT_TRUE(daemon_->waitForLog("the kubeconfig's token expired at 2020-09-13T12:26:40Z", 20s))
        << daemon_->log();
    ASSERT_TRUE(eventually(
        [&] {
            const json::object c = cluster();
            const json::value* e = c.if_contains("lastError");
            return e && e->is_string() && e->as_string().find("401") != std::string::npos &&
                   e->as_string().find("the kubeconfig's token expired at") != std::string::npos;
        },
        20s))
        << json::serialize(cluster()) << daemon_->log();
    EXPECT_TRUE(daemon_->running());
}

}  // namespace
}  // namespace devlet::test
