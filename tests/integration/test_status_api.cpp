// The status server of the real daemon over real HTTP: the JSON API with debugEcho
// devices and allocations from the kubelet simulator, /metrics, /healthz, /readyz,
// hostile requests, the bearer token, and `devlet status` / `devlet instances`.

#include <algorithm>
#include <filesystem>
#include <regex>
#include <sstream>
#include <thread>

#include <boost/json.hpp>
#include <stdlib.h>
#include <sys/stat.h>

#include "tests/integration/fixture.h"
#include "tests/status/status_test_support.h"

namespace devlet::test {
namespace {

namespace json = boost::json;

constexpr const char* kCl = "akri.sh/cams";
constexpr const char* kFoo0 = "akri.sh/cams-8120fe";
constexpr const char* kFoo1 = "akri.sh/cams-a19705";

class StatusApiTest : public DaemonTest {
protected:
    void SetUp() override {
        DaemonTest::SetUp();
        port_ = freePort();
        writeFile(daemon_->confDir() / "cams.yaml",
                  echoConfiguration("cams", 2, "      availabilityFile: " + availability().string() + "\n",
                                    "  devlet:\n    removalGracePeriodSeconds: 600\n"));
    }
    std::filesystem::path availability() const { return dir_.path() / "availability.txt"; }
    std::string listen() const { return "127.0.0.1:" + std::to_string(port_); }

    void startDaemon(const std::string& address = "127.0.0.1") {
        daemon_->start({"--listen", address + ":" + std::to_string(port_)});
        ASSERT_TRUE(
            daemon_->waitForLog("status page at http://" + address + ":" + std::to_string(port_), 20s));
    }
    void startAll() {
        ASSERT_TRUE(kubelet_->start());
        startDaemon();
        ASSERT_TRUE(waitForDevices(kCl, 4));
        ASSERT_TRUE(waitForDevices(kFoo0, 2));
        ASSERT_TRUE(waitForDevices(kFoo1, 2));
        // The kubelet reads a plugin's devices before its Register call returns to devlet,
        // so registrations may still be completing here; the tests expect them done.
        ASSERT_TRUE(eventually(
            [&] { return get("/api/v1/status")["kubelet"].at("state").as_string() == "connected"; }));
    }
    json::object get(const std::string& target) {
        const status::HttpAnswer answer = httpGet(port_, target);
        EXPECT_EQ(answer.status, 200) << target << ": " << answer.error << answer.body;
        boost::system::error_code ec;
        json::value doc = json::parse(answer.body, ec);
        if (ec || !doc.is_object()) {
            ADD_FAILURE() << target << " is not a JSON object: " << answer.body;
            return {};
        }
        return doc.as_object();
    }
    // The instance of the given name from /api/v1/instances; empty if not listed.
    json::object instance(const std::string& name) {
        json::object doc = get("/api/v1/instances");
        for (const json::value& v : doc["instances"].as_array()) {
            if (v.at("name").as_string() == name) return v.as_object();
        }
        return {};
    }

