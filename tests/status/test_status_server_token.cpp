// The status server beyond loopback: without a usable token file it refuses the address
// and says how to fix it; with one it listens and every request needs the token.

#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "status/status_server.h"
#include "status/status_source.h"
#include "tests/support/temp_dir.h"

namespace devlet::status {
namespace {

class EmptySource : public StatusSource {
public:
    std::shared_ptr<const StatusSnapshot> statusSnapshot() override {
        return std::make_shared<const StatusSnapshot>();
    }
    std::vector<StatusEvent> recentEvents(std::size_t) override { return {}; }
};

class StatusServerTokenTest : public ::testing::Test {
protected:
    std::unique_ptr<StatusServer> server(const std::string& listen, const std::string& tokenFile) {
        return std::make_unique<StatusServer>(
            loop_, source_, StatusServer::Options{.listen = listen, .tokenFile = tokenFile});
    }

    boost::asio::io_context loop_;
    EmptySource source_;
    test::TempDir dir_;
};

TEST_F(StatusServerTokenTest, AnyAddressWithoutATokenFileIsRefusedWithTheFix) {
    for (const std::string listen : {"0.0.0.0:0", "[::]:0"}) {
        const std::string missing = (dir_.path() / "status-token").string();
        auto s = server(listen, missing);
        const std::string problem = s->start();
        EXPECT_NE(problem.find(listen + " is not a loopback address"), std::string::npos) << problem;
        EXPECT_NE(problem.find("the token file " + missing + " does not exist"), std::string::npos)
            << problem;
        EXPECT_NE(problem.find("status.listen"), std::string::npos) << problem;
        EXPECT_NE(problem.find("/etc/devlet/status-token"), std::string::npos) << problem;
        EXPECT_NE(problem.find("0600"), std::string::npos) << problem;
        EXPECT_EQ(s->endpoint(), "");
        s->stop();
    }
}

TEST_F(StatusServerTokenTest, NoTokenFileSetIsRefusedBeyondLoopback) {
    auto s = server("0.0.0.0:0", "");
    const std::string problem = s->start();
    EXPECT_NE(problem.find("no token file is set"), std::string::npos) << problem;
    EXPECT_EQ(s->endpoint(), "");
}

TEST_F(StatusServerTokenTest, EmptyTokenFileIsRefusedBeyondLoopback) {
    const std::string file = dir_.file("status-token", "\n");
    ::chmod(file.c_str(), 0600);
    auto s = server("0.0.0.0:0", file);
    const std::string problem = s->start();
    EXPECT_NE(problem.find("is empty or unreadable"), std::string::npos) << problem;
    EXPECT_NE(problem.find("/etc/devlet/status-token"), std::string::npos) << problem;
}

TEST_F(StatusServerTokenTest, AnyAddressWithATokenStartsAndNeedsIt) {
    const std::string file = dir_.file("status-token", "s3cret\n");
    ::chmod(file.c_str(), 0600);
    auto s = server("0.0.0.0:0", file);
    EXPECT_EQ(s->start(), "");
    EXPECT_NE(s->endpoint(), "");
    EXPECT_TRUE(s->requiresToken());
    s->stop();
}

TEST_F(StatusServerTokenTest, LoopbackNeedsNoToken) {
    auto s = server("127.0.0.1:0", (dir_.path() / "status-token").string());
    EXPECT_EQ(s->start(), "");
    EXPECT_FALSE(s->requiresToken());
    s->stop();
}

}  // namespace
}  // namespace devlet::status
