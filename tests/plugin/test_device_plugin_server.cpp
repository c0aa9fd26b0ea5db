// One DevicePluginServer over a real Inventory, called with the real gRPC C++ client as
// the kubelet would: options, the device list and its updates, Allocate granted and
// refused across resources, and a flood of connections that is cut off while the
// kubelet's own connection keeps working.
#include <future>
#include <set>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "plugin/device_list_encoder.h"
#include "plugin/device_plugin_server.h"
#include "runtime/inventory.h"
#include "tests/support/decide_now.h"
#include "tests/support/run_on_loop.h"
#include "tests/support/temp_dir.h"

namespace devlet::plugin {
namespace {

// Keeps the inventory's latest lists for the test to publish.
class Lists : public InventoryObserver {
public:
    void resourceChanged(ResourceState state) override { latest[state.resource] = state; }
    void resourceWithdrawn(const std::string& resource) override { latest.erase(resource); }
    std::map<std::string, ResourceState> latest;
};

class DevicePluginServerTest : public ::testing::Test {
protected:
    template <typename Work>
    auto onLoop(Work work) {
        return test::runOnLoop(loop_, std::move(work));
    }

    void SetUp() override {
        socketPath_ = (dir_.path() / "echo.sock").string();
        thread_ = std::thread([this] { loop_.run(); });
        // The inventory and the server belong to the loop thread from their first call on.
        const bool started = onLoop([this] {
            inventory_ = std::make_unique<Inventory>("node", "akri.sh", nullptr, lists_);
            Configuration echo;
            echo.name = "echo";
            echo.handler = "debugEcho";
            echo.capacity = 2;
            inventory_->applyConfigurations({echo}, {});
            Instance foo0;
            foo0.id = "foo0";
            foo0.shared = true;
            foo0.properties["DEBUG_ECHO_DESCRIPTION"] = "foo0";
            inventory_->reportSnapshot("echo", {foo0});
            arbiter_ = std::make_unique<SlotArbiter>(*inventory_);
            server_ = std::make_unique<DevicePluginServer>("akri.sh/echo-8120fe", false, loop_, *inventory_,
                                                           *arbiter_);
            if (!server_->start(socketPath_)) return false;
            publish("akri.sh/echo-8120fe");
            return true;
        });
        ASSERT_TRUE(started);
        channel_ = grpc::CreateChannel("unix://" + socketPath_, grpc::InsecureChannelCredentials());
        stub_ = v1beta1::DevicePlugin::NewStub(channel_);
    }
    void TearDown() override {
        onLoop([this] {
            server_.reset();
            return 0;
        });
        work_.reset();
        thread_.join();
    }

    // What PluginHost does when the inventory reports a change (called on the loop).
    void publish(const std::string& resource) {
        server_->publish(rpc::frameMessage(*encodeDeviceList(lists_.latest.at(resource).devices)));
    }