    unsigned short port_ = 0;
};

TEST_F(StatusApiTest, InstancesShowHealthPropertiesAndWhichPodHoldsASlot) {
    startAll();
    const AllocationResult allocated = kubelet_->allocate("video", "recorder", "main", kCl, 1);
    ASSERT_TRUE(allocated.ok) << allocated.error;
    const std::string slot = allocated.deviceIds.at(0);

    // The pod's name reaches devlet through PodResources, a moment after Allocate.
    json::object held;
    ASSERT_TRUE(eventually([&] {
        json::object slots = get("/api/v1/slots");
        for (const json::value& v : slots["slots"].as_array()) {
            if (v.at("id").as_string() == slot && v.at("holder").is_object() &&
                v.at("holder").at("pod").is_string() && v.at("holder").at("pod").as_string() == "recorder") {
                held = v.as_object();
                return true;
            }
        }
        return false;
    }));
    EXPECT_EQ(held["state"].as_string(), "held");
    EXPECT_EQ(held["holder"].at("namespace").as_string(), "video");
    EXPECT_EQ(held["holder"].at("resource").as_string(), kCl);
    EXPECT_TRUE(held["holder"].at("since").is_string());

    json::object foo0 = instance("cams-8120fe");
    ASSERT_FALSE(foo0.empty());
    EXPECT_EQ(foo0["id"].as_string(), "foo0");
    EXPECT_EQ(foo0["configuration"].as_string(), "cams");
    EXPECT_EQ(foo0["resource"].as_string(), kFoo0);
    EXPECT_EQ(foo0["health"].as_string(), "healthy");
    EXPECT_TRUE(foo0["registered"].as_bool());
    EXPECT_TRUE(foo0["reason"].is_null());
    EXPECT_EQ(foo0["properties"].at("DEBUG_ECHO_DESCRIPTION").as_string(), "foo0");
    EXPECT_EQ(foo0["slots"].as_array().size(), 2u);

    json::object status = get("/api/v1/status");
    EXPECT_EQ(status["kubelet"].at("state").as_string(), "connected");
    EXPECT_EQ(status["daemon"].at("node").as_string(), "test-node");
    EXPECT_EQ(status["summary"].at("text").as_string(),
              "2 echo devices; 1 of 4 slots in use; kubelet connected");
    EXPECT_TRUE(status["summary"].at("ready").as_bool());
    const json::object& cams = status["configurations"].as_array().at(0).as_object();
    EXPECT_EQ(cams.at("name").as_string(), "cams");
    EXPECT_EQ(cams.at("resource").as_string(), kCl);
    EXPECT_EQ(cams.at("counts").at("slotsInUse").as_int64(), 1);
    EXPECT_FALSE(status["events"].as_array().empty());

    json::object probes = get("/api/v1/probes");
    EXPECT_EQ(probes["probes"].as_array().at(0).at("state").as_string(), "ok");
    json::object configurations = get("/api/v1/configurations");
    EXPECT_EQ(configurations["configurations"].as_array().size(), 1u);
    json::object daemon = get("/api/v1/daemon");
    EXPECT_EQ(daemon["version"].as_string(), "0.1.0");
}

TEST_F(StatusApiTest, WaitingForKubeletIsExplainedAndCountsAsReady) {
    startDaemon();
    ASSERT_TRUE(eventually([&] { return !instance("cams-a19705").empty(); }));
    json::object foo1 = instance("cams-a19705");
    EXPECT_EQ(foo1["reason"].as_string(),
              "not offered: waiting for kubelet at " + kubelet_->kubeletSocket().string());
    json::object status = get("/api/v1/status");
    EXPECT_EQ(status["kubelet"].at("state").as_string(), "waiting");
    const json::array& problems = status["configurations"].as_array().at(0).at("problems").as_array();
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_NE(std::string(problems.at(0).as_string()).find("waiting for kubelet"), std::string::npos);
    EXPECT_EQ(httpGet(port_, "/readyz").status, 200);
    EXPECT_EQ(httpGet(port_, "/healthz").body, "ok\n");

    // The kubelet appears: the same page says so, without a restart.
    ASSERT_TRUE(kubelet_->start());
    EXPECT_TRUE(
        eventually([&] { return get("/api/v1/status")["kubelet"].at("state").as_string() == "connected"; }));
}

TEST_F(StatusApiTest, VanishedDeviceIsUnhealthyWithTheReason) {
    startAll();
    writeFile(availability(), "OFFLINE\n");
    ASSERT_TRUE(eventually([&] {
        json::object foo0 = instance("cams-8120fe");
        return !foo0.empty() && foo0["health"].as_string() == "unhealthy";
    }));
    json::object foo0 = instance("cams-8120fe");
    EXPECT_FALSE(foo0["present"].as_bool());
    EXPECT_NE(std::string(foo0["reason"].as_string()).find("device gone"), std::string::npos);
    EXPECT_EQ(foo0["slots"].as_array().at(0).at("state").as_string(), "unavailable");
    EXPECT_EQ(get("/api/v1/status")["summary"].at("text").as_string(),
              "0 echo devices; 0 of 4 slots in use; kubelet connected");
}

TEST_F(StatusApiTest, DevicesSeenButNotOfferedAreExplained) {
    startAll();
    writeFile(availability(), "OFFLINE\n");
    const std::string why = availability().string() + " says OFFLINE";
    json::array excluded;
    ASSERT_TRUE(eventually([&] {
        json::object doc = get("/api/v1/configurations");
        excluded = doc["configurations"].as_array().at(0).at("excluded").as_array();
        return excluded.size() == 2;
    })) << json::serialize(excluded);
    EXPECT_EQ(excluded.at(0).at("id").as_string(), "foo0");
    EXPECT_EQ(excluded.at(0).at("reason").as_string(), why);
    EXPECT_EQ(excluded.at(0).at("text").as_string(), "echo device foo0 is not offered: " + why);

    json::object instances = get("/api/v1/instances");
    ASSERT_EQ(instances["excluded"].as_array().size(), 2u);
    EXPECT_EQ(instances["excluded"].as_array().at(1).at("configuration").as_string(), "cams");

    json::object probes = get("/api/v1/probes");
    const json::object& probe = probes["probes"].as_array().at(0).as_object();
    EXPECT_EQ(probe.at("state").as_string(), "ok");
    EXPECT_TRUE(probe.at("lastScan").is_string());
    EXPECT_TRUE(probe.at("lastScanDurationSeconds").is_number());
    EXPECT_GE(probe.at("scans").as_int64(), 2);
    EXPECT_EQ(probe.at("devicesExcluded").as_int64(), 2);

    const CommandResult status = runDevlet({"status", "--listen", listen()});
    EXPECT_EQ(status.exitCode, 0) << status.output;
    EXPECT_NE(status.output.find("echo device foo1 is not offered: " + why), std::string::npos)
        << status.output;
    EXPECT_NE(status.output.find("last scan "), std::string::npos);
    const CommandResult list = runDevlet({"instances", "--listen", listen()});
    EXPECT_NE(list.output.find("seen but not offered:\n  cams: echo device foo0 is not offered: " + why),
              std::string::npos)
        << list.output;

    // Back: nothing is excluded any more.
    writeFile(availability(), "\n");
    EXPECT_TRUE(eventually([&] {
        return get("/api/v1/configurations")["configurations"]
            .as_array()
            .at(0)
            .at("excluded")
            .as_array()
            .empty();
    }));
}

TEST_F(StatusApiTest, MetricsTimeDiscoveryAndItsWayToThePlugins) {
    startAll();
    writeFile(availability(), "OFFLINE\n");
    ASSERT_TRUE(waitForHealth(kFoo0, "cams-8120fe-0", "Unhealthy"));
    const std::string labels = "configuration=\"cams\",handler=\"debugEcho\"";
    std::string text;
    // The first report (both devices found) and the change each took one way to the plugins.
    ASSERT_TRUE(eventually([&] {
        text = httpGet(port_, "/metrics").body;
        return text.find("devlet_discovery_to_plugin_seconds_count{" + labels + "} 2\n") != std::string::npos;
    })) << text;
    EXPECT_NE(text.find("# TYPE devlet_discovery_to_plugin_seconds histogram\n"), std::string::npos);
    EXPECT_NE(text.find("devlet_discovery_to_plugin_seconds_bucket{" + labels + ",le=\"+Inf\"} 2\n"),
              std::string::npos);
    EXPECT_NE(text.find("devlet_discovery_duration_seconds_count{" + labels + "} 2\n"), std::string::npos);
    EXPECT_NE(text.find("devlet_discovery_scans_total{" + labels + "} 2\n"), std::string::npos);
    EXPECT_NE(text.find("devlet_discovery_errors_total{" + labels + "} 0\n"), std::string::npos);
    EXPECT_NE(text.find("devlet_discovery_excluded_devices{" + labels + "} 2\n"), std::string::npos);
    EXPECT_NE(text.find("\nprocess_threads "), std::string::npos);
    EXPECT_EQ(text.find("process_threads 0\n"), std::string::npos);
}

TEST_F(StatusApiTest, MetricsCountInstancesSlotsAndTheKubelet) {
    startAll();
    ASSERT_TRUE(kubelet_->allocate("default", "pod-a", "main", kFoo1, 1).ok);
    std::string text;
    ASSERT_TRUE(eventually([&] {
        text = httpGet(port_, "/metrics").body;
        return text.find("devlet_slots{configuration=\"cams\",state=\"held\"} 1\n") != std::string::npos;
    })) << text;
    EXPECT_NE(text.find("devlet_instances{configuration=\"cams\",health=\"healthy\"} 2\n"),
              std::string::npos);
    EXPECT_NE(text.find("devlet_kubelet_state{state=\"connected\"} 1\n"), std::string::npos);
    EXPECT_NE(text.find("devlet_plugins_registered 3\n"), std::string::npos);
    EXPECT_NE(text.find("devlet_probe_up{configuration=\"cams\",handler=\"debugEcho\"} 1\n"),
              std::string::npos);
    EXPECT_NE(text.find("process_resident_memory_bytes "), std::string::npos);
    const std::regex sample(
        R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? \S+$)");
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("# ", 0) != 0) {
            EXPECT_TRUE(std::regex_match(line, sample)) << line;
        }
    }
}

