// queryCamera on cameras' whole HTTP answers played back in call order
// (QueryOptions::playback): a Profile T camera with Media2 alone, a camera behind NAT that
// names its inside address, and the choice between Media1 and Media2.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "probes/onvif/camera_status.h"
#include "probes/onvif/onvif_client.h"

namespace devlet::onvif {
namespace {

constexpr const char* kNamespaces =
    "xmlns:env=\"http://www.w3.org/2003/05/soap-envelope\" xmlns:tt=\"http://www.onvif.org/ver10/schema\" "
    "xmlns:tds=\"http://www.onvif.org/ver10/device/wsdl\" "
    "xmlns:trt=\"http://www.onvif.org/ver10/media/wsdl\" "
    "xmlns:tr2=\"http://www.onvif.org/ver20/media/wsdl\" xmlns:ter=\"http://www.onvif.org/ver10/error\"";

std::string answer(const std::string& body, const std::string& status = "200 OK") {
    const std::string xml = std::string("<?xml version=\"1.0\" encoding=\"UTF-8\"?><env:Envelope ") +
                            kNamespaces + "><env:Body>" + body + "</env:Body></env:Envelope>";
    return "HTTP/1.1 " + status +
           "\r\nContent-Type: application/soap+xml; charset=utf-8\r\nContent-Length: " +
           std::to_string(xml.size()) + "\r\nConnection: close\r\n\r\n" + xml;
}

std::string fault(const std::string& subcode) {
    return answer("<env:Fault><env:Code><env:Value>env:Sender</env:Value><env:Subcode><env:Value>" + subcode +
                      "</env:Value></env:Subcode></env:Code><env:Reason><env:Text xml:lang=\"en\">" +
                      subcode + "</env:Text></env:Reason></env:Fault>",
                  "400 Bad Request");
}

std::string time() {
    return answer(
        "<tds:GetSystemDateAndTimeResponse><tds:SystemDateAndTime><tt:UTCDateTime><tt:Time><tt:Hour>10</"
        "tt:Hour>"
        "<tt:Minute>0</tt:Minute><tt:Second>0</tt:Second></tt:Time><tt:Date><tt:Year>2026</"
        "tt:Year><tt:Month>11"
        "</tt:Month><tt:Day>25</tt:Day></tt:Date></tt:UTCDateTime></tds:SystemDateAndTime>"
        "</tds:GetSystemDateAndTimeResponse>");
}

// GetCapabilities as a Media2-only camera answers it: a device service, no Media.
std::string capabilitiesWithoutMedia() {
    return answer(
        "<tds:GetCapabilitiesResponse><tds:Capabilities><tt:Device><tt:XAddr>http://192.0.2.10/onvif/"
        "device_service</tt:XAddr></tt:Device></tds:Capabilities></tds:GetCapabilitiesResponse>");
}

std::string capabilitiesWithMedia(const std::string& xaddr) {
    return answer("<tds:GetCapabilitiesResponse><tds:Capabilities><tt:Media><tt:XAddr>" + xaddr +
                  "</tt:XAddr></tt:Media></tds:Capabilities></tds:GetCapabilitiesResponse>");
}

std::string services(const std::vector<std::pair<std::string, std::string>>& list) {
    std::string body = "<tds:GetServicesResponse>";
    for (const auto& [ns, xaddr] : list) {
        body += "<tds:Service><tds:Namespace>" + ns + "</tds:Namespace><tds:XAddr>";
        body += xaddr +
                "</tds:XAddr><tds:Version><tt:Major>2</tt:Major><tt:Minor>60</tt:Minor></tds:Version></"
                "tds:Service>";
    }
    return answer(body + "</tds:GetServicesResponse>");
}

std::string deviceInformation() {
    return answer(
        "<tds:GetDeviceInformationResponse><tds:Manufacturer>Axis</tds:Manufacturer><tds:Model>P1455-LE</"
        "tds:Model>"
        "<tds:FirmwareVersion>10.12.182</tds:FirmwareVersion><tds:SerialNumber>B8A44F000001</"
        "tds:SerialNumber>"
        "<tds:HardwareId>7C2</tds:HardwareId></tds:GetDeviceInformationResponse>");
}

std::string networkInterfaces() {
    return answer(
        "<tds:GetNetworkInterfacesResponse><tds:NetworkInterfaces "
        "token=\"eth0\"><tt:Enabled>true</tt:Enabled>"
        "<tt:Info><tt:HwAddress>B8:A4:4F:00:00:01</tt:HwAddress></tt:Info><tt:IPv4><tt:Enabled>true</"
        "tt:Enabled>"
        "<tt:Config><tt:Manual><tt:Address>192.168.1.64</tt:Address><tt:PrefixLength>24</tt:PrefixLength>"
        "</tt:Manual></tt:Config></tt:IPv4></tds:NetworkInterfaces></tds:GetNetworkInterfacesResponse>");
}

std::string media2Profiles() {
    auto profile = [](const char* token, const char* encoding, int width, int height) {
        return std::string("<tr2:Profiles token=\"") + token + "\" fixed=\"true\"><tr2:Name>" + token +
               "</tr2:Name><tr2:Configurations><tr2:VideoSource token=\"VSC\"><tt:Name>VSC</tt:Name>"
               "<tt:UseCount>2</tt:UseCount><tt:SourceToken>VS</tt:SourceToken><tt:Bounds x=\"0\" y=\"0\" "
               "width=\"1920\" height=\"1080\"/></tr2:VideoSource><tr2:VideoEncoder token=\"VE_" +
               token +
               "\" GovLength=\"50\" Profile=\"Main\"><tt:Name>VE</tt:Name><tt:UseCount>1</tt:UseCount>"
               "<tt:Encoding>" +
               encoding + "</tt:Encoding><tt:Resolution><tt:Width>" + std::to_string(width) +
               "</tt:Width><tt:Height>" + std::to_string(height) +
               "</tt:Height></tt:Resolution><tt:Quality>5</tt:Quality></tr2:VideoEncoder></"
               "tr2:Configurations>"
               "</tr2:Profiles>";
    };
    return answer("<tr2:GetProfilesResponse>" + profile("profile_1_h265", "H265", 2592, 1944) +
                  profile("profile_2_h264", "H264", 640, 480) + "</tr2:GetProfilesResponse>");
}

std::string media2StreamUri(const std::string& uri) {
    return answer("<tr2:GetStreamUriResponse><tr2:Uri>" + uri + "</tr2:Uri></tr2:GetStreamUriResponse>");
}

std::string media1Profiles() {
    return answer(
        "<trt:GetProfilesResponse><trt:Profiles token=\"Profile_1\" "
        "fixed=\"true\"><tt:Name>mainStream</tt:Name>"
        "<tt:VideoEncoderConfiguration token=\"VE1\"><tt:Name>VE1</tt:Name><tt:Encoding>H264</tt:Encoding>"
        "<tt:Resolution><tt:Width>1920</tt:Width><tt:Height>1080</tt:Height></tt:Resolution>"
        "</tt:VideoEncoderConfiguration></trt:Profiles></trt:GetProfilesResponse>");
}

std::string media1StreamUri(const std::string& uri) {
    return answer("<trt:GetStreamUriResponse><trt:MediaUri><tt:Uri>" + uri +
                  "</tt:Uri><tt:InvalidAfterConnect>false</tt:InvalidAfterConnect></trt:MediaUri>"
                  "</trt:GetStreamUriResponse>");
}

const Credential kCredential{"admin", "secret"};

CameraReport play(const std::string& serviceUrl, const std::vector<std::string>& answers) {
    QueryOptions options;
    options.playback = &answers;
    return queryCamera(serviceUrl, kCredential, options);
}

TEST(OnvifMedia, Media2OnlyCameraGivesItsProfilesAndStreamUris) {
    const CameraReport report =
        play("http://192.0.2.10/onvif/device_service",
             {time(), capabilitiesWithoutMedia(),
              services({{"http://www.onvif.org/ver10/device/wsdl", "http://192.0.2.10/onvif/device_service"},
                        {"http://www.onvif.org/ver20/media/wsdl", "http://192.0.2.10/onvif/media2_service"}}),
              deviceInformation(), networkInterfaces(), media2Profiles(),
              media2StreamUri("rtsp://admin:secret@192.0.2.10:554/axis-media/media.amp?videocodec=h265"),
              media2StreamUri(
                  "rtsp://192.0.2.10:554/axis-media/media.amp?videocodec=h264&amp;resolution=640x480")});
    EXPECT_EQ(report.state, CameraState::UpWithAuth) << report.error;
    EXPECT_TRUE(report.media2);
    EXPECT_EQ(report.mediaUrl, "http://192.0.2.10/onvif/media2_service");
    EXPECT_TRUE(report.rewrittenServices.empty());
    EXPECT_TRUE(report.streamHostsElsewhere.empty());
    ASSERT_EQ(report.profiles.size(), 2u) << report.error;
    EXPECT_EQ(report.profiles[0].token, "profile_1_h265");
    EXPECT_EQ(report.profiles[0].name, "profile_1_h265");
    EXPECT_EQ(report.profiles[0].encoding, "H265");
    EXPECT_EQ(report.profiles[0].width, 2592);
    EXPECT_EQ(report.profiles[0].height, 1944);
    EXPECT_EQ(report.profiles[0].uri, "rtsp://192.0.2.10:554/axis-media/media.amp?videocodec=h265");
    EXPECT_EQ(report.profiles[1].encoding, "H264");
    EXPECT_EQ(report.profiles[1].uri,
              "rtsp://192.0.2.10:554/axis-media/media.amp?videocodec=h264&resolution=640x480");
}

TEST(OnvifMedia, Media2StreamUriFallsBackToTheRtspProtocolName) {
    const CameraReport report =
        play("http://192.0.2.10/onvif/device_service",
             {time(), capabilitiesWithoutMedia(),
              services({{"http://www.onvif.org/ver20/media/wsdl", "http://192.0.2.10/onvif/media2_service"}}),
              deviceInformation(), networkInterfaces(), media2Profiles(), fault("ter:InvalidArgVal"),
              media2StreamUri("rtsp://192.0.2.10/h265"), fault("ter:InvalidArgVal"),
              media2StreamUri("rtsp://192.0.2.10/h264")});
    ASSERT_EQ(report.profiles.size(), 2u) << report.error;
    EXPECT_EQ(report.profiles[0].uri, "rtsp://192.0.2.10/h265");
    EXPECT_EQ(report.profiles[1].uri, "rtsp://192.0.2.10/h264");
}

TEST(OnvifMedia, Media2ProfilesAreAskedForWithAllWhenTypesAreRefused) {
    const CameraReport report =
        play("http://192.0.2.10/onvif/device_service",
             {time(), capabilitiesWithoutMedia(),
              services({{"http://www.onvif.org/ver20/media/wsdl", "http://192.0.2.10/onvif/media2_service"}}),
              deviceInformation(), networkInterfaces(), fault("ter:InvalidArgVal"), media2Profiles(),
              media2StreamUri("rtsp://192.0.2.10/h265"), media2StreamUri("rtsp://192.0.2.10/h264")});
    ASSERT_EQ(report.profiles.size(), 2u) << report.error;
    EXPECT_EQ(report.profiles[0].encoding, "H265");
    EXPECT_EQ(report.profiles[1].uri, "rtsp://192.0.2.10/h264");
}

TEST(OnvifMedia, Media1IsPreferredWhenTheCameraHasBoth) {
    const CameraReport report =
        play("http://192.0.2.10/onvif/device_service",
             {time(), fault("ter:ActionNotSupported"), fault("ter:ActionNotSupported"),
              services({{"http://www.onvif.org/ver20/media/wsdl", "http://192.0.2.10/onvif/media2_service"},
                        {"http://www.onvif.org/ver10/media/wsdl", "http://192.0.2.10/onvif/media_service"}}),
              deviceInformation(), networkInterfaces(), media1Profiles(),
              media1StreamUri("rtsp://192.0.2.10/main")});
    EXPECT_FALSE(report.media2);
    EXPECT_EQ(report.mediaUrl, "http://192.0.2.10/onvif/media_service");
    ASSERT_EQ(report.profiles.size(), 1u) << report.error;
    EXPECT_EQ(report.profiles[0].uri, "rtsp://192.0.2.10/main");
}

TEST(OnvifMedia, MediaAddressBehindNatIsCalledAtTheContactedHost) {
    const CameraReport report =
        play("http://203.0.113.5:8080/onvif/device_service",
             {time(), capabilitiesWithMedia("http://192.168.1.64/onvif/media_service"), deviceInformation(),
              networkInterfaces(), media1Profiles(),
              media1StreamUri("rtsp://192.168.1.64:554/Streaming/Channels/101")});
    EXPECT_EQ(report.state, CameraState::UpWithAuth) << report.error;
    EXPECT_EQ(report.mediaUrl, "http://203.0.113.5:8080/onvif/media_service");
    EXPECT_EQ(report.rewrittenServices, std::vector<std::string>{"media: 192.168.1.64 -> 203.0.113.5:8080"});
    ASSERT_EQ(report.profiles.size(), 1u) << report.error;
    // The stream URI is the camera's own: said, not rewritten.
    EXPECT_EQ(report.profiles[0].uri, "rtsp://192.168.1.64:554/Streaming/Channels/101");
    EXPECT_EQ(report.streamHostsElsewhere, std::vector<std::string>{"192.168.1.64"});
}

TEST(OnvifMedia, Media2AddressBehindNatIsCalledAtTheContactedHost) {
    const CameraReport report = play(
        "http://203.0.113.5:8080/onvif/device_service",
        {time(), capabilitiesWithoutMedia(),
         services({{"http://www.onvif.org/ver20/media/wsdl", "http://192.168.1.64:80/onvif/media2_service"}}),
         deviceInformation(), networkInterfaces(), media2Profiles(),
         media2StreamUri("rtsp://203.0.113.5:8554/h265"), media2StreamUri("rtsp://203.0.113.5:8554/h264")});
    EXPECT_TRUE(report.media2);
    EXPECT_EQ(report.mediaUrl, "http://203.0.113.5:8080/onvif/media2_service");
    EXPECT_EQ(report.rewrittenServices,
              std::vector<std::string>{"media2: 192.168.1.64:80 -> 203.0.113.5:8080"});
    EXPECT_TRUE(report.streamHostsElsewhere.empty());
    ASSERT_EQ(report.profiles.size(), 2u) << report.error;
}

TEST(OnvifMedia, UnusableMediaAddressFallsBackToTheDeviceService) {
    const CameraReport report =
        play("http://192.0.2.10/onvif/device_service",
             {time(), capabilitiesWithMedia("ftp://192.0.2.10/media"), deviceInformation(),
              networkInterfaces(), media1Profiles(), media1StreamUri("rtsp://192.0.2.10/main")});
    EXPECT_EQ(report.mediaUrl, "http://192.0.2.10/onvif/device_service");
    EXPECT_TRUE(report.rewrittenServices.empty());
    ASSERT_EQ(report.profiles.size(), 1u) << report.error;
}

// gSOAP takes the host from after the first '@' anywhere in a URL: such an address would
// send the credentials to 198.51.100.9.
TEST(OnvifMedia, MediaAddressWithAnAtSignIsNotCalled) {
    for (const char* xaddr :
         {"http://192.0.2.10/x@198.51.100.9/onvif/media", "http://192.168.1.64/x@198.51.100.9/m"}) {
        const CameraReport report =
            play("http://192.0.2.10/onvif/device_service",
                 {time(), capabilitiesWithMedia(xaddr), deviceInformation(), networkInterfaces(),
                  media1Profiles(), media1StreamUri("rtsp://192.0.2.10/main")});
        EXPECT_EQ(report.mediaUrl, "http://192.0.2.10/onvif/device_service") << xaddr;
        EXPECT_TRUE(report.rewrittenServices.empty()) << xaddr;
    }
}

TEST(OnvifMedia, AddressNotesNameTheRewriteAndTheStreamHost) {
    CameraStatus status;
    status.serviceUrl = "http://203.0.113.5:8080/onvif/device_service";
    status.rewrittenServices = {"media: 192.168.1.64 -> 203.0.113.5:8080"};
    status.streamHostsElsewhere = {"192.168.1.64"};
    const std::vector<std::string> notes = addressNotes(status);
    ASSERT_EQ(notes.size(), 2u);
    EXPECT_EQ(notes[0],
              "service address rewritten to the contacted host: media: 192.168.1.64 -> 203.0.113.5:8080");
    EXPECT_EQ(
        notes[1],
        "stream URIs name 192.168.1.64, not the contacted host 203.0.113.5; kept as the camera said them");
}

struct RewriteCase {
    const char* reported;
    const char* contacted;
    const char* expected;
};

TEST(OnvifMedia, ServiceUrlsAreRewrittenOnlyWhenTheyNameAnotherHost) {
    const RewriteCase cases[] = {
        {"http://192.0.2.10:8000/onvif/Media", "http://192.0.2.10/onvif/device_service",
         "http://192.0.2.10:8000/onvif/Media"},
        {"http://192.168.1.64/onvif/media_service", "http://203.0.113.5:8080/onvif/device_service",
         "http://203.0.113.5:8080/onvif/media_service"},
        {"https://10.0.0.2:443/media?x=1", "http://203.0.113.5/onvif/device_service",
         "http://203.0.113.5/media?x=1"},
        {"http://192.168.1.64", "http://[2001:db8::5]:8080/onvif/device_service",
         "http://[2001:db8::5]:8080/"},
        {"http://user:pw@192.168.1.64/m", "http://203.0.113.5/onvif/device_service", "http://203.0.113.5/m"},
        {"http://CAM.example/m", "http://cam.example/onvif/device_service", "http://CAM.example/m"},
    };
    for (const RewriteCase& c : cases)
        EXPECT_EQ(atContactedHost(c.reported, c.contacted), c.expected) << c.reported;
}

}  // namespace
}  // namespace devlet::onvif
