// The onvif probe's camera state machine (OnvifCameras) fed real cameras' WS-Discovery
// datagrams from the corpus (corpus/README.md says where each was found) and from the fuzz
// seeds, with given senders and times, and with the query results a worker would post back.
// Each test asserts what the probe is asked to do: the calls, the Resolves, the snapshots,
// and the answers it reports as not used. No sockets, no threads.

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "probes/onvif/onvif_cameras.h"
#include "probes/onvif/soap_wire.h"

namespace devlet::onvif {
namespace {

using namespace std::chrono_literals;

const std::filesystem::path kCorpus = ONVIF_CORPUS_DIR;
const std::filesystem::path kSeeds = FUZZ_CORPUS_DIR;

std::string readFile(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        ADD_FAILURE() << "cannot read " << path;
        return "";
    }
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// `text` with every `from` replaced by `to`: a recorded answer from another address, or
// with another MessageID.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
        text.replace(at, from.size(), to);
    return text;
}

// The recorded datagrams and what they announce (test_onvif_corpus.cpp checks the reading).
const std::string kPredator = "360vision/HD_PREDATOR/ProbeMatches.xml";
const std::string kPredatorUrl = "http://192.168.68.111/onvif/services";
const std::string kPredatorUuid = "c9790c3a-701b-464d-a189-0060351c8ada";
const std::string kXiongmai = "xiongmai/IPC-model/ProbeMatches.xml";
const std::string kXiongmaiUrl = "http://192.168.1.35:8899/onvif/device_service";
const std::string kYiHello = "onvif_simple_server/Hello.xml";
const std::string kYiBye = "onvif_simple_server/Bye.xml";
const std::string kYiUrl = "http://192.168.1.20/onvif/device_service";
const std::string kYiUuid = "1c6a8b2e-3d4f-5a6b-8c7d-0e1f2a3b4c5d";
const std::string kYiMessageId = "uuid:5f1d9a3e-4c2b-4e8f-9a61-2b7c0d4e8f10";

std::string corpus(const std::string& file) {
    return readFile(kCorpus / file);
}

// The Probe a recorded ProbeMatches answers.
std::string relatesTo(const std::string& datagram) {
    std::string error;
    const auto message = decodeDiscovery(datagram, error);
    EXPECT_TRUE(message) << error;
    return message ? message->relatesTo : "";
}

CameraReport up(const std::string& manufacturer = "360Vision") {
    CameraReport report;
    report.state = CameraState::UpWithAuth;
    report.auth = AuthResult::Accepted;
    report.manufacturer = manufacturer;
    report.profiles = {{"main", "main", "H264", 1920, 1080, "rtsp://192.168.68.111/h264main"}};
    return report;
}

CameraReport unreachable() {
    CameraReport report;
    report.state = CameraState::Unreachable;
    report.error = "connection refused";
    return report;
}

const std::vector<Instance>* snapshotIn(const CameraEffects& effects) {
    const std::vector<Instance>* last = nullptr;
    for (const SinkReport& report : effects.reports)
        if (const auto* snapshot = std::get_if<OfferedSnapshot>(&report)) last = &snapshot->instances;
    return last;
}

const IgnoredAnswer* ignoredFor(const OnvifCameras& cameras, const std::string& sender) {
    for (const IgnoredAnswer& answer : cameras.ignoredAnswers())
        if (answer.sender == sender) return &answer;
    return nullptr;
}

class Cameras : public testing::Test {
protected:
    void make(bool pass = false) {
        cameras_.emplace("cams", details_, pass);
        cameras_->cycleStarted(now_);
    }
    // A recorded ProbeMatches answering a Probe of ours, from `sender`.
    CameraEffects probeMatches(const std::string& datagram, const std::string& sender) {
        cameras_->probeSent(relatesTo(datagram));
        return cameras_->datagram(datagram, sender, true, now_);
    }
    CameraEffects hello(const std::string& datagram, const std::string& sender) {
        return cameras_->datagram(datagram, sender, false, now_);
    }
    // The camera announced by `datagram` from `sender`, queried and found up; the first
    // window closed.
    CameraCall offered(const std::string& datagram, const std::string& sender, bool answer = true) {
        CameraEffects found = answer ? probeMatches(datagram, sender) : hello(datagram, sender);
        EXPECT_EQ(found.calls.size(), 1u);
        if (found.calls.empty()) return {};
        cameras_->windowClosed(now_);
        const CameraEffects queried = cameras_->callReturned(found.calls.front(), up(), now_);
        EXPECT_TRUE(snapshotIn(queried));
        return found.calls.front();
    }

