// devlet against a kubelet written with grpc-go, the library the real kubelet uses
// (kubelet_go/main.go): devlet registers through grpc-go's server, grpc-go's client
// dials every plugin back, follows its device lists, asks the configuration-level
// resource for a preferred allocation and allocates one device of each resource in turn,
// then asks for a slot already held through another resource (refused); devlet learns the
// holding pod from grpc-go's PodResources server. Skips without Go.
#include <chrono>
#include <thread>

#include <boost/json/src.hpp>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/integration/fixture.h"
#include "tests/support/daemon_process.h"
#include "tests/support/temp_dir.h"

namespace devlet::test {
namespace {

namespace json = boost::json;

// The Go kubelet as a child process, its JSON lines in a file.
class GoKubelet {
public:
    GoKubelet(const std::string& binary, const std::filesystem::path& pluginDir,
              const std::filesystem::path& podResources, const std::filesystem::path& output)
        : output_(output) {
        std::filesystem::create_directories(podResources.parent_path());
        const int fd = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        pid_ = fork();
        if (pid_ == 0) {
            dup2(fd, 1);
            execl(binary.c_str(), binary.c_str(), "-dir", pluginDir.c_str(), "-pod-resources",
                  podResources.c_str(), "-expect", "3", "-seconds", "300", nullptr);
            _exit(127);
        }
        ::close(fd);
    }
    ~GoKubelet() {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
    // The JSON lines written so far, once there are `count` of them.
    std::vector<json::object> waitForReports(std::size_t count, std::chrono::seconds timeout) const {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        std::vector<json::object> reports;
        while (std::chrono::steady_clock::now() < deadline) {
            reports.clear();
            std::istringstream lines(readFile(output_));
            for (std::string line; std::getline(lines, line);) {
                if (!line.empty()) reports.push_back(json::parse(line).as_object());
            }
            if (reports.size() >= count) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return reports;
    }

private:
    std::filesystem::path output_;
    pid_t pid_ = -1;
};

TEST(KubeletInGo, RegistersListsAllocatesAndReadsPodResources) {
    const char* binary = std::getenv("KUBELET_GO");
    if (!binary || !std::filesystem::exists(binary))
        GTEST_SKIP() << "no Go kubelet built (Debian's golang-go and golang-google-grpc-dev are needed)";
    TempDir dir;
    DaemonProcess daemon(dir.path());
    writeFile(daemon.settingsFile(), "kubelet:\n  podResourcesIntervalSeconds: 0.2\n");
    writeFile(daemon.confDir() / "echo.yaml", echoConfiguration("echo", 2));
    std::filesystem::create_directories(daemon.devicePluginDir());
    GoKubelet kubelet(binary, daemon.devicePluginDir(), daemon.podResourcesSocket(),
                      dir.path() / "kubelet.out");
    daemon.start();

    const auto reports = kubelet.waitForReports(4, std::chrono::seconds(60));
    ASSERT_EQ(reports.size(), 4u) << daemon.log();
    std::map<std::string, json::object> byResource;
    for (std::size_t i = 0; i < 3; ++i)
        byResource[json::value_to<std::string>(reports[i].at("resource"))] = reports[i];
    ASSERT_EQ(byResource.count("akri.sh/echo"), 1u);
    ASSERT_EQ(byResource.count("akri.sh/echo-8120fe"), 1u);
    ASSERT_EQ(byResource.count("akri.sh/echo-a19705"), 1u);

    for (const auto& [resource, report] : byResource) {
        SCOPED_TRACE(resource);
        ASSERT_FALSE(report.contains("error")) << json::serialize(report);
        const std::string allocated = json::value_to<std::string>(report.at("allocated"));
        // What was allocated was listed Healthy in the list grpc-go read.
        bool listedHealthy = false;
        for (const auto& device : report.at("devices").as_array()) {
            if (device.at("id") == allocated.c_str() && device.at("health") == "Healthy")
                listedHealthy = true;
        }
        EXPECT_TRUE(listedHealthy) << json::serialize(report);
        const auto& envs = report.at("envs").as_object();
        const bool foo0 = allocated.rfind("echo-8120fe-", 0) == 0;
        EXPECT_EQ(envs.at("DEBUG_ECHO_DESCRIPTION"), foo0 ? "foo0" : "foo1");
        EXPECT_EQ(envs.at(foo0 ? "DEBUG_ECHO_DESCRIPTION_8120FE" : "DEBUG_ECHO_DESCRIPTION_A19705"),
                  foo0 ? "foo0" : "foo1");
    }
    // The slot grpc-go took first, asked for through another resource: refused.
    const json::object& conflict = reports[3];
    ASSERT_TRUE(conflict.contains("conflict")) << json::serialize(conflict);
    const std::string refusal = json::value_to<std::string>(conflict.at("error"));
    EXPECT_NE(refusal.find("code = FailedPrecondition"), std::string::npos) << refusal;
    EXPECT_NE(refusal.find(json::value_to<std::string>(conflict.at("conflict"))), std::string::npos)
        << refusal;
    EXPECT_TRUE(byResource["akri.sh/echo"].at("preferredAllocation").as_bool());
    EXPECT_FALSE(byResource["akri.sh/echo-8120fe"].at("preferredAllocation").as_bool());
    const auto& suggested = byResource["akri.sh/echo"].at("suggested").as_array();
    ASSERT_EQ(suggested.size(), 1u);
    EXPECT_EQ(suggested[0], byResource["akri.sh/echo"].at("allocated"));

    // grpc-go's PodResources server names the pod holding them.
    for (const auto& [resource, report] : byResource) {
        const std::string slot = json::value_to<std::string>(report.at("allocated"));
        EXPECT_TRUE(
            daemon.waitForLog("slot " + slot + " is used by pod interop/go-pod", std::chrono::seconds(30)))
            << daemon.log();
    }
}

}  // namespace
}  // namespace devlet::test
