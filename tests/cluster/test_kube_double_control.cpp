// The API double's own behaviour that the fidelity tests do not reach through a client:
// its control endpoints (request counts, injected failures, pause, closing watches,
// compaction, partitions of one client, silent watches), resourceVersions it has not
// reached, bookmarks, connection refusal and restart, tokens with rules and client
// certificates, all through the C++ fixture the cluster tests use.

#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <future>
#include <string>
#include <thread>
#include <vector>

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

// Each node its own token and user, as the partition tests need; admin's is the fixture's.
KubeApiDouble::Options twoNodes(std::vector<std::string> extraArgs = {}) {
    KubeApiDouble::Options options;
    options.tokens = {"admin-token admin", "node-a-token node-a", "node-b-token node-b"};
    options.extraArgs = std::move(extraArgs);
    return options;
}

std::string currentVersion(const KubeApiDouble& api) {
    const json::object answer = parse(api.control("GET", "requests").body);
    const json::value* v = answer.if_contains("resourceVersion");
    return v && v->is_string() ? std::string(v->as_string()) : "";
}

// The body of a watch stays as it is for `quiet` (longer than a bookmark interval of 1 s).
bool staysUnchanged(KubeApiDouble::OpenRequest& watch, std::chrono::milliseconds quiet) {
    const std::string before = watch.body();
    std::this_thread::sleep_for(quiet);
    return watch.body() == before;
}

const auto kQuiet = std::chrono::milliseconds(2500);
const auto kLong = std::chrono::seconds(30);

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

// As upstream (1.27+): fieldValidation=Strict refuses a field the schema lacks, the default
// (Warn) and Ignore drop it; a server-side apply refuses it whatever fieldValidation says.
TEST(KubeApiDouble, UnknownFieldsFollowFieldValidation) {
    TempDir dir;
    KubeApiDouble api(dir.path());
    const std::string pods = "/api/v1/namespaces/default/pods";
    auto pod = [](const std::string& name) {
        return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
               R"(","labels":{"any-key":"x"}},"spec":{"nodeSelector":{"free-key":"y"},)"
               R"("containers":[{"name":"c","image":"i","foo":1,"resources":{"limts":{}}}]}})";
    };
    const auto strict = api.request("POST", pods + "?fieldValidation=Strict", pod("strict"));
    EXPECT_EQ(strict.status, 400) << strict.body;
    EXPECT_NE(strict.body.find(R"(Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: )"
                               R"(unknown field \"spec.containers[0].foo\", )"
                               R"(unknown field \"spec.containers[0].resources.limts\")"),
              std::string::npos)
        << strict.body;
    for (const char* validation : {"", "?fieldValidation=Warn", "?fieldValidation=Ignore"}) {
        const std::string name = std::string("pruned") + (validation[0] ? validation + 17 : "");
        std::string lower = name;
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const auto made = api.request("POST", pods + validation, pod(lower));
        ASSERT_EQ(made.status, 201) << made.body;
        const json::value got = json::parse(made.body);
        const json::object& container = got.at("spec").at("containers").as_array()[0].as_object();
        EXPECT_FALSE(container.contains("foo")) << validation;
        EXPECT_FALSE(container.at("resources").as_object().contains("limts")) << validation;
        EXPECT_EQ(got.at("spec").at("nodeSelector").at("free-key"), "y");
        EXPECT_EQ(got.at("metadata").at("labels").at("any-key"), "x");
    }
    EXPECT_EQ(api.request("POST", pods + "?fieldValidation=Loose", pod("loose")).status, 400);

    const auto applied = api.request("PATCH", pods + "/applied?fieldManager=m&fieldValidation=Strict",
                                     pod("applied"), "application/apply-patch+yaml");
    EXPECT_EQ(applied.status, 500) << applied.body;
    // As the API server names them in an apply: list items by their keys (the body is JSON,
    // so the quotes are escaped), and an object read only up to its first unknown field
    // (the container's `resources` comes after `foo`).
    EXPECT_NE(applied.body.find(R"(failed to create typed patch object (default/applied; /v1, Kind=Pod): )"
                                R"(.spec.containers[name=\"c\"].foo: field not declared in schema)"),
              std::string::npos)
        << applied.body;
    EXPECT_EQ(applied.body.find("limts"), std::string::npos) << applied.body;
    EXPECT_EQ(api.request("GET", pods + "/applied").status, 404);
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
    api.pause();
    auto held = std::async(std::launch::async, [&] { return api.request("GET", kLeases).status; });
    ASSERT_TRUE(eventually([&] { return requestsField(api, "heldRequests") == 1; }));
    api.resume();
    EXPECT_EQ(held.get(), 200);
}