    OnvifCameras::TimePoint now_{std::chrono::hours(1)};
    OnvifDetails details_;
    std::optional<OnvifCameras> cameras_;
};

class CorpusProbeMatches : public testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(CorpusProbeMatches, FromTheCamerasAddressMakeAQueryAndAnInstance) {
    const auto& [file, url] = GetParam();
    OnvifCameras cameras("cams", {}, false);
    const OnvifCameras::TimePoint now{1h};
    cameras.cycleStarted(now);
    const std::string datagram = corpus(file);
    cameras.probeSent(relatesTo(datagram));
    const CameraEffects found = cameras.datagram(datagram, urlHost(url), true, now);
    ASSERT_EQ(found.calls.size(), 1u);
    const CameraCall& call = found.calls.front();
    EXPECT_EQ(call.purpose, CameraCall::Purpose::Query);
    EXPECT_EQ(call.url, url);
    EXPECT_FALSE(call.credential);
    EXPECT_FALSE(snapshotIn(found)) << "no snapshot before the window closes";

    cameras.windowClosed(now);
    const CameraEffects queried = cameras.callReturned(call, up(), now);
    const std::vector<Instance>* snapshot = snapshotIn(queried);
    ASSERT_TRUE(snapshot);
    ASSERT_EQ(snapshot->size(), 1u);
    EXPECT_EQ(snapshot->front().id, call.camera);
    EXPECT_EQ(snapshot->front().id.rfind(url + "-", 0), 0u);
    EXPECT_EQ(snapshot->front().properties.at("ONVIF_DEVICE_SERVICE_URL"), url);
    EXPECT_TRUE(cameras.ignoredAnswers().empty());
}

INSTANTIATE_TEST_SUITE_P(
    Corpus, CorpusProbeMatches,
    testing::Values(std::pair{kPredator, kPredatorUrl}, std::pair{kXiongmai, kXiongmaiUrl},
                    std::pair{std::string("onvif_simple_server/ProbeMatches.xml"), kYiUrl}));

TEST_F(Cameras, ProbeMatchesNamingAnotherAddressAreNotQueried) {
    make();
    const CameraEffects effects = probeMatches(corpus(kPredator), "192.168.68.200");
    EXPECT_TRUE(effects.calls.empty());
    const IgnoredAnswer* answer = ignoredFor(*cameras_, "192.168.68.200");
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->reason, "XAddrs not at the sender's address");
    EXPECT_EQ(answer->uuid, kPredatorUuid);
}

TEST_F(Cameras, UnicastTargetsAdmitXAddrsInsideThem) {
    std::string error;
    details_.unicastTargets = {*parseIpv4Range("192.168.68.0/24", error)};
    make();
    const CameraEffects effects = probeMatches(corpus(kPredator), "10.0.0.1");
    ASSERT_EQ(effects.calls.size(), 1u);
    EXPECT_EQ(effects.calls.front().url, kPredatorUrl);
}

TEST_F(Cameras, ProbeMatchesToNoProbeOfOursAreIgnored) {
    make();
    const CameraEffects effects = cameras_->datagram(corpus(kPredator), "192.168.68.111", true, now_);
    EXPECT_TRUE(effects.calls.empty());
    ASSERT_TRUE(ignoredFor(*cameras_, "192.168.68.111"));
    EXPECT_EQ(ignoredFor(*cameras_, "192.168.68.111")->reason, "answers no Probe of ours");
}

TEST_F(Cameras, RetransmissionIsNotQueriedAgain) {
    make();
    EXPECT_EQ(probeMatches(corpus(kPredator), "192.168.68.111").calls.size(), 1u);
    EXPECT_TRUE(probeMatches(corpus(kPredator), "192.168.68.111").calls.empty());
    // The daemon only counts retransmissions; the status page does not list them.
    EXPECT_TRUE(cameras_->ignoredAnswers().empty());
}

TEST_F(Cameras, PassListsRetransmissions) {
    make(true);
    probeMatches(corpus(kPredator), "192.168.68.111");
    probeMatches(corpus(kPredator), "192.168.68.111");
    ASSERT_EQ(cameras_->ignoredAnswers().size(), 1u);
    EXPECT_EQ(cameras_->ignoredAnswers().front().reason.rfind("duplicate", 0), 0u);
}

