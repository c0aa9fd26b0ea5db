// GrpcChannel against a real gRPC C++ server on a unix socket, as devlet meets the
// kubelet's Registration and PodResources services: answers and error statuses, waiting
// for a server that is not listening yet, deadlines, a server that restarts, many calls
// at once, and a channel that goes away with calls pending.
#include <atomic>
#include <future>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "grpc/grpc_channel.h"
#include "tests/support/run_on_loop.h"
#include "tests/support/temp_dir.h"

namespace devlet::rpc {
namespace {

// A kubelet's Registration service: refuses resource names starting with "bad", waits
// for resource names starting with "slow", accepts the rest.
class Registration final : public v1beta1::Registration::Service {
public:
    grpc::Status Register(grpc::ServerContext* context, const v1beta1::RegisterRequest* request,
                          v1beta1::Empty*) override {
        ++calls;
        const std::string& name = request->resource_name();
        if (name.rfind("bad", 0) == 0)
            return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                "the ResourceName \"" + name + "\" is invalid");
        if (name.rfind("slow", 0) == 0) {
            while (!context->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
            return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
        }
        return grpc::Status::OK;
    }
    std::atomic<int> calls{0};
};

struct Result {
    GrpcStatus status;
    std::string response;
};

class GrpcChannelTest : public ::testing::Test {
protected:
    template <typename Work>
    auto onLoop(Work work) {
        return test::runOnLoop(loop_, std::move(work));
    }

    void SetUp() override {
        socketPath_ = (dir_.path() / "kubelet.sock").string();
        thread_ = std::thread([this] { loop_.run(); });
    }
    void TearDown() override {
        onLoop([this] {
            channel_.reset();
            return 0;
        });
        work_.reset();
        thread_.join();
        if (server_) server_->Shutdown();
    }

    void startServer() {
        grpc::ServerBuilder builder;
        builder.AddListeningPort("unix:" + socketPath_, grpc::InsecureServerCredentials());
        builder.RegisterService(&service_);
        server_ = builder.BuildAndStart();
        ASSERT_TRUE(server_);
    }

    // Makes a Register call on the loop; the future is set when its reply runs.
    std::future<Result> call(const std::string& resource, GrpcChannel::CallOptions options = {}) {
        auto promise = std::make_shared<std::promise<Result>>();
        auto future = promise->get_future();
        onLoop([&, promise] {
            if (!channel_) channel_ = std::make_unique<GrpcChannel>(loop_, socketPath_);
            v1beta1::RegisterRequest request;
            request.set_version("v1beta1");
            request.set_resource_name(resource);
            channel_->call("/v1beta1.Registration/Register", request.SerializeAsString(), options,
                           [promise](const GrpcStatus& status, const std::string& response) {
                               promise->set_value({status, response});
                           });
            return 0;
        });
        return future;
    }

    static Result wait(std::future<Result>& future) {
        EXPECT_EQ(future.wait_for(std::chrono::seconds(60)), std::future_status::ready);
        return future.get();
    }

