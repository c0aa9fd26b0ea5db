// The kubelet simulator against a tiny in-test device plugin, over real gRPC on unix sockets.

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "podresources/v1/api.grpc.pb.h"
#include "tests/support/kubelet_simulator.h"
#include "tests/support/temp_dir.h"

namespace devlet::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr auto kTimeout = 10s;
constexpr const char* kResource = "example.com/widget";

v1beta1::Device device(const std::string& id, const std::string& health = "Healthy",
                       const std::vector<int64_t>& numa = {}) {
    v1beta1::Device d;
    d.set_id(id);
    d.set_health(health);
    for (int64_t node : numa) d.mutable_topology()->add_nodes()->set_id(node);
    return d;
}

std::vector<std::string> strings(const google::protobuf::RepeatedPtrField<std::string>& field) {
    return {field.begin(), field.end()};
}

// What the fake plugin saw; read under FakePlugin's lock.
struct PluginLog {
    int optionsCalls = 0;
    int activeStreams = 0;
    int streamsOpened = 0;
    std::vector<v1beta1::PreferredAllocationRequest> preferredRequests;
    std::vector<v1beta1::AllocateRequest> allocateRequests;
};

// A trivial device plugin: serves a fixed (replaceable) device list on its own socket.
class FakePlugin final : public v1beta1::DevicePlugin::Service {
public:
    FakePlugin(std::vector<v1beta1::Device> devices, bool preferredAllocation)
        : preferredAllocation_(preferredAllocation) {
        for (auto& d : devices) *devices_.add_devices() = std::move(d);
    }
    ~FakePlugin() override { shutdown(); }

    bool serve(const fs::path& socket) {
        grpc::ServerBuilder builder;
        builder.AddListeningPort("unix:" + socket.string(), grpc::InsecureServerCredentials());
        builder.RegisterService(this);
        server_ = builder.BuildAndStart();
        return server_ != nullptr;
    }

    void shutdown() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        changed_.notify_all();
        if (server_) {
            server_->Shutdown(std::chrono::system_clock::now() + 5s);
            server_.reset();
        }
    }

    grpc::Status registerWith(const fs::path& kubeletSocket, const std::string& resource,
                              const std::string& endpoint, const std::string& version = "v1beta1") {
        auto stub = v1beta1::Registration::NewStub(
            grpc::CreateChannel("unix:" + kubeletSocket.string(), grpc::InsecureChannelCredentials()));
        v1beta1::RegisterRequest request;
        request.set_version(version);
        request.set_endpoint(endpoint);
        request.set_resource_name(resource);
        request.mutable_options()->set_get_preferred_allocation_available(preferredAllocation_);
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + kTimeout);
        v1beta1::Empty empty;
        grpc::Status status = stub->Register(&context, request, &empty);
        std::lock_guard lock(mutex_);
        optionsCallsWhenRegistered_ = log_.optionsCalls;
        return status;
    }

    void setDevices(std::vector<v1beta1::Device> devices) {
        {
            std::lock_guard lock(mutex_);
            devices_.clear_devices();
            for (auto& d : devices) *devices_.add_devices() = std::move(d);
            ++generation_;
        }
        changed_.notify_all();
    }

    void setPreferred(std::vector<std::string> ids) {
        std::lock_guard lock(mutex_);
        preferred_ = std::move(ids);
    }

    void failAllocate(std::string message) {
        std::lock_guard lock(mutex_);
        allocateError_ = std::move(message);
    }

    PluginLog log() {
        std::lock_guard lock(mutex_);
        return log_;
    }

    int optionsCallsWhenRegistered() {
        std::lock_guard lock(mutex_);
        return optionsCallsWhenRegistered_;
    }

    bool waitUntil(const std::function<bool(const PluginLog&)>& predicate) {
        std::unique_lock lock(mutex_);
        return changed_.wait_for(lock, kTimeout, [&] { return predicate(log_); });
    }

    grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                        v1beta1::DevicePluginOptions* options) override {
        std::lock_guard lock(mutex_);
        ++log_.optionsCalls;
        options->set_get_preferred_allocation_available(preferredAllocation_);
        return grpc::Status::OK;
    }

    grpc::Status ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty*,
                              grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
        std::unique_lock lock(mutex_);
        ++log_.activeStreams;
        ++log_.streamsOpened;
        changed_.notify_all();
        uint64_t sent = 0;
        while (!stopping_ && !context->IsCancelled()) {
            if (sent != generation_) {
                sent = generation_;
                v1beta1::ListAndWatchResponse response = devices_;
                lock.unlock();
                bool written = writer->Write(response);
                lock.lock();
                if (!written) break;
                continue;
            }
            // A sync handler learns about cancellation only by asking.
            changed_.wait_for(lock, 20ms);
        }
        --log_.activeStreams;
        changed_.notify_all();
        return grpc::Status::OK;
    }

    grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                        const v1beta1::PreferredAllocationRequest* request,
                                        v1beta1::PreferredAllocationResponse* response) override {
        std::lock_guard lock(mutex_);
        log_.preferredRequests.push_back(*request);
        for (int i = 0; i < request->container_requests_size(); ++i) {
            auto* container = response->add_container_responses();
            for (const auto& id : preferred_) container->add_deviceids(id);
        }
        return grpc::Status::OK;
    }

    grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* request,
                          v1beta1::AllocateResponse* response) override {
        std::lock_guard lock(mutex_);
        log_.allocateRequests.push_back(*request);
        if (!allocateError_.empty()) return grpc::Status(grpc::StatusCode::INTERNAL, allocateError_);
        for (const auto& containerRequest : request->container_requests()) {
            std::string joined;
            for (const auto& id : containerRequest.devices_ids()) joined += (joined.empty() ? "" : ",") + id;
            (*response->add_container_responses()->mutable_envs())["WIDGETS"] = joined;
        }
        return grpc::Status::OK;
    }

