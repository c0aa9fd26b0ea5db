// The command-line contract other tools depend on.

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "tests/integration/fixture.h"

namespace devlet::test {
namespace {

TEST(CommandLineTest, VersionPrintsNameAndVersion) {
    auto result = runDevlet({"version"});
    EXPECT_EQ(result.exitCode, 0);
    EXPECT_EQ(result.output.rfind("devlet ", 0), 0u) << result.output;
}

// Every command and subcommand answers --help and -h with its own usage and status 0, even
// after other options, and does nothing else (no probe runs, no daemon starts).
TEST(CommandLineTest, EveryCommandPrintsItsUsageForHelp) {
    const std::vector<std::vector<std::string>> commands = {
        {"run"},          {"config", "check"}, {"config", "rbac"}, {"probe", "usb"}, {"probe", "udev"},
        {"probe", "gpu"}, {"probe", "onvif"},  {"status"},         {"instances"},    {"version"}};
    for (const auto& command : commands) {
        for (const std::string flag : {"--help", "-h"}) {
            std::vector<std::string> args = command;
            args.push_back(flag);
            auto result = runDevlet(args);
            const std::string shown =
                "devlet " + command[0] +
                (command.size() > 1 && command[1] != "udev" ? " " + command[1] : std::string());
            EXPECT_EQ(result.exitCode, 0) << shown << " " << flag << ": " << result.output;
            EXPECT_NE(result.output.find("usage:"), std::string::npos) << shown << " " << flag;
            EXPECT_NE(result.output.find(shown), std::string::npos)
                << shown << " " << flag << ": " << result.output;
        }
    }
    auto afterOptions = runDevlet({"probe", "usb", "--json", "--help"});
    EXPECT_EQ(afterOptions.exitCode, 0) << afterOptions.output;
    EXPECT_NE(afterOptions.output.find("devlet probe usb"), std::string::npos);
    EXPECT_EQ(afterOptions.output.find("devlet probe gpu"), std::string::npos) << afterOptions.output;
    auto help = runDevlet({"help", "probe", "gpu"});
    EXPECT_EQ(help.exitCode, 0);
    EXPECT_NE(help.output.find("devlet probe gpu"), std::string::npos) << help.output;
    auto whole = runDevlet({"help"});
    EXPECT_EQ(whole.exitCode, 0);
    EXPECT_NE(whole.output.find("devlet run"), std::string::npos);
    EXPECT_NE(whole.output.find("devlet probe onvif"), std::string::npos);
    auto version = runDevlet({"--version"});
    EXPECT_EQ(version.exitCode, 0);
    EXPECT_EQ(version.output.rfind("devlet ", 0), 0u) << version.output;
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

// The Role a cluster needs for the Secrets configurations name: exactly those, by name.
TEST(CommandLineTest, ConfigRbacGrantsExactlyTheSecretsTheConfigurationsName) {
    TempDir dir;
    const auto file = dir.path() / "cams.yaml";
    writeFile(file,
              "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: cams\nspec:\n"
              "  discoveryHandler:\n    name: onvif\n    discoveryDetails: ''\n    discoveryProperties:\n"
              "    - name: username_default\n      valueFrom:\n        secretKeyRef: {name: auth, key: u}\n"
              "    - name: password_default\n      valueFrom:\n        secretKeyRef: {name: auth, key: p}\n"
              "    - name: cams_list\n      valueFrom:\n"
              "        secretKeyRef: {name: lists, key: l, namespace: cams}\n");
    auto result = runDevlet({"config", "rbac", file.string()});
    ASSERT_EQ(result.exitCode, 0) << result.output;
    const std::vector<YAML::Node> documents = YAML::LoadAll(result.output);
    ASSERT_EQ(documents.size(), 4u) << result.output;
    std::map<std::string, std::vector<std::string>> granted;  // namespace -> names
    for (const YAML::Node& document : documents) {
        const std::string ns = document["metadata"]["namespace"].as<std::string>();
        if (document["kind"].as<std::string>() == "RoleBinding") {
            EXPECT_EQ(document["roleRef"]["name"].as<std::string>(), "devlet-node-secrets");
            EXPECT_EQ(document["subjects"][0]["name"].as<std::string>(), "devlet-node");
            EXPECT_EQ(document["subjects"][0]["namespace"].as<std::string>(), "devlet");
            continue;
        }
        ASSERT_EQ(document["rules"].size(), 1u);
        const YAML::Node rule = document["rules"][0];
        EXPECT_EQ(rule["resources"].as<std::vector<std::string>>(), std::vector<std::string>{"secrets"});
        EXPECT_EQ(rule["verbs"].as<std::vector<std::string>>(), (std::vector<std::string>{"list", "watch"}));
        granted[ns] = rule["resourceNames"].as<std::vector<std::string>>();
    }
    EXPECT_EQ(granted,
              (std::map<std::string, std::vector<std::string>>{{"cams", {"lists"}}, {"default", {"auth"}}}));
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

// The probes read Configuration files given on the command line, instead of the conf dir.
TEST(CommandLineTest, ProbeReadsTheConfigurationFilesItIsGiven) {
    TempDir dir;
    writeFile(dir.path() / "bad.yaml", echoConfiguration("cams", 2) + "  capasity: 3\n");
    writeFile(dir.path() / "echo.yaml", echoConfiguration("cams", 2));
    auto broken = runDevlet({"probe", "usb", "--configuration", (dir.path() / "bad.yaml").string()});
    EXPECT_EQ(broken.exitCode, 2) << broken.output;
    EXPECT_NE(broken.output.find("bad.yaml:12:"), std::string::npos) << broken.output;
    auto other = runDevlet({"probe", "usb", "--configuration", (dir.path() / "echo.yaml").string()});
    EXPECT_EQ(other.exitCode, 2) << other.output;
    EXPECT_NE(other.output.find("no udev configuration in " + (dir.path() / "echo.yaml").string()),
              std::string::npos)
        << other.output;
}

// A Configuration where the settings go, or the settings where a Configuration goes: said,
// with the option that takes it.
TEST(CommandLineTest, AConfigurationGivenAsSettingsNamesTheRightOption) {
    TempDir dir;
    writeFile(dir.path() / "cams.yaml", echoConfiguration("cams", 2));
    writeFile(dir.path() / "devlet.yaml", "nodeName: node-a\ncluster:\n  namespace: devlet\n");
    auto probe = runDevlet({"probe", "usb", "--config", (dir.path() / "cams.yaml").string()});
    EXPECT_EQ(probe.exitCode, 2) << probe.output;
    EXPECT_NE(probe.output.find("is an Akri Configuration"), std::string::npos) << probe.output;
    EXPECT_NE(probe.output.find("--configuration"), std::string::npos) << probe.output;
    EXPECT_EQ(probe.output.find("unknown key"), std::string::npos) << probe.output;
    auto run = runDevlet({"run", "--config", (dir.path() / "cams.yaml").string()});
    EXPECT_NE(run.exitCode, 0);
    EXPECT_NE(run.output.find("is an Akri Configuration"), std::string::npos) << run.output;
    auto check = runDevlet({"config", "check", (dir.path() / "devlet.yaml").string()});
    EXPECT_EQ(check.exitCode, 2) << check.output;
    EXPECT_NE(check.output.find("devlet's settings"), std::string::npos) << check.output;
    EXPECT_NE(check.output.find("--config"), std::string::npos) << check.output;
}

}  // namespace
}  // namespace devlet::test
