// devlet's life next to a kubelet: appearing late, restarting, crashing, stopping.

#include <filesystem>
#include <fstream>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/integration/fixture.h"

namespace devlet::test {
namespace {

constexpr const char* kCl = "akri.sh/cams";
constexpr const char* kFoo0 = "akri.sh/cams-8120fe";
constexpr const char* kFoo1 = "akri.sh/cams-a19705";

// systemd's end of sd_notify: a datagram socket the daemon finds through NOTIFY_SOCKET.
class NotifySocket {
public:
    explicit NotifySocket(const std::filesystem::path& path) : path_(path) {
        fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::snprintf(address.sun_path, sizeof address.sun_path, "%s", path.c_str());
        if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) ADD_FAILURE() << "bind";
    }
    ~NotifySocket() { ::close(fd_); }
    // Waits for a message that contains `text`; every message read is kept.
    bool waitFor(const std::string& text, std::chrono::milliseconds timeout) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (received_.find(text) == std::string::npos) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            pollfd p{fd_, POLLIN, 0};
            if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
            char buffer[4096];
            const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
            if (n > 0) received_.append(buffer, static_cast<std::size_t>(n)).append("\n");
        }
        return true;
    }
    const std::string& received() const { return received_; }
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
    int fd_ = -1;
    std::string received_;
};

// Sets an environment variable for the daemon started in this scope.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const std::string& value) : name_(name) { ::setenv(name, value.c_str(), 1); }
    ~ScopedEnv() { ::unsetenv(name_); }

private:
    const char* name_;
};

class DaemonLifecycleTest : public DaemonTest {
protected:
    void SetUp() override {
        DaemonTest::SetUp();
        writeFile(daemon_->confDir() / "cams.yaml",
                  echoConfiguration("cams", 2, "      availabilityFile: " + availability().string() + "\n"));
    }
    std::filesystem::path availability() const { return dir_.path() / "availability.txt"; }
    std::vector<std::string> ownSockets() const {
        std::vector<std::string> sockets;
        for (const auto& entry : std::filesystem::directory_iterator(daemon_->devicePluginDir())) {
            if (entry.is_socket() && entry.path().filename() != "kubelet.sock") {
                sockets.push_back(entry.path().filename());
            }
        }
        return sockets;
    }
};

TEST_F(DaemonLifecycleTest, WaitsForKubeletAndRegistersWhenItAppears) {
    daemon_->start();
    ASSERT_TRUE(daemon_->waitForLog("waiting for kubelet at " + kubelet_->kubeletSocket().string(), 10s));
    ASSERT_TRUE(daemon_->waitForLog("found: \"foo1\"", 10s));
    ASSERT_TRUE(kubelet_->start());
    EXPECT_TRUE(kubelet_->waitFor([&] { return camsOffered(); }, 10s));
}

TEST_F(DaemonLifecycleTest, KubeletInstalledAfterDevletIsFoundWithoutRestart) {
    // A node where devlet starts before the kubelet was ever installed: not even the
    // device-plugin directory exists yet.
    std::filesystem::remove_all(daemon_->devicePluginDir());
    daemon_->start();
    ASSERT_TRUE(daemon_->waitForLog("waiting for kubelet at " + kubelet_->kubeletSocket().string(), 10s));
    ASSERT_TRUE(daemon_->waitForLog("found: \"foo1\"", 10s));
    std::filesystem::create_directories(daemon_->devicePluginDir());
    ASSERT_TRUE(kubelet_->start());
    EXPECT_TRUE(kubelet_->waitFor([&] { return camsOffered(); }, 10s));
}

