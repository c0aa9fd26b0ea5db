// Configuration files change in every way editors and tools change them, many times a
// second, while pods allocate: written in place in pieces, replaced by an atomic rename,
// moved to a backup and written anew, cut short by a writer that died, plus SIGHUPs.
// devlet never stops, never gives a held slot twice, and ends up offering exactly what the
// files finally say. DEVLET_FAULTS=long runs hundreds of edits.

#include <cstdio>
#include <random>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "tests/integration/fault_support.h"
#include "tests/integration/fixture.h"

namespace devlet::test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCl = "akri.sh/cams";
constexpr const char* kExtra = "akri.sh/extra";

std::string configuration(const std::string& name, const std::string& descriptions, int capacity) {
    return echoDevicesConfiguration(name, descriptions, capacity, "      shared: true\n");
}
std::string cams(int capacity) {
    return configuration("cams", "foo0, foo1, foo2, foo3", capacity);
}

// Writes text over path in place, in two pieces with a pause between: what a reader that
// comes at the wrong moment sees is a file cut short.
void writeInPlace(const fs::path& path, const std::string& text, std::chrono::milliseconds pause) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    const std::size_t half = text.size() / 2;
    ASSERT_EQ(::write(fd, text.data(), half), static_cast<ssize_t>(half));
    std::this_thread::sleep_for(pause);
    ASSERT_EQ(::write(fd, text.data() + half, text.size() - half), static_cast<ssize_t>(text.size() - half));
    ::close(fd);
}

class ConfigurationStormTest : public DaemonTest {
protected:
    void SetUp() override {
        DaemonTest::SetUp();
        writeFile(file(), cams(3));
        ASSERT_TRUE(kubelet_->start());
        daemon_->start();
        ASSERT_TRUE(kubelet_->waitFor(
            [&] {
                resources_ = configurationResources(*kubelet_, kCl);
                return resources_.size() == 5 && allRegistered(*kubelet_, resources_) &&
                       kubelet_->devices(kCl).size() == 12;
            },
            20s))
            << daemon_->log();
    }
    fs::path file() const { return daemon_->confDir() / "cams.yaml"; }
    std::vector<std::string> resources_;
};

TEST_F(ConfigurationStormTest, EditsOfEveryKindNeverStopDevletOrGiveAHeldSlotTwice) {
    const int rounds = faultRounds(25, 600);
    const std::uint32_t seed = faultSeed();
    std::mt19937 random(seed);
    auto pick = [&](int low, int high) { return std::uniform_int_distribution<int>(low, high)(random); };
    std::vector<std::string> instances(resources_.begin(), resources_.end());
    std::erase(instances, std::string(kCl));
    AllocationStorm storm(*kubelet_, kCl, instances, seed);
    storm.start();
    std::map<std::string, int> edits;

    for (int round = 0; round < rounds; ++round) {
        SCOPED_TRACE("round " + std::to_string(round) + ", seed " + std::to_string(seed));
        const std::string text = cams(pick(1, 3));
        switch (pick(0, 5)) {
            case 0:  // nano, vim with backupcopy=yes: truncated and written in place
                writeInPlace(file(), text, std::chrono::milliseconds(pick(0, 150)));
                edits["in place"]++;
                break;
            case 1: {  // vim: a swap file next to it, then the new file renamed over it
                writeFile(daemon_->confDir() / ".cams.yaml.swp", "swap");
                const fs::path temporary = daemon_->confDir() / "cams.yaml.tmp";
                writeInPlace(temporary, text, std::chrono::milliseconds(pick(0, 20)));
                fs::rename(temporary, file());
                fs::remove(daemon_->confDir() / ".cams.yaml.swp");
                edits["atomic rename"]++;
                break;
            }
            case 2:  // emacs: the old file moved to a backup, the new one written after it
                fs::rename(file(), daemon_->confDir() / "cams.yaml~");
                std::this_thread::sleep_for(std::chrono::milliseconds(pick(0, 200)));
                writeInPlace(file(), text, std::chrono::milliseconds(pick(0, 20)));
                edits["backup and rewrite"]++;
                break;
            case 3: {  // a writer that died part-way; someone writes the file again later
                writeInPlace(file(), text.substr(0, pick(1, static_cast<int>(text.size()) - 1)),
                             std::chrono::milliseconds(0));
                std::this_thread::sleep_for(std::chrono::milliseconds(pick(0, 200)));
                writeInPlace(file(), text, std::chrono::milliseconds(0));
                edits["cut short, then whole"]++;
                break;
            }
            case 4:  // a second configuration comes or goes
                if (fs::exists(daemon_->confDir() / "extra.yaml")) {
                    fs::remove(daemon_->confDir() / "extra.yaml");
                } else {
                    writeFile(daemon_->confDir() / "extra.yaml", configuration("extra", "bar0, bar1", 1));
                }
                edits["another file"]++;
                break;
            default:
                ::kill(daemon_->pid(), SIGHUP);
                edits["SIGHUP"]++;
                break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(pick(0, 150)));
        ASSERT_EQ(givenTwice(*kubelet_), std::vector<std::string>{});
    }
    storm.stop();

    // The files' last word: cams at capacity 3 (no held slot is above it), no extra.
    writeFile(file(), cams(3));
    fs::remove(daemon_->confDir() / "extra.yaml");
    ASSERT_TRUE(kubelet_->waitFor(
        [&] {
            return allRegistered(*kubelet_, resources_) && kubelet_->devices(kCl).size() == 12 &&
                   kubelet_->endpoint(kExtra).empty();
        },
        20s))
        << daemon_->log();
    EXPECT_EQ(givenTwice(*kubelet_), std::vector<std::string>{});
    EXPECT_EQ(waitForAgreement(*kubelet_, resources_, Agreement::Exact, 30s), std::vector<std::string>{})
        << daemon_->log();
    storm.endAllPods();
    EXPECT_EQ(waitForAgreement(*kubelet_, resources_, Agreement::Exact, 30s), std::vector<std::string>{});
    EXPECT_EQ(daemon_->log().find("was not recorded; adopted"), std::string::npos);
    ASSERT_TRUE(daemon_->running());
    EXPECT_EQ(::kill(daemon_->pid(), 0), 0);

    const auto counts = storm.counts();
    std::printf("%d edits (", rounds);
    for (const auto& [kind, count] : edits) std::printf(" %s: %d", kind.c_str(), count);
    std::printf(" ); %llu allocations granted, %llu refused\n",
                static_cast<unsigned long long>(counts.granted),
                static_cast<unsigned long long>(counts.refused));
}

