// The API double's own behaviour that the fidelity tests do not reach through a client:
// its control endpoints (request counts, injected failures, pause, closing watches,
// compaction), connection refusal and restart, tokens with rules and client certificates,
// all through the C++ fixture the cluster tests use.

#include <chrono>
#include <cstdio>
#include <future>
#include <thread>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "tests/cluster/kube_double_fixture.h"
#include "tests/support/temp_dir.h"

namespace devlet::test {
namespace {

namespace json = boost::json;

const std::string kLeases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";

std::string leaseJson(const std::string& name, const std::string& holder) {
    return R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":")" + name +
           R"("},"spec":{"holderIdentity":")" + holder + R"(","leaseDurationSeconds":15}})";
}

json::object parse(const std::string& body) {
    boost::system::error_code ec;
    json::value v = json::parse(body, ec);
    return !ec && v.is_object() ? v.as_object() : json::object{};
}

// Polls until condition holds; false after a generous deadline.
template <typename Condition>
bool eventually(Condition condition) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
        if (condition()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
}

std::int64_t requestsField(const KubeApiDouble& api, const char* field) {
    const json::object answer = parse(api.control("GET", "requests").body);
    const json::value* v = answer.if_contains(field);
    if (!v) return -1;
    return v->is_bool() ? v->as_bool() : v->to_number<std::int64_t>();
}

TEST(KubeApiDouble, CountsRequestsPerVerbAndResource) {
    TempDir dir;
    KubeApiDouble api(dir.path());
    EXPECT_EQ(api.request("POST", kLeases, leaseJson("a", "node-1")).status, 201);
    EXPECT_EQ(api.request("GET", kLeases + "/a").status, 200);
    EXPECT_EQ(api.request("GET", kLeases).status, 200);
    EXPECT_EQ(api.requestCount("create leases"), 1);
    EXPECT_EQ(api.requestCount("get leases"), 1);
    EXPECT_EQ(api.requestCount("list leases"), 1);
    EXPECT_EQ(api.control("DELETE", "requests").status, 200);
    EXPECT_EQ(requestsField(api, "total"), 0);
}

TEST(KubeApiDouble, NamespacesNamedAtStartExist) {
    TempDir dir;
    KubeApiDouble::Options options;
    options.namespaces = {"devlet", "cameras"};
    KubeApiDouble api(dir.path(), options);
    EXPECT_EQ(api.request("GET", "/api/v1/namespaces/cameras").status, 200);
    EXPECT_EQ(
        api.request("POST", "/apis/coordination.k8s.io/v1/namespaces/devlet/leases", leaseJson("a", "n"))
            .status,
        201);
    EXPECT_EQ(
        api.request("POST", "/apis/coordination.k8s.io/v1/namespaces/absent/leases", leaseJson("a", "n"))
            .status,
        404);
}

TEST(KubeApiDouble, LeasesAreCreatedByPutAndNeedAVersionToUpdate) {
    TempDir dir;
    KubeApiDouble api(dir.path());
    EXPECT_EQ(api.request("PUT", kLeases + "/put", leaseJson("put", "node-1")).status, 201);
    EXPECT_EQ(api.request("PUT", kLeases + "/put", leaseJson("put", "node-2")).status, 422);
    const std::string pods = "/api/v1/namespaces/default/pods";
    EXPECT_EQ(api.request("PUT", pods + "/p",
                          R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},)"
                          R"("spec":{"containers":[{"name":"c","image":"i"}]}})")
                  .status,
              404);
}

TEST(KubeApiDouble, InjectedFailuresAnswerTheNextRequestsThenStop) {
    TempDir dir;
    KubeApiDouble api(dir.path());
    ASSERT_EQ(api.control("POST", "fail", R"({"count":2,"code":500,"verb":"create"})").status, 200);
    EXPECT_EQ(api.request("GET", kLeases).status, 200);  // not a create: not failed
    EXPECT_EQ(api.request("POST", kLeases, leaseJson("f", "n")).status, 500);
    EXPECT_EQ(api.request("POST", kLeases, leaseJson("f", "n")).status, 500);
    EXPECT_EQ(api.request("POST", kLeases, leaseJson("f", "n")).status, 201);
    ASSERT_EQ(api.control("POST", "fail", R"({"count":1,"code":429,"retryAfter":3})").status, 200);
    const auto throttled = api.request("GET", kLeases);
    EXPECT_EQ(throttled.status, 429);
    EXPECT_EQ(parse(throttled.body)["reason"], "TooManyRequests");
}

