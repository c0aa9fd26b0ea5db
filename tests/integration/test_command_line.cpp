// The command-line contract other tools depend on.

#include <gtest/gtest.h>

#include "tests/integration/fixture.h"

namespace devlet::test {
namespace {

TEST(CommandLineTest, VersionPrintsNameAndVersion) {
    auto result = runDevlet({"version"});
    EXPECT_EQ(result.exitCode, 0);
    EXPECT_EQ(result.output.rfind("devlet ", 0), 0u) << result.output;
}

TEST(CommandLineTest, ConfigCheckAcceptsValidFiles) {
    TempDir dir;
    writeFile(dir.path() / "a.yaml", echoConfiguration("cams", 2));
    auto result = runDevlet({"config", "check", (dir.path() / "a.yaml").string()});
    EXPECT_EQ(result.exitCode, 0) << result.output;
}

TEST(CommandLineTest, ConfigCheckNamesFileLineAndProblem) {
    TempDir dir;
    const auto file = dir.path() / "bad.yaml";
    writeFile(file, echoConfiguration("cams", 2) + "  capasity: 3\n");
    auto result = runDevlet({"config", "check", file.string()});
    EXPECT_EQ(result.exitCode, 2);
    EXPECT_NE(result.output.find(file.string() + ":12:"), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("capacity"), std::string::npos) << result.output;
}

TEST(CommandLineTest, ConfigCheckFailsForMissingFile) {
    auto result = runDevlet({"config", "check", "/nonexistent/devlet.yaml"});
    EXPECT_EQ(result.exitCode, 2);
    EXPECT_NE(result.output.find("/nonexistent/devlet.yaml"), std::string::npos) << result.output;
}

TEST(CommandLineTest, UnknownFlagIsAUsageError) {
    auto result = runDevlet({"run", "--no-such-flag"});
    EXPECT_EQ(result.exitCode, 2);
    EXPECT_NE(result.output.find("--no-such-flag"), std::string::npos);
}

TEST(CommandLineTest, BadSettingsFileRefusesToStart) {
    TempDir dir;
    writeFile(dir.path() / "devlet.yaml", "status:\n  listen: nowhere\n");
    auto result = runDevlet({"run", "--config", (dir.path() / "devlet.yaml").string()});
    EXPECT_EQ(result.exitCode, 2);
    EXPECT_NE(result.output.find("devlet.yaml:2"), std::string::npos) << result.output;
}

TEST(CommandLineTest, ProbeWithBrokenRuleNamesThePositionAndExitsTwo) {
    auto result = runDevlet({"probe", "usb", "--rule", R"(SUBSYSTEM=="video4linux", MODE="0666")"});
    EXPECT_EQ(result.exitCode, 2) << result.output;
    EXPECT_NE(result.output.find("position 27"), std::string::npos) << result.output;
}

TEST(CommandLineTest, ProbeUnknownOptionIsAUsageError) {
    auto result = runDevlet({"probe", "usb", "--no-such-flag"});
    EXPECT_EQ(result.exitCode, 2);
    EXPECT_NE(result.output.find("--no-such-flag"), std::string::npos) << result.output;
}

TEST(CommandLineTest, ProbeWithBrokenConfigurationNamesFileAndLine) {
    TempDir dir;
    writeFile(dir.path() / "bad.yaml", echoConfiguration("cams", 2) + "  capasity: 3\n");
    auto result = runDevlet({"probe", "usb", "--conf-dir", dir.path().string()});
    EXPECT_EQ(result.exitCode, 2) << result.output;
    EXPECT_NE(result.output.find("bad.yaml:12:"), std::string::npos) << result.output;
}

TEST(CommandLineTest, ProbeWithoutUdevConfigurationSaysSo) {
    TempDir dir;
    auto result = runDevlet({"probe", "usb", "--conf-dir", dir.path().string()});
    EXPECT_EQ(result.exitCode, 2) << result.output;
    EXPECT_NE(result.output.find("no udev configuration"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace devlet::test
