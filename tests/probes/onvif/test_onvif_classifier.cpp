// Akri's ONVIF filter semantics and instance shape, on plain observations.

#include <cctype>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "probes/onvif/onvif_classifier.h"

namespace devlet::onvif {
namespace {

CameraObservation camera(const std::string& uuid = "3fa1fe68-b915-4053-a3e1-ac15a21f5f91",
                         const std::string& ip = "192.0.2.10", const std::string& mac = "00:11:22:aa:44:55") {
    CameraObservation c;
    c.uuid = uuid;
    c.serviceUrl = "http://" + ip + ":8080/onvif/device_service";
    c.scopes = {"onvif://www.onvif.org/name/Lobby", "onvif://www.onvif.org/location/hall"};
    c.report.state = CameraState::UpWithAuth;
    c.report.auth = AuthResult::Accepted;
    c.report.ipAddress = ip;
    c.report.macAddress = mac;
    return c;
}

FilterList list(FilterAction action, std::vector<std::string> items) {
    return FilterList{action, std::move(items)};
}

struct FilterCase {
    const char* name;
    std::optional<FilterList> OnvifDetails::*field;
    FilterList filter;
    bool kept;
};

class OnvifFilter : public ::testing::TestWithParam<FilterCase> {};

TEST_P(OnvifFilter, FollowsAkri) {
    const FilterCase& c = GetParam();
    OnvifDetails details;
    details.*(c.field) = c.filter;
    EXPECT_EQ(!cameraFilterOut(details, camera()).has_value(), c.kept) << c.name;
}

using D = OnvifDetails;
INSTANTIATE_TEST_SUITE_P(
    Akri, OnvifFilter,
    ::testing::Values(
        FilterCase{"ip include match", &D::ipAddresses, list(FilterAction::Include, {"192.0.2.10"}), true},
        FilterCase{"ip include miss", &D::ipAddresses, list(FilterAction::Include, {"192.0.2.11"}), false},
        FilterCase{"ip exclude match", &D::ipAddresses, list(FilterAction::Exclude, {"192.0.2.10"}), false},
        FilterCase{"ip exclude empty", &D::ipAddresses, list(FilterAction::Exclude, {}), true},
        FilterCase{"ip include empty drops", &D::ipAddresses, list(FilterAction::Include, {}), false},
        FilterCase{"mac equal", &D::macAddresses, list(FilterAction::Include, {"00:11:22:aa:44:55"}), true},
        FilterCase{"mac upper case", &D::macAddresses, list(FilterAction::Include, {"00:11:22:AA:44:55"}),
                   true},
        FilterCase{"mac exclude", &D::macAddresses, list(FilterAction::Exclude, {"00:11:22:aa:44:55"}),
                   false},
        FilterCase{"uuid upper case", &D::uuids,
                   list(FilterAction::Include, {"3FA1FE68-B915-4053-A3E1-AC15A21F5F91"}), true},
        FilterCase{"uuid exclude", &D::uuids,
                   list(FilterAction::Exclude, {"3fa1fe68-b915-4053-a3e1-ac15a21f5f91"}), false},
        FilterCase{"scope token include", &D::scopes,
                   list(FilterAction::Include, {"onvif://www.onvif.org/name/Lobby"}), true},
        FilterCase{"scope must be exact", &D::scopes,
                   list(FilterAction::Include, {"onvif://www.onvif.org/name/lobby"}), false},
        FilterCase{"scope exclude", &D::scopes,
                   list(FilterAction::Exclude, {"onvif://www.onvif.org/location/hall"}), false}),
    [](const auto& info) {
        std::string name = info.param.name;
        for (char& ch : name)
            if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
        return name;
    });

TEST(OnvifFilter, UnknownMacIsDroppedByANonTrivialList) {
    OnvifDetails details;
    details.macAddresses = list(FilterAction::Exclude, {"aa:bb:cc:dd:ee:ff"});
    CameraObservation c = camera();
    c.report.macAddress.clear();
    auto why = cameraFilterOut(details, c);
    ASSERT_TRUE(why);
    EXPECT_NE(why->find("unknown"), std::string::npos);
    details.macAddresses = list(FilterAction::Exclude, {});
    EXPECT_FALSE(cameraFilterOut(details, c));
}

TEST(OnvifFilter, IpFallsBackToTheServiceUrlHost) {
    OnvifDetails details;
    details.ipAddresses = list(FilterAction::Include, {"192.0.2.10"});
    CameraObservation c = camera();
    c.report.ipAddress.clear();
    EXPECT_FALSE(cameraFilterOut(details, c));
}

TEST(OnvifFilter, RefusedCredentialsFollowOfferUnauthenticated) {
    OnvifDetails details;
    CameraObservation c = camera();
    c.report.state = CameraState::UpWithoutAuth;
    c.report.auth = AuthResult::Refused;
    EXPECT_FALSE(cameraFilterOut(details, c));
    details.offerUnauthenticated = false;
    EXPECT_TRUE(cameraFilterOut(details, c));
}

TEST(OnvifFilter, UnreachableCameraIsNotOffered) {
    CameraObservation c = camera();
    c.report.state = CameraState::Unreachable;
    EXPECT_TRUE(cameraFilterOut(OnvifDetails{}, c));
}

TEST(OnvifClassifier, NetworkVideoTransmitterIsACameraAndWsdpDeviceIsNot) {
    EXPECT_TRUE(isCamera({"{http://www.onvif.org/ver10/network/wsdl}NetworkVideoTransmitter"}));
    EXPECT_TRUE(isCamera({"{http://schemas.xmlsoap.org/ws/2006/02/devprof}Device",
                          "{http://www.onvif.org/ver10/device/wsdl}Device"}));
    EXPECT_FALSE(isCamera({"{http://schemas.xmlsoap.org/ws/2006/02/devprof}Device",
                           "{http://schemas.microsoft.com/windows/2006/08/wdp}Computer"}));
    EXPECT_FALSE(isCamera({}));
    EXPECT_FALSE(isCamera({"{urn:other}NetworkVideoTransmitter"}));
}

TEST(OnvifClassifier, EndpointUuidStripsUrnAndUuidPrefixes) {
    EXPECT_EQ(endpointUuid("urn:uuid:3FA1FE68-B915-4053-A3E1-AC15A21F5F91"),
              "3fa1fe68-b915-4053-a3e1-ac15a21f5f91");
    EXPECT_EQ(endpointUuid("uuid:abc"), "abc");
    EXPECT_EQ(endpointUuid("abc"), "abc");
}

TEST(OnvifClassifier, ServiceUrlsAreChecked) {
    EXPECT_TRUE(isUsableServiceUrl("http://192.0.2.10/onvif/device_service"));
    EXPECT_TRUE(isUsableServiceUrl("https://[2001:db8::1]:443/onvif/device_service"));
    EXPECT_FALSE(isUsableServiceUrl("ftp://192.0.2.10/"));
    EXPECT_FALSE(isUsableServiceUrl("http:///path"));
    EXPECT_FALSE(isUsableServiceUrl("http://192.0.2.10/a b"));
    // gSOAP would call the host after the '@'.
    EXPECT_FALSE(isUsableServiceUrl("http://192.0.2.10/x@198.51.100.9/onvif/media"));
    EXPECT_FALSE(isUsableServiceUrl("http://admin:pw@192.0.2.10/onvif/device_service"));
    EXPECT_FALSE(isUsableServiceUrl("http://" + std::string(2000, 'a')));
    EXPECT_EQ(urlHost("http://user:pw@192.0.2.10:8080/x"), "192.0.2.10");
    EXPECT_EQ(urlHost("http://[2001:db8::1]:80/"), "2001:db8::1");
}

TEST(OnvifClassifier, InstanceHasAkrisIdAndProperties) {
    CameraObservation c = camera();
    c.report.manufacturer = "Acme";
    c.report.model = "Cam 1";
    c.report.profiles = {{"main", "Main", "H264", 1920, 1080, "rtsp://192.0.2.10:554/main"},
                         {"sub", "Sub", "H264", 640, 360, ""}};
    Instance instance = cameraInstance(c);
    EXPECT_EQ(instance.id,
              "http://192.0.2.10:8080/onvif/device_service-3fa1fe68-b915-4053-a3e1-ac15a21f5f91");
    EXPECT_TRUE(instance.shared);
    EXPECT_EQ(instance.properties.at("ONVIF_DEVICE_SERVICE_URL"), c.serviceUrl);
    EXPECT_EQ(instance.properties.at("ONVIF_DEVICE_UUID"), c.uuid);
    EXPECT_EQ(instance.properties.at("ONVIF_DEVICE_IP_ADDRESS"), "192.0.2.10");
    EXPECT_EQ(instance.properties.at("ONVIF_DEVICE_MAC_ADDRESS"), "00:11:22:aa:44:55");
    EXPECT_EQ(instance.properties.at("ONVIF_DEVICE_MANUFACTURER"), "Acme");
    EXPECT_EQ(instance.properties.at("ONVIF_STREAM_0_URI"), "rtsp://192.0.2.10:554/main");
    EXPECT_EQ(instance.properties.at("ONVIF_STREAM_0_RESOLUTION"), "1920x1080");
    EXPECT_EQ(instance.properties.at("ONVIF_STREAM_URI"), "rtsp://192.0.2.10:554/main");
    EXPECT_EQ(instance.properties.count("ONVIF_STREAM_1_URI"), 0u);
}

TEST(OnvifClassifier, InstanceWithoutInterfacesHasNoIpOrMac) {
    // As Akri: the IP and MAC properties exist only when GetNetworkInterfaces answered.
    CameraObservation c = camera();
    c.report.ipAddress.clear();
    c.report.macAddress.clear();
    Instance instance = cameraInstance(c);
    EXPECT_EQ(instance.properties.count("ONVIF_DEVICE_IP_ADDRESS"), 0u);
    EXPECT_EQ(instance.properties.count("ONVIF_DEVICE_MAC_ADDRESS"), 0u);
}

TEST(OnvifClassifier, SnapshotIsSortedAndFiltered) {
    OnvifDetails details;
    details.uuids = list(FilterAction::Exclude, {"b"});
    auto instances = classifyOnvif(
        {camera("c", "192.0.2.3"), camera("b", "192.0.2.2"), camera("a", "192.0.2.1")}, details);
    ASSERT_EQ(instances.size(), 2u);
    EXPECT_LT(instances[0].id, instances[1].id);
}

}  // namespace
}  // namespace devlet::onvif
