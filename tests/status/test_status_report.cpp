// What the status server says about a snapshot: JSON fields, explanations, readiness,
// the summary line, secrets removed, and the Prometheus text.

#include <algorithm>
#include <chrono>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "status/metrics.h"
#include "status/status_page.h"
#include "status/status_report.h"

namespace devlet::status {
namespace {

namespace json = boost::json;

InstanceStatus instance(const std::string& name, const std::string& id, bool present, bool offered) {
    InstanceStatus i;
    i.name = name;
    i.device.id = id;
    i.configuration = "cams";
    i.resource = "akri.sh/" + name;
    i.present = present;
    i.offered = offered;
    i.registered = offered;
    i.firstSeenMs = 1700000000000;
    i.lastSeenMs = 1700000001000;
    i.capacity = 2;
    i.slots = {{name + "-0", name, "cams", 0, "", 0, "", ""}, {name + "-1", name, "cams", 1, "", 0, "", ""}};
    return i;
}

StatusSnapshot connectedSnapshot() {
    StatusSnapshot s;
    s.daemon.version = "0.1.0";
    s.daemon.nodeName = "edge-1";
    s.daemon.startedAtMs = 1700000000000;
    s.daemon.nowMs = 1700000065000;
    s.daemon.firstPassDone = true;
    s.kubelet.state = KubeletStatus::State::Connected;
    s.kubelet.kubeletSocket = "/var/lib/kubelet/device-plugins/kubelet.sock";
    s.kubelet.pluginsOffered = 3;
    s.kubelet.pluginsRegistered = 3;
    ConfigurationStatus c;
    c.name = "cams";
    c.handler = "onvif";
    c.resource = "akri.sh/cams";
    c.capacity = 2;
    c.registered = true;
    c.instances = {instance("cams-8120fe", "foo0", true, true), instance("cams-a19705", "foo1", true, true)};
    c.instances[0].slots[1].holderResource = "akri.sh/cams";
    c.instances[0].slots[1].pod = "recorder";
    c.instances[0].slots[1].podNamespace = "video";
    c.instances[0].slots[1].sinceMs = 1700000002000;
    s.configurations.push_back(c);
    return s;
}

json::object parse(const std::string& text) {
    return json::parse(text).as_object();
}

TEST(StatusReport, CredentialLikePropertyNamesAreSecret) {
    for (const char* name : {"ONVIF_PASSWORD", "password", "API_TOKEN", "ClientSecret", "AWS_API_KEY", "KEY",
                             "SMB_PASS", "BASIC_AUTH", "WIFI_PSK", "ONVIF_CREDENTIALS", "PRIVATE_KEY_PEM"}) {
        EXPECT_TRUE(looksLikeSecret(name)) << name;
    }
    for (const char* name : {"ONVIF_DEVICE_UUID", "UDEV_DEVNODE", "USB_KEYBOARD", "DEBUG_ECHO_DESCRIPTION",
                             "ONVIF_DEVICE_SERVICE_URL", "PASSTHROUGH_MODE", "AUTHOR"}) {
        EXPECT_FALSE(looksLikeSecret(name)) << name;
    }
}

TEST(StatusReport, UserInfoIsCutFromUrls) {
    EXPECT_EQ(withoutUserInfo("rtsp://admin:hunter2@192.0.2.7:554/stream1"), "rtsp://192.0.2.7:554/stream1");
    EXPECT_EQ(withoutUserInfo("http://user@host/a@b"), "http://host/a@b");
    EXPECT_EQ(withoutUserInfo("http://192.0.2.7/onvif/device_service"),
              "http://192.0.2.7/onvif/device_service");
    EXPECT_EQ(withoutUserInfo("foo0"), "foo0");
}

TEST(StatusReport, InstancesCarryStableFieldsAndNoSecrets) {
    StatusSnapshot s = connectedSnapshot();
    auto& i = s.configurations[0].instances[0];
    i.device.properties = {{"ONVIF_DEVICE_UUID", "uuid-1"},
                           {"ONVIF_PASSWORD", "hunter2"},
                           {"ONVIF_STREAM_URI", "rtsp://admin:hunter2@192.0.2.7/s"}};
    const std::string text = apiJson("instances", s, {});
    EXPECT_EQ(text.find("hunter2"), std::string::npos) << text;
    const json::object doc = parse(text);
    const json::object& first = doc.at("instances").as_array().at(0).as_object();
    for (const char* key : {"name", "id", "configuration", "resource", "shared", "health", "present",
                            "offered", "registered", "reason", "properties", "propertiesRedacted",
                            "deviceNodes", "numaNode", "firstSeen", "lastSeen", "slotsInUse", "slots"}) {
        EXPECT_TRUE(first.contains(key)) << key;
    }
    EXPECT_EQ(first.at("name").as_string(), "cams-8120fe");
    EXPECT_EQ(first.at("health").as_string(), "healthy");
    EXPECT_TRUE(first.at("reason").is_null());
    EXPECT_EQ(first.at("propertiesRedacted").as_int64(), 1);
    EXPECT_EQ(first.at("properties").at("ONVIF_STREAM_URI").as_string(), "rtsp://192.0.2.7/s");
    EXPECT_EQ(first.at("firstSeen").as_string(), "2023-11-14T22:13:20.000Z");
    const json::object& held = first.at("slots").as_array().at(1).as_object();
    EXPECT_EQ(held.at("state").as_string(), "held");
    EXPECT_EQ(held.at("holder").at("pod").as_string(), "recorder");
    EXPECT_EQ(held.at("holder").at("namespace").as_string(), "video");
    EXPECT_EQ(held.at("holder").at("resource").as_string(), "akri.sh/cams");
    EXPECT_EQ(first.at("slots").as_array().at(0).at("state").as_string(), "free");
}

TEST(StatusReport, HeldSlotShowsItsLiveFile) {
    StatusSnapshot s = connectedSnapshot();
    auto& i = s.configurations[0].instances[0];
    const std::string held = i.slots[1].deviceId;
    i.liveFiles[held] =
        LiveFileView{"/var/lib/devlet/pods/" + held + "/devices.json", 3, "No space left on device"};
    const json::object doc = parse(apiJson("instances", s, {}));
    const json::array& slots = doc.at("instances").as_array().at(0).at("slots").as_array();
    const json::object& live = slots.at(1).at("holder").at("liveFile").as_object();
    EXPECT_EQ(live.at("path").as_string(), "/var/lib/devlet/pods/" + held + "/devices.json");
    EXPECT_EQ(live.at("generation").to_number<std::uint64_t>(), 3u);
    EXPECT_EQ(live.at("stale").as_string(), "No space left on device");

    i.liveFiles.clear();
    const json::object without = parse(apiJson("instances", s, {}));
    EXPECT_TRUE(without.at("instances")
                    .as_array()
                    .at(0)
                    .at("slots")
                    .as_array()
                    .at(1)
                    .at("holder")
                    .at("liveFile")
                    .is_null());
}

TEST(StatusReport, SummaryLineNamesDevicesSlotsAndKubelet) {
    EXPECT_EQ(summaryLine(connectedSnapshot()), "2 cameras; 1 of 4 slots in use; kubelet connected");
    StatusSnapshot s = connectedSnapshot();
    s.kubelet.state = KubeletStatus::State::Waiting;
    s.daemon.configurationErrors = {"a.yaml:3: bad"};
    EXPECT_EQ(summaryLine(s),
              "2 cameras; 1 of 4 slots in use; waiting for kubelet at "
              "/var/lib/kubelet/device-plugins/kubelet.sock; 1 configuration error");
}

TEST(StatusReport, WaitingForKubeletIsTheReasonNothingIsOffered) {
    StatusSnapshot s = connectedSnapshot();
    s.kubelet.state = KubeletStatus::State::Waiting;
    const auto& c = s.configurations[0];
    EXPECT_EQ(instanceReason(s, c, c.instances[0]),
              "not offered: waiting for kubelet at /var/lib/kubelet/device-plugins/kubelet.sock");
    const auto problems = configurationProblems(s, c);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_NE(problems[0].find("waiting for kubelet"), std::string::npos);
}

TEST(StatusReport, GoneDeviceIsUnhealthyThenWithdrawn) {
    StatusSnapshot s = connectedSnapshot();
    auto& c = s.configurations[0];
    c.instances[1].present = false;
    EXPECT_EQ(instanceHealth(c.instances[1]), "unhealthy");
    EXPECT_NE(instanceReason(s, c, c.instances[1]).find("device gone"), std::string::npos);
    c.instances[0].present = false;
    c.instances[0].offered = false;
    EXPECT_EQ(instanceHealth(c.instances[0]), "withdrawn");
    EXPECT_NE(instanceReason(s, c, c.instances[0]).find("1 slot is still held"), std::string::npos);
    const json::object doc = parse(apiJson("slots", s, {}));
    EXPECT_EQ(doc.at("slots").as_array().at(0).at("state").as_string(), "unavailable");
}

TEST(StatusReport, ProbeErrorAndNoDevicesAreExplained) {
    StatusSnapshot s = connectedSnapshot();
    auto& c = s.configurations[0];
    c.instances.clear();
    auto problems = configurationProblems(s, c);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0],
              "no cameras found: none is connected, or none matches the configuration's filters");
    c.probeError = "192.0.2.7: authentication failed";
    problems = configurationProblems(s, c);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0], "discovery failing: 192.0.2.7: authentication failed");
    const json::object probes = parse(apiJson("probes", s, {}));
    EXPECT_EQ(probes.at("probes").as_array().at(0).at("state").as_string(), "error");
}

