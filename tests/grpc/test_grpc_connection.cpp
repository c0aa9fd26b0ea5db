// GrpcConnection against the real gRPC C++ client: unary answers, statuses with awkward
// messages, server streams where a newer message replaces one not yet sent, messages far
// larger than HTTP/2's flow-control window, cancellation, and a peer that is not
// speaking HTTP/2 at all. The server side runs on its own io_context thread, as in the
// daemon.
#include <future>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "grpc/grpc_connection.h"
#include "tests/support/run_on_loop.h"
#include "tests/support/temp_dir.h"

namespace devlet::rpc {
namespace {

using boost::asio::local::stream_protocol;

// Answers by method: Options (unary), Allocate (fails with the first container's first
// device id as its message), ListAndWatch (a stream the test drives). Lives on the loop.
class TestService : public GrpcConnection::Service {
public:
    void onCall(GrpcConnection& connection, std::int32_t stream, std::string_view method,
                std::string_view request) override {
        if (method == "/v1beta1.DevicePlugin/GetDevicePluginOptions") {
            v1beta1::DevicePluginOptions options;
            options.set_get_preferred_allocation_available(true);
            connection.reply(stream, options.SerializeAsString());
        } else if (method == "/v1beta1.DevicePlugin/Allocate") {
            v1beta1::AllocateRequest in;
            in.ParseFromArray(request.data(), static_cast<int>(request.size()));
            connection.fail(stream, {GrpcCode::FailedPrecondition, in.container_requests(0).devices_ids(0)});
        } else if (method == "/v1beta1.DevicePlugin/ListAndWatch") {
            connection.beginStream(stream);
            watches.push_back({&connection, stream});
        } else {
            connection.fail(stream, {GrpcCode::Unimplemented, "unknown method " + std::string(method)});
        }
    }
    void onStreamClosed(GrpcConnection&, std::int32_t stream) override { closedStreams.push_back(stream); }
    void onDisconnected(GrpcConnection&) override { ++disconnects; }

    std::vector<std::pair<GrpcConnection*, std::int32_t>> watches;
    std::vector<std::int32_t> closedStreams;
    int disconnects = 0;
};

class GrpcConnectionTest : public ::testing::Test {
protected:
    // Runs `work` on the loop thread and waits for it.
    template <typename Work>
    auto onLoop(Work work) {
        return test::runOnLoop(loop_, std::move(work));
    }

