// The status page in a real browser (headless Chromium) against the real daemon: it shows
// the instances and who holds their slots, explains a missing kubelet, and follows a device
// going offline without being reloaded. Screenshots are kept as test artifacts.

#include <cstdlib>
#include <filesystem>

#include "tests/integration/fixture.h"
#include "tests/status/chromium.h"
#include "tests/status/status_test_support.h"

namespace devlet::test {
namespace {

constexpr const char* kCl = "akri.sh/cams";

class StatusPageTest : public DaemonTest {
protected:
    void SetUp() override {
        if (Chromium::binary().empty())
            GTEST_SKIP() << "chromium is not installed (apt-get install chromium)";
        DaemonTest::SetUp();
        port_ = freePort();
        writeFile(daemon_->confDir() / "cams.yaml",
                  echoConfiguration("cams", 2, "      availabilityFile: " + availability().string() + "\n",
                                    "  devlet:\n    removalGracePeriodSeconds: 600\n"));
    }
    void TearDown() override {
        if (browser_ && HasFailure()) std::cerr << "--- chromium log ---\n" << browser_->log();
        browser_.reset();
        DaemonTest::TearDown();
    }
    std::filesystem::path availability() const { return dir_.path() / "availability.txt"; }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/"; }

    void startDaemon() {
        daemon_->start({"--listen", "127.0.0.1:" + std::to_string(port_)});
        ASSERT_TRUE(daemon_->waitForLog("status page at http://127.0.0.1:" + std::to_string(port_), 20s));
    }
    void openPage() {
        browser_ = std::make_unique<Chromium>(dir_.path() / "chromium-profile");
        ASSERT_TRUE(browser_->connect()) << browser_->why();
        ASSERT_TRUE(browser_->navigate(url())) << browser_->why();
    }
    // The page's visible text, once it contains every one of `wanted` (or the last text seen).
    std::string waitForText(const std::vector<std::string>& wanted) {
        std::string text;
        eventually(
            [&] {
                text = browser_->text("document.body.innerText");
                for (const std::string& w : wanted) {
                    if (text.find(w) == std::string::npos) return false;
                }
                return true;
            },
            60s);
        return text;
    }
    void keepScreenshot(const std::string& name) {
        const char* dir = std::getenv("DEVLET_ARTIFACT_DIR");
        const std::filesystem::path file =
            std::filesystem::path(dir && *dir ? dir : dir_.path().string()) / (name + ".png");
        EXPECT_TRUE(browser_->screenshot(file)) << browser_->why();
        std::cout << "screenshot: " << file.string() << "\n";
    }