TEST(StatusReport, DeviceListTheKubeletCannotReceiveIsAProblem) {
    StatusSnapshot s = connectedSnapshot();
    auto& c = s.configurations[0];
    c.listProblems.push_back("akri.sh/cams: its device list of 200000 device(s) is 5242890 bytes");
    const auto problems = configurationProblems(s, c);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0],
              "device list not sent: akri.sh/cams: its device list of 200000 device(s) is 5242890 bytes");
    const json::object doc = parse(apiJson("configurations", s, {}));
    EXPECT_EQ(doc.at("configurations").as_array().at(0).at("problems").as_array().at(0).as_string(),
              problems[0]);
}

TEST(StatusReport, ReadyMeansRegisteredOrWaitingAndHealthy) {
    StatusSnapshot s = connectedSnapshot();
    EXPECT_TRUE(readiness(s).ready);
    s.kubelet.state = KubeletStatus::State::Registering;
    s.kubelet.pluginsRegistered = 2;
    EXPECT_FALSE(readiness(s).ready);
    EXPECT_EQ(readiness(s).reasons.at(0), "2 of 3 plugins registered with the kubelet");
    s.kubelet.state = KubeletStatus::State::Waiting;
    EXPECT_TRUE(readiness(s).ready);
    s.configurations[0].probeError = "no route";
    EXPECT_FALSE(readiness(s).ready);
    s = connectedSnapshot();
    s.daemon.firstPassDone = false;
    EXPECT_FALSE(readiness(s).ready);
}

