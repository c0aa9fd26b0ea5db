// PluginHost never sends a device list the kubelet could not receive: a list larger than
// gRPC's 4 MiB message limit (which would end the kubelet's ListAndWatch stream) is
// refused, the resource keeps the last list that fit, and problem() says why until a list
// fits again. Against the kubelet simulator (gRPC C++, whose client takes at most 4 MiB
// per message, as grpc-go's does).
#include <future>
#include <optional>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <gtest/gtest.h>

#include "grpc/grpc_wire.h"
#include "plugin/device_list_encoder.h"
#include "plugin/plugin_host.h"
#include "runtime/file_watch.h"
#include "runtime/inventory.h"
#include "tests/support/kubelet_simulator.h"
#include "tests/support/run_on_loop.h"
#include "tests/support/temp_dir.h"

namespace devlet::plugin {
namespace {

using namespace std::chrono_literals;

constexpr const char* kResource = "akri.sh/big";

class NoObserver : public InventoryObserver {
public:
    void resourceChanged(ResourceState) override {}
    void resourceWithdrawn(const std::string&) override {}
};

std::size_t messageSize(const std::vector<DeviceState>& devices) {
    return encodeDeviceList(devices)->size();
}

// `count` devices with ids of `length` characters, all healthy.
std::vector<DeviceState> longIds(std::size_t count, std::size_t length) {
    std::vector<DeviceState> devices;
    for (std::size_t i = 0; i < count; ++i) {
        std::string id = "big-" + std::to_string(i) + "-";
        id.resize(length, 'x');
        devices.push_back({std::move(id), true, std::nullopt});
    }
    return devices;
}

// Healthy devices whose ListAndWatchResponse is exactly the largest message the kubelet takes.
std::vector<DeviceState> exactlyTheLimit() {
    std::vector<DeviceState> devices = longIds(4000, 1000);
    const std::size_t rest = rpc::kMaxGrpcMessage - messageSize(devices);
    DeviceState last{"last-", true, std::nullopt};
    for (std::size_t length = rest; length > 0; --length) {
        last.id.resize(length, 'y');
        if (messageSize({last}) == rest) break;
    }
    devices.push_back(last);
    return devices;
}

ResourceState resource(std::vector<DeviceState> devices) {
    return {kResource, "big", "", std::move(devices)};
}

class PluginHostTest : public ::testing::Test {
protected:
    template <typename Work>
    auto onLoop(Work work) {
        return test::runOnLoop(loop_, std::move(work));
    }

    void SetUp() override {
        inventory_ = std::make_unique<Inventory>("node", "akri.sh", nullptr, noObserver_);
        arbiter_ = std::make_unique<SlotArbiter>(*inventory_);
        watch_ = std::make_unique<FileWatch>(loop_);
        host_ = std::make_unique<PluginHost>(loop_, *watch_, dir_.path().string());
        host_->setInventory(*inventory_, *arbiter_);
        thread_ = std::thread([this] { loop_.run(); });
    }
    void TearDown() override {
        onLoop([this] {
            host_.reset();
            watch_.reset();
            return 0;
        });
        work_.reset();
        thread_.join();
    }

    void offer(std::vector<DeviceState> devices) {
        onLoop([&] {
            host_->resourceChanged(resource(std::move(devices)));
            return 0;
        });
    }
    std::string problem() {
        return onLoop([this] { return host_->problem(kResource); });
    }

    test::TempDir dir_;
    boost::asio::io_context loop_;
    std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_{
        loop_.get_executor()};
    NoObserver noObserver_;
    std::unique_ptr<Inventory> inventory_;  // loop thread only, once it runs
    std::unique_ptr<SlotArbiter> arbiter_;  // loop thread only, once it runs
    std::unique_ptr<FileWatch> watch_;      // loop thread only, once it runs
    std::unique_ptr<PluginHost> host_;      // loop thread only, once it runs
    std::thread thread_;
};

TEST_F(PluginHostTest, ListOverFourMiBIsRefusedAndTheKubeletKeepsItsStream) {
    test::KubeletSimulator kubelet(dir_.path(), dir_.path() / "pod-resources.sock");
    ASSERT_TRUE(kubelet.start());
    onLoop([this] {
        host_->start();
        return 0;
    });
    offer(longIds(2, 20));
    ASSERT_TRUE(kubelet.waitFor([&] { return kubelet.devices(kResource).size() == 2; }, 10s));

    // 5,000 ids of 1,000 characters: about 5 MB.
    const std::vector<DeviceState> tooMany = longIds(5000, 1000);
    ASSERT_GT(messageSize(tooMany), rpc::kMaxGrpcMessage);
    offer(tooMany);
    const std::string why = problem();
    EXPECT_NE(why.find(std::to_string(messageSize(tooMany)) + " bytes"), std::string::npos) << why;
    EXPECT_NE(why.find("4 MiB"), std::string::npos) << why;
    EXPECT_NE(why.find("capacity"), std::string::npos) << why;

    // The next list that fits is the next the kubelet gets, on the same stream.
    const std::string endpoint = kubelet.endpoint(kResource);
    offer(longIds(3, 20));
    ASSERT_TRUE(kubelet.waitFor([&] { return kubelet.devices(kResource).size() == 3; }, 10s));
    EXPECT_EQ(kubelet.listAndWatchMessages(kResource), 2u);
    EXPECT_EQ(kubelet.endpoint(kResource), endpoint);
    EXPECT_EQ(kubelet.registrations(kResource), 1);
    EXPECT_EQ(problem(), "");
}

TEST_F(PluginHostTest, FirstListOverFourMiBIsNotSent) {
    test::KubeletSimulator kubelet(dir_.path(), dir_.path() / "pod-resources.sock");
    ASSERT_TRUE(kubelet.start());
    onLoop([this] {
        host_->start();
        return 0;
    });
    offer(longIds(5000, 1000));
    EXPECT_NE(problem(), "");
    // Registered all the same, with no list yet; the first list that fits is the first sent.
    ASSERT_TRUE(kubelet.waitFor([&] { return !kubelet.endpoint(kResource).empty(); }, 10s));
    offer(longIds(1, 20));
    ASSERT_TRUE(kubelet.waitFor([&] { return kubelet.devices(kResource).size() == 1; }, 10s));
    EXPECT_EQ(kubelet.listAndWatchMessages(kResource), 1u);
    EXPECT_EQ(problem(), "");
}

TEST_F(PluginHostTest, ListOfExactlyFourMiBIsSentAndOneThatOutgrowsItIsNot) {
    std::vector<DeviceState> devices = exactlyTheLimit();
    ASSERT_EQ(messageSize(devices), rpc::kMaxGrpcMessage);
    offer(devices);
    EXPECT_EQ(problem(), "");

    // "Healthy" to "Unhealthy" adds two bytes: too many to patch into the list.
    ResourceState taken = resource({devices[7]});
    taken.devices[0].healthy = false;
    EXPECT_FALSE(onLoop([&] { return host_->slotsChanged(taken); }));
    devices[7].healthy = false;
    offer(devices);
    EXPECT_NE(problem().find(std::to_string(rpc::kMaxGrpcMessage + 2) + " bytes"), std::string::npos)
        << problem();

    // While the latest list is refused, a change is not patched into the last one sent.
    ResourceState freed = resource({devices[7]});
    freed.devices[0].healthy = true;
    EXPECT_FALSE(onLoop([&] { return host_->slotsChanged(freed); }));
    devices[7].healthy = true;
    offer(devices);
    EXPECT_EQ(problem(), "");
}

}  // namespace
}  // namespace devlet::plugin