TEST_F(Cameras, SameMessageIdFromAnotherCameraIsNoRetransmission) {
    make();
    // Two cameras of one firmware booted together send the same MessageID.
    const std::string second = replaced(replaced(corpus(kYiHello), "192.168.1.20", "192.168.1.21"),
                                        "1c6a8b2e-3d4f", "2c6a8b2e-3d4f");
    EXPECT_EQ(hello(corpus(kYiHello), "192.168.1.20").calls.size(), 1u);
    EXPECT_EQ(hello(second, "192.168.1.21").calls.size(), 1u);
}

TEST_F(Cameras, ByeFromTheCamerasAddressWithdrawsIt) {
    make();
    offered(corpus(kYiHello), "192.168.1.20", false);
    // The recorded Bye repeats the recorded Hello's MessageID; as another message it needs its own.
    const std::string bye = replaced(corpus(kYiBye), kYiMessageId, "uuid:bye");
    const CameraEffects effects = hello(bye, "192.168.1.20");
    const std::vector<Instance>* snapshot = snapshotIn(effects);
    ASSERT_TRUE(snapshot);
    EXPECT_TRUE(snapshot->empty());
}

TEST_F(Cameras, ByeFromAnotherAddressIsIgnored) {
    make();
    offered(corpus(kYiHello), "192.168.1.20", false);
    const std::string bye = replaced(corpus(kYiBye), kYiMessageId, "uuid:bye");
    const CameraEffects effects = hello(bye, "192.168.1.66");
    EXPECT_FALSE(snapshotIn(effects));
    ASSERT_TRUE(ignoredFor(*cameras_, "192.168.1.66"));
    EXPECT_EQ(ignoredFor(*cameras_, "192.168.1.66")->reason, "Bye for a camera found at another address");
}

TEST_F(Cameras, HelloWithoutXAddrsIsResolvedAtItsSender) {
    make();
    const std::string helloWithout = readFile(kSeeds / "discovery" / "hello-without-xaddrs");
    const CameraEffects effects = hello(helloWithout, "192.0.2.10");
    EXPECT_TRUE(effects.calls.empty());
    ASSERT_EQ(effects.resolves.size(), 1u);
    const ResolveRequest request = effects.resolves.front();
    EXPECT_EQ(request.sender, "192.0.2.10");
    EXPECT_EQ(request.uuid, "8f0e1d2c-3b4a-4596-8778-695a4b3c2d1e");
    cameras_->resolveSent(request, "uuid:resolve-1", now_);

    DiscoveredEndpoint endpoint;
    endpoint.address = request.endpointAddress;
    endpoint.types = {std::string("{") + kOnvifNetworkNamespace + "}NetworkVideoTransmitter"};
    endpoint.xaddrs = {"http://192.0.2.10/onvif/device_service"};
    const std::string matches = encodeResolveMatches("uuid:answer-1", "uuid:resolve-1", endpoint);
    // From another host: not ours to believe.
    EXPECT_TRUE(cameras_->datagram(matches, "192.0.2.11", true, now_).calls.empty());
    EXPECT_EQ(ignoredFor(*cameras_, "192.0.2.11")->reason, "answers no Resolve of ours to this address");
    const CameraEffects resolved = cameras_->datagram(matches, "192.0.2.10", true, now_);
    ASSERT_EQ(resolved.calls.size(), 1u);
    EXPECT_EQ(resolved.calls.front().url, "http://192.0.2.10/onvif/device_service");
}

TEST_F(Cameras, ResolveIsNotRepeatedForTenSeconds) {
    make();
    const std::string helloWithout = readFile(kSeeds / "discovery" / "hello-without-xaddrs");
    const CameraEffects first = hello(helloWithout, "192.0.2.10");
    ASSERT_EQ(first.resolves.size(), 1u);
    cameras_->resolveSent(first.resolves.front(), "uuid:resolve-1", now_);
    const std::string again =
        replaced(helloWithout, "0000-4000-8000-000000000001", "0000-4000-8000-000000000002");
    now_ += 9s;
    EXPECT_TRUE(hello(again, "192.0.2.10").resolves.empty());
    const std::string third =
        replaced(helloWithout, "0000-4000-8000-000000000001", "0000-4000-8000-000000000003");
    now_ += 1s;
    EXPECT_EQ(hello(third, "192.0.2.10").resolves.size(), 1u);
}