// A file cut short where it no longer parses is an error; the last good version runs on.
TEST_F(ConfigurationStormTest, FileCutShortIsAnErrorAndTheLastGoodVersionKeepsRunning) {
    auto held = kubelet_->allocate("default", "pod-a", "main", kCl, 2);
    ASSERT_TRUE(held.ok) << held.error;
    ASSERT_EQ(waitForAgreement(*kubelet_, resources_, Agreement::Exact, 20s), std::vector<std::string>{});
    const std::string text = cams(1);
    for (const std::string& cut : {std::string("name: debugE"), std::string("  capac")}) {
        SCOPED_TRACE(cut);
        const std::size_t mark = daemon_->log().size();
        writeInPlace(file(), text.substr(0, text.find(cut) + cut.size()), std::chrono::milliseconds(0));
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (daemon_->log().find("cams.yaml is broken; its last good version keeps running", mark) ==
                   std::string::npos &&
               std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(20ms);
        ASSERT_NE(daemon_->log().find("cams.yaml is broken; its last good version keeps running", mark),
                  std::string::npos)
            << daemon_->log().substr(mark);
        EXPECT_EQ(kubelet_->devices(kCl).size(), 12u);
        EXPECT_EQ(waitForAgreement(*kubelet_, resources_, Agreement::Exact, 20s), std::vector<std::string>{});
    }
    // The whole file, at last: capacity 1. Free slots above it go; held ones stay listed.
    writeInPlace(file(), text, std::chrono::milliseconds(0));
    std::set<std::string> want(held.deviceIds.begin(), held.deviceIds.end());
    for (const std::string& resource : resources_) {
        if (resource != kCl) want.insert(resource.substr(resource.find('/') + 1) + "-0");
    }
    EXPECT_TRUE(kubelet_->waitFor(
        [&] {
            std::set<std::string> listed;
            for (const auto& [id, state] : kubelet_->devices(kCl)) listed.insert(id);
            return listed == want && !kubelet_->endpoint(kCl).empty();
        },
        10s))
        << daemon_->log();
    EXPECT_EQ(givenTwice(*kubelet_), std::vector<std::string>{});
}

}  // namespace
}  // namespace devlet::test
