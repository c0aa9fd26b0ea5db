// The API client and the informer against the Kubernetes API double (kube_api_double/):
// a kubeconfig the double's tools write, the answers a real API server gives (409s, 403,
// 422), injected 429s, bookmarks, connections closed under a watch, and compaction.
#include <chrono>
#include <functional>
#include <optional>

#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "cluster/api_client.h"
#include "tests/cluster/api_client_test_support.h"
#include "tests/cluster/kube_double_fixture.h"
#include "tests/support/temp_dir.h"

namespace devlet::kube {
namespace {

namespace json = boost::json;

class ApiClientDoubleTest : public ::testing::Test, protected ApiClientLoop {
protected:
    explicit ApiClientDoubleTest(test::KubeApiDouble::Options options = withBookmarks())
        : api(dir.path() / "double", std::move(options)) {}

    static test::KubeApiDouble::Options withBookmarks() {
        test::KubeApiDouble::Options options;
        options.tokens = {"devlet-token devlet", "reader-token reader allow=leases:get,list,watch"};
        options.extraArgs = {"--bookmark-interval", "1"};
        return options;
    }

    Kubeconfig kubeconfig(const std::string& token = "devlet-token") {
        auto load =
            loadKubeconfig(api.writeKubeconfig(dir.path() / ("kubeconfig-" + token), token, "devlet"));
        EXPECT_TRUE(load.config) << load.error;
        return load.config.value_or(Kubeconfig{});
    }