TEST_F(Cameras, ResolveThatCouldNotBeSentIsReported) {
    make(true);
    const CameraEffects effects =
        hello(readFile(kSeeds / "discovery" / "hello-without-xaddrs"), "192.0.2.10");
    ASSERT_EQ(effects.resolves.size(), 1u);
    cameras_->resolveNotSent(effects.resolves.front(),
                             "no XAddrs, and the Resolve could not be sent: no route", now_);
    ASSERT_TRUE(ignoredFor(*cameras_, "192.0.2.10"));
    EXPECT_EQ(ignoredFor(*cameras_, "192.0.2.10")->reason,
              "no XAddrs, and the Resolve could not be sent: no route");
}

TEST_F(Cameras, ClaimantOfAnAnsweringCamerasUuidIsRefused) {
    make();
    const CameraCall first = offered(corpus(kYiHello), "192.168.1.20", false);
    const std::string claim =
        replaced(replaced(corpus(kYiHello), "192.168.1.20", "192.168.1.30"), kYiMessageId, "uuid:claim-1");
    const CameraEffects claimed = hello(claim, "192.168.1.30");
    ASSERT_EQ(claimed.calls.size(), 1u);
    EXPECT_EQ(claimed.calls.front().purpose, CameraCall::Purpose::Claims);
    EXPECT_EQ(claimed.calls.front().url, kYiUrl) << "asked where it was found";
    const CameraEffects checked = cameras_->callReturned(claimed.calls.front(), up(), now_);
    EXPECT_TRUE(checked.calls.empty());
    EXPECT_FALSE(snapshotIn(checked)) << "the instance stays as it is";
    ASSERT_TRUE(ignoredFor(*cameras_, "192.168.1.30"));
    EXPECT_EQ(ignoredFor(*cameras_, "192.168.1.30")->reason,
              "uuid already announced by 192.168.1.20, which still answers");

    // Not listened to for ten seconds: each claim costs a call to the camera.
    now_ += 9s;
    EXPECT_TRUE(hello(replaced(claim, "uuid:claim-1", "uuid:claim-2"), "192.168.1.30").calls.empty());
    now_ += 1s;
    EXPECT_EQ(hello(replaced(claim, "uuid:claim-1", "uuid:claim-3"), "192.168.1.30").calls.size(), 1u);
    EXPECT_EQ(first.camera, kYiUrl + "-" + kYiUuid);
}

TEST_F(Cameras, CameraThatMovedKeepsItsInstance) {
    make();
    const CameraCall first = offered(corpus(kYiHello), "192.168.1.20", false);
    const std::string moved = replaced(replaced(corpus(kYiHello), "192.168.1.20", "192.168.1.30"),
                                       kYiMessageId, "uuid:after-lease");
    const CameraEffects claimed = hello(moved, "192.168.1.30");
    ASSERT_EQ(claimed.calls.size(), 1u);
    const CameraEffects checked = cameras_->callReturned(claimed.calls.front(), unreachable(), now_);
    ASSERT_EQ(checked.calls.size(), 1u);
    const CameraCall& query = checked.calls.front();
    EXPECT_EQ(query.purpose, CameraCall::Purpose::Query);
    EXPECT_EQ(query.url, "http://192.168.1.30/onvif/device_service");

    const CameraEffects queried = cameras_->callReturned(query, up(), now_);
    const std::vector<Instance>* snapshot = snapshotIn(queried);
    ASSERT_TRUE(snapshot);
    ASSERT_EQ(snapshot->size(), 1u);
    EXPECT_EQ(snapshot->front().id, first.camera);
    EXPECT_EQ(snapshot->front().properties.at("ONVIF_DEVICE_SERVICE_URL"), query.url);
    const std::vector<CameraStatus> statuses = cameras_->statuses();
    ASSERT_EQ(statuses.size(), 1u);
    EXPECT_EQ(statuses.front().movedFrom, kYiUrl);
}