TEST(KubeApiDouble, PartitionHoldsOnlyThatUsersRequests) {
    TempDir dir;
    KubeApiDouble api(dir.path(), twoNodes());
    api.partition("node-a");
    auto held = api.startRequest("GET", kLeases, "node-a-token");
    ASSERT_TRUE(eventually([&] { return requestsField(api, "heldRequests") == 1; }));
    EXPECT_EQ(api.request("GET", kLeases, "", "", "node-b-token").status, 200);
    EXPECT_EQ(
        api.request("POST", kLeases, leaseJson("b", "node-b"), "application/json", "node-b-token").status,
        201);
    EXPECT_TRUE(held.running());
    EXPECT_EQ(held.status(), 0);  // no answer, not even a header
    EXPECT_EQ(requestsField(api, "heldRequests"), 1);
}

TEST(KubeApiDouble, ControlEndpointsAnswerAPartitionedUser) {
    TempDir dir;
    KubeApiDouble api(dir.path(), twoNodes());
    api.partition("node-a");
    EXPECT_EQ(api.request("GET", "/_double/requests", "", "", "node-a-token").status, 200);
    EXPECT_EQ(api.request("POST", "/_double/heal", "{}", "application/json", "node-a-token").status, 200);
    EXPECT_EQ(api.request("GET", kLeases, "", "", "node-a-token").status, 200);
}

TEST(KubeApiDouble, HealAnswersHeldRequestsInTheirOrder) {
    TempDir dir;
    KubeApiDouble api(dir.path(), twoNodes());
    api.partition("node-a");
    auto create = api.startRequest("POST", kLeases, "node-a-token", leaseJson("ordered", "node-a"));
    ASSERT_TRUE(eventually([&] { return requestsField(api, "heldRequests") == 1; }));
    auto update =
        api.startRequest("PUT", kLeases + "/ordered", "node-a-token", leaseJson("ordered", "second"));
    ASSERT_TRUE(eventually([&] { return requestsField(api, "heldRequests") == 2; }));
    api.heal("node-a");
    ASSERT_TRUE(create.wait(kLong));
    ASSERT_TRUE(update.wait(kLong));
    EXPECT_EQ(create.status(), 201);
    // Answered after the create: a replace of an existing Lease without a resourceVersion
    // (422), not the create a PUT of a missing one would be (201).
    EXPECT_EQ(update.status(), 422) << update.body();
    EXPECT_EQ(parse(api.request("GET", kLeases + "/ordered").body)["spec"].at("holderIdentity"), "node-a");
    EXPECT_EQ(requestsField(api, "heldRequests"), 0);
}

TEST(KubeApiDouble, HealDropsHeldRequestsWhoseClientClosed) {
    TempDir dir;
    KubeApiDouble api(dir.path(), twoNodes());
    api.partition("node-a");
    auto abandoned = api.startRequest("POST", kLeases, "node-a-token", leaseJson("abandoned", "node-a"));
    ASSERT_TRUE(eventually([&] { return requestsField(api, "heldRequests") == 1; }));
    abandoned.close();
    // The double notices the closed connection while it holds the request.
    ASSERT_TRUE(eventually([&] { return requestsField(api, "heldRequests") == 0; }));
    api.heal();
    EXPECT_EQ(api.request("GET", kLeases + "/abandoned").status, 404);
    EXPECT_EQ(api.requestCount("create leases", "node-a"), 0);
    EXPECT_EQ(api.request("GET", kLeases, "", "", "node-a-token").status, 200);
}

