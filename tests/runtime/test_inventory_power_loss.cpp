// A power cut while pods allocate, then devlet starting again against the kubelet's
// checkpoint, on real SQLite files: the power-cut VFS (tests/support/power_cut_vfs.h) keeps
// only what was synced. After the reboot the kubelet reuses every allocation it was
// answered without calling Allocate again, and may not know its pods yet (no API server):
// whatever devlet lost or kept, no slot may be offered through a second resource.

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/inventory.h"
#include "runtime/naming.h"
#include "runtime/store.h"
#include "tests/support/decide_now.h"
#include "tests/support/power_cut_vfs.h"
#include "tests/support/temp_dir.h"

namespace devlet {
namespace {

using namespace std::chrono_literals;

constexpr char kCl[] = "akri.sh/echo";

class NullObserver : public InventoryObserver {
public:
    void resourceChanged(ResourceState state) override { latest[state.resource] = std::move(state); }
    void resourceWithdrawn(const std::string& resource) override { latest.erase(resource); }
    std::map<std::string, ResourceState> latest;
};

Configuration echoConfiguration() {
    Configuration configuration;
    configuration.name = "echo";
    configuration.handler = "debugEcho";
    configuration.capacity = 2;
    configuration.sourceFile = "echo.yaml";
    configuration.sourceLine = 1;
    return configuration;
}

std::vector<Instance> echoDevices() {
    std::vector<Instance> devices;
    for (const char* description : {"foo0", "foo1", "foo2", "foo3"}) {
        Instance instance;
        instance.id = description;
        instance.shared = true;
        devices.push_back(instance);
    }
    return devices;
}

class InventoryPowerLossTest : public ::testing::Test {
protected:
    struct Node {
        NullObserver observer;
        std::unique_ptr<Store> store;
        std::unique_ptr<Inventory> inventory;
        std::unique_ptr<SlotArbiter> arbiter;  // made after inventory, gone before it
    };

    // devlet starting on the node: the store, its configuration, its held slots, the echo
    // devices found.
    std::unique_ptr<Node> start() {
        auto node = std::make_unique<Node>();
        std::string error;
        node->store = Store::open((root_.path() / "state").string(), error);
        EXPECT_NE(node->store, nullptr) << error;
        node->inventory = std::make_unique<Inventory>("node-a", "akri.sh", node->store.get(), node->observer);
        node->arbiter = std::make_unique<SlotArbiter>(*node->inventory);
        node->inventory->applyConfigurations({echoConfiguration()}, {{"echo", 0ms}});
        node->inventory->restoreSlots();
        node->inventory->reportSnapshot("echo", echoDevices());
        return node;
    }

    struct Result {
        int rounds = 0;
        int adopted = 0;  // acknowledged holds state.db had lost, taken back from the checkpoint
        std::vector<std::string> offeredTwice;
    };

    // Rounds of allocations through both resources, each ended by a power cut. After the
    // reboot devlet starts with what the disk kept and reads the kubelet's checkpoint
    // (every allocation it answered); PodResources does not answer yet.
    Result cutRepeatedly(int rounds) {
        const std::uint64_t seed = test::PowerCutVfs::seed();
        std::printf("power cuts: %d rounds, seed %llu (DEVLET_FAULT_SEED repeats it)\n", rounds,
                    static_cast<unsigned long long>(seed));
        std::mt19937_64 random(seed);
        auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(random); };

        Result result;
        std::map<std::string, std::string> answered;  // slot -> resource: the kubelet's checkpoint
        for (int round = 0; round < rounds; ++round) {
            auto node = start();
            if (!node->store) return result;
            // Everything the kubelet holds must be held, before any plugin would register.
            std::set<std::string> kept;
            for (const Slot& slot : node->store->slots()) kept.insert(slot.deviceId);
            for (const auto& [slot, resource] : answered) result.adopted += kept.count(slot) ? 0 : 1;
            std::vector<PodDevice> checkpoint;
            for (const auto& [slot, resource] : answered)
                checkpoint.push_back({resource, slot, "", "", "uid"});
            node->arbiter->reconcile(KubeletEvidence{std::nullopt, checkpoint, {}}, 10s);
            for (const auto& [slot, resource] : answered) {
                const std::string instance = slot.substr(0, slot.rfind('-'));
                const std::string other = resource == kCl ? "akri.sh/" + instance : std::string(kCl);
                auto refused = test::allocateNow(*node->arbiter, other, {slot});
                if (!std::holds_alternative<AllocationRefused>(refused)) {
                    std::string twice = "round " + std::to_string(round) + ": " + slot;
                    twice += " through " + other;
                    twice += ", held through " + resource;
                    result.offeredTwice.push_back(std::move(twice));
                }
            }
            // Now and then every pod ends, on a kubelet that knows its pods: the slots are free.
            if (answered.size() > 5) {
                node->arbiter->reconcile(
                    KubeletEvidence{std::vector<PodDevice>{}, std::vector<PodDevice>{}, {}}, 0ms);
                answered.clear();
            }

            vfs_.keepUnsyncedWrites(std::vector<double>{0, 0.5}[pick(2)], random());
            vfs_.cutAfter(1 + pick(40));
            for (int call = 0; call < 30 && !vfs_.cut(); ++call) {
                const std::string instance =
                    instanceName("echo", instanceHash("foo" + std::to_string(pick(4)), "", true));
                const std::string slot = slotId(instance, pick(2));
                if (answered.count(slot)) continue;
                const std::string resource = pick(2) ? std::string(kCl) : "akri.sh/" + instance;
                auto granted = test::allocateNow(*node->arbiter, resource, {slot});
                // The power went before the answer: the kubelet never recorded it.
                if (vfs_.cut()) break;
                if (std::holds_alternative<ContainerGrant>(granted)) answered[slot] = resource;
            }
            if (!vfs_.cut()) vfs_.cutNow();
            node.reset();
            EXPECT_EQ(vfs_.restore(), "");
            ++result.rounds;
        }
        return result;
    }

    test::TempDir root_;
    test::PowerCutVfs vfs_;
};

TEST_F(InventoryPowerLossTest, NoSlotIsOfferedTwiceAfterAPowerCut) {
    Result result = cutRepeatedly(30);
    EXPECT_EQ(result.rounds, 30);
    EXPECT_EQ(result.offeredTwice, std::vector<std::string>{});
    EXPECT_EQ(result.adopted, 0) << "every acknowledged hold was synced, so none had to be taken back";
}

TEST_F(InventoryPowerLossTest, TheCheckpointCoversHoldsAStoreWithoutSyncLost) {
    // The store as it was before it synced each hold: the disk loses acknowledged holds,
    // and the kubelet's checkpoint alone keeps them from a second pod.
    test::SynchronousNormalForced normal;
    Result result = cutRepeatedly(30);
    EXPECT_EQ(result.offeredTwice, std::vector<std::string>{});
    EXPECT_GT(result.adopted, 0) << "the cuts lost no hold: this test would show nothing";
}

}  // namespace
}  // namespace devlet