private:
    const bool preferredAllocation_;
    std::unique_ptr<grpc::Server> server_;
    std::mutex mutex_;  // guards everything below
    std::condition_variable changed_;
    bool stopping_ = false;
    v1beta1::ListAndWatchResponse devices_;
    uint64_t generation_ = 1;
    std::vector<std::string> preferred_;
    std::string allocateError_;
    int optionsCallsWhenRegistered_ = -1;
    PluginLog log_;
};

class KubeletSimulatorTest : public ::testing::Test {
protected:
    void SetUp() override {
        pluginDir_ = root_.path() / "device-plugins";
        fs::create_directory(pluginDir_);
        fs::create_directory(root_.path() / "pod-resources");
        simulator_ =
            std::make_unique<KubeletSimulator>(pluginDir_, root_.path() / "pod-resources" / "kubelet.sock");
        ASSERT_TRUE(simulator_->start());
    }

    void TearDown() override {
        simulator_.reset();
        plugins_.clear();
    }

    // A plugin serving on <pluginDir>/<endpoint>.
    FakePlugin& servePlugin(const std::string& endpoint, std::vector<v1beta1::Device> devices,
                            bool preferredAllocation = false) {
        plugins_.push_back(std::make_unique<FakePlugin>(std::move(devices), preferredAllocation));
        EXPECT_TRUE(plugins_.back()->serve(pluginDir_ / endpoint));
        return *plugins_.back();
    }

    // A plugin that is serving, registered, and whose first device list arrived.
    FakePlugin& registeredPlugin(const std::string& endpoint, std::vector<v1beta1::Device> devices,
                                 bool preferredAllocation = false) {
        size_t expected = devices.size();
        auto& plugin = servePlugin(endpoint, std::move(devices), preferredAllocation);
        grpc::Status status = plugin.registerWith(simulator_->kubeletSocket(), kResource, endpoint);
        EXPECT_TRUE(status.ok()) << status.error_message();
        EXPECT_TRUE(waitFor([&] {
            return simulator_->endpoint(kResource) == endpoint &&
                   simulator_->devices(kResource).size() == expected;
        }));
        return plugin;
    }

    bool waitFor(const std::function<bool()>& predicate) { return simulator_->waitFor(predicate, kTimeout); }

    std::unique_ptr<v1::PodResourcesLister::Stub> podResources() {
        return v1::PodResourcesLister::NewStub(grpc::CreateChannel(
            "unix:" + simulator_->podResourcesSocket().string(), grpc::InsecureChannelCredentials()));
    }

    std::mutex observedMutex_;
    std::vector<std::string> observed_;  // guarded by observedMutex_
    TempDir root_;
    fs::path pluginDir_;
    std::unique_ptr<KubeletSimulator> simulator_;
    std::vector<std::unique_ptr<FakePlugin>> plugins_;
};

