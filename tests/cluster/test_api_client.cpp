// The API client against a real HTTPS server with a test CA: verification, tokens,
// answers that are returned (401, 409) and answers that are retried (429, 5xx, Retry-After
// cut short), bounds (queued calls, deadlines, keepalive) and what it says about an API server
// that does not answer; the informer's list and watch through bookmarks, stream ends, 410,
// ERROR events, 504 "Too large resource version", silent and broken streams and relist().
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/json.hpp>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "cluster/api_client.h"
#include "tests/cluster/api_client_test_support.h"
#include "tests/cluster/tls_api_server.h"
#include "tests/support/temp_dir.h"

namespace devlet::kube {
namespace {

namespace json = boost::json;

class ApiClientTest : public ::testing::Test, protected ApiClientLoop {
protected:
    ApiClientTest() : certificates(sharedCertificates()), server(certificates, {"good-token"}) {
        server.addCollection(kLeases);
    }

    Kubeconfig config(const std::string& caPem) {
        Kubeconfig config;
        config.file = "test-kubeconfig";
        config.server = "https://127.0.0.1:" + std::to_string(server.port());
        config.host = "127.0.0.1";
        config.port = std::to_string(server.port());
        config.caPem = caPem;
        config.token = "good-token";
        return config;
    }

    std::size_t watchRequests() {
        std::size_t count = 0;
        for (const auto& request : server.requests())
            if (request.target.find("watch=1") != std::string::npos) ++count;
        return count;
    }

    // The Leases requests in order, each "list" or "watch from <resourceVersion>".
    std::vector<std::string> leaseRequests() {
        std::vector<std::string> kinds;
        for (const auto& request : server.requests()) {
            if (request.method != "GET" || request.target.rfind(kLeases + "?", 0) != 0) continue;
            const auto at = request.target.find("resourceVersion=");
            if (request.target.find("watch=1") == std::string::npos) {
                kinds.push_back("list");
            } else {
                const auto end = request.target.find('&', at);
                kinds.push_back("watch from " + request.target.substr(at + 16, end - at - 16));
            }
        }
        return kinds;
    }

    // One test PKI for the whole program: making RSA keys is most of a test's time.
    static const test::TestCertificates& sharedCertificates() {
        static test::TempDir pki;
        static const test::TestCertificates made = test::makeTestCertificates(pki.path());
        return made;
    }

