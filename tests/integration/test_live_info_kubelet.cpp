// The live file a pod gets, through the real `devlet run` and the kubelet simulator: a pod
// holds two debugEcho devices through the configuration-level resource; one goes away and
// comes back, their properties change, devlet is killed and restarted, the state disk
// fills up, and the pod ends. The file the container would read follows each step, and a
// reader hammering it never sees a partial document.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>

#include <boost/json.hpp>
#include <sys/mount.h>

#include "tests/integration/fault_support.h"
#include "tests/integration/fixture.h"
#include "tests/status/status_test_support.h"

namespace devlet::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

constexpr char kResource[] = "akri.sh/live";

// The file's document; an empty object when it cannot be read or parsed.
json::object document(const fs::path& file) {
    boost::system::error_code ec;
    json::value value = json::parse(readFile(file), ec);
    return ec || !value.is_object() ? json::object{} : value.get_object();
}

std::uint64_t generationOf(const json::object& doc) {
    const json::value* g = doc.if_contains("generation");
    return g && g->is_number() ? g->to_number<std::uint64_t>() : 0;
}

// The value of one property of the device holding `slot`; empty if not listed.
std::string propertyOf(const json::object& doc, const std::string& slot, const std::string& key) {
    const json::value* devices = doc.if_contains("devices");
    if (!devices || !devices->is_array()) return {};
    for (const json::value& d : devices->get_array()) {
        if (!d.is_object() || d.get_object().at("slot").as_string() != slot) continue;
        const json::value* value = d.get_object().at("properties").as_object().if_contains(key);
        return value && value->is_string() ? std::string(value->get_string()) : std::string();
    }
    return {};
}

// Reads the file as fast as it can on a thread of its own and counts what a container
// must never see: a document that does not parse, or a generation going backwards.
class HammeringReader {
public:
    explicit HammeringReader(fs::path file) : file_(std::move(file)), thread_([this] { run(); }) {}
    ~HammeringReader() { stop(); }
    void stop() {
        done_ = true;
        if (thread_.joinable()) thread_.join();
    }
    int reads() const { return reads_; }
    int partial() const { return partial_; }
    int backwards() const { return backwards_; }

private:
    void run() {
        std::uint64_t last = 0;
        while (!done_) {
            const std::string text = readFile(file_);
            if (text.empty()) continue;  // gone: released, or not yet written
            boost::system::error_code ec;
            const json::value value = json::parse(text, ec);
            if (ec || !value.is_object() || !value.get_object().if_contains("devices")) {
                ++partial_;
                continue;
            }
            const std::uint64_t generation = generationOf(value.get_object());
            if (generation < last) ++backwards_;
            last = generation;
            ++reads_;
        }
    }
    fs::path file_;
    std::atomic<bool> done_{false};
    std::atomic<int> reads_{0}, partial_{0}, backwards_{0};
    std::thread thread_;
};

// The health of every device the document lists.
std::vector<std::string> healths(const json::object& doc) {
    std::vector<std::string> result;
    const json::value* devices = doc.if_contains("devices");
    if (!devices || !devices->is_array()) return result;
    for (const json::value& d : devices->get_array()) {
        const json::value* h = d.is_object() ? d.get_object().if_contains("health") : nullptr;
        result.push_back(h && h->is_string() ? std::string(h->get_string()) : "?");
    }
    return result;
}

class LiveInfoKubeletTest : public DaemonTest {
protected:
    fs::path availability() const { return dir_.path() / "available"; }
    void setOnline(bool online) { writeFile(availability(), online ? "\n" : "OFFLINE\n"); }
    // The configuration with the given devices and broker property MODE.
    void configure(const std::string& descriptions, const std::string& mode) {
        writeFile(daemon_->confDir() / "live.yaml",
                  echoDevicesConfiguration("live", descriptions, 1,
                                           "      availabilityFile: " + availability().string() + "\n",
                                           "  brokerProperties:\n    MODE: \"" + mode +
                                               "\"\n  devlet:\n    removalGracePeriodSeconds: 3600\n"));
    }