TEST(ExtendedResourceName, FollowsKubeletRules) {
    EXPECT_TRUE(isExtendedResourceName("example.com/widget"));
    EXPECT_TRUE(isExtendedResourceName("akri.sh/onvif-cams-4294ea"));
    EXPECT_TRUE(isExtendedResourceName("vendor/A_b.c-9"));
    EXPECT_TRUE(isExtendedResourceName("example.com/" + std::string(63, 'a')));

    EXPECT_FALSE(isExtendedResourceName("widget"));                       // no prefix: native
    EXPECT_FALSE(isExtendedResourceName("kubernetes.io/widget"));         // native namespace
    EXPECT_FALSE(isExtendedResourceName("foo.kubernetes.io/widget"));     // native namespace
    EXPECT_FALSE(isExtendedResourceName("requests.example.com/widget"));  // quota prefix
    EXPECT_FALSE(isExtendedResourceName("example.com/" + std::string(64, 'a')));
    EXPECT_FALSE(isExtendedResourceName("Example.com/widget"));   // upper-case prefix
    EXPECT_FALSE(isExtendedResourceName("example.com/-widget"));  // name starts non-alnum
    EXPECT_FALSE(isExtendedResourceName("example.com/widget."));  // name ends non-alnum
    EXPECT_FALSE(isExtendedResourceName("example.com/wid get"));
    EXPECT_FALSE(isExtendedResourceName("example.com/a/b"));
    EXPECT_FALSE(isExtendedResourceName("example.com/"));
    EXPECT_FALSE(isExtendedResourceName("example..com/widget"));
}

TEST_F(KubeletSimulatorTest, RegisterAsksForOptionsBeforeReturningAndReceivesDevices) {
    auto& plugin = servePlugin("widget.sock", {device("w0"), device("w1", "Unhealthy", {0, 1})});

    grpc::Status status = plugin.registerWith(simulator_->kubeletSocket(), kResource, "widget.sock");

    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(plugin.optionsCallsWhenRegistered(), 1);
    ASSERT_TRUE(waitFor([&] { return simulator_->devices(kResource).size() == 2; }));
    auto devices = simulator_->devices(kResource);
    EXPECT_EQ(devices["w0"], (DeviceState{"Healthy", {}}));
    EXPECT_EQ(devices["w1"], (DeviceState{"Unhealthy", {0, 1}}));
    EXPECT_EQ(simulator_->resources(), std::vector<std::string>{kResource});
    EXPECT_EQ(simulator_->registrations(kResource), 1);
    EXPECT_EQ(simulator_->endpoint(kResource), "widget.sock");
    EXPECT_EQ(simulator_->listAndWatchMessages(kResource), 1u);
}

TEST_F(KubeletSimulatorTest, RegisterRejectsUnsupportedVersion) {
    auto& plugin = servePlugin("widget.sock", {device("w0")});

    grpc::Status status = plugin.registerWith(simulator_->kubeletSocket(), kResource, "widget.sock", "v1");

    EXPECT_FALSE(status.ok());
    EXPECT_EQ(status.error_message(),
              "requested API version \"v1\" is not supported by kubelet. Supported version is \"v1beta1\"");
    EXPECT_EQ(plugin.log().optionsCalls, 0);
    EXPECT_EQ(simulator_->registrations(kResource), 0);
}

TEST_F(KubeletSimulatorTest, RegisterRejectsInvalidResourceName) {
    auto& plugin = servePlugin("widget.sock", {device("w0")});

    grpc::Status status =
        plugin.registerWith(simulator_->kubeletSocket(), "kubernetes.io/widget", "widget.sock");

    EXPECT_FALSE(status.ok());
    EXPECT_EQ(status.error_message(), "the ResourceName \"kubernetes.io/widget\" is invalid");
    EXPECT_TRUE(simulator_->resources().empty());
}

TEST_F(KubeletSimulatorTest, RegisterRejectsEndpointThatIsNotAFileName) {
    auto& plugin = servePlugin("widget.sock", {device("w0")});

    grpc::Status status =
        plugin.registerWith(simulator_->kubeletSocket(), kResource, (pluginDir_ / "widget.sock").string());

    EXPECT_FALSE(status.ok());
    EXPECT_EQ(plugin.log().optionsCalls, 0);
    EXPECT_EQ(simulator_->registrations(kResource), 0);
}