TEST(KubeApiDouble, PartitionSilencesOpenWatchesWithoutClosingThem) {
    TempDir dir;
    KubeApiDouble api(dir.path(), twoNodes({"--bookmark-interval", "1"}));
    auto watch = api.startRequest("GET", kLeases + "?watch=1&allowWatchBookmarks=true", "node-a-token");
    ASSERT_TRUE(eventually([&] { return watch.body().find("BOOKMARK") != std::string::npos; }));
    api.partition("node-a");
    ASSERT_TRUE(eventually([&] { return requestsField(api, "silentWatches") == 1; }));
    ASSERT_EQ(api.request("POST", kLeases, leaseJson("unseen", "node-b")).status, 201);
    EXPECT_TRUE(staysUnchanged(watch, kQuiet));  // no event, no bookmark
    EXPECT_TRUE(watch.running());
    EXPECT_EQ(requestsField(api, "activeWatches"), 0);
}

TEST(KubeApiDouble, WatchesOpenAtPartitionStaySilentAfterHeal) {
    TempDir dir;
    KubeApiDouble api(dir.path(), twoNodes({"--bookmark-interval", "1"}));
    auto watch = api.startRequest("GET", kLeases + "?watch=1&allowWatchBookmarks=true&timeoutSeconds=2",
                                  "node-a-token");
    ASSERT_TRUE(eventually([&] { return requestsField(api, "activeWatches") == 1; }));
    api.partition("node-a");
    api.heal("node-a");
    ASSERT_EQ(api.request("POST", kLeases, leaseJson("after-heal", "node-b")).status, 201);
    // Not even its timeoutSeconds ends it: the server forgot it.
    EXPECT_TRUE(staysUnchanged(watch, kQuiet));
    EXPECT_EQ(watch.body().find("after-heal"), std::string::npos);
    EXPECT_TRUE(watch.running());
    // Until the client closes it.
    watch.close();
    EXPECT_TRUE(eventually([&] { return requestsField(api, "silentWatches") == 0; }));
}