    // Both devices offered; returns their slot ids.
    std::vector<std::string> start(const std::vector<std::string>& extraArguments = {}) {
        setOnline(true);
        configure("live0, live1", "first");
        EXPECT_TRUE(kubelet_->start());
        daemon_->start(extraArguments);
        EXPECT_TRUE(waitForDevices(kResource, 2, 20s)) << daemon_->log();
        std::vector<std::string> ids;
        for (const auto& [id, state] : kubelet_->devices(kResource)) ids.push_back(id);
        return ids;
    }

    // Both slots, for one container; returns the live file's path.
    fs::path allocateBoth(const std::vector<std::string>& ids, AllocationResult* granted = nullptr) {
        AllocationResult result = kubelet_->allocateIds("default", "pod-a", "main", kResource, ids);
        EXPECT_TRUE(result.ok) << result.error;
        fs::path dir;
        for (const auto& mount : result.response.mounts()) {
            if (mount.container_path() != "/run/devlet/info") continue;
            EXPECT_TRUE(mount.read_only());
            dir = mount.host_path();
        }
        EXPECT_FALSE(dir.empty()) << "no live-info mount in the Allocate answer";
        if (granted) *granted = std::move(result);
        return dir.empty() ? dir : dir / "devices.json";
    }

    // The file changes without the kubelet hearing of it: read again until it says what is
    // wanted or the deadline passes.
    static bool waitUntil(const std::function<bool()>& predicate) {
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (!predicate()) {
            if (std::chrono::steady_clock::now() > deadline) return false;
            std::this_thread::sleep_for(5ms);
        }
        return true;
    }
    static bool waitForFile(const fs::path& file, const std::vector<std::string>& want, std::uint64_t after) {
        return waitUntil([&] {
            const json::object doc = document(file);
            return healths(doc) == want && generationOf(doc) > after;
        });
    }
};

TEST_F(LiveInfoKubeletTest, PodFileFollowsItsDevicesThroughRestartUntilReleased) {
    const std::vector<std::string> ids = start();
    ASSERT_EQ(ids.size(), 2u);
    AllocationResult granted;
    const fs::path file = allocateBoth(ids, &granted);
    ASSERT_FALSE(file.empty());
    const fs::path dir = file.parent_path();
    EXPECT_EQ(dir.parent_path(), daemon_->stateDir() / "pods");
    EXPECT_EQ(granted.response.envs().at("DEVLET_INFO_FILE"), "/run/devlet/info/devices.json");
    HammeringReader reader(file);

    json::object doc = document(file);
    EXPECT_EQ(generationOf(doc), 1u);
    EXPECT_EQ(healths(doc), (std::vector<std::string>{"present", "present"}));
    // Every variable the container got for its devices is in the file, with its value; a
    // plain KEY is the first device's, in both.
    std::map<std::string, std::string> properties;
    for (const json::value& d : doc.at("devices").as_array()) {
        for (const auto& [key, value] : d.at("properties").as_object())
            properties.try_emplace(std::string(key), std::string(value.as_string()));
    }
    for (const auto& [key, value] : granted.response.envs()) {
        if (key.starts_with("DEVLET_")) continue;
        EXPECT_EQ(properties[key], value) << key;
    }
    EXPECT_EQ(granted.response.envs().at("MODE"), "first");

    // One device goes away and comes back; the other stays.
    std::uint64_t generation = generationOf(document(file));
    configure("live0", "first");
    ASSERT_TRUE(waitForFile(file, {"present", "gone"}, generation)) << readFile(file) << daemon_->log();
    EXPECT_EQ(generationOf(document(file)), generation + 1);
    generation = generationOf(document(file));
    configure("live0, live1", "first");
    ASSERT_TRUE(waitForFile(file, {"present", "present"}, generation)) << readFile(file);
    EXPECT_EQ(generationOf(document(file)), generation + 1);
    generation = generationOf(document(file));

    // Their properties change: the file shows the new value, the environment keeps the old.
    configure("live0, live1", "second");
    ASSERT_TRUE(waitUntil([&] { return propertyOf(document(file), ids[0], "MODE") == "second"; }))
        << readFile(file);
    EXPECT_EQ(propertyOf(document(file), ids[1], "MODE"), "second");
    EXPECT_EQ(generationOf(document(file)), generation + 1);
    EXPECT_EQ(granted.response.envs().at("MODE"), "first");
    generation = generationOf(document(file));

    // Both go offline together and come back.
    setOnline(false);
    ASSERT_TRUE(waitForFile(file, {"gone", "gone"}, generation)) << readFile(file);
    generation = generationOf(document(file));
    setOnline(true);
    ASSERT_TRUE(waitForFile(file, {"present", "present"}, generation)) << readFile(file);
    generation = generationOf(document(file));

    // Rebuilt from the state store: the next generation, as soon as devlet is back.
    daemon_->kill9();
    daemon_->start();
    ASSERT_TRUE(waitForFile(file, {"present", "present"}, generation)) << readFile(file) << daemon_->log();

    reader.stop();
    std::printf("reader: %d whole documents read, %d partial, %d going backwards\n", reader.reads(),
                reader.partial(), reader.backwards());
    EXPECT_EQ(reader.partial(), 0);
    EXPECT_EQ(reader.backwards(), 0);
    EXPECT_GT(reader.reads(), 0);

    kubelet_->removePod("default", "pod-a");
    ASSERT_TRUE(waitUntil([&] { return !fs::exists(dir); })) << daemon_->log();
}

