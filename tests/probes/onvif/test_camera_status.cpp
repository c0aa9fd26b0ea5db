// Each camera's state as a status page and `devlet probe onvif` show it: EdgeX's states,
// refused credentials, and why a camera is not offered, naming the filter.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "probes/onvif/camera_status.h"

namespace devlet::onvif {
namespace {

CameraObservation camera() {
    CameraObservation c;
    c.uuid = "3fa1fe68-b915-4053-a3e1-ac15a21f5f91";
    c.serviceUrl = "http://192.0.2.10:8080/onvif/device_service";
    c.scopes = {"onvif://www.onvif.org/name/Lobby"};
    c.report.state = CameraState::UpWithAuth;
    c.report.auth = AuthResult::Accepted;
    c.report.manufacturer = "Acme";
    c.report.model = "Cam 1";
    c.report.ipAddress = "192.0.2.10";
    c.report.macAddress = "00:11:22:aa:44:55";
    c.report.profiles = {{"main", "Main", "H264", 1920, 1080, "rtsp://192.0.2.10:554/main"},
                         {"sub", "Sub", "H264", 640, 360, ""}};
    return c;
}

CameraProgress answered() {
    CameraProgress progress;
    progress.answered = true;
    return progress;
}

TEST(CameraStatus, AuthenticatedCameraIsUpWithAuthAndOffered) {
    const CameraStatus s = queriedCameraStatus(OnvifDetails{}, camera(), answered());
    EXPECT_EQ(s.status, DeviceStatus::UpWithAuth);
    EXPECT_STREQ(statusKey(s.status), "UpWithAuth");
    EXPECT_STREQ(describe(s.status), "up with authentication");
    EXPECT_TRUE(s.offered);
    EXPECT_TRUE(s.reason.empty());
    EXPECT_EQ(s.instanceId, camera().serviceUrl + "-" + camera().uuid);
    EXPECT_EQ(s.model, "Cam 1");
    // A profile without a stream URI is no stream.
    ASSERT_EQ(s.streams.size(), 1u);
    EXPECT_EQ(s.streams[0].uri, "rtsp://192.0.2.10:554/main");
}

// A camera that moved keeps the id it was first offered under, with its new service URL,
// and the status says where it was.
TEST(CameraStatus, CameraThatMovedKeepsItsInstanceIdAndSaysSo) {
    CameraObservation moved = camera();
    moved.firstInstanceId = moved.serviceUrl + "-" + moved.uuid;
    moved.movedFrom = moved.serviceUrl;
    moved.serviceUrl = "http://192.0.2.11:8080/onvif/device_service";
    const CameraStatus s = queriedCameraStatus(OnvifDetails{}, moved, answered());
    EXPECT_EQ(s.instanceId, camera().serviceUrl + "-" + camera().uuid);
    EXPECT_EQ(s.serviceUrl, "http://192.0.2.11:8080/onvif/device_service");
    EXPECT_TRUE(s.offered);
    const Instance instance = cameraInstance(moved);
    EXPECT_EQ(instance.id, s.instanceId);
    EXPECT_EQ(instance.properties.at("ONVIF_DEVICE_SERVICE_URL"),
              "http://192.0.2.11:8080/onvif/device_service");
    ASSERT_EQ(addressNotes(s).size(), 1u);
    EXPECT_EQ(addressNotes(s).front(),
              "moved from http://192.0.2.10:8080/onvif/device_service to "
              "http://192.0.2.11:8080/onvif/device_service (no longer answering there); the instance keeps "
              "its name");
    EXPECT_TRUE(addressNotes(queriedCameraStatus(OnvifDetails{}, camera(), answered())).empty());
}

TEST(CameraStatus, RefusedCredentialsAreAuthenticationFailed) {
    CameraObservation c = camera();
    c.report.state = CameraState::UpWithoutAuth;
    c.report.auth = AuthResult::Refused;
    OnvifDetails details;
    CameraStatus s = queriedCameraStatus(details, c, answered());
    EXPECT_EQ(s.status, DeviceStatus::AuthenticationFailed);
    EXPECT_TRUE(s.offered);
    details.offerUnauthenticated = false;
    s = queriedCameraStatus(details, c, answered());
    EXPECT_FALSE(s.offered);
    EXPECT_NE(s.reason.find("offerUnauthenticated"), std::string::npos) << s.reason;
}

TEST(CameraStatus, CameraWithoutCredentialsIsUpWithoutAuth) {
    CameraObservation c = camera();
    c.report.state = CameraState::UpWithoutAuth;
    c.report.auth = AuthResult::NoCredentials;
    EXPECT_EQ(queriedCameraStatus(OnvifDetails{}, c, answered()).status, DeviceStatus::UpWithoutAuth);
}

TEST(CameraStatus, FilterThatExcludesACameraIsNamed) {
    OnvifDetails details;
    details.macAddresses = FilterList{FilterAction::Exclude, {"00:11:22:AA:44:55"}};
    const CameraStatus s = queriedCameraStatus(details, camera(), answered());
    EXPECT_FALSE(s.offered);
    EXPECT_NE(s.reason.find("macAddresses filter"), std::string::npos) << s.reason;
    details = OnvifDetails{};
    details.ipAddresses = FilterList{FilterAction::Include, {"192.0.2.99"}};
    EXPECT_NE(queriedCameraStatus(details, camera(), answered()).reason.find("ipAddresses filter"),
              std::string::npos);
}

TEST(CameraStatus, CameraBeingQueriedIsNotOfferedYet) {
    const CameraStatus s = queriedCameraStatus(OnvifDetails{}, camera(), CameraProgress{});
    EXPECT_EQ(s.status, DeviceStatus::Querying);
    EXPECT_FALSE(s.offered);
    EXPECT_TRUE(s.model.empty());
}

TEST(CameraStatus, CameraThatStoppedAnsweringShowsTheFailedCheck) {
    CameraProgress progress = answered();
    progress.gone = true;
    progress.lastCheck = CameraState::Unreachable;
    progress.lastCheckError = "GetSystemDateAndTime failed: no connection";
    OnvifDetails details;
    details.missedChecks = 3;
    const CameraStatus s = queriedCameraStatus(details, camera(), progress);
    EXPECT_EQ(s.status, DeviceStatus::Unreachable);
    EXPECT_FALSE(s.offered);
    EXPECT_NE(s.reason.find("3 liveness checks"), std::string::npos) << s.reason;
    EXPECT_EQ(s.error, progress.lastCheckError);
}

TEST(CameraStatus, ByeIsTheReason) {
    CameraProgress progress = answered();
    progress.left = true;
    const CameraStatus s = queriedCameraStatus(OnvifDetails{}, camera(), progress);
    EXPECT_FALSE(s.offered);
    EXPECT_NE(s.reason.find("Bye"), std::string::npos);
}

TEST(CameraStatus, DiscoveryFilteredCameraIsNotQueried) {
    OnvifDetails details;
    details.uuids = FilterList{FilterAction::Include, {"other"}};
    const auto why = discoveryFilterOut(details, camera().uuid, camera().scopes);
    ASSERT_TRUE(why);
    const CameraStatus s = excludedCameraStatus(camera().uuid, camera().serviceUrl, camera().scopes, *why);
    EXPECT_EQ(s.status, DeviceStatus::NotQueried);
    EXPECT_FALSE(s.offered);
    EXPECT_NE(s.reason.find("uuids filter"), std::string::npos) << s.reason;
}

TEST(CameraStatus, ScopeFilterNamesTheScope) {
    OnvifDetails details;
    details.scopes = FilterList{FilterAction::Exclude, {"onvif://www.onvif.org/name/Lobby"}};
    const auto why = discoveryFilterOut(details, camera().uuid, camera().scopes);
    ASSERT_TRUE(why);
    EXPECT_EQ(*why, "scope onvif://www.onvif.org/name/Lobby is excluded by the scopes filter");
}

TEST(CameraStatus, StatusesSortByUuidThenUrl) {
    std::vector<CameraStatus> statuses = {excludedCameraStatus("b", "http://x/1", {}, "r"),
                                          excludedCameraStatus("a", "http://x/2", {}, "r"),
                                          excludedCameraStatus("a", "http://x/1", {}, "r")};
    sortStatuses(statuses);
    EXPECT_EQ(statuses[0].instanceId, "http://x/1-a");
    EXPECT_EQ(statuses[1].instanceId, "http://x/2-a");
    EXPECT_EQ(statuses[2].instanceId, "http://x/1-b");
}

// How the status page names an answer it did not use: the message, the sender, the uuid.
TEST(CameraStatus, IgnoredAnswerIsNamedBySenderAndUuid) {
    IgnoredAnswer spoofed{"192.0.2.55", "Hello", "11111111-1111-4111-8111-111111111111", {}, "r"};
    EXPECT_EQ(ignoredAnswerName(spoofed),
              "Hello from 192.0.2.55 (uuid 11111111-1111-4111-8111-111111111111)");
    IgnoredAnswer unreadable{"2001:db8::7", "", "", {}, "malformed XML"};
    EXPECT_EQ(ignoredAnswerName(unreadable), "datagram from 2001:db8::7");
}

}  // namespace
}  // namespace devlet::onvif