TEST_F(DaemonLifecycleTest, ReadyIsNotHeldBackByAKubeletSocketNobodyAnswers) {
    // A kubelet that crashed leaves kubelet.sock behind; `systemctl start devlet` must
    // still finish.
    {
        const int stale = ::socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::snprintf(address.sun_path, sizeof address.sun_path, "%s", kubelet_->kubeletSocket().c_str());
        ASSERT_EQ(::bind(stale, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
        ::close(stale);
    }
    NotifySocket systemd(dir_.path() / "notify");
    {
        ScopedEnv notify("NOTIFY_SOCKET", systemd.path().string());
        daemon_->start();
    }
    EXPECT_TRUE(systemd.waitFor("READY=1", 10s)) << systemd.received();
    EXPECT_NE(systemd.received().find("STATUS=2 instance(s) in 1 configuration(s)"), std::string::npos)
        << systemd.received();
}

TEST_F(DaemonLifecycleTest, WatchdogIsPingedWhenSystemdAsks) {
    NotifySocket systemd(dir_.path() / "notify");
    {
        ScopedEnv notify("NOTIFY_SOCKET", systemd.path().string());
        ScopedEnv watchdog("WATCHDOG_USEC", "200000");
        daemon_->start();
    }
    EXPECT_TRUE(systemd.waitFor("WATCHDOG=1", 10s)) << systemd.received();
    EXPECT_EQ(daemon_->stop(SIGTERM), 0);
    EXPECT_TRUE(systemd.waitFor("STOPPING=1", 10s)) << systemd.received();
}

TEST_F(DaemonLifecycleTest, KubeletRestartReregistersEveryPluginWithSameDevices) {
    ASSERT_TRUE(kubelet_->start());
    daemon_->start();
    ASSERT_TRUE(kubelet_->waitFor([&] { return camsOffered(); }, 10s));
    auto held = kubelet_->allocateIds("default", "pod-a", "main", kCl, {"cams-a19705-1"});
    ASSERT_TRUE(held.ok) << held.error;
    ASSERT_TRUE(waitForHealth(kFoo1, "cams-a19705-1", "Unhealthy"));
    const auto before = std::make_tuple(health(kCl), health(kFoo0), health(kFoo1));
    const std::string oldEndpoint = kubelet_->endpoint(kCl);

    ASSERT_TRUE(kubelet_->restart());
    ASSERT_TRUE(kubelet_->waitFor(
        [&] {
            return camsOffered() && kubelet_->registrations(kCl) == 2 &&
                   kubelet_->registrations(kFoo0) == 2 && kubelet_->registrations(kFoo1) == 2;
        },
        10s));
    EXPECT_EQ(std::make_tuple(health(kCl), health(kFoo0), health(kFoo1)), before);
    EXPECT_NE(kubelet_->endpoint(kCl), oldEndpoint) << "a fresh socket name on every registration";
}

// More inotify events than the kernel queues for one reader (max_queued_events), all while
// devlet is stopped: the kubelet's restart that follows them is lost in the overflow.
int floodWithEvents(const std::filesystem::path& dir) {
    std::ifstream limitFile("/proc/sys/fs/inotify/max_queued_events");
    long limit = 0;
    if (!(limitFile >> limit) || limit <= 0 || limit > 1'000'000) return -1;
    const std::string noise = (dir / "noise").string();
    for (long events = 0; events <= limit; events += 2) {  // IN_CREATE and IN_DELETE
        const int fd = ::open(noise.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        if (fd < 0) return -1;
        ::close(fd);
        ::unlink(noise.c_str());
    }
    return 0;
}

TEST_F(DaemonLifecycleTest, KubeletRestartLostInAnInotifyOverflowStillReregisters) {
    ASSERT_TRUE(kubelet_->start());
    daemon_->start();
    ASSERT_TRUE(kubelet_->waitFor([&] { return camsOffered(); }, 10s));

    ASSERT_EQ(::kill(daemon_->pid(), SIGSTOP), 0);
    const int flooded = floodWithEvents(daemon_->devicePluginDir());
    const bool restarted = kubelet_->restart();  // a new kubelet.sock, our sockets wiped
    ASSERT_EQ(::kill(daemon_->pid(), SIGCONT), 0);
    if (flooded != 0) GTEST_SKIP() << "cannot read fs.inotify.max_queued_events or it is too large to fill";
    ASSERT_TRUE(restarted);

    ASSERT_TRUE(daemon_->waitForLog("inotify's queue overflowed", 10s)) << daemon_->log();
    EXPECT_TRUE(kubelet_->waitFor(
        [&] {
            return camsOffered() && kubelet_->registrations(kCl) == 2 &&
                   kubelet_->registrations(kFoo0) == 2 && kubelet_->registrations(kFoo1) == 2;
        },
        10s))
        << daemon_->log();
}

TEST_F(DaemonLifecycleTest, KillDashNineKeepsHeldSlotsAcrossRestart) {
    ASSERT_TRUE(kubelet_->start());
    daemon_->start();
    ASSERT_TRUE(kubelet_->waitFor([&] { return camsOffered(); }, 10s));
    auto viaCl = kubelet_->allocateIds("default", "pod-a", "main", kCl, {"cams-8120fe-0"});
    ASSERT_TRUE(viaCl.ok) << viaCl.error;
    auto viaIl = kubelet_->allocateIds("default", "pod-b", "main", kFoo1, {"cams-a19705-0"});
    ASSERT_TRUE(viaIl.ok) << viaIl.error;

    daemon_->kill9();  // right after the allocations: nothing flushed on the way out
    daemon_->start();
    ASSERT_TRUE(daemon_->waitForLog("restored 2 held slot(s)", 10s));
    ASSERT_TRUE(waitForHealth(kFoo0, "cams-8120fe-0", "Unhealthy"));
    ASSERT_TRUE(waitForHealth(kCl, "cams-a19705-0", "Unhealthy"));
    // Neither slot can be given a second time through the other resource.
    EXPECT_FALSE(kubelet_->allocateIds("default", "pod-c", "main", kFoo0, {"cams-8120fe-0"}).ok);
    EXPECT_FALSE(kubelet_->allocateIds("default", "pod-d", "main", kCl, {"cams-a19705-0"}).ok);
}

TEST_F(DaemonLifecycleTest, AvailabilityFileOfflineMakesDevicesVanishAndReturn) {
    ASSERT_TRUE(kubelet_->start());
    daemon_->start();
    ASSERT_TRUE(kubelet_->waitFor([&] { return camsOffered(); }, 10s));
    writeFile(availability(), "OFFLINE\n");
    // The configuration resource lists nothing; the instance plugins are withdrawn.
    EXPECT_TRUE(kubelet_->waitFor(
        [&] {
            return health(kCl).empty() && kubelet_->endpoint(kFoo0).empty() &&
                   kubelet_->endpoint(kFoo1).empty();
        },
        10s));
    writeFile(availability(), "\n");
    EXPECT_TRUE(kubelet_->waitFor([&] { return camsOffered(); }, 10s));
}

TEST_F(DaemonLifecycleTest, SigtermWithdrawsCleanlyAndRemovesOwnSockets) {
    ASSERT_TRUE(kubelet_->start());
    daemon_->start();
    ASSERT_TRUE(kubelet_->waitFor([&] { return camsOffered(); }, 10s));
    EXPECT_EQ(ownSockets().size(), 3u);
    EXPECT_EQ(daemon_->stop(SIGTERM), 0);
    EXPECT_TRUE(ownSockets().empty());
    EXPECT_TRUE(kubelet_->waitFor([&] { return kubelet_->endpoint(kCl).empty(); }, 10s));
}

TEST_F(DaemonLifecycleTest, CorruptStateDatabaseRefusedAndKept) {
    const std::string data = "this is not a database, but it is someone's data\n";
    writeFile(daemon_->stateDir() / "state.db", data);
    daemon_->start();
    EXPECT_EQ(daemon_->wait(), 1);
    EXPECT_NE(daemon_->log().find("state.db"), std::string::npos);
    EXPECT_EQ(readFile(daemon_->stateDir() / "state.db"), data) << "user data is never overwritten";
    bool copied = false;
    for (const auto& entry : std::filesystem::directory_iterator(daemon_->stateDir())) {
        copied |= entry.path().filename().string().rfind("state.db.corrupt-", 0) == 0;
    }
    EXPECT_TRUE(copied);
}

}  // namespace
}  // namespace devlet::test