    unsigned short port_ = 0;
    std::unique_ptr<Chromium> browser_;
};

TEST_F(StatusPageTest, ShowsInstancesSlotHoldersAndFollowsADeviceGoingOffline) {
    ASSERT_TRUE(kubelet_->start());
    startDaemon();
    ASSERT_TRUE(waitForDevices(kCl, 4));
    const AllocationResult allocated = kubelet_->allocate("video", "recorder", "main", kCl, 1);
    ASSERT_TRUE(allocated.ok) << allocated.error;
    openPage();

    std::string text = waitForText({"cams-8120fe", "cams-a19705", "held by video/recorder via akri.sh/cams",
                                    "kubelet connected", "1 of 4 slots in use"});
    ASSERT_NE(text.find("held by video/recorder"), std::string::npos) << text;
    EXPECT_NE(text.find("2 echo devices; 1 of 4 slots in use; kubelet connected"), std::string::npos) << text;
    EXPECT_EQ(browser_->evaluate("document.querySelectorAll('tr[data-instance]').length").to_number<int>(),
              2);
    EXPECT_EQ(browser_->text("document.querySelector('tr[data-instance=\"cams-8120fe\"]').dataset.health"),
              "healthy");
    // Live: the server pushes every change (server-sent events), the page does not poll.
    EXPECT_TRUE(eventually([&] { return browser_->text("document.body.dataset.live") == "stream"; }, 30s));
    keepScreenshot("status-page-connected");

    // From here on the page must change by itself: a reload would lose this marker.
    ASSERT_FALSE(browser_->evaluate("window.devletTestMarker = 'same page'").is_null());
    writeFile(availability(), "OFFLINE\n");
    const std::string why = availability().string() + " says OFFLINE";
    text = waitForText({"device gone", "0 echo devices", "echo device foo0 is not offered: " + why});
    EXPECT_NE(text.find("device gone"), std::string::npos) << text;
    // Why each device is missing, in a sentence.
    EXPECT_NE(text.find("Seen but not offered:"), std::string::npos) << text;
    EXPECT_NE(text.find("echo device foo0 is not offered: " + why), std::string::npos) << text;
    EXPECT_NE(text.find("echo device foo1 is not offered: " + why), std::string::npos) << text;
    EXPECT_EQ(browser_->text("document.querySelector('tr[data-instance=\"cams-8120fe\"]').dataset.health"),
              "unhealthy");
    EXPECT_EQ(browser_->text("window.devletTestMarker"), "same page");
    EXPECT_EQ(browser_->text("document.body.dataset.live"), "stream");
    keepScreenshot("status-page-device-offline");
}

TEST_F(StatusPageTest, PollsWhenTheLiveStreamIsRefusedAndStillFollowsChanges) {
    ASSERT_TRUE(kubelet_->start());
    startDaemon();
    ASSERT_TRUE(waitForDevices(kCl, 4));
    // Every live stream the server allows is taken: the page must fall back to polling.
    std::vector<std::unique_ptr<RawConnection>> streams;
    for (int i = 0; i < 8; ++i) {
        streams.push_back(std::make_unique<RawConnection>(port_));
        ASSERT_TRUE(streams.back()->send("GET /api/v1/status/stream HTTP/1.1\r\nHost: x\r\n\r\n"));
        ASSERT_NE(streams.back()->readUntil("event: status", 0, 20s), std::string::npos);
    }
    openPage();
    waitForText({"cams-8120fe", "kubelet connected"});
    EXPECT_TRUE(eventually([&] { return browser_->text("document.body.dataset.live") == "polling"; }, 30s));
    ASSERT_FALSE(browser_->evaluate("window.devletTestMarker = 'same page'").is_null());
    writeFile(availability(), "OFFLINE\n");
    const std::string text = waitForText({"device gone", "echo device foo0 is not offered"});
    EXPECT_NE(text.find("echo device foo0 is not offered"), std::string::npos) << text;
    EXPECT_EQ(browser_->text("window.devletTestMarker"), "same page");
    keepScreenshot("status-page-polling");
}

TEST_F(StatusPageTest, ExplainsWaitingForTheKubelet) {
    startDaemon();
    openPage();
    const std::string waiting = "waiting for kubelet at " + kubelet_->kubeletSocket().string();
    std::string text = waitForText({"cams-8120fe", "not offered: " + waiting});
    EXPECT_NE(text.find("not offered: " + waiting), std::string::npos) << text;
    keepScreenshot("status-page-waiting-for-kubelet");

    ASSERT_FALSE(browser_->evaluate("window.devletTestMarker = 'same page'").is_null());
    ASSERT_TRUE(kubelet_->start());
    text = waitForText({"kubelet connected"});
    EXPECT_NE(text.find("kubelet connected"), std::string::npos) << text;
    EXPECT_EQ(browser_->text("window.devletTestMarker"), "same page");
}

TEST_F(StatusPageTest, SaysSoWhenDevletStopsAnswering) {
    startDaemon();
    openPage();
    waitForText({"cams-8120fe"});
    daemon_->stop();
    const std::string text = waitForText({"devlet does not answer"});
    EXPECT_NE(text.find("devlet does not answer"), std::string::npos) << text;
    EXPECT_NE(text.find("cams-8120fe"), std::string::npos);  // what it knew stays on screen
}

}  // namespace
}  // namespace devlet::test
