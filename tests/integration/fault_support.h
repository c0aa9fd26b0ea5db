#pragma once
// What the fault-injection tests share: how long a storm runs (short in CI, long by hand),
// a kubelet-like allocation storm on a thread of its own, and the checks that say whether
// a slot was lost, leaked or given twice, read from what the kubelet simulator holds and
// sees. The storm owns its thread; everything else runs on the test's thread.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/kubelet_simulator.h"

namespace devlet::test {

// Enters a mount namespace of its own (once per process), so that mounts made by a test
// vanish with it whatever way it ends. Empty when done; otherwise why not (needs root).
std::string enterPrivateMountNamespace();
// Fills the file system that holds `file` until a write fails for want of space.
void fillFileSystem(const std::filesystem::path& file);

// Rounds of a storm: `ci` by default, `manual` with DEVLET_FAULTS=long, or exactly
// DEVLET_FAULT_ROUNDS. Says which on stdout, so a failing run can be repeated.
int faultRounds(int ci, int manual);
// The random seed of a storm: DEVLET_FAULT_SEED, or a fresh one; printed either way.
std::uint32_t faultSeed();

// One container's hold on one slot, as the kubelet simulator records it.
struct Hold {
    std::string pod;  // namespace/name
    std::string container;
    std::string resource;
};
// Every slot some container holds, from the simulator's allocation records.
std::map<std::string, std::vector<Hold>> holds(const KubeletSimulator& kubelet);

// Slots held through two resources or by two pods: what devlet promises never happens.
// A pod's containers sharing a slot through one resource (init and app containers) is fine.
std::vector<std::string> givenTwice(const KubeletSimulator& kubelet);

// Whether what the kubelet sees agrees with what it holds, over `resources` (each must have
// a live registration):
//  - Held: every held slot is Healthy in the resource that holds it and Unhealthy in every
//    other resource that lists it: devlet still knows the holder, so the kubelet cannot
//    give the slot to a second pod.
//  - Exact: Held, and every slot nobody holds is Healthy everywhere: nothing leaked.
// Slots of devices that are gone are Unhealthy everywhere and are not checked.
enum class Agreement { Held, Exact };
// Empty when they agree; otherwise one line per disagreement.
std::vector<std::string> disagreements(const KubeletSimulator& kubelet,
                                       const std::vector<std::string>& resources, Agreement agreement,
                                       const std::set<std::string>& goneSlots = {});
// Waits until they agree; on timeout returns the last disagreements.
std::vector<std::string> waitForAgreement(KubeletSimulator& kubelet,
                                          const std::vector<std::string>& resources, Agreement agreement,
                                          std::chrono::milliseconds timeout,
                                          const std::set<std::string>& goneSlots = {});
// Whether every resource has a live registration and has sent its device list since.
bool allRegistered(const KubeletSimulator& kubelet, const std::vector<std::string>& resources);
// The resources of one configuration the kubelet has seen register: its own
// (`configurationResource`) and its instances' (`configurationResource`-HASH).
std::vector<std::string> configurationResources(const KubeletSimulator& kubelet,
                                                const std::string& configurationResource);

// Pods asking for devices at random, like a busy node's scheduler and kubelet: new pods
// through the configuration-level resource (one or two slots, sometimes an init container
// whose slot the app container reuses) or through an instance's resource, and pods that
// end. Runs on its own thread between start() and stop(); failures while devlet or the
// kubelet is down are expected and counted.
class AllocationStorm {
public:
    struct Counts {
        std::uint64_t granted = 0;  // Allocate answered yes
        std::uint64_t refused = 0;  // devlet or the kubelet said no
        std::uint64_t ended = 0;    // pods removed
    };

    AllocationStorm(KubeletSimulator& kubelet, std::string configurationResource,
                    std::vector<std::string> instanceResources, std::uint32_t seed);
    ~AllocationStorm();
    AllocationStorm(const AllocationStorm&) = delete;
    AllocationStorm& operator=(const AllocationStorm&) = delete;

    void start();
    void stop();  // returns once the thread has ended
    Counts counts() const;
    // Ends some of the running pods (each with probability `fraction`), from the test's thread.
    void endPods(double fraction);
    void endAllPods();
    // Refusals devlet gave, by message (the first few), for the report of a failing test.
    std::vector<std::string> refusals() const;

private:
    void run();
    void step();
    void newPod(const std::string& resource, int count, bool withInit);
    void endPod(std::size_t index);

    KubeletSimulator& kubelet_;
    const std::string configurationResource_;
    const std::vector<std::string> instanceResources_;
    std::atomic<bool> running_{false};
    std::thread thread_;
    // Guards the fields below: the storm's thread and endPods() on the test's thread.
    mutable std::mutex mutex_;
    std::mt19937 random_;
    std::vector<std::string> pods_;  // running pods, by name
    std::uint64_t nextPod_ = 0;
    Counts counts_;
    std::vector<std::string> refusals_;
};

}  // namespace devlet::test
