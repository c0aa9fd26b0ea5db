// The file system under devlet's state directory fails: it fills up, it is read-only when
// devlet starts, or it turns read-only under a running devlet after an I/O error (ext4's
// errors=remount-ro). devlet never hands out a slot it has not recorded: Allocate is refused
// with a clear error, and it recovers when the file system does. Real file systems in a
// private mount namespace (tmpfs, ext4 on a loop device): needs root; skips (77) otherwise.

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/integration/fault_support.h"
#include "tests/integration/fixture.h"

namespace devlet::test {
namespace {

constexpr const char* kCl = "akri.sh/cams";
constexpr const char* kFoo0 = "akri.sh/cams-8120fe";
constexpr const char* kFoo1 = "akri.sh/cams-a19705";
const std::vector<std::string> kResources = {kCl, kFoo0, kFoo1};

bool alive(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto paren = line.rfind(')');
    return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

class StateDiskTest : public DaemonTest {
protected:
    void SetUp() override {
        if (std::string problem = enterPrivateMountNamespace(); !problem.empty()) GTEST_SKIP() << problem;
        DaemonTest::SetUp();
        writeFile(daemon_->confDir() / "cams.yaml", echoConfiguration("cams", 2));
        std::filesystem::create_directories(daemon_->stateDir());
    }
    void TearDown() override {
        DaemonTest::TearDown();  // the daemon goes before its file system
        for (const auto& mount : mounts_) ::umount2(mount.c_str(), MNT_DETACH);
    }

    void mountTmpfs(const std::string& options) {
        ASSERT_EQ(::mount("tmpfs", daemon_->stateDir().c_str(), "tmpfs", 0, options.c_str()), 0)
            << std::strerror(errno);
        mounts_.push_back(daemon_->stateDir());
    }
    void remount(bool readOnly) {
        ASSERT_EQ(::mount(nullptr, daemon_->stateDir().c_str(), nullptr,
                          MS_REMOUNT | (readOnly ? MS_RDONLY : 0), nullptr),
                  0)
            << std::strerror(errno);
    }

    void startAndWaitOffered() {
        ASSERT_TRUE(kubelet_->start());
        daemon_->start();
        ASSERT_TRUE(kubelet_->waitFor([&] { return allRegistered(*kubelet_, kResources); }, 20s))
            << daemon_->log();
    }

    // devlet starts again with only its state to go by (PodResources silent); every slot
    // the kubelet holds must show held through the same resource.
    void restartAndCheckHeld() {
        std::map<std::string, int> before;
        for (const auto& r : kResources) before[r] = kubelet_->registrations(r);
        kubelet_->setPodResourcesAvailable(false);
        if (daemon_->running()) daemon_->kill9();
        daemon_->start();
        ASSERT_TRUE(kubelet_->waitFor(
            [&] {
                for (const auto& [r, count] : before) {
                    if (kubelet_->registrations(r) <= count) return false;
                }
                return allRegistered(*kubelet_, kResources);
            },
            20s))
            << daemon_->log();
        EXPECT_EQ(givenTwice(*kubelet_), std::vector<std::string>{});
        EXPECT_EQ(waitForAgreement(*kubelet_, kResources, Agreement::Held, 20s), std::vector<std::string>{})
            << daemon_->log();
        kubelet_->setPodResourcesAvailable(true);
        EXPECT_EQ(waitForAgreement(*kubelet_, kResources, Agreement::Exact, 30s), std::vector<std::string>{})
            << daemon_->log();
    }

    std::vector<std::filesystem::path> mounts_;
};

TEST_F(StateDiskTest, FullDiskRefusesAllocateAndRecoversWhenSpaceReturns) {
    mountTmpfs("size=1m,mode=0700");
    startAndWaitOffered();
    auto first = kubelet_->allocate("default", "pod-a", "main", kCl, 1);
    ASSERT_TRUE(first.ok) << first.error;

    fillFileSystem(daemon_->stateDir() / "filler");
    // Pods keep coming. SQLite may still find room in a page it already has; whatever it
    // grants it has recorded, and soon it must refuse.
    std::vector<std::string> refusals;
    int granted = 0;
    for (int i = 0; i < 3 && refusals.empty(); ++i) {
        auto result =
            kubelet_->allocate("default", "full-" + std::to_string(i), "main", i % 2 ? kFoo1 : kCl, 1);
        if (result.ok) {
            ++granted;
        } else {
            refusals.push_back(result.error);
        }
    }
    ASSERT_FALSE(refusals.empty()) << "the disk is full, yet " << granted << " allocation(s) were granted";
    std::printf("disk full: %d granted, then refused: %s\n", granted, refusals[0].c_str());
    EXPECT_NE(refusals[0].find("cannot record the allocation"), std::string::npos) << refusals[0];
    EXPECT_NE(refusals[0].find("database or disk is full"), std::string::npos) << refusals[0];
    EXPECT_TRUE(alive(daemon_->pid()));
    EXPECT_EQ(waitForAgreement(*kubelet_, kResources, Agreement::Held, 20s), std::vector<std::string>{});

    // Space returns: the next pod gets its slot, without restarting devlet.
    std::filesystem::remove(daemon_->stateDir() / "filler");
    auto after = kubelet_->allocate("default", "pod-after", "main", kCl, 1);
    ASSERT_TRUE(after.ok) << after.error << "\n" << daemon_->log();

    // Everything granted, before, during and after, was recorded.
    restartAndCheckHeld();
}

TEST_F(StateDiskTest, ReadOnlyStateDirectoryOffersNothingUntilItCanBeWritten) {
    mountTmpfs("size=4m,mode=0700");
    startAndWaitOffered();
    ASSERT_TRUE(kubelet_->allocate("default", "pod-a", "main", kFoo0, 1).ok);
    ASSERT_EQ(waitForAgreement(*kubelet_, kResources, Agreement::Exact, 20s), std::vector<std::string>{});
    ASSERT_TRUE(kubelet_->allocate("default", "pod-b", "main", kCl, 1).ok);
    ASSERT_EQ(daemon_->stop(SIGTERM), 0);
    std::map<std::string, int> before;
    for (const auto& r : kResources) before[r] = kubelet_->registrations(r);

    remount(true);
    kubelet_->setPodResourcesAvailable(false);
    daemon_->start();
    ASSERT_TRUE(daemon_->waitForLog("is on a read-only file system", 20s)) << daemon_->log();
    ASSERT_TRUE(daemon_->waitForLog("no device is offered until it can be written", 20s));
    // It keeps running (systemd would give up on a daemon that exits again and again) and
    // offers nothing it could not record.
    EXPECT_TRUE(alive(daemon_->pid()));
    for (const auto& [r, count] : before) {
        EXPECT_EQ(kubelet_->registrations(r), count) << r;
        EXPECT_TRUE(kubelet_->endpoint(r).empty()) << r;
    }

    remount(false);
    ASSERT_TRUE(daemon_->waitForLog("can be written again", 20s)) << daemon_->log();
    ASSERT_TRUE(kubelet_->waitFor([&] { return allRegistered(*kubelet_, kResources); }, 20s))
        << daemon_->log();
    EXPECT_EQ(waitForAgreement(*kubelet_, kResources, Agreement::Held, 20s), std::vector<std::string>{})
        << daemon_->log();
    kubelet_->setPodResourcesAvailable(true);
    EXPECT_EQ(waitForAgreement(*kubelet_, kResources, Agreement::Exact, 30s), std::vector<std::string>{});
    EXPECT_TRUE(kubelet_->allocate("default", "pod-c", "main", kCl, 1).ok);
}

// ext4 as a node runs it: an I/O error makes it read-only under the running daemon.
class FailingDiskTest : public StateDiskTest {
protected:
    void SetUp() override {
        StateDiskTest::SetUp();
        if (IsSkipped()) return;
        image_ = dir_.path() / "state.img";
        if (std::system("command -v mkfs.ext4 >/dev/null && command -v e2fsck >/dev/null") != 0)
            GTEST_SKIP() << "mkfs.ext4 and e2fsck (e2fsprogs) are needed";
        if (std::system(("truncate -s 16M " + image_.string() + " && mkfs.ext4 -q -F " + image_.string() +
                         " >/dev/null 2>&1")
                            .c_str()) != 0)
            GTEST_SKIP() << "cannot make an ext4 image";
        if (!mountImage()) GTEST_SKIP() << "cannot mount an ext4 image on a loop device (no /dev/loop*?)";
        mounts_.push_back(daemon_->stateDir());
    }
    bool mountImage() {
        const std::string command = "mount -o loop,errors=remount-ro " + image_.string() + " " +
                                    daemon_->stateDir().string() + " 2>/dev/null";
        return std::system(command.c_str()) == 0;
    }
    // /sys/fs/ext4/<device>/trigger_fs_error: ext4 reports an error as if the disk had one.
    std::filesystem::path errorTrigger() const {
        std::ifstream mounts("/proc/self/mounts");
        for (std::string device, point, rest; mounts >> device >> point && std::getline(mounts, rest);) {
            if (point == daemon_->stateDir().string())
                return std::filesystem::path("/sys/fs/ext4") / std::filesystem::path(device).filename() /
                       "trigger_fs_error";
        }
        return {};
    }
    std::filesystem::path image_;
};

TEST_F(FailingDiskTest, DiskErrorRefusesAllocateAndRepairedDiskKeepsEveryHeldSlot) {
    startAndWaitOffered();
    ASSERT_TRUE(kubelet_->allocate("default", "pod-a", "main", kFoo1, 1).ok);
    ASSERT_EQ(waitForAgreement(*kubelet_, kResources, Agreement::Exact, 20s), std::vector<std::string>{});
    ASSERT_TRUE(kubelet_->allocate("default", "pod-b", "main", kCl, 1).ok);
    const auto trigger = errorTrigger();
    if (trigger.empty() || !std::filesystem::exists(trigger))
        GTEST_SKIP() << "this kernel has no " << trigger << " to report an ext4 error with";
    // What devlet committed before is on the disk (a disk that fails may lose the last
    // commits, as a power loss may).
    ::sync();
    {
        std::ofstream error(trigger);
        error << "1\n";
    }

    auto refused = kubelet_->allocate("default", "pod-c", "main", kCl, 1);
    ASSERT_FALSE(refused.ok) << "a slot was handed out that devlet could not record";
    std::printf("disk error: refused: %s\n", refused.error.c_str());
    EXPECT_NE(refused.error.find("cannot record the allocation"), std::string::npos) << refused.error;
    EXPECT_TRUE(alive(daemon_->pid()));
    EXPECT_FALSE(kubelet_->endpoint(kCl).empty()) << "devlet keeps serving the kubelet";
    EXPECT_EQ(waitForAgreement(*kubelet_, kResources, Agreement::Held, 20s), std::vector<std::string>{});

    // The operator repairs the file system and restarts devlet.
    daemon_->stop(SIGTERM);
    ASSERT_EQ(::umount2(daemon_->stateDir().c_str(), 0), 0) << std::strerror(errno);
    const int fsck = std::system(("e2fsck -fy " + image_.string() + " >/dev/null 2>&1").c_str());
    // 0: clean, 1: errors corrected (the error ext4 recorded), 4 and above: not repaired.
    ASSERT_TRUE(WIFEXITED(fsck) && WEXITSTATUS(fsck) < 4) << "e2fsck exit status " << fsck;
    ASSERT_TRUE(mountImage());
    restartAndCheckHeld();
    EXPECT_TRUE(kubelet_->allocate("default", "pod-d", "main", kCl, 1).ok);
}

}  // namespace
}  // namespace devlet::test