    // Waits (generously: a loaded machine) until `condition` holds on the loop thread.
    template <typename Condition>
    bool eventually(Condition condition) {
        for (int i = 0; i < 2000; ++i) {
            if (onLoop(condition)) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        return false;
    }

    void SetUp() override {
        socketPath_ = dir_.path() / "plugin.sock";
        acceptor_.open(stream_protocol());
        acceptor_.bind(stream_protocol::endpoint(socketPath_.string()));
        acceptor_.listen();
        accept();
        thread_ = std::thread([this] { loop_.run(); });
        channel_ = grpc::CreateChannel("unix://" + socketPath_.string(), grpc::InsecureChannelCredentials());
        stub_ = v1beta1::DevicePlugin::NewStub(channel_);
    }
    void TearDown() override {
        onLoop([this] {
            for (auto& connection : connections_) connection->close();
            acceptor_.close();
        });
        work_.reset();
        thread_.join();
    }

    void accept() {
        acceptor_.async_accept([this](boost::system::error_code ec, stream_protocol::socket socket) {
            if (ec) return;
            connections_.push_back(std::make_shared<GrpcConnection>(std::move(socket), service_));
            connections_.back()->start();
            accept();
        });
    }

    static std::string listOf(int devices) {
        v1beta1::ListAndWatchResponse response;
        for (int i = 0; i < devices; ++i) {
            auto* device = response.add_devices();
            device->set_id("device-with-a-long-enough-name-" + std::to_string(i));
            device->set_health("Healthy");
        }
        return response.SerializeAsString();
    }

    void send(std::size_t watch, const std::string& message) {
        onLoop([&] {
            auto [connection, stream] = service_.watches.at(watch);
            connection->sendLatest(stream, frameMessage(message));
        });
    }

    test::TempDir dir_;
    std::filesystem::path socketPath_;
    boost::asio::io_context loop_;
    std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_{
        loop_.get_executor()};
    stream_protocol::acceptor acceptor_{loop_};
    TestService service_;
    std::vector<std::shared_ptr<GrpcConnection>> connections_;
    std::thread thread_;
    std::shared_ptr<grpc::Channel> channel_;
    std::unique_ptr<v1beta1::DevicePlugin::Stub> stub_;
};

TEST_F(GrpcConnectionTest, UnaryCallIsAnswered) {
    grpc::ClientContext context;
    v1beta1::DevicePluginOptions options;
    const grpc::Status status = stub_->GetDevicePluginOptions(&context, v1beta1::Empty(), &options);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(options.get_preferred_allocation_available());
}

TEST_F(GrpcConnectionTest, ErrorStatusKeepsCodeAndMessage) {
    const std::string message = "slot akri-cam-0 is held: 100% taken \xc3\xa9\n";
    grpc::ClientContext context;
    v1beta1::AllocateRequest request;
    request.add_container_requests()->add_devices_ids(message);
    v1beta1::AllocateResponse response;
    const grpc::Status status = stub_->Allocate(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_EQ(status.error_message(), message);
}

TEST_F(GrpcConnectionTest, UnknownMethodIsUnimplemented) {
    grpc::ClientContext context;
    v1beta1::PreStartContainerResponse response;
    const grpc::Status status =
        stub_->PreStartContainer(&context, v1beta1::PreStartContainerRequest(), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_NE(status.error_message().find("PreStartContainer"), std::string::npos);
}

TEST_F(GrpcConnectionTest, CompressedRequestIsRefused) {
    grpc::ClientContext context;
    context.set_compression_algorithm(GRPC_COMPRESS_GZIP);
    v1beta1::AllocateRequest request;
    request.add_container_requests()->add_devices_ids(std::string(4096, 'a'));
    v1beta1::AllocateResponse response;
    const grpc::Status status = stub_->Allocate(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(GrpcConnectionTest, StreamDeliversEveryListSentOneAtATime) {
    grpc::ClientContext context;
    auto reader = stub_->ListAndWatch(&context, v1beta1::Empty());
    ASSERT_TRUE(eventually([this] { return service_.watches.size() == 1; }));
    v1beta1::ListAndWatchResponse response;
    for (int devices : {1, 3, 0, 7}) {
        send(0, listOf(devices));
        ASSERT_TRUE(reader->Read(&response));
        EXPECT_EQ(response.devices_size(), devices);
    }
    context.TryCancel();
    while (reader->Read(&response)) {
    }
}

TEST_F(GrpcConnectionTest, ListLargerThanTheFlowControlWindowArrivesWhole) {
    // About 250 KB: several times the 64 KiB initial window, in many DATA frames.
    const std::string big = listOf(6000);
    ASSERT_GT(big.size(), 200'000u);
    grpc::ClientContext context;
    auto reader = stub_->ListAndWatch(&context, v1beta1::Empty());
    ASSERT_TRUE(eventually([this] { return service_.watches.size() == 1; }));
    send(0, big);
    send(0, listOf(2));
    v1beta1::ListAndWatchResponse response;
    ASSERT_TRUE(reader->Read(&response));
    EXPECT_EQ(response.SerializeAsString(), big);
    ASSERT_TRUE(reader->Read(&response));
    EXPECT_EQ(response.devices_size(), 2);
    context.TryCancel();
    while (reader->Read(&response)) {
    }
}

TEST_F(GrpcConnectionTest, NewerListReplacesOneNotYetSent) {
    grpc::ClientContext context;
    auto reader = stub_->ListAndWatch(&context, v1beta1::Empty());
    ASSERT_TRUE(eventually([this] { return service_.watches.size() == 1; }));
    // A list larger than the flow-control window is still on its way while 50 more are
    // published in the same turn of the loop: of those, only the last is sent after it.
    const std::string big = listOf(6000);
    onLoop([&] {
        auto [connection, stream] = service_.watches.at(0);
        connection->sendLatest(stream, frameMessage(big));
        for (int devices = 1; devices <= 50; ++devices)
            connection->sendLatest(stream, frameMessage(listOf(devices)));
    });
    v1beta1::ListAndWatchResponse response;
    ASSERT_TRUE(reader->Read(&response));
    EXPECT_EQ(response.devices_size(), 6000);
    ASSERT_TRUE(reader->Read(&response));
    EXPECT_EQ(response.devices_size(), 50);
    context.TryCancel();
    while (reader->Read(&response)) {
    }
}

TEST_F(GrpcConnectionTest, EndedStreamFinishesWithItsStatus) {
    grpc::ClientContext context;
    auto reader = stub_->ListAndWatch(&context, v1beta1::Empty());
    ASSERT_TRUE(eventually([this] { return service_.watches.size() == 1; }));
    send(0, listOf(1));
    onLoop([this] {
        auto [connection, stream] = service_.watches.at(0);
        connection->endStream(stream, {GrpcCode::Unavailable, "device plugin is stopping"});
    });
    v1beta1::ListAndWatchResponse response;
    ASSERT_TRUE(reader->Read(&response));
    EXPECT_FALSE(reader->Read(&response));
    const grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(status.error_message(), "device plugin is stopping");
}

TEST_F(GrpcConnectionTest, CancelledStreamIsReportedClosed) {
    auto context = std::make_unique<grpc::ClientContext>();
    auto reader = stub_->ListAndWatch(context.get(), v1beta1::Empty());
    ASSERT_TRUE(eventually([this] { return service_.watches.size() == 1; }));
    const std::int32_t stream = onLoop([this] { return service_.watches.at(0).second; });
    context->TryCancel();
    v1beta1::ListAndWatchResponse response;
    while (reader->Read(&response)) {
    }
    EXPECT_TRUE(eventually([&] {
        return std::find(service_.closedStreams.begin(), service_.closedStreams.end(), stream) !=
               service_.closedStreams.end();
    }));
}

TEST_F(GrpcConnectionTest, ManyCallsOnOneConnectionAreAllAnswered) {
    std::vector<std::future<bool>> calls;
    for (int i = 0; i < 200; ++i) {
        calls.push_back(std::async(std::launch::async, [this] {
            grpc::ClientContext context;
            v1beta1::DevicePluginOptions options;
            return stub_->GetDevicePluginOptions(&context, v1beta1::Empty(), &options).ok() &&
                   options.get_preferred_allocation_available();
        }));
    }
    for (auto& call : calls) EXPECT_TRUE(call.get());
}

TEST_F(GrpcConnectionTest, PeerThatIsNotHttp2IsDroppedAndOthersAreServed) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, socketPath_.c_str(), sizeof address.sun_path - 1);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    const std::string garbage = "GET / HTTP/1.1\r\nHost: x\r\n\r\n" + std::string(100000, '\xff');
    (void)::write(fd, garbage.data(), garbage.size());
    // The server answers with a GOAWAY, if anything, and hangs up.
    char buffer[4096];
    while (::read(fd, buffer, sizeof buffer) > 0) {
    }
    ::close(fd);
    EXPECT_TRUE(eventually([this] { return service_.disconnects >= 1; }));

    grpc::ClientContext context;
    v1beta1::DevicePluginOptions options;
    EXPECT_TRUE(stub_->GetDevicePluginOptions(&context, v1beta1::Empty(), &options).ok());
}

TEST(GrpcWire, PercentEncodingLeavesPrintableAsciiAlone) {
    EXPECT_EQ(percentEncode("slot a-1 is held"), "slot a-1 is held");
    EXPECT_EQ(percentEncode("100%\n\xc3\xa9"), "100%25%0A%C3%A9");
}

TEST(GrpcWire, FramePrefixIsUncompressedAndBigEndianLength) {
    const GrpcFrame frame = frameMessage(std::string(300, 'x'));
    ASSERT_EQ(frame->size(), 305u);
    EXPECT_EQ(std::string(frame->data(), 5), std::string("\0\0\0\x01\x2c", 5));
}

}  // namespace
}  // namespace devlet::rpc
