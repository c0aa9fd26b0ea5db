// The onvif handler's discoveryDetails: Akri's keys and defaults, devlet's additions, and
// every bad value reported at its line (relative to the details text).

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "probes/onvif/onvif_details.h"

namespace devlet::onvif {
namespace {

using namespace std::chrono_literals;

std::string describe(const std::vector<DetailsProblem>& problems) {
    std::string text;
    for (const DetailsProblem& p : problems) text += std::to_string(p.line) + ": " + p.message + "\n";
    return text;
}

TEST(OnvifDetails, EmptyDetailsAreAkrisDefaults) {
    for (const char* text : {"", "\n", "# nothing\n"}) {
        std::vector<DetailsProblem> problems;
        OnvifDetails details = parseOnvifDetails(text, problems);
        EXPECT_TRUE(problems.empty()) << describe(problems);
        EXPECT_FALSE(details.ipAddresses);
        EXPECT_FALSE(details.uuids);
        EXPECT_EQ(details.discoveryTimeout, 1000ms);
        EXPECT_TRUE(details.offerUnauthenticated);
        EXPECT_FALSE(details.ipv6);
    }
}

TEST(OnvifDetails, AkriHelmDefaultsParse) {
    // What Akri's Helm chart renders for the onvif configuration.
    std::vector<DetailsProblem> problems;
    OnvifDetails details = parseOnvifDetails(
        "ipAddresses:\n"
        "  action: Exclude\n"
        "  items: []\n"
        "macAddresses:\n"
        "  action: Exclude\n"
        "  items: []\n"
        "scopes:\n"
        "  action: Exclude\n"
        "  items: []\n"
        "uuids:\n"
        "  action: Exclude\n"
        "  items: []\n"
        "discoveryTimeoutSeconds: 1\n",
        problems);
    EXPECT_TRUE(problems.empty()) << describe(problems);
    ASSERT_TRUE(details.ipAddresses);
    EXPECT_EQ(details.ipAddresses->action, FilterAction::Exclude);
    EXPECT_TRUE(details.ipAddresses->items.empty());
    ASSERT_TRUE(details.uuids);
    EXPECT_EQ(details.discoveryTimeout, 1s);
}

TEST(OnvifDetails, ActionDefaultsToInclude) {
    std::vector<DetailsProblem> problems;
    OnvifDetails details = parseOnvifDetails("uuids:\n  items: [a, b]\n", problems);
    EXPECT_TRUE(problems.empty()) << describe(problems);
    ASSERT_TRUE(details.uuids);
    EXPECT_EQ(details.uuids->action, FilterAction::Include);
    EXPECT_EQ(details.uuids->items, (std::vector<std::string>{"a", "b"}));
}

TEST(OnvifDetails, DevletAdditionsAreRead) {
    std::vector<DetailsProblem> problems;
    OnvifDetails details = parseOnvifDetails(
        "probeRetransmissions: 3\n"
        "interfaces: [eth0, eth1]\n"
        "ipv6: true\n"
        "unicastTargets: [192.0.2.7, 198.51.100.0/24]\n"
        "unicastConcurrency: 64\n"
        "rescanIntervalSeconds: 30\n"
        "livenessIntervalSeconds: 5\n"
        "missedChecks: 3\n"
        "credentialsFile: /etc/devlet/onvif-credentials.yaml\n"
        "offerUnauthenticated: false\n",
        problems);
    EXPECT_TRUE(problems.empty()) << describe(problems);
    EXPECT_EQ(details.probeRetransmissions, 3);
    EXPECT_EQ(details.interfaces, (std::vector<std::string>{"eth0", "eth1"}));
    EXPECT_TRUE(details.ipv6);
    ASSERT_EQ(details.unicastTargets.size(), 2u);
    EXPECT_EQ(details.unicastTargets[0].size(), 1u);
    EXPECT_EQ(details.unicastTargets[1].size(), 254u);
    EXPECT_EQ(details.unicastConcurrency, 64);
    EXPECT_EQ(details.rescanInterval, 30s);
    EXPECT_EQ(details.livenessInterval, 5s);
    EXPECT_EQ(details.missedChecks, 3);
    EXPECT_EQ(details.credentialsFile, "/etc/devlet/onvif-credentials.yaml");
    EXPECT_FALSE(details.offerUnauthenticated);
}

TEST(OnvifDetails, CidrRangeSkipsNetworkAndBroadcast) {
    std::string error;
    auto range = parseIpv4Range("192.0.2.0/30", error);
    ASSERT_TRUE(range) << error;
    EXPECT_EQ(range->first, 0xC0000201u);
    EXPECT_EQ(range->last, 0xC0000202u);
    auto pair = parseIpv4Range("192.0.2.4/31", error);
    ASSERT_TRUE(pair);
    EXPECT_EQ(pair->size(), 2u);
    EXPECT_FALSE(parseIpv4Range("192.0.2.0/33", error));
    EXPECT_FALSE(parseIpv4Range("camera.local", error));
}

struct BadValue {
    const char* text;
    int line;
    const char* part;
};

class OnvifDetailsBadValue : public ::testing::TestWithParam<BadValue> {};

TEST_P(OnvifDetailsBadValue, IsReportedAtItsLine) {
    const BadValue& bad = GetParam();
    std::vector<DetailsProblem> problems;
    parseOnvifDetails(bad.text, problems);
    ASSERT_EQ(problems.size(), 1u) << describe(problems);
    EXPECT_EQ(problems[0].line, bad.line) << problems[0].message;
    EXPECT_NE(problems[0].message.find(bad.part), std::string::npos) << problems[0].message;
}

INSTANTIATE_TEST_SUITE_P(
    Values, OnvifDetailsBadValue,
    ::testing::Values(BadValue{"discoveryTimeoutSeconds: 1\nuuid: []\n", 2, "did you mean \"uuids\""},
                      BadValue{"scopes:\n  action: include\n", 2, "did you mean \"Include\""},
                      BadValue{"ipAddresses:\n  action: Include\n  itmes: [a]\n", 3,
                               "did you mean \"items\""},
                      BadValue{"macAddresses:\n  items: a\n", 2, "must be a list"},
                      BadValue{"discoveryTimeoutSeconds: 0\n", 1, "from 1 to 60"},
                      BadValue{"discoveryTimeoutSeconds: soon\n", 1, "whole number"},
                      BadValue{"missedChecks: 0\n", 1, "missedChecks"},
                      BadValue{"unicastTargets: [192.0.2.300]\n", 1, "not an IPv4 address"},
                      BadValue{"unicastTargets: [10.0.0.0/8]\n", 1, "at most 65536"},
                      BadValue{"credentialsFile: creds.yaml\n", 1, "absolute path"},
                      BadValue{"credential: /run/credentials/x\n", 1, "not a path"},
                      BadValue{"offerUnauthenticated: maybe\n", 1, "true or false"},
                      BadValue{"ipv6: sometimes\n", 1, "ipv6 must be true or false"},
                      BadValue{"[1, 2]\n", 1, "must be a mapping"}));

// Akri's credential forms, given with value: each is refused with where it goes instead,
// and no warning shows a value.
TEST(OnvifProperties, AkriCredentialFormsAreRefusedWithoutShowingThem) {
    const std::map<std::string, std::string> properties = {
        {"username_default", "admin"},
        {"password_default", "hunter2"},
        {"username_3fa1fe68_b915_4053_a3e1_ac15a21f5f91", "viewer"},
        {"password_3fa1fe68_b915_4053_a3e1_ac15a21f5f91", "hunter3"},
        {"device_credential_list", "[\"cams\"]"},
        {"cams",
         "{\"3fa1fe68-b915-4053-a3e1-ac15a21f5f91\": {\"username\": \"u\", \"password\": \"aHVudGVyNA==\", "
         "\"base64encoded\": true}}"},
        {"device_credential_ref_list", "[\"refs\"]"},
        {"refs",
         "{\"3fa1fe68-b915-4053-a3e1-ac15a21f5f91\": {\"username_ref\": \"cam_user\", \"password_ref\": "
         "\"cam_pass\"}}"},
        {"cam_user", "u"},
        {"cam_pass", "hunter5"},
        {"brightness", "7"},
    };
    const std::vector<PropertyWarning> warnings = onvifPropertyWarnings(properties);
    ASSERT_EQ(warnings.size(), properties.size());
    std::map<std::string, std::string> byName;
    for (const PropertyWarning& w : warnings) {
        byName[w.property] = w.message;
        for (const char* secret : {"hunter", "aHVudGVy", "viewer"})
            EXPECT_EQ(w.message.find(secret), std::string::npos) << w.property << ": " << w.message;
    }
    for (const char* name : {"username_default", "password_default"})
        EXPECT_NE(byName.at(name).find("it is not used"), std::string::npos) << byName.at(name);
    EXPECT_NE(byName.at("username_default").find("as default"), std::string::npos);
    EXPECT_NE(byName.at("password_3fa1fe68_b915_4053_a3e1_ac15a21f5f91")
                  .find("3fa1fe68-b915-4053-a3e1-ac15a21f5f91"),
              std::string::npos);
    for (const char* name :
         {"device_credential_list", "device_credential_ref_list", "cams", "refs", "cam_user", "cam_pass"})
        EXPECT_NE(byName.at(name).find("not used"), std::string::npos) << name << ": " << byName.at(name);
    EXPECT_NE(byName.at("brightness").find("ignored"), std::string::npos);
    EXPECT_EQ(byName.at("brightness").find("credential"), std::string::npos);
}

TEST(OnvifProperties, AMalformedCredentialListIsSaidToBeOne) {
    const std::vector<PropertyWarning> warnings =
        onvifPropertyWarnings({{"device_credential_list", "[oops"}});
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].message.find("not a JSON list"), std::string::npos) << warnings[0].message;
}

}  // namespace
}  // namespace devlet::onvif