TEST(KubeApiDouble, WatchOpenedDuringPartitionHangsThenStreamsAfterHeal) {
    TempDir dir;
    KubeApiDouble api(dir.path(), twoNodes());
    api.partition("node-a");
    auto watch = api.startRequest("GET", kLeases + "?watch=1", "node-a-token");
    ASSERT_TRUE(eventually([&] { return requestsField(api, "heldRequests") == 1; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(watch.status(), 0);  // no response header
    api.heal();
    ASSERT_TRUE(eventually([&] { return watch.status() == 200; }));
    ASSERT_TRUE(eventually([&] { return requestsField(api, "activeWatches") == 1; }));
    ASSERT_EQ(api.request("POST", kLeases, leaseJson("seen", "node-b")).status, 201);
    EXPECT_TRUE(eventually([&] { return watch.body().find(R"("name":"seen")") != std::string::npos; }));
}

TEST(KubeApiDouble, RequestsReportPartitionedUsersAndCountsPerUser) {
    TempDir dir;
    KubeApiDouble api(dir.path(), twoNodes());
    ASSERT_EQ(api.request("GET", kLeases, "", "", "node-a-token").status, 200);
    ASSERT_EQ(api.request("GET", kLeases, "", "", "node-a-token").status, 200);
    ASSERT_EQ(
        api.request("POST", kLeases, leaseJson("b", "node-b"), "application/json", "node-b-token").status,
        201);
    EXPECT_EQ(api.requestCount("list leases", "node-a"), 2);
    EXPECT_EQ(api.requestCount("create leases", "node-a"), 0);
    EXPECT_EQ(api.requestCount("create leases", "node-b"), 1);
    EXPECT_EQ(api.requestCount("list leases"), 2);
    api.partition("node-b");
    const json::object answer = parse(api.control("GET", "requests").body);
    EXPECT_EQ(answer.at("partitioned"), (json::array{"node-b"}));
    EXPECT_EQ(answer.at("users").at("node-a").at("list leases"), 2);
    api.heal();
    EXPECT_EQ(parse(api.control("GET", "requests").body).at("partitioned"), json::array{});
    ASSERT_EQ(api.control("DELETE", "requests").status, 200);
    EXPECT_EQ(api.requestCount("list leases", "node-a"), 0);
    EXPECT_EQ(parse(api.control("GET", "requests").body).at("users"), json::object{});
}

TEST(KubeApiDouble, SilencedWatchesStayOpenAndDeliverNothing) {
    TempDir dir;
    KubeApiDouble api(dir.path(), twoNodes({"--bookmark-interval", "1"}));
    auto watch = api.startRequest("GET", kLeases + "?watch=1&allowWatchBookmarks=true", "node-a-token");
    ASSERT_TRUE(eventually([&] { return watch.body().find("BOOKMARK") != std::string::npos; }));
    api.silenceWatches("node-a");
    ASSERT_TRUE(eventually([&] { return requestsField(api, "silentWatches") == 1; }));
    ASSERT_EQ(api.request("POST", kLeases, leaseJson("unseen", "node-b")).status, 201);
    EXPECT_TRUE(staysUnchanged(watch, kQuiet));
    EXPECT_TRUE(watch.running());
    // Everything else of that user works, a new watch included.
    EXPECT_EQ(api.request("GET", kLeases + "/unseen", "", "", "node-a-token").status, 200);
    auto fresh = api.startRequest("GET", kLeases + "?watch=1", "node-a-token");
    EXPECT_TRUE(eventually([&] { return fresh.body().find(R"("name":"unseen")") != std::string::npos; }));
}

TEST(KubeApiDouble, SilencingOneUserLeavesOtherUsersWatchesDelivering) {
    TempDir dir;
    KubeApiDouble api(dir.path(), twoNodes());
    auto silenced = api.startRequest("GET", kLeases + "?watch=1", "node-a-token");
    auto other = api.startRequest("GET", kLeases + "?watch=1", "node-b-token");
    ASSERT_TRUE(eventually([&] { return requestsField(api, "activeWatches") == 2; }));
    api.silenceWatches("node-a");
    ASSERT_TRUE(eventually([&] { return requestsField(api, "silentWatches") == 1; }));
    ASSERT_EQ(api.request("POST", kLeases, leaseJson("news", "node-b")).status, 201);
    EXPECT_TRUE(eventually([&] { return other.body().find(R"("name":"news")") != std::string::npos; }));
    EXPECT_EQ(silenced.body().find(R"("name":"news")"), std::string::npos);
    // Without a user, every watch.
    api.silenceWatches();
    EXPECT_TRUE(eventually([&] { return requestsField(api, "silentWatches") == 2; }));
    EXPECT_EQ(requestsField(api, "activeWatches"), 0);
}

// A version ahead of the double's is waited for (1 s), then refused as upstream refuses it.
void expectTooLarge(const KubeApiDouble::Response& answer, std::uint64_t requested, std::uint64_t current) {
    EXPECT_EQ(answer.status, 504) << answer.body;
    const json::object status = parse(answer.body);
    EXPECT_EQ(status.at("kind"), "Status");
    EXPECT_EQ(status.at("reason"), "Timeout");
    EXPECT_EQ(status.at("code"), 504);
    EXPECT_EQ(std::string(status.at("message").as_string()),
              "Timeout: Too large resource version: " + std::to_string(requested) +
                  ", current: " + std::to_string(current));
    const json::object& details = status.at("details").as_object();
    EXPECT_EQ(details.at("retryAfterSeconds"), 1);
    EXPECT_EQ(details.at("causes").at(0).at("reason"), "ResourceVersionTooLarge");
    EXPECT_EQ(details.at("causes").at(0).at("message"), "Too large resource version");
}

TEST(KubeApiDouble, WatchFromAVersionNotReachedIsTooLarge) {
    TempDir dir;
    KubeApiDouble api(dir.path());
    const std::uint64_t current = std::stoull(currentVersion(api));
    const auto started = std::chrono::steady_clock::now();
    const auto answer =
        api.request("GET", kLeases + "?watch=1&resourceVersion=" + std::to_string(current + 100));
    EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(900));
    expectTooLarge(answer, current + 100, current);
}

TEST(KubeApiDouble, ListAndGetFromAVersionNotReachedAreTooLarge) {
    TempDir dir;
    KubeApiDouble api(dir.path());
    ASSERT_EQ(api.request("POST", kLeases, leaseJson("a", "node-1")).status, 201);
    const std::uint64_t current = std::stoull(currentVersion(api));
    const std::string ahead = std::to_string(current + 1);
    expectTooLarge(api.request("GET", kLeases + "?resourceVersion=" + ahead), current + 1, current);
    expectTooLarge(api.request("GET", kLeases + "/a?resourceVersion=" + ahead), current + 1, current);
    EXPECT_EQ(api.request("GET", kLeases + "?resourceVersion=0").status, 200);
    EXPECT_EQ(api.request("GET", kLeases + "/a?resourceVersion=" + std::to_string(current)).status, 200);
}

TEST(KubeApiDouble, AVersionReachedWhileWaitingIsServed) {
    TempDir dir;
    KubeApiDouble api(dir.path());
    const std::uint64_t current = std::stoull(currentVersion(api));
    auto list = std::async(std::launch::async, [&] {
        return api.request("GET", kLeases + "?resourceVersion=" + std::to_string(current + 1));
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_EQ(api.request("POST", kLeases, leaseJson("arrived", "node-1")).status, 201);
    const auto answer = list.get();
    EXPECT_EQ(answer.status, 200) << answer.body;
    EXPECT_NE(answer.body.find(R"("name":"arrived")"), std::string::npos);
}

// After a restart (etcd restored from nothing), a client resuming from its old version is
// told so, and lists again.
TEST(KubeApiDouble, RestartMakesOldVersionsTooLarge) {
    TempDir dir;
    KubeApiDouble api(dir.path());
    for (const char* name : {"a", "b", "c"})
        ASSERT_EQ(api.request("POST", kLeases, leaseJson(name, "node-1")).status, 201);
    const std::uint64_t before = std::stoull(currentVersion(api));
    api.restart();
    const std::uint64_t after = std::stoull(currentVersion(api));
    ASSERT_LT(after, before);
    expectTooLarge(api.request("GET", kLeases + "?watch=1&resourceVersion=" + std::to_string(before)), before,
                   after);
    EXPECT_EQ(api.request("GET", kLeases).status, 200);
}

TEST(KubeApiDouble, BookmarksComeOncePerMinuteUnlessAskedMoreOften) {
    TempDir dir;
    KubeApiDouble upstreamLike(dir.dir("default"));
    KubeApiDouble::Options often;
    often.extraArgs = {"--bookmark-interval", "1"};
    KubeApiDouble frequent(dir.dir("often"), often);
    const std::string watch = kLeases + "?watch=1&allowWatchBookmarks=true&timeoutSeconds=2";
    auto quiet = std::async(std::launch::async, [&] { return upstreamLike.request("GET", watch); });
    const auto bookmarked = frequent.request("GET", watch);
    EXPECT_NE(bookmarked.body.find(R"("type":"BOOKMARK")"), std::string::npos);
    EXPECT_EQ(quiet.get().body.find(R"("type":"BOOKMARK")"), std::string::npos);
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