// The state directory fills up while a pod holds devices: the file keeps its last whole
// document, the status API says why it is stale, and once space returns the next change
// brings it up to date. A tmpfs in a mount namespace of the test's own (root).
TEST_F(LiveInfoKubeletTest, FullDiskKeepsLastDocumentAndStatusSaysWhy) {
    if (std::string problem = enterPrivateMountNamespace(); !problem.empty()) GTEST_SKIP() << problem;
    fs::create_directories(daemon_->stateDir());
    ASSERT_EQ(::mount("tmpfs", daemon_->stateDir().c_str(), "tmpfs", 0, "size=1m,mode=0700"), 0)
        << std::strerror(errno);
    struct Unmount {
        fs::path point;
        ~Unmount() { ::umount2(point.c_str(), MNT_DETACH); }
    } unmount{daemon_->stateDir()};

    const unsigned short port = freePort();
    const std::vector<std::string> ids = start({"--listen", "127.0.0.1:" + std::to_string(port)});
    ASSERT_EQ(ids.size(), 2u);
    const fs::path file = allocateBoth(ids);
    ASSERT_FALSE(file.empty());
    ASSERT_EQ(generationOf(document(file)), 1u);

    fillFileSystem(daemon_->stateDir() / "filler");
    setOnline(false);
    // What the status API says about the slot's live file.
    auto staleReason = [&]() -> std::string {
        const status::HttpAnswer answer = httpGet(port, "/api/v1/instances");
        boost::system::error_code ec;
        const json::value doc = json::parse(answer.body, ec);
        if (ec || !doc.is_object()) return {};
        for (const json::value& i : doc.at("instances").as_array()) {
            for (const json::value& slot : i.at("slots").as_array()) {
                if (slot.at("id").as_string() != ids[0]) continue;
                const json::value* holder = slot.as_object().if_contains("holder");
                if (!holder || !holder->is_object()) continue;
                const json::value& live = holder->at("liveFile");
                if (live.is_object() && live.at("stale").is_string())
                    return std::string(live.at("stale").as_string());
            }
        }
        return {};
    };
    ASSERT_TRUE(waitUntil([&] { return !staleReason().empty(); })) << daemon_->log();
    const std::string why = staleReason();
    std::printf("disk full: the live file is stale: %s\n", why.c_str());
    EXPECT_NE(why.find("No space left on device"), std::string::npos) << why;
    json::object doc = document(file);
    EXPECT_EQ(generationOf(doc), 1u) << readFile(file);
    EXPECT_EQ(healths(doc), (std::vector<std::string>{"present", "present"}));
    EXPECT_TRUE(daemon_->running());

    // Space returns; the next change is written, and the status API stops saying stale.
    fs::remove(daemon_->stateDir() / "filler");
    setOnline(true);
    setOnline(false);
    ASSERT_TRUE(waitForFile(file, {"gone", "gone"}, 1)) << readFile(file) << daemon_->log();
    ASSERT_TRUE(waitUntil([&] { return staleReason().empty(); }));
}

}  // namespace
}  // namespace devlet::test