TEST_F(KubeletSimulatorTest, RegisterFailsWhenPluginIsNotServing) {
    simulator_->setDialTimeout(200ms);
    FakePlugin plugin({device("w0")}, false);

    grpc::Status status = plugin.registerWith(simulator_->kubeletSocket(), kResource, "absent.sock");

    EXPECT_FALSE(status.ok());
    EXPECT_EQ(simulator_->registrations(kResource), 0);
    EXPECT_EQ(simulator_->endpoint(kResource), "");
}

TEST_F(KubeletSimulatorTest, ListAndWatchMessageReplacesDeviceList) {
    // The observer runs on gRPC threads; what it touches lives in the fixture.
    auto& mutex = observedMutex_;
    auto& observed = observed_;
    simulator_->onListAndWatch([&](const std::string& resource, const v1beta1::ListAndWatchResponse& response,
                                   std::chrono::steady_clock::time_point receivedAt) {
        EXPECT_LE(receivedAt, std::chrono::steady_clock::now());
        std::lock_guard lock(mutex);
        observed.push_back(resource + ":" + std::to_string(response.devices_size()));
    });
    auto& plugin = registeredPlugin("widget.sock", {device("w0"), device("w1")});

    plugin.setDevices({device("w2", "Healthy", {1})});

    ASSERT_TRUE(waitFor([&] { return simulator_->listAndWatchMessages(kResource) == 2; }));
    EXPECT_EQ(simulator_->devices(kResource), (std::map<std::string, DeviceState>{{"w2", {"Healthy", {1}}}}));
    std::lock_guard lock(mutex);
    EXPECT_EQ(observed,
              (std::vector<std::string>{std::string(kResource) + ":2", std::string(kResource) + ":1"}));
}

TEST_F(KubeletSimulatorTest, EndedStreamMarksDevicesUnhealthy) {
    auto& plugin = registeredPlugin("widget.sock", {device("w0"), device("w1")});

    plugin.shutdown();

    ASSERT_TRUE(waitFor([&] { return simulator_->endpoint(kResource).empty(); }));
    auto devices = simulator_->devices(kResource);
    ASSERT_EQ(devices.size(), 2u);
    EXPECT_EQ(devices["w0"].health, "Unhealthy");
    EXPECT_EQ(devices["w1"].health, "Unhealthy");
    EXPECT_EQ(simulator_->allocate("default", "pod", "c", kResource, 1).error,
              "no healthy devices present; cannot allocate unhealthy devices example.com/widget");
}

TEST_F(KubeletSimulatorTest, NewerRegistrationReplacesEndpointAndCancelsOldStream) {
    auto& first = registeredPlugin("widget-1.sock", {device("w0")});
    auto& second = servePlugin("widget-2.sock", {device("w0"), device("w1")});

    ASSERT_TRUE(second.registerWith(simulator_->kubeletSocket(), kResource, "widget-2.sock").ok());

    EXPECT_EQ(simulator_->endpoint(kResource), "widget-2.sock");
    EXPECT_EQ(simulator_->registrations(kResource), 2);
    EXPECT_TRUE(first.waitUntil([](const PluginLog& log) { return log.activeStreams == 0; }));
    ASSERT_TRUE(waitFor([&] { return simulator_->devices(kResource).size() == 2; }));
    EXPECT_EQ(simulator_->devices(kResource)["w1"].health, "Healthy");
}

TEST_F(KubeletSimulatorTest, AllocateFollowsPreferredAllocationAndSendsOneContainerRequest) {
    auto& plugin =
        registeredPlugin("widget.sock", {device("w0"), device("w1"), device("w2"), device("w3")}, true);
    // "bogus" is not available and must be dropped; the shortfall is filled by the simulator.
    plugin.setPreferred({"w3", "bogus"});

    auto result = simulator_->allocate("default", "pod", "app", kResource, 2);

    ASSERT_TRUE(result.ok) << result.error;
    EXPECT_EQ(result.deviceIds, (std::vector<std::string>{"w3", "w0"}));
    EXPECT_EQ(result.response.envs().at("WIDGETS"), "w3,w0");
    auto log = plugin.log();
    ASSERT_EQ(log.preferredRequests.size(), 1u);
    ASSERT_EQ(log.preferredRequests[0].container_requests_size(), 1);
    const auto& preferred = log.preferredRequests[0].container_requests(0);
    EXPECT_EQ(strings(preferred.available_deviceids()), (std::vector<std::string>{"w0", "w1", "w2", "w3"}));
    EXPECT_TRUE(preferred.must_include_deviceids().empty());
    EXPECT_EQ(preferred.allocation_size(), 2);
    ASSERT_EQ(log.allocateRequests.size(), 1u);
    ASSERT_EQ(log.allocateRequests[0].container_requests_size(), 1);
    EXPECT_EQ(strings(log.allocateRequests[0].container_requests(0).devices_ids()),
              (std::vector<std::string>{"w3", "w0"}));
}