TEST_F(Cameras, TwoClaimantsOfASilentCameraTakeNothingOver) {
    make();
    offered(corpus(kYiHello), "192.168.1.20", false);
    const std::string base = replaced(corpus(kYiHello), kYiMessageId, "uuid:claim");
    const CameraEffects claimed = hello(replaced(base, "192.168.1.20", "192.168.1.30"), "192.168.1.30");
    ASSERT_EQ(claimed.calls.size(), 1u);
    EXPECT_TRUE(hello(replaced(base, "192.168.1.20", "192.168.1.31"), "192.168.1.31").calls.empty())
        << "waits for the call in flight";
    const CameraEffects checked = cameras_->callReturned(claimed.calls.front(), unreachable(), now_);
    EXPECT_TRUE(checked.calls.empty());
    ASSERT_TRUE(ignoredFor(*cameras_, "192.168.1.31"));
    EXPECT_NE(ignoredFor(*cameras_, "192.168.1.31")->reason.find("claimed by several hosts at once"),
              std::string::npos);
    EXPECT_EQ(cameras_->statuses().front().serviceUrl, kYiUrl);
}

TEST_F(Cameras, PassKeepsTheFirstOfTwoHostsNamingOneUuid) {
    make(true);
    hello(corpus(kYiHello), "192.168.1.20");
    const std::string second =
        replaced(replaced(corpus(kYiHello), "192.168.1.20", "192.168.1.30"), kYiMessageId, "uuid:second");
    EXPECT_TRUE(hello(second, "192.168.1.30").calls.empty());
    EXPECT_EQ(ignoredFor(*cameras_, "192.168.1.30")->reason, "uuid already announced by 192.168.1.20");
}

TEST_F(Cameras, NewMetadataVersionQueriesAgain) {
    make();
    offered(corpus(kYiHello), "192.168.1.20", false);
    const std::string sameVersion = replaced(corpus(kYiHello), kYiMessageId, "uuid:again");
    EXPECT_TRUE(hello(sameVersion, "192.168.1.20").calls.empty());
    const std::string newVersion = replaced(replaced(corpus(kYiHello), kYiMessageId, "uuid:changed"),
                                            "<wsdd:MetadataVersion>0</wsdd:MetadataVersion>",
                                            "<wsdd:MetadataVersion>1</wsdd:MetadataVersion>");
    const CameraEffects effects = hello(newVersion, "192.168.1.20");
    ASSERT_EQ(effects.calls.size(), 1u);
    EXPECT_EQ(effects.calls.front().purpose, CameraCall::Purpose::Query);
}

TEST_F(Cameras, LivenessChecksWithdrawACameraThatStopsAnswering) {
    details_.missedChecks = 2;
    make();
    offered(corpus(kPredator), "192.168.68.111");
    for (int check = 1; check <= 2; ++check) {
        now_ += 10s;
        const CameraEffects due = cameras_->livenessDue(now_);
        ASSERT_EQ(due.calls.size(), 1u);
        // The first check is the short one; after a miss the camera gets the full query.
        EXPECT_EQ(due.calls.front().purpose,
                  check == 1 ? CameraCall::Purpose::Liveness : CameraCall::Purpose::Query);
        const CameraEffects checked = cameras_->callReturned(due.calls.front(), unreachable(), now_);
        if (check == 1) {
            EXPECT_FALSE(snapshotIn(checked));
        } else {
            ASSERT_TRUE(snapshotIn(checked));
            EXPECT_TRUE(snapshotIn(checked)->empty());
        }
    }
    // Gone, it is still queried at each check, and offered again when it answers.
    const CameraEffects due = cameras_->livenessDue(now_);
    ASSERT_EQ(due.calls.size(), 1u);
    EXPECT_EQ(due.calls.front().purpose, CameraCall::Purpose::Query);
    EXPECT_EQ(snapshotIn(cameras_->callReturned(due.calls.front(), up(), now_))->size(), 1u);
}

TEST_F(Cameras, NoCallWhileOneIsInFlight) {
    make();
    const CameraEffects found = probeMatches(corpus(kPredator), "192.168.68.111");
    ASSERT_EQ(found.calls.size(), 1u);
    EXPECT_TRUE(cameras_->callsInFlight());
    EXPECT_TRUE(cameras_->livenessDue(now_).calls.empty());
    cameras_->callReturned(found.calls.front(), up(), now_);
    EXPECT_FALSE(cameras_->callsInFlight());
}

