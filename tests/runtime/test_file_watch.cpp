// FileWatch when the kernel's inotify queue overflows: every watch hears that events were
// lost, and a directory whose creation was lost is found. The overflow is real: more
// events than fs.inotify.max_queued_events arrive while the loop does not read them.

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/file_watch.h"
#include "tests/support/temp_dir.h"

namespace devlet {
namespace {

// Creates and deletes one file until more events than the kernel queues are waiting;
// false when the limit cannot be read or is too large to fill in a test.
bool overflow(const std::string& dir) {
    std::ifstream limitFile("/proc/sys/fs/inotify/max_queued_events");
    long limit = 0;
    if (!(limitFile >> limit) || limit <= 0 || limit > 1'000'000) return false;
    const std::string noise = dir + "/noise";
    for (long events = 0; events <= limit; events += 2) {  // IN_CREATE and IN_DELETE
        const int fd = ::open(noise.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        if (fd < 0) return false;
        ::close(fd);
        ::unlink(noise.c_str());
    }
    return true;
}

// Runs every handler that is ready, and those they make ready, without waiting.
void drain(boost::asio::io_context& loop) {
    while (loop.poll() > 0) {
    }
    loop.restart();
}

struct Seen {
    std::vector<std::pair<std::string, std::uint32_t>> calls;
    bool overflowed() const {
        for (const auto& [name, mask] : calls) {
            if (name.empty() && (mask & IN_Q_OVERFLOW)) return true;
        }
        return false;
    }
    bool named(const std::string& wanted) const {
        for (const auto& [name, mask] : calls) {
            if (name == wanted) return true;
        }
        return false;
    }
};

FileWatch::Callback into(Seen& seen) {
    return [&seen](const std::string& name, std::uint32_t mask) { seen.calls.emplace_back(name, mask); };
}

TEST(FileWatchTest, QueueOverflowTellsEveryWatchThatEventsWereLost) {
    test::TempDir dir;
    const std::string noisy = dir.dir("noisy");
    const std::string quiet = dir.dir("quiet");
    boost::asio::io_context loop;
    FileWatch watch(loop);
    Seen noisySeen, quietSeen;
    watch.watchDirectory(noisy, IN_CREATE | IN_DELETE | IN_MOVED_TO, into(noisySeen));
    watch.watchDirectory(quiet, IN_CREATE | IN_DELETE | IN_MOVED_TO, into(quietSeen));

    if (!overflow(noisy)) GTEST_SKIP() << "fs.inotify.max_queued_events unreadable or too large to fill";
    dir.file("quiet/lost.yaml", "x");  // queued after the overflow: never reported by name
    drain(loop);

    EXPECT_TRUE(noisySeen.overflowed());
    EXPECT_TRUE(quietSeen.overflowed());
    EXPECT_FALSE(quietSeen.named("lost.yaml"));

    // Afterwards events come by name again.
    quietSeen.calls.clear();
    dir.file("quiet/next.yaml", "x");
    drain(loop);
    EXPECT_TRUE(quietSeen.named("next.yaml"));
    EXPECT_FALSE(quietSeen.overflowed());
}

TEST(FileWatchTest, DirectoryCreatedDuringAnOverflowIsFound) {
    test::TempDir dir;
    const std::string noisy = dir.dir("noisy");
    const std::string later = (dir.path() / "later").string();
    boost::asio::io_context loop;
    FileWatch watch(loop);
    Seen noisySeen, laterSeen;
    watch.watchDirectory(noisy, IN_CREATE | IN_DELETE | IN_MOVED_TO, into(noisySeen));
    watch.watchDirectory(later, IN_CREATE | IN_DELETE | IN_MOVED_TO, into(laterSeen));

    if (!overflow(noisy)) GTEST_SKIP() << "fs.inotify.max_queued_events unreadable or too large to fill";
    ASSERT_EQ(::mkdir(later.c_str(), 0700), 0);  // its IN_CREATE is lost
    drain(loop);

    ASSERT_EQ(laterSeen.calls.size(), 1u);
    EXPECT_EQ(laterSeen.calls[0], std::make_pair(std::string(), std::uint32_t{IN_CREATE}));
    // Now watched itself.
    dir.file("later/a.yaml", "x");
    drain(loop);
    EXPECT_TRUE(laterSeen.named("a.yaml"));
}

}  // namespace
}  // namespace devlet