TEST_F(KubeletSimulatorTest, AllocateSkipsPreferredAllocationWhenPluginDoesNotOfferIt) {
    auto& plugin = registeredPlugin("widget.sock", {device("w0"), device("w1")}, false);

    auto result = simulator_->allocate("default", "pod", "app", kResource, 1);

    ASSERT_TRUE(result.ok) << result.error;
    EXPECT_EQ(result.deviceIds, std::vector<std::string>{"w0"});
    EXPECT_TRUE(plugin.log().preferredRequests.empty());
    EXPECT_EQ(plugin.log().allocateRequests.size(), 1u);
}

TEST_F(KubeletSimulatorTest, AllocateFailsWhenTooFewHealthyDevicesAreFree) {
    auto& plugin = registeredPlugin("widget.sock", {device("w0"), device("w1", "Unhealthy")});

    auto result = simulator_->allocate("default", "pod", "app", kResource, 2);

    EXPECT_FALSE(result.ok);
    EXPECT_EQ(result.error,
              "requested number of devices unavailable for example.com/widget. Requested: 2, Available: 1");
    EXPECT_TRUE(plugin.log().allocateRequests.empty());
}

TEST_F(KubeletSimulatorTest, AllocateSkipsDevicesHeldByOtherContainersUntilPodRemoved) {
    registeredPlugin("widget.sock", {device("w0"), device("w1")});
    ASSERT_TRUE(simulator_->allocate("default", "first", "app", kResource, 1).ok);

    auto second = simulator_->allocate("default", "second", "app", kResource, 1);
    auto third = simulator_->allocate("default", "third", "app", kResource, 1);
    simulator_->removePod("default", "first");
    auto fourth = simulator_->allocate("default", "fourth", "app", kResource, 1);

    ASSERT_TRUE(second.ok) << second.error;
    EXPECT_EQ(second.deviceIds, std::vector<std::string>{"w1"});
    EXPECT_FALSE(third.ok);
    ASSERT_TRUE(fourth.ok) << fourth.error;
    EXPECT_EQ(fourth.deviceIds, std::vector<std::string>{"w0"});
}

TEST_F(KubeletSimulatorTest, AllocateAgainForSameContainerReturnsItsDevicesWithoutRpc) {
    auto& plugin = registeredPlugin("widget.sock", {device("w0"), device("w1")});
    auto first = simulator_->allocate("default", "pod", "app", kResource, 1);

    auto again = simulator_->allocate("default", "pod", "app", kResource, 1);

    ASSERT_TRUE(again.ok) << again.error;
    EXPECT_EQ(again.deviceIds, first.deviceIds);
    EXPECT_EQ(plugin.log().allocateRequests.size(), 1u);
}

TEST_F(KubeletSimulatorTest, AllocatePassesReusedDevicesAsMustInclude) {
    auto& plugin = registeredPlugin("widget.sock", {device("w0"), device("w1"), device("w2")}, true);
    plugin.setPreferred({"w2"});
    auto init = simulator_->allocate("default", "pod", "init", kResource, 1);
    ASSERT_TRUE(init.ok) << init.error;
    ASSERT_EQ(init.deviceIds, std::vector<std::string>{"w2"});
    plugin.setPreferred({"w2", "w1"});

    auto app = simulator_->allocate("default", "pod", "app", kResource, 2, init.deviceIds);

    ASSERT_TRUE(app.ok) << app.error;
    EXPECT_EQ(app.deviceIds, (std::vector<std::string>{"w2", "w1"}));
    auto log = plugin.log();
    ASSERT_EQ(log.preferredRequests.size(), 2u);
    const auto& preferred = log.preferredRequests[1].container_requests(0);
    EXPECT_EQ(strings(preferred.must_include_deviceids()), std::vector<std::string>{"w2"});
    EXPECT_EQ(strings(preferred.available_deviceids()), (std::vector<std::string>{"w0", "w1", "w2"}));
    EXPECT_EQ(preferred.allocation_size(), 2);
}