    test::TempDir dir;
    test::KubeApiDouble api;
};

TEST_F(ApiClientDoubleTest, TakesAndReleasesALeaseAsTheApiServerAnswers) {
    ApiClient client(loop, kubeconfig(), fastRetries());
    auto created =
        call([&](auto done) { client.create(kLeases, lease("cam-0", "node-a"), std::move(done)); });
    ASSERT_EQ(created.code, 201) << created.describe();
    EXPECT_TRUE(call([&](auto done) {
                    client.create(kLeases, lease("cam-0", "node-b"), std::move(done));
                }).alreadyExists());

    json::object mine = created.body.as_object();
    mine["spec"].as_object()["holderIdentity"] = "node-a-renewed";
    auto renewed = call([&](auto done) { client.replace(kLeases + "/cam-0", mine, std::move(done)); });
    ASSERT_TRUE(renewed.ok()) << renewed.describe();
    // The version read before the renewal is stale now.
    auto stale = call([&](auto done) { client.replace(kLeases + "/cam-0", mine, std::move(done)); });
    EXPECT_TRUE(stale.conflict()) << stale.describe();

    const std::string version(renewed.body.at("metadata").at("resourceVersion").as_string());
    auto wrongDelete = call([&](auto done) {
        client.remove(kLeases + "/cam-0", {.resourceVersion = "1", .uid = ""}, std::move(done));
    });
    EXPECT_TRUE(wrongDelete.conflict()) << wrongDelete.describe();
    auto deleted = call([&](auto done) {
        client.remove(kLeases + "/cam-0", {.resourceVersion = version, .uid = ""}, std::move(done));
    });
    EXPECT_TRUE(deleted.ok()) << deleted.describe();
    EXPECT_TRUE(call([&](auto done) { client.get(kLeases + "/cam-0", std::move(done)); }).notFound());
}

TEST_F(ApiClientDoubleTest, AppliesServerSide) {
    ApiClient client(loop, kubeconfig(), fastRetries());
    auto applied = call([&](auto done) {
        client.apply(kLeases + "/cam-0", lease("cam-0", "node-a"), "devlet-node-a", false, std::move(done));
    });
    ASSERT_EQ(applied.code, 201) << applied.describe();
    EXPECT_EQ(holderOf(applied.body.as_object()), "node-a");
    // Another manager's different value conflicts unless forced.
    auto other = call([&](auto done) {
        client.apply(kLeases + "/cam-0", lease("cam-0", "node-b"), "other", false, std::move(done));
    });
    EXPECT_TRUE(other.conflict()) << other.describe();
    auto forced = call([&](auto done) {
        client.apply(kLeases + "/cam-0", lease("cam-0", "node-b"), "other", true, std::move(done));
    });
    EXPECT_TRUE(forced.ok()) << forced.describe();
    auto invalid =
        call([&](auto done) { client.create(kLeases, lease("Not_A_Name", "x"), std::move(done)); });
    EXPECT_EQ(invalid.code, 422);
    EXPECT_EQ(invalid.reason, "Invalid");
}

TEST_F(ApiClientDoubleTest, ForbiddenAndUnauthorizedAreAnswersNotRetries) {
    ApiClient reader(loop, kubeconfig("reader-token"), fastRetries());
    auto refused =
        call([&](auto done) { reader.create(kLeases, lease("cam-0", "node-a"), std::move(done)); });
    EXPECT_EQ(refused.code, 403);
    EXPECT_EQ(refused.reason, "Forbidden");
    EXPECT_EQ(refused.attempts, 1);
    ApiClient stranger(loop, kubeconfig("unknown-token"), fastRetries());
    EXPECT_EQ(call([&](auto done) { stranger.list(kLeases, "", std::move(done)); }).code, 401);
}

TEST_F(ApiClientDoubleTest, TooManyRequestsWaitsForRetryAfter) {
    ApiClient client(loop, kubeconfig(), fastRetries());
    ASSERT_EQ(api.control("POST", "fail",
                          R"({"count":2,"code":429,"retryAfter":1,"verb":"create","resource":"leases"})")
                  .status,
              200);
    auto created =
        call([&](auto done) { client.create(kLeases, lease("cam-0", "node-a"), std::move(done)); });
    EXPECT_EQ(created.code, 201) << created.describe();
    EXPECT_EQ(created.attempts, 3);
    EXPECT_EQ(api.requestCount("create leases"), 3);
}

struct Recorder {
    std::vector<std::string> events;
    int synced = 0;
    Informer::Handlers handlers() {
        Informer::Handlers h;
        h.added = [this](const json::object& o) { events.push_back("added " + name(o) + " " + holderOf(o)); };
        h.modified = [this](const json::object& o) {
            events.push_back("modified " + name(o) + " " + holderOf(o));
        };
        h.deleted = [this](const json::object& o) { events.push_back("deleted " + name(o)); };
        h.synced = [this] { ++synced; };
        return h;
    }
    static std::string name(const json::object& o) {
        return std::string(o.at("metadata").at("name").as_string());
    }
};

TEST_F(ApiClientDoubleTest, InformerFollowsBookmarksAndResumesAfterClosedConnections) {
    ApiClient client(loop, kubeconfig(), fastRetries());
    ApiClient writer(loop, kubeconfig(), fastRetries());
    Recorder recorder;
    Informer informer(client, kLeases, recorder.handlers(), {});
    informer.start();
    ASSERT_TRUE(runUntil([&] { return informer.state().watchCurrent; }));
    ASSERT_EQ(
        call([&](auto done) { writer.create(kLeases, lease("cam-0", "node-a"), std::move(done)); }).code,
        201);
    ASSERT_TRUE(runUntil([&] { return recorder.events.size() == 1; }));
    // Writes elsewhere move the version on; a bookmark (every second here) brings it along.
    ASSERT_EQ(api.request("POST", "/api/v1/namespaces/devlet/secrets", R"({"metadata":{"name":"s"}})").status,
              201);
    const std::string before = informer.state().resourceVersion;
    ASSERT_TRUE(runUntil([&] { return informer.state().resourceVersion != before; }));

    // Every connection closed under the watch; meanwhile more happens.
    ASSERT_EQ(api.control("POST", "close").status, 200);
    ASSERT_EQ(
        call([&](auto done) { writer.create(kLeases, lease("cam-1", "node-b"), std::move(done)); }).code,
        201);
    auto current = call([&](auto done) { writer.get(kLeases + "/cam-0", std::move(done)); }).body.as_object();
    current["spec"].as_object()["holderIdentity"] = "node-c";
    ASSERT_TRUE(call([&](auto done) { writer.replace(kLeases + "/cam-0", current, std::move(done)); }).ok());
    ASSERT_TRUE(runUntil([&] { return recorder.events.size() >= 3 && informer.state().watchCurrent; }));
    EXPECT_EQ(recorder.events, (std::vector<std::string>{"added cam-0 node-a", "added cam-1 node-b",
                                                         "modified cam-0 node-c"}));
    EXPECT_EQ(informer.state().lists, 1u);
    EXPECT_EQ(api.requestCount("list leases"), 1);
}

TEST_F(ApiClientDoubleTest, InformerListsAgainWhenTheWatchExpires) {
    ApiClient client(loop, kubeconfig(), fastRetries());
    ApiClient writer(loop, kubeconfig(), fastRetries());
    ASSERT_EQ(call([&](auto done) { writer.create(kLeases, lease("keep", "node-a"), std::move(done)); }).code,
              201);
    ASSERT_EQ(call([&](auto done) { writer.create(kLeases, lease("drop", "node-a"), std::move(done)); }).code,
              201);
    Recorder recorder;
    Informer informer(client, kLeases, recorder.handlers(), {});
    informer.start();
    ASSERT_TRUE(runUntil([&] { return informer.state().watchCurrent && recorder.synced == 1; }));
    recorder.events.clear();
    ASSERT_EQ(api.request("DELETE", kLeases + "/drop").status, 200);
    ASSERT_EQ(
        api.request("POST", kLeases, R"({"metadata":{"name":"new"},"spec":{"holderIdentity":"node-b"}})")
            .status,
        201);
    ASSERT_TRUE(runUntil([&] { return recorder.events.size() == 2; }));
    // The history is dropped and the running watch gets an ERROR event with 410: the
    // informer lists again and, nothing having changed since, reports nothing twice.
    ASSERT_EQ(api.control("POST", "compact", R"({"expireWatches":true})").status, 200);
    ASSERT_TRUE(runUntil([&] { return informer.state().lists == 2 && informer.state().watchCurrent; }));
    EXPECT_EQ(recorder.events, (std::vector<std::string>{"deleted drop", "added new node-b"}));
    EXPECT_EQ(recorder.synced, 2);
}

}  // namespace
}  // namespace devlet::kube