TEST(StatusReport, StatusDocumentHasEveryPart) {
    const json::object doc =
        parse(apiJson("status", connectedSnapshot(), {{1700000003000, "info", "cams-8120fe", "found"}}));
    for (const char* key : {"apiVersion", "summary", "daemon", "kubelet", "configurations", "events"})
        EXPECT_TRUE(doc.contains(key)) << key;
    EXPECT_EQ(doc.at("daemon").at("uptimeSeconds").as_int64(), 65);
    EXPECT_EQ(doc.at("summary").at("slotsInUse").as_int64(), 1);
    EXPECT_EQ(doc.at("summary").at("slots").as_int64(), 4);
    EXPECT_EQ(doc.at("events").as_array().at(0).at("message").as_string(), "found");
    EXPECT_EQ(doc.at("configurations").as_array().at(0).at("counts").at("healthy").as_int64(), 2);
    EXPECT_EQ(apiJson("nonsense", connectedSnapshot(), {}), "");
}

TEST(StatusReport, ExcludedDevicesAreExplainedPerConfiguration) {
    StatusSnapshot s = connectedSnapshot();
    auto& c = s.configurations[0];
    c.instances[0].deviceState = "up without authentication (its credentials were refused)";
    c.instances[0].deviceNotes = {
        "service address rewritten to the contacted host: media: 192.168.1.64 -> 203.0.113.5:8080"};
    c.discovery.excluded = {
        {"http://admin:pw@192.0.2.9/onvif/device_service-uuid-9", "filtered out by macAddresses Exclude", 1},
        {"", "no rule in udevRules matches them", 312}};
    c.discovery.lastScanMs = 1700000004000;
    c.discovery.lastScanDuration = std::chrono::milliseconds(1500);
    c.discovery.scans = 3;
    c.discovery.errors = 1;
    c.discovery.lastError = "no route to 192.0.2.0/24";
    c.discovery.lastErrorMs = 1700000002500;

    const json::object configurations = parse(apiJson("configurations", s, {}));
    const json::object& cams = configurations.at("configurations").as_array().at(0).as_object();
    const json::array& excluded = cams.at("excluded").as_array();
    ASSERT_EQ(excluded.size(), 2u);
    EXPECT_EQ(excluded.at(0).at("id").as_string(), "http://192.0.2.9/onvif/device_service-uuid-9");
    EXPECT_EQ(excluded.at(0).at("reason").as_string(), "filtered out by macAddresses Exclude");
    EXPECT_EQ(excluded.at(0).at("count").as_int64(), 1);
    EXPECT_EQ(excluded.at(0).at("text").as_string(),
              "camera http://192.0.2.9/onvif/device_service-uuid-9 is not offered: filtered out by "
              "macAddresses Exclude");
    EXPECT_TRUE(excluded.at(1).at("id").is_null());
    EXPECT_EQ(excluded.at(1).at("text").as_string(),
              "312 devices are not offered: no rule in udevRules matches them");
    EXPECT_EQ(cams.at("counts").at("excluded").as_int64(), 313);
    const json::object& probe = cams.at("probe").as_object();
    EXPECT_EQ(probe.at("lastScan").as_string(), "2023-11-14T22:13:24.000Z");
    EXPECT_DOUBLE_EQ(probe.at("lastScanDurationSeconds").as_double(), 1.5);
    EXPECT_EQ(probe.at("scans").as_int64(), 3);
    EXPECT_EQ(probe.at("errors").as_int64(), 1);
    EXPECT_EQ(probe.at("lastError").as_string(), "no route to 192.0.2.0/24");
    EXPECT_EQ(probe.at("state").as_string(), "ok");

    const json::object instances = parse(apiJson("instances", s, {}));
    EXPECT_EQ(instances.at("instances").as_array().at(0).at("deviceState").as_string(),
              "up without authentication (its credentials were refused)");
    EXPECT_TRUE(instances.at("instances").as_array().at(1).at("deviceState").is_null());
    const json::array& notes = instances.at("instances").as_array().at(0).at("deviceNotes").as_array();
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_EQ(notes.at(0).as_string(),
              "service address rewritten to the contacted host: media: 192.168.1.64 -> 203.0.113.5:8080");
    EXPECT_TRUE(instances.at("instances").as_array().at(1).at("deviceNotes").as_array().empty());
    EXPECT_EQ(instances.at("excluded").as_array().size(), 2u);
    EXPECT_EQ(instances.at("excluded").as_array().at(0).at("configuration").as_string(), "cams");

    const json::object probes = parse(apiJson("probes", s, {}));
    const json::object& p = probes.at("probes").as_array().at(0).as_object();
    EXPECT_EQ(p.at("configuration").as_string(), "cams");
    EXPECT_EQ(p.at("devicesExcluded").as_int64(), 313);
    EXPECT_EQ(p.at("lastErrorAt").as_string(), "2023-11-14T22:13:22.500Z");
    EXPECT_EQ(p.at("excluded").as_array().size(), 2u);
    EXPECT_EQ(apiJson("probes", s, {}).find("pw@"), std::string::npos);
}