    test::TempDir dir;
    const test::TestCertificates& certificates;
    test::TlsApiServer server;
};

TEST_F(ApiClientTest, CreatesGetsAndListsOverVerifiedTls) {
    ApiClient client(loop, config(certificates.caPem));
    auto created =
        call([&](auto done) { client.create(kLeases, lease("cam-0", "node-a"), std::move(done)); });
    ASSERT_EQ(created.code, 201) << created.describe();
    auto got = call([&](auto done) { client.get(kLeases + "/cam-0", std::move(done)); });
    ASSERT_TRUE(got.ok()) << got.describe();
    EXPECT_EQ(holderOf(got.body.as_object()), "node-a");
    auto listed = call([&](auto done) { client.list(kLeases, "limit=10", std::move(done)); });
    EXPECT_EQ(listed.body.at("items").as_array().size(), 1u);
    EXPECT_TRUE(client.state().reachable);
    // One kept-alive connection carried all three.
    EXPECT_EQ(server.requests().size(), 3u);
}

TEST_F(ApiClientTest, AServerTheCaDidNotSignIsAnError) {
    ClientOptions options = fastRetries();
    options.maxAttempts = 2;
    ApiClient client(loop, config(certificates.otherCaPem), options);
    auto result = call([&](auto done) { client.get(kLeases + "/cam-0", std::move(done)); });
    EXPECT_EQ(result.code, 0);
    EXPECT_NE(result.message.find("TLS handshake"), std::string::npos) << result.message;
    EXPECT_NE(result.message.find("certificate"), std::string::npos) << result.message;
    EXPECT_TRUE(server.requests().empty());
    EXPECT_FALSE(client.state().reachable);
    EXPECT_FALSE(client.state().lastError.empty());
}

TEST_F(ApiClientTest, ACaThatIsNoCertificateIsAProblemBeforeAnyCall) {
    ApiClient client(loop, config("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"));
    EXPECT_NE(client.problem().find("the certificate authority cannot be used"), std::string::npos)
        << client.problem();
    auto result = call([&](auto done) { client.get(kLeases, std::move(done)); });
    EXPECT_EQ(result.message, client.problem());
    EXPECT_TRUE(server.requests().empty());
}

TEST_F(ApiClientTest, AServerThatNeverAnswersTheHandshakeTimesOut) {
    // A listener that never accepts: the kernel completes TCP, nobody speaks TLS.
    boost::asio::ip::tcp::acceptor silent(loop, {boost::asio::ip::make_address("127.0.0.1"), 0});
    Kubeconfig stuck = config(certificates.caPem);
    stuck.port = std::to_string(silent.local_endpoint().port());
    ClientOptions options = fastRetries();
    options.handshakeTimeout = std::chrono::milliseconds(200);
    options.maxAttempts = 2;
    ApiClient client(loop, stuck, options);
    auto result = call([&](auto done) { client.get(kLeases, std::move(done)); });
    EXPECT_EQ(result.code, 0);
    EXPECT_NE(result.message.find("TLS handshake with the API server timed out"), std::string::npos)
        << result.message;
    EXPECT_EQ(result.attempts, 2);
}

TEST_F(ApiClientTest, AClosedKeptAliveConnectionIsReplacedWithoutLosingTheCall) {
    ApiClient client(loop, config(certificates.caPem), fastRetries());
    ASSERT_TRUE(call([&](auto done) { client.get(kLeases, std::move(done)); }).ok());
    server.closeConnections();
    // A create is not repeated after a failure in general, but one the server never
    // read (it closed the idle connection) goes out once more on a new connection.
    auto created =
        call([&](auto done) { client.create(kLeases, lease("cam-0", "node-a"), std::move(done)); });
    EXPECT_EQ(created.code, 201) << created.describe();
    EXPECT_EQ(created.attempts, 1);
    EXPECT_EQ(server.requests().size(), 2u);
}

TEST_F(ApiClientTest, AWrongTokenIs401AndNotRetried) {
    Kubeconfig wrong = config(certificates.caPem);
    wrong.token = "stolen";
    ApiClient client(loop, wrong, fastRetries());
    auto result = call([&](auto done) { client.get(kLeases, std::move(done)); });
    EXPECT_EQ(result.code, 401);
    EXPECT_EQ(result.attempts, 1);
    EXPECT_TRUE(client.state().reachable);
    EXPECT_EQ(client.state().lastError.find("stolen"), std::string::npos);
}

TEST_F(ApiClientTest, ARotatedTokenFileIsUsedFromTheNextRequest) {
    std::string path = dir.file("token", "old-token");
    ::chmod(path.c_str(), 0600);
    Kubeconfig rotating = config(certificates.caPem);
    rotating.token.clear();
    rotating.tokenFile = path;
    server.setTokens({"old-token"});
    ApiClient client(loop, rotating, fastRetries());
    EXPECT_TRUE(call([&](auto done) { client.get(kLeases, std::move(done)); }).ok());
    server.setTokens({"new-token-rotated"});
    test::writeFile(path, "new-token-rotated\n");
    EXPECT_TRUE(call([&](auto done) { client.get(kLeases, std::move(done)); }).ok());
}

TEST_F(ApiClientTest, AStaleReplaceIsAConflictAndACreateOfAnExistingNameIsAlreadyExists) {
    ApiClient client(loop, config(certificates.caPem), fastRetries());
    auto created =
        call([&](auto done) { client.create(kLeases, lease("cam-0", "node-a"), std::move(done)); });
    ASSERT_EQ(created.code, 201);
    json::object stale = created.body.as_object();
    server.putObject(kLeases, "cam-0", lease("cam-0", "node-b"));  // another node wrote first
    stale["spec"].as_object()["holderIdentity"] = "node-a";
    auto replaced = call([&](auto done) { client.replace(kLeases + "/cam-0", stale, std::move(done)); });
    EXPECT_EQ(replaced.code, 409);
    EXPECT_TRUE(replaced.conflict());
    EXPECT_FALSE(replaced.alreadyExists());
    EXPECT_EQ(replaced.attempts, 1);
    auto again = call([&](auto done) { client.create(kLeases, lease("cam-0", "node-a"), std::move(done)); });
    EXPECT_TRUE(again.alreadyExists());
    EXPECT_FALSE(again.conflict());
    // A delete whose precondition is stale is a conflict too; with the right version it deletes.
    auto staleDelete = call([&](auto done) {
        client.remove(kLeases + "/cam-0", {.resourceVersion = "1", .uid = ""}, std::move(done));
    });
    EXPECT_TRUE(staleDelete.conflict());
    const std::string current = server.resourceVersionOf(kLeases, "cam-0");
    auto deleted = call([&](auto done) {
        client.remove(kLeases + "/cam-0", {.resourceVersion = current, .uid = ""}, std::move(done));
    });
    EXPECT_TRUE(deleted.ok()) << deleted.describe();
    EXPECT_TRUE(call([&](auto done) { client.get(kLeases + "/cam-0", std::move(done)); }).notFound());
}

TEST_F(ApiClientTest, TooManyRequestsIsRetriedAfterRetryAfter) {
    ApiClient client(loop, config(certificates.caPem), fastRetries());
    server.failNext(429, 2, "1");
    // A create is not idempotent, but a 429 was refused before any work: it goes again.
    auto created =
        call([&](auto done) { client.create(kLeases, lease("cam-0", "node-a"), std::move(done)); });
    EXPECT_EQ(created.code, 201) << created.describe();
    EXPECT_EQ(created.attempts, 3);
    EXPECT_EQ(client.state().retries, 2u);
}

TEST_F(ApiClientTest, ServerErrorsAreRetriedForIdempotentCallsOnly) {
    ApiClient client(loop, config(certificates.caPem), fastRetries());
    server.failNext(500, 2);
    auto got = call([&](auto done) { client.list(kLeases, "", std::move(done)); });
    EXPECT_TRUE(got.ok()) << got.describe();
    EXPECT_EQ(got.attempts, 3);
    server.failNext(503, 1);
    auto created =
        call([&](auto done) { client.create(kLeases, lease("cam-0", "node-a"), std::move(done)); });
    EXPECT_EQ(created.code, 503);
    EXPECT_EQ(created.attempts, 1);
    ClientOptions few = fastRetries();
    few.maxAttempts = 3;
    ApiClient patient(loop, config(certificates.caPem), few);
    server.failNext(500, 5);
    auto givenUp = call([&](auto done) { patient.get(kLeases, std::move(done)); });
    EXPECT_EQ(givenUp.code, 500);
    EXPECT_EQ(givenUp.attempts, 3);
}

TEST_F(ApiClientTest, ACallsOwnDeadlineAndAttemptsLimitItsRetries) {
    ApiClient client(loop, config(certificates.caPem), fastRetries());
    // Waiting 30 s as asked would pass the call's deadline: the 429 is the answer.
    server.failNext(429, 1, "30");
    auto hurried = call([&](auto done) {
        client.get(kLeases, std::move(done), {.maxAttempts = 0, .deadline = std::chrono::seconds(5)});
    });
    EXPECT_EQ(hurried.code, 429);
    EXPECT_EQ(hurried.attempts, 1);
    server.failNext(500, 3);
    auto once =
        call([&](auto done) { client.get(kLeases, std::move(done), {.maxAttempts = 1, .deadline = {}}); });
    EXPECT_EQ(once.code, 500);
    EXPECT_EQ(once.attempts, 1);
    server.failNext(500, 2);
    EXPECT_TRUE(call([&](auto done) { client.get(kLeases, std::move(done)); }).ok());
}

TEST_F(ApiClientTest, AppliesWithAFieldManager) {
    ApiClient client(loop, config(certificates.caPem), fastRetries());
    auto applied = call([&](auto done) {
        client.apply(kLeases + "/cam-0", lease("cam-0", "node-a"), "devlet-node-a", true, std::move(done));
    });
    EXPECT_EQ(applied.code, 201) << applied.describe();
    auto requests = server.requests();
    ASSERT_EQ(requests.size(), 1u);
    EXPECT_EQ(requests[0].contentType, "application/apply-patch+yaml");
    EXPECT_NE(requests[0].target.find("fieldManager=devlet-node-a&force=true"), std::string::npos);
    // A field the API server does not know fails the apply instead of being dropped.
    EXPECT_NE(requests[0].target.find("&fieldValidation=Strict"), std::string::npos);
}

// What an informer reports, in order.
struct Recorder {
    std::vector<std::string> events;
    int synced = 0;
    int stateChanges = 0;
    Informer::Handlers handlers() {
        return {
            .added =
                [this](const json::object& o) { events.push_back("added " + name(o) + " " + holderOf(o)); },
            .modified =
                [this](const json::object& o) {
                    events.push_back("modified " + name(o) + " " + holderOf(o));
                },
            .deleted = [this](const json::object& o) { events.push_back("deleted " + name(o)); },
            .vanished = {},
            .synced = [this] { ++synced; },
            .stateChanged = [this] { ++stateChanges; },
        };
    }
    static std::string name(const json::object& o) {
        return std::string(o.at("metadata").at("name").as_string());
    }
};

TEST_F(ApiClientTest, InformerListsThenWatchesAndFollowsBookmarks) {
    server.putObject(kLeases, "cam-0", lease("cam-0", "node-a"));
    ApiClient client(loop, config(certificates.caPem), fastRetries());
    Recorder recorder;
    Informer informer(client, kLeases, recorder.handlers(), {});
    informer.start();
    ASSERT_TRUE(runUntil([&] { return informer.state().watchCurrent && server.openWatches() == 1; }));
    EXPECT_EQ(recorder.synced, 1);
    server.putObject(kLeases, "cam-1", lease("cam-1", "node-b"));
    server.putObject(kLeases, "cam-0", lease("cam-0", "node-c"));
    server.deleteObject(kLeases, "cam-1");
    ASSERT_TRUE(runUntil([&] { return recorder.events.size() == 4; }));
    EXPECT_EQ(recorder.events, (std::vector<std::string>{"added cam-0 node-a", "added cam-1 node-b",
                                                         "modified cam-0 node-c", "deleted cam-1"}));
    // Changes elsewhere move the server on; a bookmark tells the watcher where it is.
    server.addCollection("/api/v1/namespaces/devlet/pods");
    server.putObject("/api/v1/namespaces/devlet/pods", "p", {});
    server.bookmark();
    const std::string bookmarked = server.resourceVersionOf("/api/v1/namespaces/devlet/pods", "p");
    ASSERT_TRUE(runUntil([&] { return informer.state().resourceVersion == bookmarked; }));
    server.endWatches();
    ASSERT_TRUE(runUntil([&] { return watchRequests() == 2 && informer.state().watchCurrent; }));
    EXPECT_NE(server.requests().back().target.find("resourceVersion=" + bookmarked), std::string::npos);
    EXPECT_NE(server.requests().back().target.find("allowWatchBookmarks=true"), std::string::npos);
    EXPECT_EQ(informer.state().lists, 1u);
}

TEST_F(ApiClientTest, InformerResumesAfterTheServerEndsTheStreamWithoutLosingOrRepeatingEvents) {
    ApiClient client(loop, config(certificates.caPem), fastRetries());
    Recorder recorder;
    Informer informer(client, kLeases, recorder.handlers(), {});
    informer.start();
    ASSERT_TRUE(runUntil([&] { return informer.state().watchCurrent; }));
    server.putObject(kLeases, "cam-0", lease("cam-0", "node-a"));
    ASSERT_TRUE(runUntil([&] { return recorder.events.size() == 1; }));
    // The stream ends and, before the client watches again, more happens.
    server.endWatches();
    server.putObject(kLeases, "cam-0", lease("cam-0", "node-b"));
    server.putObject(kLeases, "cam-1", lease("cam-1", "node-b"));
    ASSERT_TRUE(runUntil([&] { return recorder.events.size() >= 3 && watchRequests() >= 2; }));
    server.putObject(kLeases, "cam-1", lease("cam-1", "node-c"));
    ASSERT_TRUE(runUntil([&] { return recorder.events.size() >= 4; }));
    EXPECT_EQ(recorder.events, (std::vector<std::string>{"added cam-0 node-a", "modified cam-0 node-b",
                                                         "added cam-1 node-b", "modified cam-1 node-c"}));
    EXPECT_EQ(informer.state().lists, 1u);
}

class InformerGone : public ApiClientTest, public ::testing::WithParamInterface<bool> {};

TEST_P(InformerGone, ListsAgainOn410AndReportsOnlyTheDifference) {
    server.putObject(kLeases, "keep", lease("keep", "node-a"));
    server.putObject(kLeases, "change", lease("change", "node-a"));
    server.putObject(kLeases, "drop", lease("drop", "node-a"));
    ApiClient client(loop, config(certificates.caPem), fastRetries());
    Recorder recorder;
    Informer informer(client, kLeases, recorder.handlers(), {});
    informer.start();
    ASSERT_TRUE(runUntil([&] { return informer.state().watchCurrent && recorder.events.size() == 3; }));
    recorder.events.clear();
    // The stream ends; while the client waits to watch again, what happens is compacted
    // away: its version is gone.
    server.holdWatches(true);
    server.endWatches();
    server.putObject(kLeases, "change", lease("change", "node-b"));
    server.deleteObject(kLeases, "drop");
    server.putObject(kLeases, "new", lease("new", "node-b"));
    server.compact(/*asHttp=*/GetParam());
    server.holdWatches(false);
    ASSERT_TRUE(runUntil([&] { return informer.state().lists == 2 && informer.state().watchCurrent; }));
    EXPECT_EQ(recorder.events,
              (std::vector<std::string>{"deleted drop", "modified change node-b", "added new node-b"}));
    EXPECT_EQ(recorder.synced, 2);
    EXPECT_EQ(informer.objects().size(), 3u);
}

INSTANTIATE_TEST_SUITE_P(HttpOrErrorEvent, InformerGone, ::testing::Bool());

TEST_F(ApiClientTest, InformerRecoversWhenTheServerRefusesForAWhile) {
    ApiClient client(loop, config(certificates.caPem), fastRetries());
    Recorder recorder;
    server.failNext(503, 3);
    Informer informer(client, kLeases, recorder.handlers(), {});
    informer.start();
    ASSERT_TRUE(runUntil([&] { return informer.state().watchCurrent; }));
    EXPECT_EQ(recorder.synced, 1);
    EXPECT_TRUE(informer.state().lastError.empty());
    EXPECT_TRUE(informer.state().connected);
    EXPECT_GE(recorder.stateChanges, 2);  // the failure, then the recovery
}

TEST_F(ApiClientTest, RetryAfterOfAServerErrorIsCutToRetryAfterMax) {
    ClientOptions options = fastRetries();
    options.retryAfterMax = std::chrono::milliseconds(100);
    ApiClient client(loop, config(certificates.caPem), options);
    // Waiting as asked would outlast the test (and the node).
    server.failNext(503, 1, "100000");
    auto got = call([&](auto done) { client.get(kLeases, std::move(done)); });
    EXPECT_TRUE(got.ok()) << got.describe();
    EXPECT_EQ(got.attempts, 2);
}

TEST_F(ApiClientTest, ACallBeyondMaxQueuedFailsAtOnce) {
    ClientOptions options = fastRetries();
    options.maxQueued = 2;
    ApiClient client(loop, config(certificates.caPem), options);
    server.holdAnswers(true);
    std::optional<ApiResult> first, second, third;
    client.get(kLeases, [&](ApiResult r) { first = std::move(r); });
    client.get(kLeases, [&](ApiResult r) { second = std::move(r); });
    client.get(kLeases, [&](ApiResult r) { third = std::move(r); });
    ASSERT_TRUE(runUntil([&] { return third.has_value(); }));
    EXPECT_EQ(third->code, 0);
    EXPECT_EQ(third->message, "2 calls already wait for the API server");
    EXPECT_FALSE(first.has_value() || second.has_value());  // the server has answered nothing yet
    server.holdAnswers(false);
    ASSERT_TRUE(runUntil([&] { return first.has_value() && second.has_value(); }));
    EXPECT_TRUE(first->ok()) << first->describe();
    EXPECT_TRUE(second->ok()) << second->describe();
}

TEST_F(ApiClientTest, AQueuedCallIsAnsweredAtItsDeadlineNotWhenTheCallAheadEnds) {
    ApiClient client(loop, config(certificates.caPem), fastRetries());
    ASSERT_TRUE(call([&](auto done) { client.get(kLeases, std::move(done)); }).ok());
    ASSERT_TRUE(client.state().reachable);
    server.holdAnswers(true);
    std::optional<ApiResult> ahead;
    client.get(kLeases, [&](ApiResult r) { ahead = std::move(r); });
    auto hurried = call([&](auto done) {
        client.get(kLeases, std::move(done), {.maxAttempts = 0, .deadline = std::chrono::milliseconds(300)});
    });
    EXPECT_EQ(hurried.code, 0);
    EXPECT_EQ(hurried.message, "no answer from the API server before the call's deadline");
    EXPECT_FALSE(ahead.has_value());
    // Nothing was answered while it waited.
    EXPECT_FALSE(client.state().reachable);
    server.holdAnswers(false);
    ASSERT_TRUE(runUntil([&] { return ahead.has_value(); }));
    EXPECT_TRUE(ahead->ok()) << ahead->describe();
    EXPECT_TRUE(client.state().reachable);
    EXPECT_EQ(server.requests().size(), 2u);  // the hurried call was never sent
}

TEST_F(ApiClientTest, WaitingSinceIsSetWhileTheServerDoesNotAnswer) {
    ApiClient client(loop, config(certificates.caPem), fastRetries());
    EXPECT_EQ(client.state().lastAnswer, std::chrono::steady_clock::time_point{});
    ASSERT_TRUE(call([&](auto done) { client.get(kLeases, std::move(done)); }).ok());
    const auto answeredAt = client.state().lastAnswer;
    EXPECT_NE(answeredAt, std::chrono::steady_clock::time_point{});
    EXPECT_FALSE(client.state().waitingSince.has_value());

    server.holdAnswers(true);
    const auto before = std::chrono::steady_clock::now();
    std::optional<ApiResult> result;
    client.get(kLeases, [&](ApiResult r) { result = std::move(r); });
    ASSERT_TRUE(client.state().waitingSince.has_value());
    EXPECT_GE(*client.state().waitingSince, before);
    // Sent, and the server says nothing.
    ASSERT_TRUE(runUntil([&] { return server.requests().size() == 2; }));
    EXPECT_TRUE(client.state().waitingSince.has_value());
    EXPECT_EQ(client.state().lastAnswer, answeredAt);

    server.holdAnswers(false);
    ASSERT_TRUE(runUntil([&] { return result.has_value(); }));
    EXPECT_FALSE(client.state().waitingSince.has_value());
    EXPECT_GT(client.state().lastAnswer, answeredAt);
}

// The client's sockets are in this process: those whose peer is the server's port.
std::vector<int> socketsConnectedTo(unsigned short port) {
    std::vector<int> found;
    for (int fd = 0; fd < 1024; ++fd) {
        sockaddr_storage peer{};
        socklen_t length = sizeof peer;
        if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0) continue;
        if (peer.ss_family == AF_INET && ntohs(reinterpret_cast<sockaddr_in*>(&peer)->sin_port) == port)
            found.push_back(fd);
    }
    return found;
}

int socketOption(int fd, int level, int name) {
    int value = -1;
    socklen_t length = sizeof value;
    return ::getsockopt(fd, level, name, &value, &length) == 0 ? value : -1;
}

TEST_F(ApiClientTest, ConnectionsToTheApiServerNoticeADeadPeerThroughKeepalive) {
    ApiClient client(loop, config(certificates.caPem), fastRetries());
    ASSERT_TRUE(call([&](auto done) { client.get(kLeases, std::move(done)); }).ok());
    Informer informer(client, kLeases, {}, {});
    informer.start();
    ASSERT_TRUE(runUntil([&] { return informer.state().watchCurrent; }));
    const auto sockets = socketsConnectedTo(server.port());
    ASSERT_EQ(sockets.size(), 2u);  // requests, and the watch's own
    for (int fd : sockets) {
        EXPECT_NE(socketOption(fd, SOL_SOCKET, SO_KEEPALIVE), 0);
        EXPECT_EQ(socketOption(fd, IPPROTO_TCP, TCP_KEEPIDLE), 15);
        EXPECT_EQ(socketOption(fd, IPPROTO_TCP, TCP_KEEPINTVL), 5);
        EXPECT_EQ(socketOption(fd, IPPROTO_TCP, TCP_KEEPCNT), 3);
        EXPECT_EQ(socketOption(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), 30000);
    }
}

TEST_F(ApiClientTest, InformerListsAgainWhenTheWatchIsAnsweredResourceVersionTooLarge) {
    server.putObject(kLeases, "cam-0", lease("cam-0", "node-a"));
    ApiClient client(loop, config(certificates.caPem), fastRetries());
    Recorder recorder;
    // What a real server answers a watch from a version it has not reached: watching again
    // from that version would get the same answer forever.
    server.failNextWatches(504, 1, "1", "Timeout: Too large resource version: 9999, current: 101",
                           "ResourceVersionTooLarge");
    Informer informer(client, kLeases, recorder.handlers(), {});
    informer.start();
    ASSERT_TRUE(runUntil([&] { return informer.state().lists == 2 && informer.state().watchCurrent; }));
    const std::string version = server.resourceVersionOf(kLeases, "cam-0");
    EXPECT_EQ(leaseRequests(),
              (std::vector<std::string>{"list", "watch from " + version, "list", "watch from " + version}));
    EXPECT_EQ(recorder.events, (std::vector<std::string>{"added cam-0 node-a"}));
}

TEST_F(ApiClientTest, InformerWatchesAgainFromTheSameVersionAfterTooManyRequests) {
    server.putObject(kLeases, "cam-0", lease("cam-0", "node-a"));
    ApiClient client(loop, config(certificates.caPem), fastRetries());
    Recorder recorder;
    server.failNextWatches(429, 1, "1");
    Informer informer(client, kLeases, recorder.handlers(), {});
    informer.start();
    ASSERT_TRUE(runUntil([&] { return watchRequests() == 2 && informer.state().watchCurrent; }));
    const std::string version = server.resourceVersionOf(kLeases, "cam-0");
    EXPECT_EQ(leaseRequests(),
              (std::vector<std::string>{"list", "watch from " + version, "watch from " + version}));
    EXPECT_EQ(informer.state().lists, 1u);
}

class InformerErrorEvent : public ApiClientTest, public ::testing::WithParamInterface<int> {};

TEST_P(InformerErrorEvent, AnErrorEventInTheStreamListsAgain) {
    server.putObject(kLeases, "cam-0", lease("cam-0", "node-a"));
    ApiClient client(loop, config(certificates.caPem), fastRetries());
    Recorder recorder;
    Informer informer(client, kLeases, recorder.handlers(), {});
    informer.start();
    ASSERT_TRUE(runUntil([&] { return informer.state().watchCurrent && server.openWatches() == 1; }));
    if (GetParam() == 504)
        server.errorWatches(504, "Timeout", "Too large resource version: 9999, current: 101");
    else
        server.errorWatches(500, "InternalError", "etcdserver: leader changed");
    ASSERT_TRUE(runUntil([&] { return informer.state().lists == 2 && informer.state().watchCurrent; }));
    EXPECT_EQ(leaseRequests().size(), 4u);                                         // list, watch, list, watch
    EXPECT_EQ(recorder.events, (std::vector<std::string>{"added cam-0 node-a"}));  // nothing twice
    EXPECT_EQ(recorder.synced, 2);
}

INSTANTIATE_TEST_SUITE_P(TooLargeOrInternal, InformerErrorEvent, ::testing::Values(504, 500));

TEST_F(ApiClientTest, InformerGivesUpASilentWatchAfterIdleTimeoutAndListsAgain) {
    ApiClient client(loop, config(certificates.caPem), fastRetries());
    Recorder recorder;
    auto handlers = recorder.handlers();
    std::vector<std::string> errors;
    Informer* watched = nullptr;
    handlers.stateChanged = [&] {
        if (watched && !watched->state().lastError.empty()) errors.push_back(watched->state().lastError);
    };
    Informer::Options options;
    options.idleTimeout = std::chrono::seconds(1);
    // Headers, then nothing: not even the bookmarks a server sends every minute.
    server.silenceWatches(true);
    Informer informer(client, kLeases, handlers, options);
    watched = &informer;
    informer.start();
    ASSERT_TRUE(runUntil([&] { return informer.state().watchCurrent && server.openWatches() == 1; }));
    server.silenceWatches(false);
    server.putObject(kLeases, "cam-0", lease("cam-0", "node-a"));  // the silent stream does not tell
    ASSERT_TRUE(runUntil([&] { return informer.state().lists == 2 && informer.state().watchCurrent; }));
    EXPECT_EQ(recorder.events, (std::vector<std::string>{"added cam-0 node-a"}));
    ASSERT_FALSE(errors.empty());
    EXPECT_NE(errors.front().find("nothing received for 1 s"), std::string::npos) << errors.front();
    EXPECT_TRUE(informer.state().lastError.empty());
}

// A connection cut under a stream (a reset, a proxy restarting): the server replays what
// followed the last version, so the informer watches again from it, as client-go's
// reflector does, without a list (a thousand nodes would each list after a load balancer
// restarts otherwise).
TEST_F(ApiClientTest, InformerWatchesAgainFromItsVersionWhenAStreamIsCut) {
    server.putObject(kLeases, "cam-0", lease("cam-0", "node-a"));
    ApiClient client(loop, config(certificates.caPem), fastRetries());
    Recorder recorder;
    Informer informer(client, kLeases, recorder.handlers(), {});
    informer.start();
    ASSERT_TRUE(runUntil([&] { return informer.state().watchCurrent && server.openWatches() == 1; }));
    server.closeConnections();
    server.putObject(kLeases, "cam-1", lease("cam-1", "node-b"));
    ASSERT_TRUE(runUntil([&] { return informer.state().watchCurrent && recorder.events.size() == 2; }));
    EXPECT_EQ(recorder.events, (std::vector<std::string>{"added cam-0 node-a", "added cam-1 node-b"}));
    EXPECT_EQ(informer.state().lists, 1u);
}

TEST_F(ApiClientTest, RelistListsAgainNowAndReportsOnlyTheDifference) {
    server.putObject(kLeases, "keep", lease("keep", "node-a"));
    server.putObject(kLeases, "change", lease("change", "node-a"));
    server.putObject(kLeases, "drop", lease("drop", "node-a"));
    ApiClient client(loop, config(certificates.caPem), fastRetries());
    Recorder recorder;
    Informer informer(client, kLeases, recorder.handlers(), {});
    informer.relist();  // before start(): nothing
    informer.start();
    ASSERT_TRUE(runUntil([&] { return informer.state().watchCurrent && recorder.events.size() == 3; }));
    EXPECT_EQ(informer.state().lists, 1u);
    recorder.events.clear();
    // The watch goes blind: the stream the server ends is followed by one that says nothing.
    server.silenceWatches(true);
    server.endWatches();
    ASSERT_TRUE(runUntil([&] { return watchRequests() == 2 && informer.state().watchCurrent; }));
    server.silenceWatches(false);
    server.putObject(kLeases, "change", lease("change", "node-b"));
    server.deleteObject(kLeases, "drop");
    server.putObject(kLeases, "new", lease("new", "node-b"));
    // The owner knows (its own write did not show up) and asks.
    informer.relist();
    EXPECT_FALSE(informer.state().watchCurrent);
    ASSERT_TRUE(runUntil([&] { return informer.state().lists == 2 && informer.state().watchCurrent; }));
    EXPECT_EQ(recorder.events,
              (std::vector<std::string>{"deleted drop", "modified change node-b", "added new node-b"}));
    EXPECT_EQ(recorder.synced, 2);
    EXPECT_EQ(informer.objects().size(), 3u);
}

}  // namespace
}  // namespace devlet::kube
