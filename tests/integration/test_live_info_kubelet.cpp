// The live file a pod gets, through the real `devlet run` and the kubelet simulator: a pod
// holds two debugEcho devices through the configuration-level resource, they go offline
// and come back, devlet is killed and restarted, and the pod ends; the file the container
// would read follows each step.

#include <chrono>
#include <functional>
#include <thread>

#include <boost/json.hpp>

#include "tests/integration/fixture.h"

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

    // Both devices offered; returns their slot ids.
    std::vector<std::string> start() {
        setOnline(true);
        writeFile(daemon_->confDir() / "live.yaml",
                  echoDevicesConfiguration("live", "live0, live1", 1,
                                           "      availabilityFile: " + availability().string() + "\n",
                                           "  devlet:\n    removalGracePeriodSeconds: 3600\n"));
        EXPECT_TRUE(kubelet_->start());
        daemon_->start();
        EXPECT_TRUE(waitForDevices(kResource, 2, 20s)) << daemon_->log();
        std::vector<std::string> ids;
        for (const auto& [id, state] : kubelet_->devices(kResource)) ids.push_back(id);
        return ids;
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
    const AllocationResult granted = kubelet_->allocateIds("default", "pod-a", "main", kResource, ids);
    ASSERT_TRUE(granted.ok) << granted.error;

    fs::path dir;
    for (const auto& mount : granted.response.mounts()) {
        if (mount.container_path() != "/run/devlet/info") continue;
        EXPECT_TRUE(mount.read_only());
        dir = mount.host_path();
    }
    ASSERT_FALSE(dir.empty()) << "no live-info mount in the Allocate answer";
    EXPECT_EQ(dir.parent_path(), daemon_->stateDir() / "pods");
    EXPECT_EQ(granted.response.envs().at("DEVLET_INFO_FILE"), "/run/devlet/info/devices.json");
    const fs::path file = dir / "devices.json";

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

    setOnline(false);
    ASSERT_TRUE(waitForFile(file, {"gone", "gone"}, 1)) << readFile(file);
    std::uint64_t generation = generationOf(document(file));
    setOnline(true);
    ASSERT_TRUE(waitForFile(file, {"present", "present"}, generation)) << readFile(file);
    generation = generationOf(document(file));

    // Rebuilt from the state store: the next generation, as soon as devlet is back.
    daemon_->kill9();
    daemon_->start();
    ASSERT_TRUE(waitForFile(file, {"present", "present"}, generation)) << readFile(file) << daemon_->log();

    kubelet_->removePod("default", "pod-a");
    ASSERT_TRUE(waitUntil([&] { return !fs::exists(dir); })) << daemon_->log();
}

}  // namespace
}  // namespace devlet::test