TEST(KubeApiDouble, PauseHoldsRequestsUntilResume) {
    TempDir dir;
    KubeApiDouble api(dir.path());
    ASSERT_EQ(api.control("POST", "pause").status, 200);
    auto held = std::async(std::launch::async, [&] { return api.request("GET", kLeases).status; });
    ASSERT_TRUE(eventually([&] { return requestsField(api, "heldRequests") == 1; }));
    ASSERT_EQ(api.control("POST", "resume").status, 200);
    EXPECT_EQ(held.get(), 200);
}

TEST(KubeApiDouble, CloseEndsEveryWatch) {
    TempDir dir;
    KubeApiDouble api(dir.path());
    auto watching = std::async(std::launch::async, [&] { return api.request("GET", kLeases + "?watch=1"); });
    ASSERT_TRUE(eventually([&] { return requestsField(api, "activeWatches") == 1; }));
    EXPECT_EQ(api.control("POST", "close").status, 200);
    watching.get();
    EXPECT_TRUE(eventually([&] { return requestsField(api, "activeWatches") == 0; }));
}

TEST(KubeApiDouble, WatchStreamsEventsAsJsonLines) {
    TempDir dir;
    KubeApiDouble api(dir.path());
    const auto created = parse(api.request("POST", kLeases, leaseJson("w", "node-1")).body);
    const std::string version(created.at("metadata").at("resourceVersion").as_string());
    ASSERT_EQ(api.request("PATCH", kLeases + "/w", R"({"spec":{"holderIdentity":"node-2"}})",
                          "application/merge-patch+json")
                  .status,
              200);
    ASSERT_EQ(api.request("DELETE", kLeases + "/w").status, 200);
    const auto stream =
        api.request("GET", kLeases + "?watch=true&timeoutSeconds=1&resourceVersion=" + version);
    EXPECT_EQ(stream.status, 200);
    EXPECT_NE(stream.body.find(R"({"type":"MODIFIED")"), std::string::npos);
    EXPECT_NE(stream.body.find(R"({"type":"DELETED")"), std::string::npos);
    EXPECT_EQ(stream.body.find(R"({"type":"ADDED")"), std::string::npos);  // before the version
    // After compaction, the same version is gone: a 410 ERROR event, and a list continuing
    // from it is 410 too.
    ASSERT_EQ(api.control("POST", "compact").status, 200);
    const auto expired = api.request("GET", kLeases + "?watch=1&timeoutSeconds=5&resourceVersion=" + version);
    EXPECT_NE(expired.body.find(R"({"type":"ERROR")"), std::string::npos);
    EXPECT_NE(expired.body.find(R"("code":410)"), std::string::npos);
    EXPECT_EQ(api.request("GET", kLeases + "?limit=1&continue=" + version + ":default/w").status, 410);
}

TEST(KubeApiDouble, RefusedConnectionsComeBackWithTheObjects) {
    TempDir dir;
    KubeApiDouble api(dir.path());
    ASSERT_EQ(api.request("POST", kLeases, leaseJson("kept", "node-1")).status, 201);
    api.refuseConnections();
    EXPECT_TRUE(eventually([&] { return api.request("GET", kLeases + "/kept").status == 0; }));
    api.acceptConnections();
    EXPECT_TRUE(eventually([&] { return api.request("GET", kLeases + "/kept").status == 200; }));
}

TEST(KubeApiDouble, RestartKeepsThePortAndLosesTheObjects) {
    TempDir dir;
    KubeApiDouble api(dir.path());
    const int port = api.port();
    ASSERT_EQ(api.request("POST", kLeases, leaseJson("lost", "node-1")).status, 201);
    api.restart();
    EXPECT_EQ(api.port(), port);
    EXPECT_EQ(api.request("GET", kLeases + "/lost").status, 404);
}