    test::TempDir dir_;
    std::string socketPath_;
    boost::asio::io_context loop_;
    std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_{
        loop_.get_executor()};
    Lists lists_;
    std::unique_ptr<Inventory> inventory_;        // loop thread only, once it runs
    std::unique_ptr<SlotArbiter> arbiter_;        // loop thread only, once it runs
    std::unique_ptr<DevicePluginServer> server_;  // loop thread only, once it runs
    std::thread thread_;
    std::shared_ptr<grpc::Channel> channel_;
    std::unique_ptr<v1beta1::DevicePlugin::Stub> stub_;
};

TEST_F(DevicePluginServerTest, InstanceResourceOffersNoPreferredAllocation) {
    grpc::ClientContext context;
    v1beta1::DevicePluginOptions options;
    ASSERT_TRUE(stub_->GetDevicePluginOptions(&context, v1beta1::Empty(), &options).ok());
    EXPECT_FALSE(options.get_preferred_allocation_available());
    EXPECT_FALSE(options.pre_start_required());
}

TEST_F(DevicePluginServerTest, ListShowsBothSlotsAndFollowsAnAllocationElsewhere) {
    grpc::ClientContext context;
    auto reader = stub_->ListAndWatch(&context, v1beta1::Empty());
    v1beta1::ListAndWatchResponse list;
    ASSERT_TRUE(reader->Read(&list));
    ASSERT_EQ(list.devices_size(), 2);
    EXPECT_EQ(list.devices(0).id(), "echo-8120fe-0");
    EXPECT_EQ(list.devices(0).health(), "Healthy");

    // Slot 0 taken through the configuration-level resource: Unhealthy here.
    const bool granted = onLoop([this] {
        auto result = test::allocateNow(*arbiter_, "akri.sh/echo", {"echo-8120fe-0"});
        publish("akri.sh/echo-8120fe");
        return std::holds_alternative<ContainerGrant>(result);
    });
    ASSERT_TRUE(granted);
    ASSERT_TRUE(reader->Read(&list));
    EXPECT_EQ(list.devices(0).health(), "Unhealthy");
    EXPECT_EQ(list.devices(1).health(), "Healthy");
    context.TryCancel();
    while (reader->Read(&list)) {
    }
}

TEST_F(DevicePluginServerTest, AllocateGrantsEnvironmentAndRefusesASlotHeldElsewhere) {
    {
        grpc::ClientContext context;
        v1beta1::AllocateRequest request;
        request.add_container_requests()->add_devices_ids("echo-8120fe-1");
        v1beta1::AllocateResponse response;
        ASSERT_TRUE(stub_->Allocate(&context, request, &response).ok());
        ASSERT_EQ(response.container_responses_size(), 1);
        EXPECT_EQ(response.container_responses(0).envs().at("DEBUG_ECHO_DESCRIPTION"), "foo0");
    }
    onLoop([this] {
        return std::holds_alternative<ContainerGrant>(
            test::allocateNow(*arbiter_, "akri.sh/echo", {"echo-8120fe-0"}));
    });
    grpc::ClientContext context;
    v1beta1::AllocateRequest request;
    request.add_container_requests()->add_devices_ids("echo-8120fe-0");
    v1beta1::AllocateResponse response;
    const grpc::Status status = stub_->Allocate(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(status.error_message().find("echo-8120fe-0"), std::string::npos) << status.error_message();
}

TEST_F(DevicePluginServerTest, MalformedAllocateIsInvalidArgument) {
    grpc::GenericStub generic(channel_);
    grpc::ClientContext context;
    const std::string garbage = "\xff\xff\xff";
    grpc::Slice slice(garbage.data(), garbage.size());
    grpc::ByteBuffer request(&slice, 1), response;
    std::promise<grpc::Status> done;
    generic.UnaryCall(&context, "/v1beta1.DevicePlugin/Allocate", grpc::StubOptions(), &request, &response,
                      [&](const grpc::Status& status) { done.set_value(status); });
    EXPECT_EQ(done.get_future().get().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(DevicePluginServerTest, ConnectionFloodIsCutOffAndTheKubeletKeepsItsOwn) {
    grpc::ClientContext watchContext;
    auto reader = stub_->ListAndWatch(&watchContext, v1beta1::Empty());
    v1beta1::ListAndWatchResponse list;
    ASSERT_TRUE(reader->Read(&list));

    std::vector<int> fds;
    int refused = 0;
    for (int i = 0; i < 40; ++i) {
        const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::strncpy(address.sun_path, socketPath_.c_str(), sizeof address.sun_path - 1);
        ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
        fds.push_back(fd);
    }
    // Refused connections are closed by the server: their reads end (0). The accepted
    // ones only get the server's settings and stay open. Wait for the ends together.
    std::set<int> open(fds.begin(), fds.end());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (refused < 32 && std::chrono::steady_clock::now() < deadline) {  // at most 8 are accepted
        std::vector<pollfd> polls;
        for (int fd : open) polls.push_back({fd, POLLIN, 0});
        if (::poll(polls.data(), polls.size(), 100) <= 0) continue;
        for (const pollfd& p : polls) {
            if (!(p.revents & (POLLIN | POLLHUP))) continue;
            char buffer[256];
            if (::read(p.fd, buffer, sizeof buffer) == 0) {
                ++refused;
                open.erase(p.fd);
            }
        }
    }
    for (int fd : fds) ::close(fd);
    EXPECT_GE(refused, 32);  // 40 less the 8 a plugin accepts (the kubelet's among them)

    grpc::ClientContext context;
    v1beta1::DevicePluginOptions options;
    EXPECT_TRUE(stub_->GetDevicePluginOptions(&context, v1beta1::Empty(), &options).ok());
    watchContext.TryCancel();
    while (reader->Read(&list)) {
    }
}

}  // namespace
}  // namespace devlet::plugin
