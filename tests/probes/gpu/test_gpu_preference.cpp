// The gpu allocation policy as the inventory uses it: a gpu configuration's
// configuration-level GetPreferredAllocation goes through the handler's slot preference;
// other handlers keep the core's spread/pack choice.

#include <gtest/gtest.h>

#include "probes/gpu/gpu_handler.h"
#include "runtime/inventory.h"

namespace devlet::gpu {
namespace {

class IgnoringObserver : public InventoryObserver {
public:
    void resourceChanged(ResourceState) override {}
    void resourceWithdrawn(const std::string&) override {}
};

Instance gpu(const std::string& address, int numa, const std::string& root) {
    Instance instance;
    instance.id = address;
    instance.numaNode = numa;
    instance.properties["GPU_PCI_ROOT"] = root;
    return instance;
}

class GpuPreferenceTest : public ::testing::Test {
protected:
    void start(const std::string& handler, const std::string& details) {
        Configuration configuration;
        configuration.name = "gpus";
        configuration.handler = handler;
        configuration.discoveryDetails = details;
        configuration.capacity = 2;
        configuration.uniqueDevices = false;  // what a gpu configuration gets by default
        inventory_.applyConfigurations({configuration}, {{"gpus", std::chrono::milliseconds(0)}});
        inventory_.reportSnapshot(
            "gpus", {gpu("0000:03:00.0", 0, "pci0000:00"), gpu("0000:83:00.0", 1, "pci0000:80"),
                     gpu("0000:04:00.0", 0, "pci0000:00"), gpu("0000:84:00.0", 1, "pci0000:80")});
        for (const ConfigurationView& view : inventory_.view()) {
            for (const InstanceView& instance : view.instances) {
                numa_[instance.name] = *instance.device.numaNode;
                for (const Slot& slot : instance.slots) available_.push_back(slot.deviceId);
            }
        }
        ASSERT_EQ(available_.size(), 8u);
    }

    int numaOf(const std::string& slot) { return numa_.at(slot.substr(0, slot.rfind('-'))); }
    static std::string gpuOf(const std::string& slot) { return slot.substr(0, slot.rfind('-')); }

    GpuPreferenceTest() {
        handlers_.add(std::make_unique<GpuHandler>());
        inventory_.setHandlers(handlers_);
    }

    HandlerRegistry handlers_;
    IgnoringObserver observer_;
    Inventory inventory_{"node-a", "akri.sh", nullptr, observer_};
    std::map<std::string, int> numa_;
    std::vector<std::string> available_;
};

TEST_F(GpuPreferenceTest, PackedGpuConfigurationFillsOneGpuOnOneNumaNode) {
    start("gpu", "allocationPolicy: packed\n");
    const std::vector<std::string> chosen = inventory_.preferredAllocation("akri.sh/gpus", available_, {}, 2);
    ASSERT_EQ(chosen.size(), 2u);
    EXPECT_EQ(gpuOf(chosen[0]), gpuOf(chosen[1]));
}

TEST_F(GpuPreferenceTest, NonePolicyTakesTwoGpusOfOneNumaNode) {
    start("gpu", "allocationPolicy: none\n");
    for (int size : {2, 4}) {
        const std::vector<std::string> chosen =
            inventory_.preferredAllocation("akri.sh/gpus", available_, {}, size);
        ASSERT_EQ(chosen.size(), static_cast<std::size_t>(size));
        for (const std::string& id : chosen) EXPECT_EQ(numaOf(id), numaOf(chosen[0])) << id;
        EXPECT_NE(gpuOf(chosen[0]), gpuOf(chosen[1]));
    }
}

TEST_F(GpuPreferenceTest, OtherHandlersKeepTheCoresChoice) {
    start("debugEcho", "descriptions: [a]\n");
    // The core's spread: distinct devices first, whatever their NUMA nodes.
    const std::vector<std::string> chosen = inventory_.preferredAllocation("akri.sh/gpus", available_, {}, 4);
    ASSERT_EQ(chosen.size(), 4u);
    std::set<std::string> gpus;
    for (const std::string& id : chosen) gpus.insert(gpuOf(id));
    EXPECT_EQ(gpus.size(), 4u);
}

}  // namespace
}  // namespace devlet::gpu