TEST_F(KubeletSimulatorTest, AllocateReportsPluginErrorAndRecordsNothing) {
    auto& plugin = registeredPlugin("widget.sock", {device("w0")});
    plugin.failAllocate("widget w0 is gone");

    auto result = simulator_->allocate("default", "pod", "app", kResource, 1);

    EXPECT_FALSE(result.ok);
    EXPECT_EQ(result.error, "widget w0 is gone");
    EXPECT_TRUE(simulator_->allocations().empty());
}

TEST_F(KubeletSimulatorTest, AllocateIdsBypassesAccountingToForceConflicts) {
    auto& plugin = registeredPlugin("widget.sock", {device("w0")}, true);
    ASSERT_TRUE(simulator_->allocate("default", "first", "app", kResource, 1).ok);

    auto conflict = simulator_->allocateIds("default", "second", "app", kResource, {"w0"});

    ASSERT_TRUE(conflict.ok) << conflict.error;
    EXPECT_EQ(conflict.deviceIds, std::vector<std::string>{"w0"});
    EXPECT_EQ(plugin.log().allocateRequests.size(), 2u);
    EXPECT_EQ(plugin.log().preferredRequests.size(), 1u);
    EXPECT_EQ(simulator_->allocations().size(), 2u);
}

TEST_F(KubeletSimulatorTest, RestartRemovesSocketsAndClearsRegistrations) {
    auto& plugin = registeredPlugin("widget.sock", {device("w0")});
    ASSERT_TRUE(simulator_->allocate("default", "pod", "app", kResource, 1).ok);
    std::ofstream(pluginDir_ / "kubelet_internal_checkpoint") << "{}";

    ASSERT_TRUE(simulator_->restart());

    EXPECT_FALSE(fs::exists(pluginDir_ / "widget.sock"));
    EXPECT_TRUE(fs::exists(pluginDir_ / "kubelet_internal_checkpoint"));
    EXPECT_TRUE(fs::is_socket(simulator_->kubeletSocket()));
    EXPECT_EQ(simulator_->endpoint(kResource), "");
    EXPECT_TRUE(simulator_->devices(kResource).empty());
    EXPECT_EQ(simulator_->registrations(kResource), 1);
    EXPECT_EQ(simulator_->allocations().size(), 1u);
    EXPECT_TRUE(plugin.waitUntil([](const PluginLog& log) { return log.activeStreams == 0; }));

    // The plugin notices and comes back on a fresh socket.
    auto& again = servePlugin("widget-2.sock", {device("w0"), device("w1")});
    ASSERT_TRUE(again.registerWith(simulator_->kubeletSocket(), kResource, "widget-2.sock").ok());
    EXPECT_EQ(simulator_->registrations(kResource), 2);
    ASSERT_TRUE(waitFor([&] { return simulator_->devices(kResource).size() == 2; }));
    // w0 is still held by the checkpointed pod.
    auto result = simulator_->allocate("default", "other", "app", kResource, 1);
    ASSERT_TRUE(result.ok) << result.error;
    EXPECT_EQ(result.deviceIds, std::vector<std::string>{"w1"});
}

TEST_F(KubeletSimulatorTest, PodResourcesListReflectsAllocationsAndRemovePod) {
    registeredPlugin("widget.sock", {device("w0", "Healthy", {1}), device("w1")});
    ASSERT_TRUE(simulator_->allocate("ns", "pod", "app", kResource, 2).ok);
    auto client = podResources();

    v1::ListPodResourcesResponse listed;
    {
        grpc::ClientContext context;
        ASSERT_TRUE(client->List(&context, v1::ListPodResourcesRequest{}, &listed).ok());
    }
    simulator_->removePod("ns", "pod");
    v1::ListPodResourcesResponse afterRemoval;
    {
        grpc::ClientContext context;
        ASSERT_TRUE(client->List(&context, v1::ListPodResourcesRequest{}, &afterRemoval).ok());
    }

    ASSERT_EQ(listed.pod_resources_size(), 1);
    const auto& pod = listed.pod_resources(0);
    EXPECT_EQ(pod.name(), "pod");
    EXPECT_EQ(pod.namespace_(), "ns");
    ASSERT_EQ(pod.containers_size(), 1);
    EXPECT_EQ(pod.containers(0).name(), "app");
    ASSERT_EQ(pod.containers(0).devices_size(), 2);
    const auto& w0 = pod.containers(0).devices(0);
    EXPECT_EQ(w0.resource_name(), kResource);
    EXPECT_EQ(strings(w0.device_ids()), std::vector<std::string>{"w0"});
    ASSERT_EQ(w0.topology().nodes_size(), 1);
    EXPECT_EQ(w0.topology().nodes(0).id(), 1);
    EXPECT_EQ(strings(pod.containers(0).devices(1).device_ids()), std::vector<std::string>{"w1"});
    EXPECT_FALSE(pod.containers(0).devices(1).has_topology());
    EXPECT_EQ(afterRemoval.pod_resources_size(), 0);
}

