// The udev handler's discoveryDetails: Akri's keys with their defaults, devlet's
// additions, and every bad value reported at its line (relative to the details text).

#include <chrono>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "probes/usb/udev_details.h"

namespace devlet::usb {
namespace {

using namespace std::chrono_literals;

std::vector<DetailsProblem> problemsOf(const std::string& text) {
    std::vector<DetailsProblem> problems;
    parseUdevDetails(text, problems);
    return problems;
}

std::string describe(const std::vector<DetailsProblem>& problems) {
    std::string text;
    for (const DetailsProblem& p : problems) text += std::to_string(p.line) + ": " + p.message + "\n";
    return text;
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

TEST(UdevDetails, AkriExampleParsesWithAkriDefaults) {
    // Akri's documented udev configuration (docs: discovery-handlers/udev.md).
    std::vector<DetailsProblem> problems;
    UdevDetails details = parseUdevDetails(
        "udevRules:\n"
        "  - 'SUBSYSTEM==\"video4linux\", ENV{ID_V4L_CAPABILITIES}==\":capture:\"'\n"
        "  - 'KERNEL==\"video[0-9]*\"'\n",
        problems);
    EXPECT_TRUE(problems.empty()) << describe(problems);
    ASSERT_EQ(details.rules.size(), 2u);
    EXPECT_EQ(details.rules[0].text(), "SUBSYSTEM==\"video4linux\", ENV{ID_V4L_CAPABILITIES}==\":capture:\"");
    EXPECT_EQ(details.rules[1].text(), "KERNEL==\"video[0-9]*\"");
    EXPECT_FALSE(details.groupRecursive);
    EXPECT_EQ(details.permissions, "rwm");
    EXPECT_EQ(details.stableIdentity, StableIdentity::Devpath);
    EXPECT_EQ(details.rescanInterval, 300s);
    EXPECT_TRUE(details.hotplugEvents);
}

TEST(UdevDetails, EveryKeyIsRead) {
    std::vector<DetailsProblem> problems;
    UdevDetails details = parseUdevDetails(
        "udevRules: ['SUBSYSTEM==\"usb\"']\n"
        "groupRecursive: true\n"
        "permissions: rw\n"
        "stableIdentity: usb\n"
        "rescanIntervalSeconds: 3600\n"
        "hotplugEvents: false\n",
        problems);
    EXPECT_TRUE(problems.empty()) << describe(problems);
    EXPECT_EQ(details.rules.size(), 1u);
    EXPECT_FALSE(details.hotplugEvents);
    EXPECT_TRUE(details.groupRecursive);
    EXPECT_EQ(details.permissions, "rw");
    EXPECT_EQ(details.stableIdentity, StableIdentity::Usb);
    EXPECT_EQ(details.rescanInterval, 3600s);
}

TEST(UdevDetails, EveryPermissionAkriAllowsIsAccepted) {
    for (const std::string permissions : {"r", "w", "m", "rw", "rm", "rwm", "wm"}) {
        std::vector<DetailsProblem> problems;
        UdevDetails details = parseUdevDetails(
            "udevRules: ['KERNEL==\"video0\"']\npermissions: " + permissions + "\n", problems);
        EXPECT_TRUE(problems.empty()) << permissions << ": " << describe(problems);
        EXPECT_EQ(details.permissions, permissions);
    }
}

TEST(UdevDetails, StableIdentityDevpathIsAkrisId) {
    std::vector<DetailsProblem> problems;
    UdevDetails details =
        parseUdevDetails("udevRules: ['KERNEL==\"video0\"']\nstableIdentity: devpath\n", problems);
    EXPECT_TRUE(problems.empty()) << describe(problems);
    EXPECT_EQ(details.stableIdentity, StableIdentity::Devpath);
}

TEST(UdevDetails, RescanIntervalBoundsAreAccepted) {
    for (const auto& [text, expected] : {std::pair{"1", 1s}, std::pair{"86400", 86400s}}) {
        std::vector<DetailsProblem> problems;
        UdevDetails details = parseUdevDetails(
            std::string("udevRules: ['KERNEL==\"video0\"']\nrescanIntervalSeconds: ") + text, problems);
        EXPECT_TRUE(problems.empty()) << text << ": " << describe(problems);
        EXPECT_EQ(details.rescanInterval, expected);
    }
}

struct BadValue {
    const char* text;
    int line;
    const char* message;
};

// gtest looks this name up to print a parameter.
void PrintTo(const BadValue& bad, std::ostream* out) {  // NOLINT(readability-identifier-naming)
    *out << bad.text;
}

class UdevDetailsBadValue : public testing::TestWithParam<BadValue> {};

TEST_P(UdevDetailsBadValue, IsReportedAtItsLine) {
    const BadValue& bad = GetParam();
    auto problems = problemsOf(bad.text);
    ASSERT_EQ(problems.size(), 1u) << bad.text << "\n" << describe(problems);
    EXPECT_EQ(problems[0].line, bad.line) << problems[0].message;
    EXPECT_TRUE(contains(problems[0].message, bad.message)) << problems[0].message;
}

constexpr const char* kRule = "udevRules: ['KERNEL==\"video0\"']\n";

INSTANTIATE_TEST_SUITE_P(
    Table, UdevDetailsBadValue,
    testing::Values(
        BadValue{"groupRecursive: true\n", 1, "udev needs \"udevRules\""},
        BadValue{"udevRules: 'KERNEL==\"video0\"'\n", 1, "udevRules must be a list of udev rules"},
        BadValue{"udevRules:\n  - KERNEL: video0\n", 2, "udevRules[0] must be a string"},
        BadValue{"udevRules: ['KERNEL==\"video0\"']\ngroupRecursive: maybe\n", 2,
                 "groupRecursive must be true or false; got \"maybe\""},
        BadValue{"udevRules: ['KERNEL==\"video0\"']\n\npermissions: rwmx\n", 3,
                 "permissions must be one of r, w, m, rw, rm, rwm, wm; got \"rwmx\"; did you mean \"rwm\"?"},
        BadValue{"udevRules: ['KERNEL==\"video0\"']\npermissions: mw\n", 2, "got \"mw\""},
        BadValue{"udevRules: ['KERNEL==\"video0\"']\npermissions: [r, w]\n", 2,
                 "\"permissions\" must be a single value"},
        BadValue{"udevRules: ['KERNEL==\"video0\"']\nstableIdentity: serial\n", 2,
                 "stableIdentity must be one of devpath, usb; got \"serial\""},
        BadValue{"udevRules: ['KERNEL==\"video0\"']\nstableIdentity: devpth\n", 2,
                 "did you mean \"devpath\"?"},
        BadValue{"udevRules: ['KERNEL==\"video0\"']\nrescanIntervalSeconds: 0\n", 2,
                 "rescanIntervalSeconds must be a whole number of seconds from 1 to 86400; got \"0\""},
        BadValue{"udevRules: ['KERNEL==\"video0\"']\nrescanIntervalSeconds: 86401\n", 2, "got \"86401\""},
        BadValue{"udevRules: ['KERNEL==\"video0\"']\nrescanIntervalSeconds: -5\n", 2, "got \"-5\""},
        BadValue{"udevRules: ['KERNEL==\"video0\"']\nrescanIntervalSeconds: 2.5\n", 2, "got \"2.5\""},
        BadValue{"udevRules: ['KERNEL==\"video0\"']\nhotplugEvents: sometimes\n", 2,
                 "hotplugEvents must be true or false; got \"sometimes\""},
        BadValue{"udevRules: ['KERNEL==\"video0\"']\nrescanIntervalSeconds: often\n", 2, "got \"often\""},
        BadValue{"udevRules: ['KERNEL==\"video0\"']\nudevRules: ['KERNEL==\"video1\"']\n", 2,
                 "duplicate key \"udevRules\""},
        BadValue{"- KERNEL==\"video0\"\n", 1, "discoveryDetails must be a mapping with \"udevRules\""},
        BadValue{"udevRules: ['KERNEL==\"video0\"'\n", 2, "discoveryDetails is not valid YAML"}));

TEST(UdevDetails, EmptyRulesAreAcceptedWithAWarning) {
    auto problems = problemsOf("udevRules: []\n");
    ASSERT_EQ(problems.size(), 1u) << describe(problems);
    EXPECT_TRUE(problems[0].warning);
    EXPECT_EQ(problems[0].line, 1);
    EXPECT_EQ(problems[0].message, "udevRules is empty: this configuration has no devices");
}

TEST(UdevDetails, UnknownKeyIsReportedWithTheKeyMeant) {
    auto problems = problemsOf(
        "udevRules:\n"
        "  - 'KERNEL==\"video0\"'\n"
        "groupRecursve: true\n");
    ASSERT_EQ(problems.size(), 1u) << describe(problems);
    EXPECT_EQ(problems[0].line, 3);
    EXPECT_TRUE(
        contains(problems[0].message,
                 "unknown key \"groupRecursve\" in udev discoveryDetails; did you mean \"groupRecursive\"?"))
        << problems[0].message;
}

TEST(UdevDetails, UnknownKeyFarFromAnyListsTheAllowedKeys) {
    auto problems = problemsOf(std::string(kRule) + "brokerSpec: x\n");
    ASSERT_EQ(problems.size(), 1u) << describe(problems);
    EXPECT_EQ(problems[0].line, 2);
    EXPECT_TRUE(
        contains(problems[0].message,
                 "allowed: udevRules, groupRecursive, permissions, stableIdentity, rescanIntervalSeconds"))
        << problems[0].message;
}

TEST(UdevDetails, BrokenRuleIsReportedAtItsListItemAndLeftOut) {
    std::vector<DetailsProblem> problems;
    UdevDetails details = parseUdevDetails(
        "udevRules:\n"
        "  - 'KERNEL==\"video0\"'\n"
        "  - 'KERNEL==\"video1\", MODE=\"0666\"'\n"
        "  - 'SUBSYSTEM==\"usb\"'\n",
        problems);
    ASSERT_EQ(problems.size(), 1u) << describe(problems);
    EXPECT_EQ(problems[0].line, 3);
    EXPECT_TRUE(contains(problems[0].message, "udevRules[1] 'KERNEL==\"video1\", MODE=\"0666\"': position"))
        << problems[0].message;
    ASSERT_EQ(details.rules.size(), 2u);
    EXPECT_EQ(details.rules[1].text(), "SUBSYSTEM==\"usb\"");
}

TEST(UdevDetails, EveryBrokenRuleIsReported) {
    auto problems = problemsOf(
        "udevRules:\n"
        "  - 'ACTION==\"add\"'\n"
        "  - 'KERNEL=\"video0\"'\n");
    ASSERT_EQ(problems.size(), 2u) << describe(problems);
    EXPECT_EQ(problems[0].line, 2);
    EXPECT_TRUE(contains(problems[0].message, "udevRules[0]")) << problems[0].message;
    EXPECT_EQ(problems[1].line, 3);
    EXPECT_TRUE(contains(problems[1].message, "udevRules[1]")) << problems[1].message;
}

// Akri's udev handler reads two discoveryProperties; any other, or one with no effect as
// given, is a warning naming it (Akri accepts every name, so none is refused).
TEST(UdevDiscoveryProperties, EachPropertyWithNoEffectIsWarned) {
    struct Case {
        const char* name;
        std::map<std::string, std::string> properties;
        std::vector<std::string> warned;  // property names, in name order
        const char* says;                 // part of the (first) message
    };
    const Case cases[] = {
        {"both used", {{"devicePluginResourceName", "a.b/c"}, {"vfioPassthrough", "true"}}, {}, ""},
        {"resource name alone", {{"devicePluginResourceName", "a.b/c"}}, {}, ""},
        {"vfio false alone", {{"vfioPassthrough", "false"}}, {}, ""},
        {"vfio without a resource name",
         {{"vfioPassthrough", "true"}},
         {"vfioPassthrough"},
         "without devicePluginResourceName"},
        {"vfio neither true nor false",
         {{"devicePluginResourceName", "a.b/c"}, {"vfioPassthrough", "on"}},
         {"vfioPassthrough"},
         "reads as false"},
        {"empty resource name", {{"devicePluginResourceName", " "}}, {"devicePluginResourceName"}, "empty"},
        {"misspelled",
         {{"devicePluginResourcName", "a.b/c"}},
         {"devicePluginResourcName"},
         "did you mean \"devicePluginResourceName\"?"},
        {"ONVIF credentials", {{"username", "admin"}}, {"username"}, "does not read it"},
    };
    for (const Case& c : cases) {
        std::vector<PropertyWarning> warnings = udevPropertyWarnings(c.properties);
        std::vector<std::string> names;
        for (const PropertyWarning& warning : warnings) names.push_back(warning.property);
        EXPECT_EQ(names, c.warned) << c.name;
        if (!warnings.empty()) {
            EXPECT_NE(warnings[0].message.find(c.says), std::string::npos) << warnings[0].message;
        }
    }
}

TEST(UdevDiscoveryProperties, AppliedAsAkriReadsThem) {
    UdevDetails details;
    applyDiscoveryProperties({{"devicePluginResourceName", "  akri.sh/gpu \n"}, {"vfioPassthrough", "True"}},
                             details);
    EXPECT_EQ(details.devicePluginResourceName, "akri.sh/gpu");
    EXPECT_TRUE(details.vfioPassthrough);
    applyDiscoveryProperties({{"devicePluginResourceName", ""}, {"vfioPassthrough", "1"}}, details);
    EXPECT_EQ(details.devicePluginResourceName, std::nullopt);
    EXPECT_FALSE(details.vfioPassthrough);
}

}  // namespace
}  // namespace devlet::usb