TEST_F(Cameras, FilteredCameraIsNeverQueried) {
    details_.scopes = FilterList{FilterAction::Exclude, {"onvif://www.onvif.org/name/PREDATOR"}};
    make();
    const CameraEffects effects = probeMatches(corpus(kPredator), "192.168.68.111");
    EXPECT_TRUE(effects.calls.empty());
    const std::vector<CameraStatus> statuses = cameras_->statuses();
    ASSERT_EQ(statuses.size(), 1u);
    EXPECT_EQ(statuses.front().status, DeviceStatus::NotQueried);
    EXPECT_FALSE(statuses.front().offered);
}

TEST_F(Cameras, CredentialGoesOnlyInsideItsNetworks) {
    make();
    std::string error;
    cameras_->setCredentials(
        CredentialStore::withDefault({"admin", "secret"}, {*IpNetwork::parse("192.168.68.0/24", error)},
                                     "the test's network"),
        "");
    const CameraEffects inside = probeMatches(corpus(kPredator), "192.168.68.111");
    ASSERT_EQ(inside.calls.size(), 1u);
    ASSERT_TRUE(inside.calls.front().credential);
    EXPECT_EQ(inside.calls.front().credential->username, "admin");
    const CameraEffects outside = probeMatches(corpus(kXiongmai), "192.168.1.35");
    ASSERT_EQ(outside.calls.size(), 1u);
    EXPECT_FALSE(outside.calls.front().credential);
    EXPECT_FALSE(outside.calls.front().credentialWithheld.empty());
}

TEST_F(Cameras, RefusedCredentialsAreAProbeError) {
    make();
    const CameraEffects found = probeMatches(corpus(kPredator), "192.168.68.111");
    ASSERT_EQ(found.calls.size(), 1u);
    cameras_->windowClosed(now_);
    CameraReport refused = up();
    refused.state = CameraState::UpWithoutAuth;
    refused.auth = AuthResult::Refused;
    const CameraEffects effects = cameras_->callReturned(found.calls.front(), refused, now_);
    std::optional<std::string> problem;
    for (const SinkReport& report : effects.reports)
        if (const auto* p = std::get_if<ProbeProblem>(&report)) problem = p->message;
    ASSERT_TRUE(problem);
    EXPECT_EQ(*problem, "authentication failed for 1 camera: " + kPredatorUuid);
}

TEST_F(Cameras, FloodingSenderIsRateLimitedAndProbedAgain) {
    make();
    const std::string datagram = corpus(kPredator);
    cameras_->probeSent(relatesTo(datagram));
    bool limited = false;
    for (int i = 0; i < 200 && !limited; ++i) {
        const std::string copy = replaced(datagram, "<wsa:MessageID>", "<wsa:MessageID>" + std::to_string(i));
        limited = cameras_->datagram(copy, "192.168.68.200", true, now_).probeSenderAgain;
    }
    EXPECT_TRUE(limited);
    EXPECT_NE(ignoredFor(*cameras_, "192.168.68.200"), nullptr);
    bool rateLimited = false;
    for (const IgnoredAnswer& answer : cameras_->ignoredAnswers())
        rateLimited |= answer.reason.rfind("rate-limited", 0) == 0;
    EXPECT_TRUE(rateLimited);
    // Another sender keeps its own share.
    EXPECT_FALSE(cameras_->datagram(datagram, "192.168.68.111", true, now_).probeSenderAgain);
}

TEST_F(Cameras, NetworkFailureIsAProbeError) {
    make();
    const CameraEffects effects =
        cameras_->networkFailed("cannot open the WS-Discovery socket: denied", now_);
    ASSERT_EQ(effects.reports.size(), 1u);
    EXPECT_EQ(std::get<ProbeProblem>(effects.reports.front()).message,
              "cannot open the WS-Discovery socket: denied");
    EXPECT_EQ(cameras_->networkProblem(), "cannot open the WS-Discovery socket: denied");
}

TEST_F(Cameras, IgnoredAnswersAreForgottenAfterTwoCycles) {
    make();
    probeMatches(corpus(kPredator), "192.168.68.200");
    ASSERT_EQ(cameras_->ignoredAnswers().size(), 1u);
    cameras_->cycleStarted(now_);
    EXPECT_EQ(cameras_->ignoredAnswers().size(), 1u);
    cameras_->cycleStarted(now_);
    EXPECT_TRUE(cameras_->ignoredAnswers().empty());
}

}  // namespace
}  // namespace devlet::onvif