TEST_F(StatusApiTest, UnknownPathsAndMethodsGetClearErrors) {
    startDaemon();
    EXPECT_EQ(httpGet(port_, "/nope").status, 404);
    EXPECT_EQ(httpGet(port_, "/api/v1/../../etc/passwd").status, 404);
    EXPECT_EQ(httpGet(port_, "/api/v2/status").status, 404);
    RawConnection post(port_);
    ASSERT_TRUE(post.connected());
    ASSERT_TRUE(post.send(
        "POST /api/v1/status HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"));
    const std::string answer = post.readUntilClosed(10s);
    EXPECT_EQ(answer.rfind("HTTP/1.1 405", 0), 0u) << answer;
    EXPECT_NE(answer.find("Allow: GET, HEAD"), std::string::npos);
    RawConnection head(port_);
    ASSERT_TRUE(head.send("HEAD /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    const std::string headAnswer = head.readUntilClosed(10s);
    EXPECT_EQ(headAnswer.rfind("HTTP/1.1 200", 0), 0u) << headAnswer;
    EXPECT_EQ(headAnswer.find("ok\n"), std::string::npos);  // no body
}

TEST_F(StatusApiTest, KeepAliveServesSeveralRequestsOnOneConnection) {
    startDaemon();
    RawConnection c(port_);
    ASSERT_TRUE(
        c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /api/v1/daemon HTTP/1.1\r\nHost: x\r\n\r\n"
               "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    const std::string answers = c.readUntilClosed(10s);
    EXPECT_TRUE(c.closedByPeer());
    std::size_t count = 0;
    for (std::size_t at = answers.find("HTTP/1.1 200"); at != std::string::npos;
         at = answers.find("HTTP/1.1 200", at + 1))
        ++count;
    EXPECT_EQ(count, 3u) << answers;
}

TEST_F(StatusApiTest, HostileRequestsDoNotStopThePlugins) {
    startAll();
    {
        RawConnection big(port_);
        ASSERT_TRUE(
            big.send("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(64 * 1024, 'a') + "\r\n\r\n"));
        const std::string answer = big.readUntilClosed(10s);
        EXPECT_EQ(answer.rfind("HTTP/1.1 431", 0), 0u) << answer.substr(0, 200);
    }
    {
        RawConnection garbage(port_);
        // The start of a TLS ClientHello, as a client that thinks this is HTTPS sends it.
        constexpr char kHello[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 hello\r\n\r\n";
        ASSERT_TRUE(garbage.send(std::string(kHello, sizeof kHello - 1)));
        const std::string answer = garbage.readUntilClosed(10s);
        EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << answer;
    }
    {
        RawConnection body(port_);
        ASSERT_TRUE(body.send("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n"));
        const std::string answer = body.readUntilClosed(10s);
        EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << answer;
    }
    {
        // Far more idle connections than the server keeps: the extra ones are closed, and
        // the kubelet is served all the while.
        std::vector<std::unique_ptr<RawConnection>> crowd;
        for (int i = 0; i < 200; ++i) crowd.push_back(std::make_unique<RawConnection>(port_));
        const AllocationResult allocated = kubelet_->allocate("default", "pod-a", "main", kCl, 1);
        EXPECT_TRUE(allocated.ok) << allocated.error;
        std::size_t closed = 0;
        for (auto& c : crowd) {
            c->readUntilClosed(50ms);
            closed += c->closedByPeer() ? 1 : 0;
        }
        EXPECT_GE(closed, 100u);
    }
    // Once the crowd is gone, the server answers again.
    EXPECT_TRUE(eventually([&] { return httpGet(port_, "/healthz").status == 200; }));
    const std::string metrics = httpGet(port_, "/metrics").body;
    EXPECT_NE(metrics.find("devlet_http_connections_refused_total "), std::string::npos);
    EXPECT_EQ(metrics.find("devlet_http_connections_refused_total 0\n"), std::string::npos);
    EXPECT_TRUE(daemon_->running());
}

TEST_F(StatusApiTest, SlowClientIsCutOffWhileOthersAreServed) {
    startDaemon();
    RawConnection slow(port_);
    ASSERT_TRUE(slow.send("GET / HTTP/1.1\r\nHost: x\r\n"));
    // It never finishes its header; everyone else is answered meanwhile, and the server
    // ends the slow connection on its own (the request timeout), answering nothing.
    EXPECT_EQ(httpGet(port_, "/healthz").status, 200);
    const std::string answer = slow.readUntilClosed(60s);
    EXPECT_TRUE(slow.closedByPeer());
    EXPECT_EQ(answer, "");
    EXPECT_EQ(httpGet(port_, "/healthz").status, 200);
}

TEST_F(StatusApiTest, LiveStreamSendsTheStatusAndEveryChange) {
    startAll();
    RawConnection stream(port_);
    ASSERT_TRUE(
        stream.send("GET /api/v1/status/stream HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n"));
    const std::size_t first =
        stream.readUntil("\n\n", stream.readUntil("event: status\ndata: {", 0, 20s), 20s);
    ASSERT_NE(first, std::string::npos) << stream.received().substr(0, 500);
    const std::string& head = stream.received();
    EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head.substr(0, 300);
    EXPECT_NE(head.find("Content-Type: text/event-stream"), std::string::npos);
    EXPECT_NE(head.find("\"healthy\":2"), std::string::npos);

    // A device goes: the next message says so, without being asked.
    writeFile(availability(), "OFFLINE\n");
    const std::size_t next = stream.readUntil("\"unhealthy\":2", first, 20s);
    EXPECT_NE(next, std::string::npos) << stream.received().substr(first, 500);
    const std::string metrics = httpGet(port_, "/metrics").body;
    EXPECT_NE(metrics.find("devlet_http_streams_open 1\n"), std::string::npos) << metrics;
}

TEST_F(StatusApiTest, LiveStreamsAreBoundedAndTheRestIsToldToPoll) {
    startDaemon();
    const std::string request = "GET /api/v1/status/stream HTTP/1.1\r\nHost: x\r\n\r\n";
    std::vector<std::unique_ptr<RawConnection>> streams;
    for (int i = 0; i < 8; ++i) {
        streams.push_back(std::make_unique<RawConnection>(port_));
        ASSERT_TRUE(streams.back()->send(request));
        ASSERT_NE(streams.back()->readUntil("event: status", 0, 20s), std::string::npos) << i;
    }
    RawConnection refused(port_);
    ASSERT_TRUE(refused.send(request));
    const std::string answer = refused.readUntilClosed(20s);
    EXPECT_EQ(answer.rfind("HTTP/1.1 503", 0), 0u) << answer;
    EXPECT_NE(answer.find("Retry-After: 10"), std::string::npos);
    EXPECT_NE(answer.find("poll /api/v1/status"), std::string::npos);
    EXPECT_EQ(httpGet(port_, "/api/v1/status").status, 200);

    // One goes; its place is free again.
    streams.pop_back();
    EXPECT_TRUE(eventually([&] {
        RawConnection again(port_);
        again.send(request);
        return again.readUntil("event: status", 0, 5s) != std::string::npos;
    }));
}

TEST_F(StatusApiTest, SlowAndStuckClientsDoNotStopThePlugins) {
    startAll();
    // Clients that send their header a byte at a time (slowloris) and clients that ask for
    // the whole status and never read the answer, together more than the server keeps.
    std::vector<std::unique_ptr<RawConnection>> slow, stuck;
    for (int i = 0; i < 40; ++i) {
        slow.push_back(std::make_unique<RawConnection>(port_));
        stuck.push_back(std::make_unique<RawConnection>(port_));
        stuck.back()->send("GET /api/v1/status HTTP/1.1\r\nHost: x\r\n\r\n");
        stuck.back()->send("GET /api/v1/status HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    const std::string header = "GET / HTTP/1.1\r\nHost: x\r\nUser-Agent: slowly\r\n";
    std::size_t sent = 0;
    auto trickle = [&] {
        if (sent >= header.size()) return;
        for (auto& c : slow) c->send(header.substr(sent, 1));
        ++sent;
    };
    // Meanwhile the kubelet allocates, and a device change reaches it.
    trickle();
    const AllocationResult allocated = kubelet_->allocate("default", "pod-a", "main", kCl, 1);
    EXPECT_TRUE(allocated.ok) << allocated.error;
    trickle();
    writeFile(availability(), "OFFLINE\n");
    EXPECT_TRUE(kubelet_->waitFor(
        [&] {
            const auto devices = health(kCl);
            return devices.size() == 4 && std::all_of(devices.begin(), devices.end(),
                                                      [](const auto& d) { return d.second == "Unhealthy"; });
        },
        20s));
    trickle();
    // The slow ones are cut off by the request time limit, however they trickle.
    std::size_t closed = 0;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (closed < slow.size() && std::chrono::steady_clock::now() < deadline) {
        trickle();
        closed = 0;
        for (auto& c : slow) {
            c->readUntilClosed(1ms);
            closed += c->closedByPeer() ? 1 : 0;
        }
        std::this_thread::sleep_for(200ms);
    }
    EXPECT_EQ(closed, slow.size());
    slow.clear();
    stuck.clear();
    EXPECT_TRUE(eventually([&] { return httpGet(port_, "/healthz").status == 200; }));
    EXPECT_TRUE(daemon_->running());
}

TEST_F(StatusApiTest, StatusAndInstancesCommandsReadTheApi) {
    startAll();
    const CommandResult table = runDevlet({"status", "--listen", listen()});
    EXPECT_EQ(table.exitCode, 0) << table.output;
    EXPECT_NE(table.output.find("2 echo devices; 0 of 4 slots in use; kubelet connected"), std::string::npos)
        << table.output;
    EXPECT_NE(table.output.find("CONFIGURATION"), std::string::npos);
    EXPECT_NE(table.output.find("akri.sh/cams"), std::string::npos);
    EXPECT_NE(table.output.find("ready: yes"), std::string::npos);

    const CommandResult instances = runDevlet({"instances", "--listen", listen()});
    EXPECT_EQ(instances.exitCode, 0) << instances.output;
    EXPECT_NE(instances.output.find("cams-8120fe"), std::string::npos) << instances.output;
    EXPECT_NE(instances.output.find("cams-a19705"), std::string::npos);
    EXPECT_NE(instances.output.find("healthy"), std::string::npos);

    const CommandResult asJson = runDevlet({"instances", "--json", "--listen", listen()});
    EXPECT_EQ(asJson.exitCode, 0);
    boost::system::error_code ec;
    json::value doc = json::parse(asJson.output, ec);
    ASSERT_FALSE(ec) << asJson.output;
    EXPECT_EQ(doc.at("instances").as_array().size(), 2u);

    // The address can also come from the settings file, as the daemon reads it.
    writeFile(dir_.path() / "client.yaml", "status:\n  listen: " + listen() + "\n");
    const CommandResult fromSettings =
        runDevlet({"status", "--json", "--config", (dir_.path() / "client.yaml").string()});
    EXPECT_EQ(fromSettings.exitCode, 0) << fromSettings.output;
    EXPECT_NE(fromSettings.output.find("\"apiVersion\":\"v1\""), std::string::npos);
}

TEST_F(StatusApiTest, StatusCommandWithoutADaemonSaysSo) {
    const CommandResult result = runDevlet({"status", "--listen", listen()});
    EXPECT_EQ(result.exitCode, 1);
    EXPECT_NE(result.output.find("cannot read the status server at http://" + listen()), std::string::npos)
        << result.output;
    EXPECT_EQ(runDevlet({"status", "--bogus"}).exitCode, 2);
}

// Sets an environment variable for the daemon started in this scope.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const std::string& value) : name_(name) { ::setenv(name, value.c_str(), 1); }
    ~ScopedEnv() { ::unsetenv(name_); }

private:
    const char* name_;
};

TEST_F(StatusApiTest, BeyondLoopbackEveryRequestNeedsTheToken) {
    const std::filesystem::path credentials = dir_.path() / "credentials";
    std::filesystem::create_directories(credentials);
    writeFile(credentials / "status-token", "s3cret-token-value\n");
    ::chmod((credentials / "status-token").c_str(), 0600);
    ScopedEnv env("CREDENTIALS_DIRECTORY", credentials.string());
    startDaemon("0.0.0.0");
    EXPECT_EQ(httpGet(port_, "/api/v1/status").status, 401);
    EXPECT_EQ(httpGet(port_, "/metrics").status, 401);
    EXPECT_EQ(httpGet(port_, "/", "wrong").status, 401);
    EXPECT_EQ(httpGet(port_, "/healthz").status, 200);
    EXPECT_EQ(httpGet(port_, "/readyz").status, 200);
    const status::HttpAnswer ok = httpGet(port_, "/api/v1/status", "s3cret-token-value");
    EXPECT_EQ(ok.status, 200);
    EXPECT_EQ(ok.body.find("s3cret"), std::string::npos);
    EXPECT_EQ(daemon_->log().find("s3cret"), std::string::npos);

    // A user's shell has no systemd credentials: without the token the command is refused.
    ::unsetenv("CREDENTIALS_DIRECTORY");
    const CommandResult refused = runDevlet({"status", "--listen", "0.0.0.0:" + std::to_string(port_)});
    EXPECT_EQ(refused.exitCode, 1);
    EXPECT_NE(refused.output.find("answered 401"), std::string::npos) << refused.output;
    const CommandResult withToken = runDevlet({"status", "--listen", "0.0.0.0:" + std::to_string(port_),
                                               "--token-file", (credentials / "status-token").string()});
    EXPECT_EQ(withToken.exitCode, 0) << withToken.output;
}

TEST_F(StatusApiTest, BeyondLoopbackWithoutATokenTheServerStaysOffButNotTheDaemon) {
    const std::filesystem::path credentials = dir_.path() / "credentials";
    std::filesystem::create_directories(credentials);  // systemd passed no status-token
    ScopedEnv env("CREDENTIALS_DIRECTORY", credentials.string());
    ASSERT_TRUE(kubelet_->start());
    daemon_->start({"--listen", "0.0.0.0:" + std::to_string(port_)});
    ASSERT_TRUE(daemon_->waitForLog("devlet runs without its status page", 20s));
    const std::string log = daemon_->log();
    EXPECT_NE(log.find("0.0.0.0:" + std::to_string(port_) + " is not a loopback address and the token file " +
                       (credentials / "status-token").string() + " does not exist"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("set status.listen (or --listen) to a loopback address"), std::string::npos) << log;
    EXPECT_TRUE(waitForDevices(kCl, 4));
    EXPECT_EQ(httpGet(port_, "/healthz").status, 0);
}

TEST_F(StatusApiTest, TokenFileOthersCanReadKeepsTheServerOffButNotTheDaemon) {
    const std::filesystem::path credentials = dir_.path() / "credentials";
    std::filesystem::create_directories(credentials);
    writeFile(credentials / "status-token", "s3cret\n");
    ::chmod((credentials / "status-token").c_str(), 0644);
    ScopedEnv env("CREDENTIALS_DIRECTORY", credentials.string());
    ASSERT_TRUE(kubelet_->start());
    daemon_->start({"--listen", "0.0.0.0:" + std::to_string(port_)});
    ASSERT_TRUE(daemon_->waitForLog("is readable by group or others", 20s));
    EXPECT_TRUE(waitForDevices(kCl, 4));
    EXPECT_EQ(httpGet(port_, "/healthz").status, 0);
}

}  // namespace
}  // namespace devlet::test
