// The debugEcho handler: its discoveryDetails parser and the instances it yields
// are pure and table-tested; the probe is run on a real loop against an
// availability file in a temporary directory.

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "probes/echo/echo_handler.h"
#include "runtime/configuration.h"
#include "tests/support/temp_dir.h"

namespace devlet::echo {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::vector<DetailsProblem> problemsOf(const std::string& text) {
    std::vector<DetailsProblem> problems;
    parseEchoDetails(text, problems);
    return problems;
}

std::string describe(const std::vector<DetailsProblem>& problems) {
    std::string text;
    for (const DetailsProblem& p : problems) text += std::to_string(p.line) + ": " + p.message + "\n";
    return text;
}

TEST(EchoDetails, AcceptsDescriptionsSharedAndAvailabilityFile) {
    std::vector<DetailsProblem> problems;
    EchoDetails details = parseEchoDetails(
        "descriptions:\n"
        "  - foo0\n"
        "  - foo1\n"
        "shared: true\n"
        "availabilityFile: /run/devlet/echo-availability\n",
        problems);
    EXPECT_TRUE(problems.empty()) << describe(problems);
    EXPECT_EQ(details.descriptions, (std::vector<std::string>{"foo0", "foo1"}));
    EXPECT_TRUE(details.shared);
    EXPECT_EQ(details.availabilityFile, "/run/devlet/echo-availability");
}

// Akri's Helm chart runs its debugEcho handler with DEBUG_ECHO_INSTANCES_SHARED=true, so
// its Configuration (descriptions only) names foo0 the same on every node.
TEST(EchoDetails, AkriFormatAloneIsSharedAndAlwaysAvailable) {
    std::vector<DetailsProblem> problems;
    EchoDetails details = parseEchoDetails("descriptions: [\"foo 0\", foo1]\n", problems);
    EXPECT_TRUE(problems.empty()) << describe(problems);
    EXPECT_EQ(details.descriptions, (std::vector<std::string>{"foo 0", "foo1"}));
    EXPECT_TRUE(details.shared);
    EXPECT_EQ(details.availabilityFile, "");
}

TEST(EchoDetails, SharedFalseMakesDevicesNodeLocal) {
    std::vector<DetailsProblem> problems;
    EchoDetails details = parseEchoDetails("descriptions: [foo0]\nshared: false\n", problems);
    EXPECT_TRUE(problems.empty()) << describe(problems);
    EXPECT_FALSE(details.shared);
    std::vector<Instance> instances = echoInstances(details, false);
    ASSERT_EQ(instances.size(), 1u);
    EXPECT_FALSE(instances[0].shared);
}

// Akri accepts an empty list (its Helm chart renders `descriptions: []` when none are set).
TEST(EchoDetails, EmptyDescriptionsAreAcceptedWithAWarning) {
    std::vector<DetailsProblem> problems;
    EchoDetails details = parseEchoDetails("shared: true\ndescriptions: []\n", problems);
    ASSERT_EQ(problems.size(), 1u) << describe(problems);
    EXPECT_TRUE(problems[0].warning);
    EXPECT_EQ(problems[0].line, 2);
    EXPECT_EQ(problems[0].message, "\"descriptions\" is empty: this configuration has no devices");
    EXPECT_TRUE(details.descriptions.empty());
    EXPECT_TRUE(echoInstances(details, false).empty());
}

TEST(EchoDetails, UnknownKeyIsReportedWithItsLineAndTheKeyMeant) {
    auto problems = problemsOf(
        "descriptions:\n"
        "  - foo0\n"
        "sharde: true\n");
    ASSERT_EQ(problems.size(), 1u) << describe(problems);
    EXPECT_EQ(problems[0].line, 3);
    EXPECT_NE(problems[0].message.find("unknown key \"sharde\" in debugEcho discoveryDetails; did you mean "
                                       "\"shared\"?"),
              std::string::npos)
        << problems[0].message;
}

TEST(EchoDetails, RepeatedKeyIsReportedAtTheRepeat) {
    auto problems = problemsOf(
        "descriptions: [foo0]\n"
        "shared: true\n"
        "shared: false\n");
    ASSERT_EQ(problems.size(), 1u) << describe(problems);
    EXPECT_EQ(problems[0].line, 3);
    EXPECT_NE(problems[0].message.find("duplicate key \"shared\""), std::string::npos) << problems[0].message;
}

TEST(EchoDetails, DuplicateDescriptionIsReportedAtTheDuplicate) {
    std::vector<DetailsProblem> problems;
    EchoDetails details = parseEchoDetails(
        "descriptions:\n"
        "  - foo0\n"
        "  - foo1\n"
        "  - foo0\n",
        problems);
    ASSERT_EQ(problems.size(), 1u) << describe(problems);
    EXPECT_EQ(problems[0].line, 4);
    EXPECT_NE(problems[0].message.find("\"foo0\" is listed twice"), std::string::npos) << problems[0].message;
    EXPECT_EQ(details.descriptions, (std::vector<std::string>{"foo0", "foo1"}));
}

TEST(EchoDetails, EmptyDescriptionIsReported) {
    auto problems = problemsOf("descriptions: [foo0, \"\"]\n");
    ASSERT_EQ(problems.size(), 1u) << describe(problems);
    EXPECT_NE(problems[0].message.find("non-empty string"), std::string::npos) << problems[0].message;
}

TEST(EchoDetails, RelativeAvailabilityFileIsRejected) {
    auto problems = problemsOf(
        "descriptions: [foo0]\n"
        "availabilityFile: run/echo\n");
    ASSERT_EQ(problems.size(), 1u) << describe(problems);
    EXPECT_EQ(problems[0].line, 2);
    EXPECT_NE(problems[0].message.find("absolute path"), std::string::npos) << problems[0].message;
}

TEST(EchoDetails, BadYamlIsReported) {
    auto problems = problemsOf(
        "descriptions:\n"
        "  - [foo0\n");
    ASSERT_EQ(problems.size(), 1u) << describe(problems);
    EXPECT_NE(problems[0].message.find("not valid YAML"), std::string::npos) << problems[0].message;
    EXPECT_GT(problems[0].line, 0);
}

TEST(EchoDetails, WrongTypeIsReported) {
    auto problems = problemsOf(
        "descriptions: [foo0]\n"
        "shared: sometimes\n");
    ASSERT_EQ(problems.size(), 1u) << describe(problems);
    EXPECT_EQ(problems[0].line, 2);
    EXPECT_NE(problems[0].message.find("\"shared\" has the wrong type"), std::string::npos)
        << problems[0].message;
}

TEST(EchoDetails, DescriptionsMustBeAList) {
    auto problems = problemsOf("descriptions: foo0\n");
    ASSERT_FALSE(problems.empty());
    EXPECT_NE(problems[0].message.find("must be a list"), std::string::npos) << problems[0].message;
}

// Required in Akri too (DebugEchoDiscoveryDetails has no default for it).
TEST(EchoDetails, MissingDescriptionsIsAnError) {
    auto problems = problemsOf("shared: true\n");
    ASSERT_EQ(problems.size(), 1u) << describe(problems);
    EXPECT_FALSE(problems[0].warning);
    EXPECT_NE(problems[0].message.find("needs \"descriptions\""), std::string::npos) << problems[0].message;
}

TEST(EchoDetails, NonMappingIsReported) {
    EXPECT_EQ(problemsOf("").size(), 1u);
    EXPECT_EQ(problemsOf("- foo0\n").size(), 1u);
}

TEST(EchoInstances, EachDescriptionIsADeviceWithItsProperty) {
    EchoDetails details;
    details.descriptions = {"foo0", "foo1"};
    details.shared = true;
    std::vector<Instance> instances = echoInstances(details, false);
    ASSERT_EQ(instances.size(), 2u);
    EXPECT_EQ(instances[0].id, "foo0");
    EXPECT_TRUE(instances[0].shared);
    EXPECT_EQ(instances[0].properties,
              (std::map<std::string, std::string>{{"DEBUG_ECHO_DESCRIPTION", "foo0"}}));
    EXPECT_TRUE(instances[0].nodes.empty());
    EXPECT_EQ(instances[1].id, "foo1");
    EXPECT_EQ(instances[1].properties.at("DEBUG_ECHO_DESCRIPTION"), "foo1");
}

TEST(EchoInstances, OfflineYieldsNoDevices) {
    EchoDetails details;
    details.descriptions = {"foo0", "foo1"};
    EXPECT_TRUE(echoInstances(details, true).empty());
}

TEST(EchoHandler, CheckReportsProblemsOfDiscoveryDetails) {
    EchoHandler handler;
    EXPECT_EQ(handler.name(), "debugEcho");
    Configuration configuration;
    configuration.name = "echo";
    configuration.handler = "debugEcho";
    configuration.discoveryDetails = "descriptions: [foo0]\n";
    EXPECT_TRUE(handler.check(configuration).empty());
    configuration.discoveryDetails = "descriptions: [foo0]\nextra: 1\n";
    EXPECT_EQ(handler.check(configuration).size(), 1u);
}

// --- the probe ---------------------------------------------------------------------

class RecordingSink : public ProbeSink {
public:
    void reportSnapshot(const std::string& configuration, std::vector<Instance> instances) override {
        snapshots.push_back({configuration, std::move(instances)});
    }
    void reportProbeError(const std::string&, const std::string& message) override {
        errors.push_back(message);
    }