TEST_F(KubeletSimulatorTest, PodResourcesCanBeMadeUnavailable) {
    auto client = podResources();
    simulator_->setPodResourcesAvailable(false);

    grpc::ClientContext context;
    v1::ListPodResourcesResponse response;
    grpc::Status status = client->List(&context, v1::ListPodResourcesRequest{}, &response);

    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(KubeletSimulatorTest, RestartWithoutApiServerListsNoPodUntilItLearnsThem) {
    registeredPlugin("widget.sock", {device("w0")});
    ASSERT_TRUE(simulator_->allocate("ns", "pod", "app", kResource, 1).ok);
    ASSERT_TRUE(simulator_->restart(std::chrono::hours(1)));
    auto list = [&] {
        grpc::ClientContext context;
        v1::ListPodResourcesResponse response;
        EXPECT_TRUE(podResources()->List(&context, v1::ListPodResourcesRequest{}, &response).ok());
        return response.pod_resources_size();
    };
    EXPECT_EQ(list(), 0) << "an empty pod manager";
    EXPECT_EQ(simulator_->allocations().size(), 1u) << "the device manager keeps its allocations";
    simulator_->learnPods();
    EXPECT_EQ(list(), 1);
}

TEST_F(KubeletSimulatorTest, CheckpointKeepsARemovedPodUntilTheNextWrite) {
    auto& plugin = registeredPlugin("widget.sock", {device("w0", "Healthy", {1}), device("w1")});
    ASSERT_TRUE(simulator_->allocate("ns", "pod", "app", kResource, 1).ok);
    auto checkpoint = [&] {
        std::ifstream in(simulator_->checkpointFile());
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const std::string entry =
        R"("ContainerName":"app","ResourceName":"example.com/widget","DeviceIDs":{"1":["w0"]})";
    EXPECT_NE(checkpoint().find(entry), std::string::npos) << checkpoint();
    EXPECT_NE(checkpoint().find(R"("RegisteredDevices":{"example.com/widget":["w0","w1"]})"),
              std::string::npos)
        << checkpoint();

    simulator_->removePod("ns", "pod");
    EXPECT_NE(checkpoint().find(entry), std::string::npos) << "written on lists and allocations only";
    plugin.setDevices({device("w0", "Healthy", {1}), device("w1", "Unhealthy")});
    // The simulator says its state changed again once the checkpoint is written. A list
    // still on its way from the registration may write it first (the entry gone, both
    // devices listed): the one to wait for lists w0 alone.
    const std::string healthyOnly = R"("RegisteredDevices":{"example.com/widget":["w0"]})";
    EXPECT_TRUE(waitFor([&] { return checkpoint().find(healthyOnly) != std::string::npos; })) << checkpoint();
    EXPECT_EQ(checkpoint().find(entry), std::string::npos) << checkpoint();
}

TEST_F(KubeletSimulatorTest, StopRegistrationRemovesKubeletSocketUntilStart) {
    simulator_->stopRegistration();
    EXPECT_FALSE(fs::exists(simulator_->kubeletSocket()));

    ASSERT_TRUE(simulator_->start());

    EXPECT_TRUE(fs::is_socket(simulator_->kubeletSocket()));
    registeredPlugin("widget.sock", {device("w0")});
    EXPECT_EQ(simulator_->registrations(kResource), 1);
}

TEST_F(KubeletSimulatorTest, WaitForGivesUpWhenPredicateStaysFalse) {
    EXPECT_FALSE(simulator_->waitFor([] { return false; }, 10ms));
    EXPECT_TRUE(simulator_->waitFor([] { return true; }, 0ms));
}

}  // namespace
}  // namespace devlet::test