TEST(KubeApiDouble, TokensAndRulesDecideWhoMayDoWhat) {
    TempDir dir;
    KubeApiDouble::Options options;
    options.tokens = {"admin admin", "reader reader allow=leases:get,list,watch",
                      "creds node-a allow=*:*:* deny=secrets allow=secrets:get:camera-creds"};
    KubeApiDouble api(dir.path(), options);
    const std::string secrets = "/api/v1/namespaces/default/secrets";
    EXPECT_EQ(api.request("GET", kLeases, "", "", "nobody").status, 401);
    EXPECT_EQ(api.request("GET", kLeases, "", "", "").status, 401);
    EXPECT_EQ(api.request("GET", kLeases, "", "", "reader").status, 200);
    EXPECT_EQ(api.request("POST", kLeases, leaseJson("r", "n"), "application/json", "reader").status, 403);
    const std::string secret = R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"camera-creds"}})";
    ASSERT_EQ(api.request("POST", secrets, secret, "application/json", "admin").status, 201);
    // deny wins over allow: the narrow allow does not reopen what a deny closes.
    EXPECT_EQ(api.request("GET", secrets + "/camera-creds", "", "", "creds").status, 403);
    EXPECT_EQ(api.request("GET", kLeases, "", "", "creds").status, 200);
    // A token removed from the file stops working without a restart.
    writeFile(api.tokensPath(), "admin admin\n");
    EXPECT_EQ(api.request("GET", kLeases, "", "", "reader").status, 401);
}

TEST(KubeApiDouble, NamedRulesAllowOnlyThoseObjects) {
    TempDir dir;
    KubeApiDouble::Options options;
    options.tokens = {"admin admin", "node node-a allow=secrets:get,list:camera-creds allow=leases"};
    KubeApiDouble api(dir.path(), options);
    const std::string secrets = "/api/v1/namespaces/default/secrets";
    for (const char* name : {"camera-creds", "other"})
        ASSERT_EQ(api.request("POST", secrets,
                              std::string(R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":")") +
                                  name + R"("},"stringData":{"password":"x"}})",
                              "application/json", "admin")
                      .status,
                  201);
    EXPECT_EQ(api.request("GET", secrets + "/camera-creds", "", "", "node").status, 200);
    EXPECT_EQ(api.request("GET", secrets + "/other", "", "", "node").status, 403);
    EXPECT_EQ(api.request("GET", secrets, "", "", "node").status, 403);  // a list of everything
    // A list or watch selecting the granted name by metadata.name is granted, as in RBAC.
    EXPECT_EQ(
        api.request("GET", secrets + "?fieldSelector=metadata.name%3Dcamera-creds", "", "", "node").status,
        200);
    EXPECT_EQ(api.request("GET", secrets + "?fieldSelector=metadata.name%3Dother", "", "", "node").status,
              403);
    EXPECT_EQ(api.request("POST", kLeases, leaseJson("l", "n"), "application/json", "node").status, 201);
}

// A rule with namespaces is a Role's; without, a ClusterRole's (also cluster-scoped objects).
TEST(KubeApiDouble, NamespacedRulesStayInTheirNamespaces) {
    TempDir dir;
    KubeApiDouble::Options options;
    options.namespaces = {"other"};
    options.tokens = {"admin admin", "node node-a allow=leases:get,list,create::default allow=nodes:get"};
    KubeApiDouble api(dir.path(), options);
    const std::string other = "/apis/coordination.k8s.io/v1/namespaces/other/leases";
    EXPECT_EQ(api.request("GET", kLeases, "", "", "node").status, 200);
    EXPECT_EQ(api.request("POST", kLeases, leaseJson("l", "n"), "application/json", "node").status, 201);
    EXPECT_EQ(api.request("GET", other, "", "", "node").status, 403);
    EXPECT_EQ(api.request("POST", other, leaseJson("l", "n"), "application/json", "node").status, 403);
    ASSERT_EQ(api.request("POST", "/api/v1/nodes",
                          R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"node-a"}})",
                          "application/json", "admin")
                  .status,
              201);
    EXPECT_EQ(api.request("GET", "/api/v1/nodes/node-a", "", "", "node").status, 200);
}

TEST(KubeApiDouble, ClientCertificateSignedByTheTestCaAuthenticates) {
    TempDir dir;
    KubeApiDouble::Options options;
    options.clientCertificates = true;
    KubeApiDouble api(dir.path(), options);
    const std::string command = "/usr/bin/curl -sS -o /dev/null -w '%{http_code}' --cacert " +
                                api.caPath().string() + " --cert " + api.clientCertPath().string() +
                                " --key " + api.clientKeyPath().string() + " " + api.url() + kLeases;
    FILE* curl = popen(command.c_str(), "r");
    ASSERT_NE(curl, nullptr);
    char code[8] = {};
    ASSERT_NE(fgets(code, sizeof code, curl), nullptr);
    pclose(curl);
    EXPECT_STREQ(code, "200");
    EXPECT_EQ(api.request("GET", kLeases, "", "", "").status, 401);  // no certificate, no token
}

}  // namespace
}  // namespace devlet::test