    std::vector<std::pair<std::string, std::vector<Instance>>> snapshots;
    std::vector<std::string> errors;
};

class EchoProbeTest : public ::testing::Test {
protected:
    void SetUp() override { availability_ = root_.path() / "availability"; }

    Configuration configuration() const {
        Configuration c;
        c.name = "echo";
        c.handler = "debugEcho";
        c.discoveryDetails = "descriptions: [foo0, foo1]\navailabilityFile: " + availability_.string() + "\n";
        return c;
    }

    void writeAvailability(const std::string& text) const {
        std::ofstream out(availability_, std::ios::trunc);
        out << text;
    }

    // Runs the loop until the sink holds `count` snapshots or a few seconds pass.
    void runUntil(std::size_t count) {
        const auto deadline = std::chrono::steady_clock::now() + 5s;
        while (sink_.snapshots.size() < count && std::chrono::steady_clock::now() < deadline) {
            loop_.run_one_for(100ms);
            if (loop_.stopped()) loop_.restart();
        }
    }

    test::TempDir root_;
    fs::path availability_;
    boost::asio::io_context loop_;
    RecordingSink sink_;
    EchoHandler handler_;
};

TEST_F(EchoProbeTest, StartReportsEveryDescription) {
    auto probe = handler_.createProbe(configuration(), loop_, sink_);
    probe->start();
    ASSERT_EQ(sink_.snapshots.size(), 1u);
    EXPECT_EQ(sink_.snapshots[0].first, "echo");
    EXPECT_EQ(sink_.snapshots[0].second.size(), 2u);
    probe->stop();
}

TEST_F(EchoProbeTest, OfflineAvailabilityFileReportsNoDevices) {
    writeAvailability("OFFLINE\n");
    auto probe = handler_.createProbe(configuration(), loop_, sink_);
    probe->start();
    ASSERT_EQ(sink_.snapshots.size(), 1u);
    EXPECT_TRUE(sink_.snapshots[0].second.empty());
    probe->stop();
}

TEST_F(EchoProbeTest, AvailabilityFileChangesAreReported) {
    writeAvailability("ONLINE\n");
    auto probe = handler_.createProbe(configuration(), loop_, sink_);
    probe->start();
    ASSERT_EQ(sink_.snapshots.size(), 1u);

    writeAvailability("OFFLINE\n");
    runUntil(2);
    ASSERT_EQ(sink_.snapshots.size(), 2u);
    EXPECT_TRUE(sink_.snapshots[1].second.empty());

    fs::remove(availability_);
    runUntil(3);
    ASSERT_EQ(sink_.snapshots.size(), 3u);
    EXPECT_EQ(sink_.snapshots[2].second.size(), 2u);
    probe->stop();
}

}  // namespace
}  // namespace devlet::echo