TEST(StatusReport, NothingOfferedBecauseEverythingSeenIsExcluded) {
    StatusSnapshot s = connectedSnapshot();
    auto& c = s.configurations[0];
    c.instances.clear();
    c.discovery.excluded = {{"http://192.0.2.9/onvif/device_service-u9", "authentication failed", 1}};
    const auto problems = configurationProblems(s, c);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0], "no cameras offered: 1 camera seen, and it is excluded (see why below)");
    // Counted entries are the rest of what the handler looked at, not devices it could offer.
    c.discovery.excluded = {{"", "no rule in udevRules matches them", 40}};
    EXPECT_EQ(configurationProblems(s, c).at(0),
              "no cameras found: none is connected, or none matches the configuration's filters");
}

TEST(StatusReport, KeptDocumentsAreTheSameAsFreshOnes) {
    auto snapshot = std::make_shared<StatusSnapshot>(connectedSnapshot());
    snapshot->configurations[0].discovery.excluded = {
        {"0000:03:00.0", "an integrated GPU, and type is discrete", 1}};
    const std::vector<StatusEvent> events = {{1700000003000, "info", "cams-8120fe", "found"}};
    int asked = 0;
    SnapshotDocuments documents(snapshot, [&](std::size_t limit) {
        ++asked;
        return std::vector<StatusEvent>(
            events.begin(), events.begin() + static_cast<std::ptrdiff_t>(std::min(limit, events.size())));
    });
    for (const char* what :
         {"status", "daemon", "configurations", "instances", "slots", "probes", "events"}) {
        const DocumentParts kept = documents.api(what, snapshot->daemon.nowMs);
        ASSERT_FALSE(kept.empty()) << what;
        EXPECT_EQ(joined(kept), apiJson(what, *snapshot, events)) << what;
    }
    // Kept: the same bytes again, without asking for the events again; only the clock moves.
    EXPECT_EQ(documents.api("instances", 0), documents.api("instances", 0));
    const DocumentParts later = documents.api("status", snapshot->daemon.nowMs + 5000);
    ASSERT_EQ(later.size(), 3u);
    EXPECT_EQ(later[0], documents.api("status", 0)[0]);
    EXPECT_EQ(later[2], documents.api("status", 0)[2]);
    EXPECT_NE(later[1]->find("\"uptimeSeconds\":70"), std::string::npos) << *later[1];
    EXPECT_EQ(asked, 2);  // once for status, once for events
    EXPECT_TRUE(documents.api("nonsense", 0).empty());
}

