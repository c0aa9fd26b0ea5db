// Real cameras' answers (one file each under corpus/; corpus/README.md says where each was
// found) through the code devlet runs on what cameras send: WS-Discovery datagrams through
// decodeDiscovery, device and media service answers through queryCamera with the answers
// played back in the order it makes its calls. Each row names the fields a reader must get
// out of its file. A row whose answer needs a reader that is not there yet names that in
// `needs` and skips; the expectations are already the right ones.
// Every file is also a fuzz seed: the seeds under fuzz/corpus/ must be what the rows play.
// DEVLET_WRITE_CORPUS_SEEDS=1 rewrites them after a change of a row or of the stand-ins.

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "probes/onvif/onvif_client.h"
#include "probes/onvif/soap_wire.h"

namespace devlet::onvif {
namespace {

const std::filesystem::path kCorpus = ONVIF_CORPUS_DIR;
const std::filesystem::path kSeeds = FUZZ_CORPUS_DIR;
constexpr std::string_view kSeedSeparator = "\n--devlet-next-answer--\n";  // fuzz_onvif_answers.cpp

std::string readFile(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        ADD_FAILURE() << "cannot read " << path;
        return "";
    }
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A seed's name: the corpus path with '/' as '-' ("axis-M5525-E-GetProfiles.xml").
std::string seedName(std::string path) {
    for (char& c : path) {
        if (c == '/') c = '-';
    }
    return "corpus-" + path;
}

// The seed under fuzz/corpus/<target>/ must hold `bytes`; rewritten when asked to.
void expectSeed(const std::string& target, const std::string& name, const std::string& bytes) {
    const std::filesystem::path path = kSeeds / target / name;
    if (const char* write = std::getenv("DEVLET_WRITE_CORPUS_SEEDS"); write && std::string(write) == "1") {
        std::ofstream(path, std::ios::binary) << bytes;
        return;
    }
    EXPECT_TRUE(readFile(path) == bytes)
        << path << " is not what the row plays: DEVLET_WRITE_CORPUS_SEEDS=1 rewrites it";
}

// ---------------------------------------------------------------------------------------
// WS-Discovery datagrams

struct DiscoveryRow {
    const char* file;
    const char* needs;  // nullptr: today's reader reads it
    DiscoveryKind kind;
    std::string uuid;
    std::vector<std::string> xaddrs;  // not checked for a Bye, which devlet reads for its uuid only
    std::vector<std::string> scopes;  // each among the endpoint's scopes
    bool camera;
};

const DiscoveryRow kDiscoveryRows[] = {
    {
        .file = "360vision/HD_PREDATOR/ProbeMatches.xml",
        .needs = nullptr,  // carries <wsa:ReplyTo SOAP-ENV:mustUnderstand="true">
        .kind = DiscoveryKind::ProbeMatches,
        .uuid = "c9790c3a-701b-464d-a189-0060351c8ada",
        .xaddrs = {"http://192.168.68.111/onvif/services"},
        .scopes = {"onvif://www.onvif.org/hardware/HD_PREDATOR", "onvif://www.onvif.org/name/PREDATOR",
                   "onvif://www.onvif.org/location/"},
        .camera = true,
    },
    {
        .file = "xiongmai/IPC-model/ProbeMatches.xml",
        .needs = nullptr,
        .kind = DiscoveryKind::ProbeMatches,
        .uuid = "3fa1fe68-b915-4053-a3e1-ac15a21f5f91",
        .xaddrs = {"http://192.168.1.35:8899/onvif/device_service"},
        .scopes = {"onvif://www.onvif.org/hardware/IPC-model", "onvif://www.onvif.org/name/NVT",
                   "onvif://www.onvif.org/location/country/china"},
        .camera = true,
    },
    {
        .file = "onvif_simple_server/ProbeMatches.xml",
        .needs = nullptr,  // carries <wsa:ReplyTo SOAP-ENV:mustUnderstand="true">
        .kind = DiscoveryKind::ProbeMatches,
        .uuid = "1c6a8b2e-3d4f-5a6b-8c7d-0e1f2a3b4c5d",
        .xaddrs = {"http://192.168.1.20/onvif/device_service"},
        // The firmware writes its model name into the scope unescaped: "Yi Hack" makes two.
        .scopes = {"onvif://www.onvif.org/hardware/AFUS", "onvif://www.onvif.org/name/Yi", "Hack"},
        .camera = true,
    },
    {
        .file = "onvif_simple_server/Hello.xml",
        .needs = nullptr,
        .kind = DiscoveryKind::Hello,
        .uuid = "1c6a8b2e-3d4f-5a6b-8c7d-0e1f2a3b4c5d",
        .xaddrs = {"http://192.168.1.20/onvif/device_service"},
        .scopes = {"onvif://www.onvif.org/hardware/AFUS", "onvif://www.onvif.org/type/ptz"},
        .camera = true,
    },
    {
        .file = "onvif_simple_server/Bye.xml",
        .needs = nullptr,
        .kind = DiscoveryKind::Bye,
        .uuid = "1c6a8b2e-3d4f-5a6b-8c7d-0e1f2a3b4c5d",
        .xaddrs = {},
        .scopes = {},
        .camera = false,
    },
};

// NOLINTNEXTLINE(readability-identifier-naming): gtest's name
void PrintTo(const DiscoveryRow& row, std::ostream* out) {
    *out << row.file;
}

class CorpusDatagram : public testing::TestWithParam<DiscoveryRow> {};

TEST_P(CorpusDatagram, YieldsTheEndpoint) {
    const DiscoveryRow& row = GetParam();
    if (row.needs) GTEST_SKIP() << "needs " << row.needs;
    std::string error;
    const auto message = decodeDiscovery(readFile(kCorpus / row.file), error);
    ASSERT_TRUE(message) << error;
    EXPECT_EQ(message->kind, row.kind);
    ASSERT_EQ(message->endpoints.size(), 1u);
    const DiscoveredEndpoint& endpoint = message->endpoints.front();
    EXPECT_EQ(endpointUuid(endpoint.address), row.uuid);
    if (row.kind == DiscoveryKind::Bye) return;
    EXPECT_EQ(endpoint.xaddrs, row.xaddrs);
    for (const std::string& scope : row.scopes) {
        EXPECT_NE(std::find(endpoint.scopes.begin(), endpoint.scopes.end(), scope), endpoint.scopes.end())
            << scope;
    }
    EXPECT_EQ(isCamera(endpoint.types), row.camera);
}

TEST_P(CorpusDatagram, IsAFuzzSeed) {
    const DiscoveryRow& row = GetParam();
    expectSeed("discovery", seedName(row.file), readFile(kCorpus / row.file));
}

std::string rowName(const char* file) {
    std::string name;
    for (const char* p = file; *p; ++p) name += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
    return name;
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusDatagram, testing::ValuesIn(kDiscoveryRows),
                         [](const auto& info) { return rowName(info.param.file); });

// ---------------------------------------------------------------------------------------
// Device and media service answers

// The calls queryCamera makes, in its order (onvif_client.cpp).
enum class Call {
    SystemDateAndTime,
    Capabilities,
    Services,  // only when GetCapabilities names no media service
    DeviceInformation,
    NetworkInterfaces,
    Profiles,
    StreamUri,  // one per profile
    Media2Profiles,
    Media2StreamUri,
};

struct Answer {
    Call call;
    const char* file;
    // The status line the test puts before the SOAP body the corpus holds; nullptr when the
    // file is a whole HTTP answer.
    const char* status = "200 OK";
};

// Fields left out are not checked.
struct Expected {
    std::optional<CameraState> state = {};
    std::optional<AuthResult> auth = {};
    std::optional<std::string> cameraUtc = {};  // "YYYY-MM-DDTHH:MM:SSZ" from GetSystemDateAndTime
    std::optional<std::string> manufacturer = {}, model = {}, firmware = {}, serial = {}, hardwareId = {};
    std::optional<std::string> ipAddress = {}, macAddress = {};
    std::optional<std::string> mediaUrl = {};
    std::optional<std::vector<StreamProfile>> profiles = {};
    std::optional<std::string> firstStreamUri = {};
    std::optional<std::string> errorIncludes = {};
    // A password the camera's answers carry, which nothing in the report may show.
    std::optional<std::string> secret = {};
};

struct AnswerRow {
    const char* name;
    const char* needs;       // nullptr: today's client reads it
    std::string serviceUrl;  // the camera's device service, on the host its answers name
    std::vector<Answer> answers;
    Expected expected;
};

// Answers the test writes for the calls a row's files do not answer: the least a camera
// says, so that the client reaches the call the file answers.
constexpr const char* kEnvelopeStart =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
    "<SOAP-ENV:Envelope xmlns:SOAP-ENV=\"http://www.w3.org/2003/05/soap-envelope\" "
    "xmlns:tt=\"http://www.onvif.org/ver10/schema\" xmlns:tds=\"http://www.onvif.org/ver10/device/wsdl\" "
    "xmlns:trt=\"http://www.onvif.org/ver10/media/wsdl\"><SOAP-ENV:Body>";
constexpr const char* kEnvelopeEnd = "</SOAP-ENV:Body></SOAP-ENV:Envelope>";

std::string envelope(const std::string& body) {
    return kEnvelopeStart + body + kEnvelopeEnd;
}

std::string standInTime() {
    return envelope(
        "<tds:GetSystemDateAndTimeResponse><tds:SystemDateAndTime><tt:DateTimeType>NTP</tt:DateTimeType>"
        "<tt:DaylightSavings>false</tt:DaylightSavings><tt:UTCDateTime><tt:Time><tt:Hour>12</tt:Hour>"
        "<tt:Minute>0</tt:Minute><tt:Second>0</tt:Second></tt:Time><tt:Date><tt:Year>2024</tt:Year>"
        "<tt:Month>1</tt:Month><tt:Day>1</tt:Day></tt:Date></tt:UTCDateTime></tds:SystemDateAndTime>"
        "</tds:GetSystemDateAndTimeResponse>");
}

std::string standInCapabilities(const std::string& mediaUrl) {
    const std::string media =
        mediaUrl.empty() ? "" : "<tt:Media><tt:XAddr>" + mediaUrl + "</tt:XAddr></tt:Media>";
    return envelope("<tds:GetCapabilitiesResponse><tds:Capabilities>" + media +
                    "</tds:Capabilities></tds:GetCapabilitiesResponse>");
}

std::string standInServices(const std::string& serviceUrl, const std::string& media2Url) {
    return envelope(
        "<tds:GetServicesResponse><tds:Service><tds:Namespace>http://www.onvif.org/ver10/device/wsdl"
        "</tds:Namespace><tds:XAddr>" +
        serviceUrl +
        "</tds:XAddr><tds:Version><tt:Major>2</tt:Major><tt:Minor>60</tt:Minor></tds:Version></tds:Service>"
        "<tds:Service><tds:Namespace>http://www.onvif.org/ver20/media/wsdl</tds:Namespace><tds:XAddr>" +
        media2Url +
        "</tds:XAddr><tds:Version><tt:Major>2</tt:Major><tt:Minor>60</tt:Minor></tds:Version></tds:Service>"
        "</tds:GetServicesResponse>");
}

std::string standInDeviceInformation() {
    return envelope(
        "<tds:GetDeviceInformationResponse><tds:Manufacturer>stand-in</tds:Manufacturer>"
        "<tds:Model>stand-in</tds:Model><tds:FirmwareVersion>stand-in</tds:FirmwareVersion>"
        "<tds:SerialNumber>stand-in</tds:SerialNumber><tds:HardwareId>stand-in</tds:HardwareId>"
        "</tds:GetDeviceInformationResponse>");
}

std::string standInNetworkInterfaces() {
    return envelope("<tds:GetNetworkInterfacesResponse></tds:GetNetworkInterfacesResponse>");
}

std::string standInProfiles(bool oneProfile) {
    const std::string profile =
        oneProfile ? "<trt:Profiles token=\"stand-in\"><tt:Name>stand-in</tt:Name></trt:Profiles>" : "";
    return envelope("<trt:GetProfilesResponse>" + profile + "</trt:GetProfilesResponse>");
}

std::string httpAnswer(const char* status, const std::string& body) {
    return std::string("HTTP/1.1 ") + status +
           "\r\nContent-Type: application/soap+xml; charset=utf-8\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

std::string urlRoot(const std::string& url) {
    const auto path = url.find('/', url.find("://") + 3);
    return url.substr(0, path);
}

// The camera's answers in the order queryCamera asks: the row's files where it has them,
// stand-ins elsewhere. A row that ends early (a refused credential) leaves the rest unread.
std::vector<std::string> playback(const AnswerRow& row) {
    auto has = [&](Call call) {
        return std::any_of(row.answers.begin(), row.answers.end(),
                           [&](const Answer& a) { return a.call == call; });
    };
    auto answer = [&](Call call, const std::string& standIn) {
        for (const Answer& a : row.answers) {
            if (a.call != call) continue;
            const std::string file = readFile(kCorpus / a.file);
            return a.status ? httpAnswer(a.status, file) : file;
        }
        return httpAnswer("200 OK", standIn);
    };
    const bool media2 = has(Call::Media2Profiles) || has(Call::Media2StreamUri);
    const std::string root = urlRoot(row.serviceUrl);
    std::vector<std::string> out;
    out.push_back(answer(Call::SystemDateAndTime, standInTime()));
    const bool servicesNeeded = has(Call::Services) || media2;
    out.push_back(
        answer(Call::Capabilities, standInCapabilities(servicesNeeded ? "" : root + "/onvif/media_service")));
    if (servicesNeeded)
        out.push_back(
            answer(Call::Services, standInServices(row.serviceUrl, root + "/onvif/media2_service")));
    out.push_back(answer(Call::DeviceInformation, standInDeviceInformation()));
    out.push_back(answer(Call::NetworkInterfaces, standInNetworkInterfaces()));
    if (media2) {
        out.push_back(answer(Call::Media2Profiles, ""));
        if (has(Call::Media2StreamUri)) out.push_back(answer(Call::Media2StreamUri, ""));
    } else {
        out.push_back(answer(Call::Profiles, standInProfiles(has(Call::StreamUri))));
        if (has(Call::StreamUri)) out.push_back(answer(Call::StreamUri, ""));
    }
    return out;
}

std::chrono::system_clock::time_point utc(const std::string& text) {
    std::tm tm{};
    std::istringstream in(text);
    in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%SZ");
    EXPECT_FALSE(in.fail()) << text;
    return std::chrono::system_clock::from_time_t(timegm(&tm));
}

StreamProfile profile(const char* token, const char* name, const char* encoding, int width, int height,
                      const char* uri = "") {
    return {.token = token, .name = name, .encoding = encoding, .width = width, .height = height, .uri = uri};
}

const Credential kCredential{"admin", "corpus-Pa55word"};
constexpr CameraState kUp = CameraState::UpWithAuth;

// clang-format off
const AnswerRow kAnswerRows[] = {
    // ---- 360Vision HD_PREDATOR: a whole camera ----
    {
        .name = "360vision_HD_PREDATOR_whole_camera",
        .needs = nullptr,
        .serviceUrl = "http://192.168.68.111/onvif/services",
        .answers = {{Call::SystemDateAndTime, "360vision/HD_PREDATOR/GetSystemDateAndTime.xml"},
                    {Call::Capabilities, "360vision/HD_PREDATOR/GetCapabilities.xml"},
                    {Call::DeviceInformation, "360vision/HD_PREDATOR/GetDeviceInformation.xml"},
                    {Call::Profiles, "360vision/HD_PREDATOR/GetProfiles.xml"},
                    {Call::StreamUri, "360vision/HD_PREDATOR/GetStreamUri.xml"}},
        .expected = {.state = kUp, .auth = AuthResult::Accepted, .cameraUtc = "2014-12-24T19:14:37Z",
                     .manufacturer = "360Vision", .model = "HD_PREDATOR", .firmware = "PREDATOR_HD_1_11_03",
                     .serial = "00000000", .hardwareId = "HD_PREDATOR",
                     .mediaUrl = "http://192.168.68.111/onvif/services",
                     .profiles = std::vector{profile("main", "main", "H264", 1920, 1080, "rtsp://192.168.68.111/h264main")}},
    },
    {
        .name = "360vision_HD_PREDATOR_GetServices",
        .needs = nullptr,
        .serviceUrl = "http://192.168.68.111/onvif/services",
        .answers = {{Call::Services, "360vision/HD_PREDATOR/GetServices.xml"}},
        .expected = {.mediaUrl = "http://192.168.68.111/onvif/services"},
    },
    // ---- Axis ----
    {
        .name = "axis_GetSystemDateAndTime",
        .needs = nullptr,
        .serviceUrl = "http://192.0.2.20/onvif/device_service",
        .answers = {{Call::SystemDateAndTime, "axis/unnamed/GetSystemDateAndTime.xml"}},
        .expected = {.state = kUp, .cameraUtc = "2024-07-09T19:49:06Z"},
    },
    {
        .name = "axis_M5525_E_GetCapabilities",
        .needs = nullptr,
        .serviceUrl = "http://192.168.4.12/onvif/device_service",
        .answers = {{Call::Capabilities, "axis/M5525-E/GetCapabilities.xml"}},
        .expected = {.mediaUrl = "http://192.168.4.12/onvif/services"},
    },
    {
        .name = "axis_M5525_E_GetServices",
        .needs = nullptr,
        .serviceUrl = "http://192.168.4.12/onvif/device_service",
        .answers = {{Call::Services, "axis/M5525-E/GetServices.xml"}},
        .expected = {.mediaUrl = "http://192.168.4.12/onvif/services"},
    },
    {
        .name = "axis_M5525_E_GetDeviceInformation",
        .needs = nullptr,
        .serviceUrl = "http://192.168.4.12/onvif/device_service",
        .answers = {{Call::DeviceInformation, "axis/M5525-E/GetDeviceInformation.xml"}},
        .expected = {.state = kUp, .auth = AuthResult::Accepted, .manufacturer = "AXIS", .model = "M5525-E",
                     .firmware = "8.40.1.1", .serial = "ACCC8EBECCEA", .hardwareId = "757"},
    },
    {
        // DHCP is on; the manual address beside it is not the one the camera answers on.
        .name = "axis_M5525_E_GetNetworkInterfaces",
        .needs = nullptr,
        .serviceUrl = "http://192.168.4.12/onvif/device_service",
        .answers = {{Call::NetworkInterfaces, "axis/M5525-E/GetNetworkInterfaces.xml"}},
        .expected = {.ipAddress = "192.168.4.12", .macAddress = "ac:cc:8e:be:cc:ea"},
    },
    {
        .name = "axis_M5525_E_GetProfiles",
        .needs = nullptr,
        .serviceUrl = "http://192.168.4.12/onvif/device_service",
        .answers = {{Call::Profiles, "axis/M5525-E/GetProfiles.xml"}},
        .expected = {.profiles = std::vector{profile("profile_1_h264", "profile_1 h264", "H264", 1920, 1080),
                                             profile("profile_1_jpeg", "profile_1 jpeg", "JPEG", 1920, 1080)}},
    },
    // ---- Hikvision ----
    {
        .name = "hikvision_DS_2CD2143G0_I_GetCapabilities",
        .needs = nullptr,
        .serviceUrl = "http://192.168.4.13/onvif/device_service",
        .answers = {{Call::Capabilities, "hikvision/DS-2CD2143G0-I/GetCapabilities.xml"}},
        .expected = {.mediaUrl = "http://192.168.4.13/onvif/Media"},
    },
    {
        .name = "hikvision_DS_2CD2143G0_I_GetServices",
        .needs = nullptr,
        .serviceUrl = "http://192.168.4.13/onvif/device_service",
        .answers = {{Call::Services, "hikvision/DS-2CD2143G0-I/GetServices.xml"}},
        .expected = {.mediaUrl = "http://192.168.4.13/onvif/Media"},
    },
    {
        .name = "hikvision_DS_2CD2143G0_I_GetDeviceInformation",
        .needs = nullptr,
        .serviceUrl = "http://192.168.4.13/onvif/device_service",
        .answers = {{Call::DeviceInformation, "hikvision/DS-2CD2143G0-I/GetDeviceInformation.xml"}},
        .expected = {.state = kUp, .auth = AuthResult::Accepted, .manufacturer = "HIKVISION",
                     .model = "DS-2CD2143G0-I", .firmware = "V5.5.61 build 180718",
                     .serial = "DS-2CD2143G0-I20180829AAWRC46851082", .hardwareId = "88"},
    },
    {
        .name = "hikvision_DS_2CD2143G0_I_GetNetworkInterfaces",
        .needs = nullptr,
        .serviceUrl = "http://192.168.4.13/onvif/device_service",
        .answers = {{Call::NetworkInterfaces, "hikvision/DS-2CD2143G0-I/GetNetworkInterfaces.xml"}},
        .expected = {.ipAddress = "192.168.4.13", .macAddress = "58:03:fb:8a:57:9b"},
    },
    {
        .name = "hikvision_DS_2CD2143G0_I_GetProfiles",
        .needs = nullptr,
        .serviceUrl = "http://192.168.4.13/onvif/device_service",
        .answers = {{Call::Profiles, "hikvision/DS-2CD2143G0-I/GetProfiles.xml"}},
        .expected = {.profiles = std::vector{profile("Profile_1", "mainStream", "H264", 1920, 1080),
                                             profile("Profile_2", "subStream", "JPEG", 640, 480),
                                             profile("Profile_3", "thirdStream", "H264", 1280, 720)}},
    },
    {
        // The encoder configuration carries an encoding="H265" attribute beside <tt:Encoding>H264.
        .name = "hikvision_GetProfiles_encoding_attribute",
        .needs = nullptr,
        .serviceUrl = "http://192.0.2.30/onvif/device_service",
        .answers = {{Call::Profiles, "hikvision/unnamed/GetProfiles.xml"}},
        .expected = {.profiles = std::vector{profile("Profile_1", "mainStream", "H264", 1920, 1080),
                                             profile("Profile_2", "subStream", "H264", 640, 360)}},
    },
    {
        // An NVR refuses with a web page, not a SOAP fault.
        .name = "hikvision_NVR_401_html",
        .needs = nullptr,
        .serviceUrl = "http://192.0.2.31/onvif/device_service",
        .answers = {{Call::DeviceInformation, "hikvision/NVR/Unauthorized-401.html", "401 Unauthorized"}},
        .expected = {.state = CameraState::UpWithoutAuth, .auth = AuthResult::Refused, .manufacturer = ""},
    },
    // ---- Pelco ----
    {
        .name = "pelco_IMP321_1ES_GetCapabilities",
        .needs = nullptr,
        .serviceUrl = "http://192.168.4.18/onvif/device_service",
        .answers = {{Call::Capabilities, "pelco/IMP321-1ES/GetCapabilities.xml"}},
        .expected = {.mediaUrl = "http://192.168.4.18:80/onvif/device_service"},
    },
    {
        .name = "pelco_IMP321_1ES_GetServices",
        .needs = nullptr,
        .serviceUrl = "http://192.168.4.18/onvif/device_service",
        .answers = {{Call::Services, "pelco/IMP321-1ES/GetServices.xml"}},
        .expected = {.mediaUrl = "http://192.168.4.18:80/onvif/device_service"},
    },
    {
        .name = "pelco_IMP321_1ES_GetDeviceInformation",
        .needs = nullptr,
        .serviceUrl = "http://192.168.4.18/onvif/device_service",
        .answers = {{Call::DeviceInformation, "pelco/IMP321-1ES/GetDeviceInformation.xml"}},
        .expected = {.state = kUp, .auth = AuthResult::Accepted, .manufacturer = "pelco", .model = "IMP321-1ES",
                     .firmware = "01.16.42-20180912", .serial = "T82212128", .hardwareId = ""},
    },
    {
        .name = "pelco_IMP321_1ES_GetNetworkInterfaces",
        .needs = nullptr,
        .serviceUrl = "http://192.168.4.18/onvif/device_service",
        .answers = {{Call::NetworkInterfaces, "pelco/IMP321-1ES/GetNetworkInterfaces.xml"}},
        .expected = {.ipAddress = "192.168.4.18", .macAddress = "00:04:7d:36:a5:4e"},
    },
    {
        .name = "pelco_IMP321_1ES_GetProfiles",
        .needs = nullptr,
        .serviceUrl = "http://192.168.4.18/onvif/device_service",
        .answers = {{Call::Profiles, "pelco/IMP321-1ES/GetProfiles.xml"}},
        .expected = {.profiles = std::vector{profile("0", "Profile 0", "H264", 2048, 1536),
                                             profile("1", "Profile 1", "H264", 800, 600)}},
    },
    // ---- Dahua ----
    {
        .name = "dahua_GetCapabilities",
        .needs = nullptr,
        .serviceUrl = "http://192.168.1.123/onvif/device_service",
        .answers = {{Call::Capabilities, "dahua/unnamed/GetCapabilities.xml"}},
        .expected = {.mediaUrl = "http://192.168.1.123/onvif/media_service"},
    },
    {
        .name = "dahua_GetStreamUri",
        .needs = nullptr,
        .serviceUrl = "http://192.168.1.123/onvif/device_service",
        .answers = {{Call::StreamUri, "dahua/unnamed/GetStreamUri.xml"}},
        .expected = {.firstStreamUri = "rtsp://192.168.1.123:554/cam/realmonitor?channel=1&subtype=1&unicast=true&proto=Onvif"},
    },
    {
        .name = "dahua_NotAuthorized_400",
        .needs = nullptr,
        .serviceUrl = "http://192.168.100.94/onvif/device_service",
        .answers = {{Call::DeviceInformation, "dahua/unnamed/NotAuthorized-400.xml", "400 Bad Request"}},
        .expected = {.state = CameraState::UpWithoutAuth, .auth = AuthResult::Refused, .manufacturer = ""},
    },
    {
        // A Digest challenge with no body. A client with HTTP Digest answers it and finds no
        // second answer here: refused either way.
        .name = "dahua_Digest_challenge_401",
        .needs = nullptr,
        .serviceUrl = "http://192.168.100.94/onvif/device_service",
        .answers = {{Call::DeviceInformation, "dahua/unnamed/Unauthorized-401.http", nullptr}},
        .expected = {.state = CameraState::UpWithoutAuth, .auth = AuthResult::Refused, .manufacturer = ""},
    },
    // ---- Milesight (Media2) ----
    {
        .name = "milesight_Media2_GetProfiles_GetStreamUri",
        .needs = nullptr,
        .serviceUrl = "http://192.168.8.101/onvif/device_service",
        .answers = {{Call::Media2Profiles, "milesight/unnamed/GetProfiles-media2.xml"},
                    {Call::Media2StreamUri, "milesight/unnamed/GetStreamUri-media2.xml"}},
        .expected = {.profiles = std::vector{profile("Profile_1", "MsMediaProfile1", "H264", 1920, 1080,
                                                     "rtsp://192.168.8.101:9101/main"),
                                             profile("Profile_2", "MsMediaProfile2", "H264", 640, 480)}},
    },
    // ---- Xiongmai-firmware camera ----
    {
        .name = "xiongmai_GetServices",
        .needs = nullptr,
        .serviceUrl = "http://192.168.1.35:8899/onvif/device_service",
        .answers = {{Call::Services, "xiongmai/IPC-model/GetServices.xml"}},
        .expected = {.mediaUrl = "http://192.168.1.35:8899/onvif/Media"},
    },
    {
        .name = "xiongmai_GetNetworkInterfaces_manual",
        .needs = nullptr,
        .serviceUrl = "http://192.168.1.36/onvif/device_service",
        .answers = {{Call::NetworkInterfaces, "xiongmai/IPC-model/GetNetworkInterfaces.xml"}},
        .expected = {.ipAddress = "192.168.1.36", .macAddress = "00:12:41:5c:a1:a5"},
    },
    {
        .name = "xiongmai_GetNetworkInterfaces_dhcp",
        .needs = nullptr,
        .serviceUrl = "http://10.137.185.208/onvif/device_service",
        .answers = {{Call::NetworkInterfaces, "xiongmai/IPC-model/GetNetworkInterfaces-dhcp.xml"}},
        .expected = {.ipAddress = "10.137.185.208", .macAddress = "00:fc:da:b1:69:cc"},
    },
    {
        .name = "xiongmai_GetProfiles",
        .needs = nullptr,
        .serviceUrl = "http://192.168.1.35:8899/onvif/device_service",
        .answers = {{Call::Profiles, "xiongmai/IPC-model/GetProfiles.xml"}},
        .expected = {.profiles = std::vector{profile("000", "Profile_000", "H264", 1280, 720),
                                             profile("001", "Profile_001", "H264", 704, 576),
                                             profile("002", "Profile_002", "JPEG", 704, 576)}},
    },
    {
        // The firmware puts the credential in the URI's path, where no user information
        // rule finds it: the URI keeps its shape, the password's value is left out, and the
        // camera's error text says so.
        .name = "xiongmai_GetStreamUri_credentials_in_path",
        .needs = nullptr,
        .serviceUrl = "http://192.168.1.36/onvif/device_service",
        .answers = {{Call::StreamUri, "xiongmai/IPC-model/GetStreamUri.xml"}},
        .expected = {.firstStreamUri =
                         "rtsp://192.168.1.36:554/user=admin_password=_channel=1_stream=0.sdp?real_stream",
                     .errorIncludes = "the stream URI of profile stand-in has a password parameter in the path "
                                      "or query (password=): shown without its value",
                     .secret = "tlJwpbo6"},
    },
};
// clang-format on

// NOLINTNEXTLINE(readability-identifier-naming): gtest's name
void PrintTo(const AnswerRow& row, std::ostream* out) {
    *out << row.name;
}

class CorpusAnswers : public testing::TestWithParam<AnswerRow> {};

TEST_P(CorpusAnswers, YieldTheReport) {
    const AnswerRow& row = GetParam();
    if (row.needs) GTEST_SKIP() << "needs " << row.needs;
    const std::vector<std::string> answers = playback(row);
    QueryOptions options;
    options.playback = &answers;
    const auto before = std::chrono::system_clock::now();
    const CameraReport report = queryCamera(row.serviceUrl, kCredential, options);
    const auto after = std::chrono::system_clock::now();
    const Expected& want = row.expected;
    SCOPED_TRACE(report.error);
    if (want.state) {
        EXPECT_EQ(describe(report.state), std::string(describe(*want.state)));
    }
    if (want.auth) {
        EXPECT_EQ(int(report.auth), int(*want.auth));
    }
    if (want.cameraUtc) {
        // The offset is the camera's clock less the local clock at the call: between these.
        const auto camera = utc(*want.cameraUtc);
        EXPECT_LE(report.clockOffset, std::chrono::duration_cast<std::chrono::milliseconds>(camera - before) +
                                          std::chrono::milliseconds(1));
        EXPECT_GE(report.clockOffset, std::chrono::duration_cast<std::chrono::milliseconds>(camera - after) -
                                          std::chrono::milliseconds(1));
    }
    if (want.manufacturer) {
        EXPECT_EQ(report.manufacturer, *want.manufacturer);
    }
    if (want.model) {
        EXPECT_EQ(report.model, *want.model);
    }
    if (want.firmware) {
        EXPECT_EQ(report.firmware, *want.firmware);
    }
    if (want.serial) {
        EXPECT_EQ(report.serial, *want.serial);
    }
    if (want.hardwareId) {
        EXPECT_EQ(report.hardwareId, *want.hardwareId);
    }
    if (want.ipAddress) {
        EXPECT_EQ(report.ipAddress, *want.ipAddress);
    }
    if (want.macAddress) {
        EXPECT_EQ(report.macAddress, *want.macAddress);
    }
    if (want.mediaUrl) {
        EXPECT_EQ(report.mediaUrl, *want.mediaUrl);
    }
    if (want.profiles) {
        ASSERT_EQ(report.profiles.size(), want.profiles->size());
        for (std::size_t i = 0; i < want.profiles->size(); ++i) {
            const StreamProfile& got = report.profiles[i];
            const StreamProfile& expected = (*want.profiles)[i];
            EXPECT_EQ(got.token, expected.token) << i;
            EXPECT_EQ(got.name, expected.name) << i;
            EXPECT_EQ(got.encoding, expected.encoding) << i;
            EXPECT_EQ(got.width, expected.width) << i;
            EXPECT_EQ(got.height, expected.height) << i;
            EXPECT_EQ(got.uri, expected.uri) << i;
        }
    }
    if (want.errorIncludes) {
        EXPECT_NE(report.error.find(*want.errorIncludes), std::string::npos) << report.error;
    }
    if (want.secret) {
        EXPECT_EQ(report.error.find(*want.secret), std::string::npos);
        for (const StreamProfile& p : report.profiles) EXPECT_EQ(p.uri.find(*want.secret), std::string::npos);
    }
    if (want.firstStreamUri) {
        ASSERT_FALSE(report.profiles.empty());
        EXPECT_EQ(report.profiles.front().uri, *want.firstStreamUri);
    }
}

TEST_P(CorpusAnswers, AreAFuzzSeed) {
    const AnswerRow& row = GetParam();
    std::string seed;
    for (const std::string& answer : playback(row)) {
        if (!seed.empty()) seed += kSeedSeparator;
        seed += answer;
    }
    expectSeed("onvif_answers", "corpus-" + std::string(row.name), seed);
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusAnswers, testing::ValuesIn(kAnswerRows),
                         [](const auto& info) { return std::string(info.param.name); });

// Every file under corpus/ is some row's, so none sits there untested.
TEST(Corpus, EveryFileIsARow) {
    std::vector<std::string> used;
    for (const DiscoveryRow& row : kDiscoveryRows) used.emplace_back(row.file);
    for (const AnswerRow& row : kAnswerRows) {
        for (const Answer& answer : row.answers) used.emplace_back(answer.file);
    }
    for (const auto& entry : std::filesystem::recursive_directory_iterator(kCorpus)) {
        if (!entry.is_regular_file() || entry.path().filename() == "README.md") continue;
        const std::string file = std::filesystem::relative(entry.path(), kCorpus).generic_string();
        EXPECT_NE(std::find(used.begin(), used.end(), file), used.end()) << file << " is no row's";
    }
}

}  // namespace
}  // namespace devlet::onvif