    test::TempDir dir_;
    std::string socketPath_;
    boost::asio::io_context loop_;
    std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_{
        loop_.get_executor()};
    std::thread thread_;
    std::unique_ptr<GrpcChannel> channel_;  // used on the loop only
    Registration service_;
    std::unique_ptr<grpc::Server> server_;
};

TEST_F(GrpcChannelTest, CallIsAnswered) {
    startServer();
    auto reply = call("example.com/camera");
    const Result result = wait(reply);
    EXPECT_TRUE(result.status.ok()) << result.status.message;
    v1beta1::Empty empty;
    EXPECT_TRUE(empty.ParseFromString(result.response));
}

TEST_F(GrpcChannelTest, ErrorStatusArrivesWithItsMessage) {
    startServer();
    auto reply = call("bad/na me%");
    const Result result = wait(reply);
    EXPECT_EQ(result.status.code, GrpcCode::InvalidArgument);
    EXPECT_EQ(result.status.message, "the ResourceName \"bad/na me%\" is invalid");
}

TEST_F(GrpcChannelTest, NoServerFailsAtOnceWithoutWaitForReady) {
    auto reply = call("example.com/camera", {.timeout = std::chrono::seconds(30)});
    const Result result = wait(reply);
    EXPECT_EQ(result.status.code, GrpcCode::Unavailable);
    EXPECT_NE(result.status.message.find(socketPath_), std::string::npos);
}

TEST_F(GrpcChannelTest, WaitForReadyRidesOutAServerThatStartsLater) {
    auto reply = call("example.com/camera", {.timeout = std::chrono::seconds(30), .waitForReady = true});
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(reply.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
    startServer();
    const Result result = wait(reply);
    EXPECT_TRUE(result.status.ok()) << result.status.message;
}

TEST_F(GrpcChannelTest, DeadlineEndsACallTheServerDoesNotAnswer) {
    startServer();
    auto reply = call("slow/camera", {.timeout = std::chrono::milliseconds(200)});
    const Result result = wait(reply);
    EXPECT_EQ(result.status.code, GrpcCode::DeadlineExceeded);
    // The connection is still good for the next call.
    auto next = call("example.com/camera");
    const Result after = wait(next);
    EXPECT_TRUE(after.status.ok()) << static_cast<int>(after.status.code) << ": " << after.status.message;
}

TEST_F(GrpcChannelTest, ServerRestartIsFollowedByANewConnection) {
    startServer();
    auto first = call("example.com/camera");
    ASSERT_TRUE(wait(first).status.ok());
    server_->Shutdown();
    server_.reset();
    std::filesystem::remove(socketPath_);
    startServer();
    // The first call after the restart may find the old connection closing; a kubelet
    // client retries, and so do we here.
    Result result;
    for (int attempt = 0; attempt < 3; ++attempt) {
        auto reply = call("example.com/camera", {.timeout = std::chrono::seconds(10), .waitForReady = true});
        result = wait(reply);
        if (result.status.ok()) break;
        EXPECT_EQ(result.status.code, GrpcCode::Unavailable) << result.status.message;
    }
    EXPECT_TRUE(result.status.ok()) << result.status.message;
}

TEST_F(GrpcChannelTest, ManyCallsAtOnceAreAllAnswered) {
    startServer();
    std::vector<std::future<Result>> replies;
    for (int i = 0; i < 300; ++i) replies.push_back(call("example.com/camera-" + std::to_string(i)));
    for (auto& reply : replies) EXPECT_TRUE(wait(reply).status.ok());
    EXPECT_EQ(service_.calls.load(), 300);
}

TEST_F(GrpcChannelTest, DestroyedChannelRepliesToNothing) {
    startServer();
    std::atomic<bool> replied{false};
    onLoop([&] {
        channel_ = std::make_unique<GrpcChannel>(loop_, socketPath_);
        channel_->call("/v1beta1.Registration/Register", "", {.timeout = std::chrono::seconds(5)},
                       [&](const GrpcStatus&, const std::string&) { replied = true; });
        channel_.reset();
        return 0;
    });
    // Whatever was in flight has had time to come back by the time a fresh call is answered.
    auto reply = call("example.com/camera");
    EXPECT_TRUE(wait(reply).status.ok());
    EXPECT_FALSE(replied.load());
}

TEST(GrpcWire, PercentDecodingUndoesEncodingAndKeepsStrayPercents) {
    const std::string text = "100%\n\xc3\xa9 ok";
    EXPECT_EQ(percentDecode(percentEncode(text)), text);
    EXPECT_EQ(percentDecode("50% off %zz %4"), "50% off %zz %4");
}

TEST(GrpcWire, SingleMessageRefusesWhatIsNotOneMessage) {
    EXPECT_TRUE(std::holds_alternative<GrpcStatus>(singleMessage("")));
    EXPECT_TRUE(
        std::holds_alternative<GrpcStatus>(singleMessage(std::string("\0\0\0\0\x05"
                                                                     "abc",
                                                                     8))));
    EXPECT_TRUE(std::holds_alternative<GrpcStatus>(singleMessage(std::string("\x01\0\0\0\x01x", 6))));
    const std::string body(
        "\0\0\0\0\x03"
        "abc",
        8);
    const auto message = singleMessage(body);  // a view into body
    ASSERT_TRUE(std::holds_alternative<std::string_view>(message));
    EXPECT_EQ(std::get<std::string_view>(message), "abc");
}

TEST(GrpcWire, StatusCodesOutsideGrpcsRangeAreUnknown) {
    EXPECT_EQ(parseGrpcCode("14"), GrpcCode::Unavailable);
    EXPECT_EQ(parseGrpcCode("17"), GrpcCode::Unknown);
    EXPECT_EQ(parseGrpcCode("x"), GrpcCode::Unknown);
}

}  // namespace
}  // namespace devlet::rpc