TEST(StatusMetrics, LabelValuesAreEscaped) {
    EXPECT_EQ(escapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(StatusMetrics, EverySampleLineIsWellFormed) {
    StatusSnapshot s = connectedSnapshot();
    s.configurations[0].name = "we\"ird";
    s.configurations[0].allocations = 7;
    s.configurations[0].refusals = 2;
    s.kubelet.registrations = 4;
    const std::string text = metricsText(s, {{{200, 5}}, 3, 0, 1}, readProcessStats());
    const std::regex sample(
        R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? \S+$)");
    const std::regex comment(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$)");
    std::istringstream lines(text);
    int samples = 0;
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind('#', 0) == 0) {
            EXPECT_TRUE(std::regex_match(line, comment)) << line;
        } else {
            EXPECT_TRUE(std::regex_match(line, sample)) << line;
            ++samples;
        }
    }
    EXPECT_GT(samples, 20);
    EXPECT_NE(text.find("devlet_instances{configuration=\"we\\\"ird\",health=\"healthy\"} 2\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("devlet_slots{configuration=\"we\\\"ird\",state=\"held\"} 1\n"), std::string::npos);
    EXPECT_NE(text.find("devlet_http_responses_total{code=\"200\"} 5\n"), std::string::npos);
    EXPECT_NE(text.find("devlet_kubelet_state{state=\"connected\"} 1\n"), std::string::npos);
    EXPECT_NE(text.find("devlet_allocations_total{configuration=\"we\\\"ird\"} 7\n"), std::string::npos);
    EXPECT_NE(text.find("devlet_allocation_refusals_total{configuration=\"we\\\"ird\"} 2\n"),
              std::string::npos);
    EXPECT_NE(text.find("devlet_kubelet_registrations_total{result=\"ok\"} 4\n"), std::string::npos);
    EXPECT_EQ(text.find("process_resident_memory_bytes 0\n"), std::string::npos);
}

TEST(StatusMetrics, HistogramsHaveCumulativeBucketsSumAndCount) {
    StatusSnapshot s = connectedSnapshot();
    auto& d = s.configurations[0].discovery;
    d.publishLatency.observe(std::chrono::microseconds(300));   // le 0.0005
    d.publishLatency.observe(std::chrono::microseconds(2000));  // le 0.0025
    d.publishLatency.observe(std::chrono::seconds(90));         // only +Inf
    d.scanDurations.observe(std::chrono::milliseconds(40));
    d.scans = 1;
    d.errors = 2;
    const std::string text = inventoryMetricsText(s);
    const std::string labels = "configuration=\"cams\",handler=\"onvif\"";
    auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
    EXPECT_TRUE(has("# TYPE devlet_discovery_to_plugin_seconds histogram")) << text;
    EXPECT_TRUE(has("devlet_discovery_to_plugin_seconds_bucket{" + labels + ",le=\"0.00025\"} 0")) << text;
    EXPECT_TRUE(has("devlet_discovery_to_plugin_seconds_bucket{" + labels + ",le=\"0.0005\"} 1"));
    EXPECT_TRUE(has("devlet_discovery_to_plugin_seconds_bucket{" + labels + ",le=\"0.0025\"} 2"));
    EXPECT_TRUE(has("devlet_discovery_to_plugin_seconds_bucket{" + labels + ",le=\"60\"} 2"));
    EXPECT_TRUE(has("devlet_discovery_to_plugin_seconds_bucket{" + labels + ",le=\"+Inf\"} 3"));
    EXPECT_TRUE(has("devlet_discovery_to_plugin_seconds_count{" + labels + "} 3"));
    EXPECT_NE(text.find("devlet_discovery_to_plugin_seconds_sum{" + labels + "} 90.002"), std::string::npos);
    EXPECT_TRUE(has("devlet_discovery_duration_seconds_bucket{" + labels + ",le=\"0.05\"} 1"));
    EXPECT_TRUE(has("devlet_discovery_scans_total{" + labels + "} 1"));
    EXPECT_TRUE(has("devlet_discovery_errors_total{" + labels + "} 2"));
    // Buckets never decrease, and +Inf is the count: what Prometheus checks on a scrape.
    std::istringstream lines(text);
    double last = -1;
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("devlet_discovery_to_plugin_seconds_bucket", 0) != 0) continue;
        const double value = std::stod(line.substr(line.rfind(' ') + 1));
        EXPECT_GE(value, last) << line;
        last = value;
    }
    // Every family is announced once, before its samples.
    std::set<std::string> announced;
    std::istringstream again(text + serverMetricsText({}, readProcessStats()));
    for (std::string line; std::getline(again, line);) {
        if (line.rfind("# TYPE ", 0) != 0) continue;
        const std::string name = line.substr(7, line.find(' ', 7) - 7);
        EXPECT_TRUE(announced.insert(name).second) << name << " announced twice";
    }
    EXPECT_TRUE(announced.count("process_threads"));
}

TEST(StatusMetrics, ProcessFiguresAreRead) {
    const ProcessStats p = readProcessStats();
    EXPECT_GT(p.residentBytes, 0u);
    EXPECT_GE(p.threads, 1u);
    EXPECT_GT(p.openFds, 0u);
    EXPECT_GT(p.startTimeSeconds, 1.6e9);
}

TEST(StatusPage, IsOneDocumentWithoutExternalAssets) {
    const std::string page(statusPage());
    EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
    for (const char* external : {"src=\"http", "href=\"http", "@import", "url(http", "//cdn"})
        EXPECT_EQ(page.find(external), std::string::npos) << external;
    EXPECT_NE(page.find("/api/v1/status"), std::string::npos);
    EXPECT_EQ(page.find("innerHTML"), std::string::npos);  // device text is never parsed as markup
}

}  // namespace
}  // namespace devlet::status
