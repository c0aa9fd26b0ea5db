#include "tests/integration/fault_support.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string_view>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

namespace devlet::test {

namespace {
constexpr std::string_view kHealthy = "Healthy";
}  // namespace

std::string enterPrivateMountNamespace() {
    static std::string problem = [] {
        if (::unshare(CLONE_NEWNS) != 0)
            return std::string("cannot create a mount namespace (needs root): ") + std::strerror(errno);
        if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
            return std::string("cannot make mounts private: ") + std::strerror(errno);
        return std::string();
    }();
    return problem;
}

void fillFileSystem(const std::filesystem::path& file) {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return;
    const std::string chunk(64 * 1024, 'x');
    for (std::size_t size : {chunk.size(), std::size_t{4096}, std::size_t{1}}) {
        while (::write(fd, chunk.data(), size) > 0) {
        }
    }
    ::close(fd);
}

int faultRounds(int ci, int manual) {
    int rounds = ci;
    std::string why = "the CI length; DEVLET_FAULTS=long runs " + std::to_string(manual);
    if (const char* mode = std::getenv("DEVLET_FAULTS"); mode && std::string_view(mode) == "long") {
        rounds = manual;
        why = "DEVLET_FAULTS=long";
    }
    if (const char* exact = std::getenv("DEVLET_FAULT_ROUNDS")) {
        const std::string_view text = exact;
        int given = 0;
        if (const auto [stop, error] = std::from_chars(text.data(), text.data() + text.size(), given);
            error != std::errc() || stop != text.data() + text.size())
            throw std::invalid_argument("DEVLET_FAULT_ROUNDS must be a whole number, not \"" +
                                        std::string(text) + "\"");
        rounds = std::max(1, given);
        why = "DEVLET_FAULT_ROUNDS";
    }
    std::printf("fault storm: %d round(s) (%s)\n", rounds, why.c_str());
    std::fflush(stdout);
    return rounds;
}

std::uint32_t faultSeed() {
    std::uint32_t seed = std::random_device{}();
    if (const char* fixed = std::getenv("DEVLET_FAULT_SEED"))
        seed = static_cast<std::uint32_t>(std::strtoul(fixed, nullptr, 10));
    std::printf("fault storm: seed %u (DEVLET_FAULT_SEED=%u repeats it)\n", seed, seed);
    std::fflush(stdout);
    return seed;
}

std::map<std::string, std::vector<Hold>> holds(const KubeletSimulator& kubelet) {
    std::map<std::string, std::vector<Hold>> result;
    for (const ContainerAllocation& allocation : kubelet.allocations()) {
        for (const std::string& id : allocation.deviceIds) {
            result[id].push_back(
                {allocation.podNamespace + "/" + allocation.pod, allocation.container, allocation.resource});
        }
    }
    return result;
}

std::vector<std::string> givenTwice(const KubeletSimulator& kubelet) {
    std::vector<std::string> result;
    for (const auto& [slot, list] : holds(kubelet)) {
        std::set<std::string> pods, resources;
        for (const Hold& hold : list) {
            pods.insert(hold.pod);
            resources.insert(hold.resource);
        }
        if (pods.size() < 2 && resources.size() < 2) continue;
        std::string line = "slot " + slot + " is held by";
        for (const Hold& hold : list) line += " " + hold.pod + "/" + hold.container + " via " + hold.resource;
        result.push_back(line);
    }
    return result;
}

std::vector<std::string> disagreements(const KubeletSimulator& kubelet,
                                       const std::vector<std::string>& resources, Agreement agreement,
                                       const std::set<std::string>& goneSlots) {
    const auto held = holds(kubelet);
    std::vector<std::string> result;
    for (const std::string& resource : resources) {
        if (kubelet.endpoint(resource).empty()) {
            result.push_back(resource + " has no live registration");
            continue;
        }
        for (const auto& [slot, state] : kubelet.devices(resource)) {
            if (goneSlots.count(slot)) continue;
            const bool healthy = state.health == kHealthy;
            auto it = held.find(slot);
            if (it == held.end()) {
                if (agreement == Agreement::Exact && !healthy) {
                    std::string leaked = "slot " + slot + " is held by no pod but " + state.health;
                    leaked += " in " + resource + " (leaked)";
                    result.push_back(std::move(leaked));
                }
                continue;
            }
            const bool holder = std::any_of(it->second.begin(), it->second.end(),
                                            [&](const Hold& hold) { return hold.resource == resource; });
            if (holder && !healthy) {
                std::string lost = "slot " + slot + " is held through ";
                lost += resource + " but " + state.health + " there (devlet lost or moved its holder)";
                result.push_back(std::move(lost));
            } else if (!holder && healthy) {
                const Hold& first = it->second.front();
                std::string twice =
                    "slot " + slot + " is held by " + first.pod + " through " + first.resource;
                twice += " but Healthy in " + resource + " (it could be given twice)";
                result.push_back(std::move(twice));
            }
        }
    }
    return result;
}

std::vector<std::string> waitForAgreement(KubeletSimulator& kubelet,
                                          const std::vector<std::string>& resources, Agreement agreement,
                                          std::chrono::milliseconds timeout,
                                          const std::set<std::string>& goneSlots) {
    std::vector<std::string> last;
    const bool agreed = kubelet.waitFor(
        [&] {
            last = disagreements(kubelet, resources, agreement, goneSlots);
            return last.empty();
        },
        timeout);
    if (agreed) return {};
    return last.empty() ? std::vector<std::string>{"no agreement before the deadline"} : last;
}

bool allRegistered(const KubeletSimulator& kubelet, const std::vector<std::string>& resources) {
    return std::all_of(resources.begin(), resources.end(), [&](const std::string& resource) {
        return !kubelet.endpoint(resource).empty() && !kubelet.devices(resource).empty();
    });
}

std::vector<std::string> configurationResources(const KubeletSimulator& kubelet,
                                                const std::string& configurationResource) {
    std::vector<std::string> result;
    for (const std::string& resource : kubelet.resources()) {
        if (resource == configurationResource || resource.starts_with(configurationResource + "-"))
            result.push_back(resource);
    }
    return result;
}

// ---------------------------------------------------------------------------

AllocationStorm::AllocationStorm(KubeletSimulator& kubelet, std::string configurationResource,
                                 std::vector<std::string> instanceResources, std::uint32_t seed)
    : kubelet_(kubelet),
      configurationResource_(std::move(configurationResource)),
      instanceResources_(std::move(instanceResources)),
      random_(seed) {}

AllocationStorm::~AllocationStorm() {
    stop();
}

void AllocationStorm::start() {
    if (running_.exchange(true)) return;
    thread_ = std::thread([this] { run(); });
}

void AllocationStorm::stop() {
    running_ = false;
    if (thread_.joinable()) thread_.join();
}

AllocationStorm::Counts AllocationStorm::counts() const {
    std::lock_guard lock(mutex_);
    return counts_;
}

std::vector<std::string> AllocationStorm::refusals() const {
    std::lock_guard lock(mutex_);
    return refusals_;
}

void AllocationStorm::run() {
    while (running_) {
        step();
        // Room for devlet on a small machine: the storm is about interleavings, not load.
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

void AllocationStorm::step() {
    enum class Op { End, ClPod, IlPod } op;
    std::string resource;
    int count = 1;
    bool withInit = false;
    std::size_t victim = 0;
    {
        std::lock_guard lock(mutex_);
        const int roll = std::uniform_int_distribution<int>(0, 99)(random_);
        // Enough pods running that slots run short and allocations get refused, not so many
        // that nothing is free.
        if (!pods_.empty() && (pods_.size() >= 6 || roll < 20)) {
            op = Op::End;
            victim = std::uniform_int_distribution<std::size_t>(0, pods_.size() - 1)(random_);
        } else if (roll < 60 || instanceResources_.empty()) {
            op = Op::ClPod;
            resource = configurationResource_;
            count = std::uniform_int_distribution<int>(0, 9)(random_) < 3 ? 2 : 1;
            withInit = std::uniform_int_distribution<int>(0, 9)(random_) < 2;
        } else {
            op = Op::IlPod;
            resource = instanceResources_[std::uniform_int_distribution<std::size_t>(
                0, instanceResources_.size() - 1)(random_)];
        }
    }
    if (op == Op::End) {
        endPod(victim);
    } else {
        newPod(resource, count, withInit);
    }
}

void AllocationStorm::newPod(const std::string& resource, int count, bool withInit) {
    std::string pod;
    {
        std::lock_guard lock(mutex_);
        pod = "storm-" + std::to_string(nextPod_++);
    }
    AllocationResult result;
    if (withInit) {
        // The init container's slot, then the app container reusing it: a re-offer
        // through the same resource, which devlet accepts.
        AllocationResult init = kubelet_.allocate("default", pod, "init", resource, 1);
        result = init.ok ? kubelet_.allocate("default", pod, "main", resource, count, init.deviceIds) : init;
        if (init.ok && !result.ok) kubelet_.removePod("default", pod);  // admission failed
    } else {
        result = kubelet_.allocate("default", pod, "main", resource, count);
    }
    std::lock_guard lock(mutex_);
    if (result.ok) {
        ++counts_.granted;
        pods_.push_back(pod);
        return;
    }
    ++counts_.refused;
    if (refusals_.size() < 20 &&
        std::find(refusals_.begin(), refusals_.end(), result.error) == refusals_.end())
        refusals_.push_back(result.error);
}

void AllocationStorm::endPod(std::size_t index) {
    std::string pod;
    {
        std::lock_guard lock(mutex_);
        if (index >= pods_.size()) return;
        pod = pods_[index];
        pods_.erase(pods_.begin() + static_cast<std::ptrdiff_t>(index));
        ++counts_.ended;
    }
    kubelet_.removePod("default", pod);
}

void AllocationStorm::endPods(double fraction) {
    std::vector<std::string> ending;
    {
        std::lock_guard lock(mutex_);
        std::bernoulli_distribution end(fraction);
        for (auto it = pods_.begin(); it != pods_.end();) {
            if (end(random_)) {
                ending.push_back(*it);
                it = pods_.erase(it);
                ++counts_.ended;
            } else {
                ++it;
            }
        }
    }
    for (const std::string& pod : ending) kubelet_.removePod("default", pod);
}

void AllocationStorm::endAllPods() {
    endPods(1.0);
}

}  // namespace devlet::test
