// WS-Discovery messages through the generated gSOAP serializers, the UsernameToken digest,
// credentials files, and hostile datagrams that must be refused without harm.

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "probes/onvif/credentials.h"
#include "probes/onvif/onvif_client.h"
#include "probes/onvif/sender_rate_limit.h"
#include "probes/onvif/soap_wire.h"
#include "probes/onvif/username_token.h"
#include "tests/support/temp_dir.h"

namespace devlet::onvif {
namespace {

const std::string kNvt = std::string("{") + kOnvifNetworkNamespace + "}NetworkVideoTransmitter";

DiscoveredEndpoint cameraEndpoint() {
    DiscoveredEndpoint e;
    e.address = "urn:uuid:3fa1fe68-b915-4053-a3e1-ac15a21f5f91";
    e.types = {kNvt};
    e.scopes = {"onvif://www.onvif.org/name/Lobby", "onvif://www.onvif.org/hardware/Cam1"};
    e.xaddrs = {"http://192.0.2.10:8080/onvif/device_service"};
    e.metadataVersion = 3;
    return e;
}

TEST(UsernameToken, MatchesTheOnvifSpecificationExample) {
    // ONVIF Application Programmer's Guide, 6.1.1.3.
    const std::string nonce = base64Decode("LKqI6G/AikKCQrN0zqZFlg==").value();
    EXPECT_EQ(passwordDigest(nonce, "2010-09-16T07:50:45Z", "userpassword"), "tuOSpGlFlIXsozq4HFNeeGeFLEI=");
}

TEST(UsernameToken, CreatedUsesTheCameraClock) {
    // A camera that lost its time (ten years behind) gets tokens stamped with its clock.
    const auto token = makeUsernameToken("admin", "pw", -std::chrono::hours(24 * 365 * 10));
    EXPECT_EQ(token.username, "admin");
    EXPECT_EQ(token.created.size(), 24u);
    EXPECT_EQ(token.created.back(), 'Z');
    EXPECT_LT(token.created,
              formatCreated(std::chrono::system_clock::now() - std::chrono::hours(24 * 365 * 9)));
    EXPECT_EQ(token.passwordDigest, passwordDigest(base64Decode(token.nonce).value(), token.created, "pw"));
    // Hours ahead is a clock off, and used.
    const auto ahead = makeUsernameToken("admin", "pw", std::chrono::hours(20));
    EXPECT_GT(ahead.created, formatCreated(std::chrono::system_clock::now() + std::chrono::hours(19)));
}

TEST(UsernameToken, ACameraClockFarAheadIsNotUsed) {
    // Whoever answers GetSystemDateAndTime chooses the offset: a token for ten years ahead
    // would stay fresh for a replay until then. Stamped with our clock instead.
    EXPECT_EQ(tokenClockOffset(std::chrono::hours(24 * 365 * 10)), std::chrono::milliseconds(0));
    EXPECT_EQ(tokenClockOffset(kMaxClockLead + std::chrono::milliseconds(1)), std::chrono::milliseconds(0));
    EXPECT_EQ(tokenClockOffset(kMaxClockLead), std::chrono::milliseconds(kMaxClockLead));
    EXPECT_EQ(tokenClockOffset(-std::chrono::hours(24 * 365 * 30)), -std::chrono::hours(24 * 365 * 30));
    const auto token = makeUsernameToken("admin", "pw", std::chrono::hours(24 * 365 * 10));
    EXPECT_LT(token.created, formatCreated(std::chrono::system_clock::now() + std::chrono::hours(1)));
}

TEST(UsernameToken, Base64RoundTrips) {
    for (const std::string& text :
         std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff\x10", 3)})
        EXPECT_EQ(base64Decode(base64Encode(text)), text);
}

TEST(DiscoveryWire, ProbeDeclaresTheOnvifNamespace) {
    const std::string probe = encodeProbe("uuid:1234");
    EXPECT_NE(probe.find("NetworkVideoTransmitter"), std::string::npos);
    EXPECT_NE(probe.find("=\"http://www.onvif.org/ver10/network/wsdl\""), std::string::npos) << probe;
    EXPECT_NE(probe.find("http://schemas.xmlsoap.org/ws/2005/04/discovery/Probe"), std::string::npos);
    EXPECT_NE(probe.find("urn:schemas-xmlsoap-org:ws:2005:04:discovery"), std::string::npos);
    std::string error;
    auto decoded = decodeDiscovery(probe, error);
    ASSERT_TRUE(decoded) << error;
    EXPECT_EQ(decoded->kind, DiscoveryKind::Probe);
    EXPECT_EQ(decoded->messageId, "uuid:1234");
    EXPECT_EQ(decoded->probeTypes, std::vector<std::string>{kNvt});
}

TEST(DiscoveryWire, ProbeMatchesRoundTrip) {
    const std::string text = encodeProbeMatches("uuid:m1", "uuid:p1", {cameraEndpoint()});
    std::string error;
    auto decoded = decodeDiscovery(text, error);
    ASSERT_TRUE(decoded) << error;
    EXPECT_EQ(decoded->kind, DiscoveryKind::ProbeMatches);
    EXPECT_EQ(decoded->messageId, "uuid:m1");
    EXPECT_EQ(decoded->relatesTo, "uuid:p1");
    ASSERT_EQ(decoded->endpoints.size(), 1u);
    EXPECT_EQ(decoded->endpoints[0], cameraEndpoint());
}

TEST(DiscoveryWire, HelloAndByeRoundTrip) {
    std::string error;
    auto hello = decodeDiscovery(encodeHello("uuid:h", cameraEndpoint()), error);
    ASSERT_TRUE(hello) << error;
    EXPECT_EQ(hello->kind, DiscoveryKind::Hello);
    EXPECT_EQ(hello->endpoints.at(0), cameraEndpoint());
    auto bye = decodeDiscovery(encodeBye("uuid:b", cameraEndpoint()), error);
    ASSERT_TRUE(bye) << error;
    EXPECT_EQ(bye->kind, DiscoveryKind::Bye);
    EXPECT_EQ(bye->endpoints.at(0).address, cameraEndpoint().address);
}

// A ProbeMatches as a camera writes it by hand: other prefixes, SOAP 1.2, the type's
// namespace declared on the element.
const char* kForeignMatch = R"(<?xml version="1.0" encoding="UTF-8"?>
<env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope"
 xmlns:a="http://schemas.xmlsoap.org/ws/2004/08/addressing"
 xmlns:d="http://schemas.xmlsoap.org/ws/2005/04/discovery"
 xmlns:dn="http://www.onvif.org/ver10/network/wsdl">
<env:Header><a:MessageID>uuid:x1</a:MessageID><a:RelatesTo>uuid:p1</a:RelatesTo>
<a:To>http://schemas.xmlsoap.org/ws/2004/08/addressing/role/anonymous</a:To>
<a:Action>http://schemas.xmlsoap.org/ws/2005/04/discovery/ProbeMatches</a:Action></env:Header>
<env:Body><d:ProbeMatches><d:ProbeMatch>
<a:EndpointReference><a:Address>urn:uuid:AAAA</a:Address></a:EndpointReference>
<d:Types>dn:NetworkVideoTransmitter</d:Types>
<d:Scopes>onvif://www.onvif.org/type/video_encoder onvif://www.onvif.org/name/X</d:Scopes>
<d:XAddrs>http://192.0.2.20/onvif/device_service http://[2001:db8::20]/onvif/device_service</d:XAddrs>
<d:MetadataVersion>1</d:MetadataVersion><d:Unknown>skipped</d:Unknown>
</d:ProbeMatch></d:ProbeMatches></env:Body></env:Envelope>)";

TEST(DiscoveryWire, CameraWrittenProbeMatchIsRead) {
    std::string error;
    auto decoded = decodeDiscovery(kForeignMatch, error);
    ASSERT_TRUE(decoded) << error;
    ASSERT_EQ(decoded->endpoints.size(), 1u);
    const DiscoveredEndpoint& e = decoded->endpoints[0];
    EXPECT_EQ(e.types, std::vector<std::string>{kNvt});
    EXPECT_TRUE(isCamera(e.types));
    EXPECT_EQ(e.xaddrs.size(), 2u);
    EXPECT_EQ(e.scopes.size(), 2u);
}

TEST(DiscoveryWire, WsdpDeviceHostIsNotACamera) {
    std::string text = kForeignMatch;
    text.replace(text.find("dn:NetworkVideoTransmitter"), std::string("dn:NetworkVideoTransmitter").size(),
                 "wsdp:Device");
    text.replace(text.find("xmlns:dn="), 0, "xmlns:wsdp=\"http://schemas.xmlsoap.org/ws/2006/02/devprof\" ");
    std::string error;
    auto decoded = decodeDiscovery(text, error);
    ASSERT_TRUE(decoded) << error;
    EXPECT_FALSE(isCamera(decoded->endpoints.at(0).types));
}

std::string withXAddrs(std::size_t count) {
    std::string xaddrs;
    for (std::size_t i = 0; i < count; ++i)
        xaddrs += "http://192.0.2." + std::to_string(i % 250) + "/x" + std::to_string(i) + " ";
    std::string text = kForeignMatch;
    const auto start = text.find("<d:XAddrs>") + 10;
    text.replace(start, text.find("</d:XAddrs>") - start, xaddrs);
    return text;
}

TEST(DiscoveryWireHostile, TenThousandXAddrsAreCut) {
    std::string error;
    auto decoded = decodeDiscovery(withXAddrs(2000), error);  // 10,000 do not fit a datagram
    if (decoded) {
        EXPECT_LE(decoded->endpoints.at(0).xaddrs.size(), kMaxXAddrsPerEndpoint);
    }
    std::string huge = withXAddrs(10000);
    EXPECT_GT(huge.size(), kMaxDatagram);
    EXPECT_FALSE(decodeDiscovery(huge, error));
}

TEST(DiscoveryWireHostile, InvalidXAddrsAreDropped) {
    std::string text = kForeignMatch;
    const auto start = text.find("<d:XAddrs>") + 10;
    text.replace(start, text.find("</d:XAddrs>") - start, "javascript:alert(1) file:///etc/passwd http:// ");
    std::string error;
    auto decoded = decodeDiscovery(text, error);
    ASSERT_TRUE(decoded) << error;
    EXPECT_TRUE(decoded->endpoints.at(0).xaddrs.empty());
}

TEST(DiscoveryWireHostile, ManyMatchesAreCut) {
    std::string matches;
    for (int i = 0; i < 300; ++i)
        matches +=
            "<d:ProbeMatch><a:EndpointReference><a:Address>urn:uuid:" + std::to_string(i) +
            "</a:Address></a:EndpointReference><d:MetadataVersion>1</d:MetadataVersion></d:ProbeMatch>";
    std::string text = kForeignMatch;
    const auto start = text.find("<d:ProbeMatch>");
    const auto end = text.find("</d:ProbeMatches>");
    text.replace(start, end - start, matches);
    std::string error;
    auto decoded = decodeDiscovery(text, error);
    ASSERT_TRUE(decoded) << error;
    EXPECT_LE(decoded->endpoints.size(), kMaxEndpointsPerMessage);
}

// --- Datagrams as cameras in the field write them ---

const std::string kDevice = std::string("{") + kOnvifDeviceNamespace + "}Device";

// A ProbeMatches as cameras built on gSOAP's wsdd send it: mustUnderstand on ReplyTo, To and
// Action, header blocks devlet does not model, two Types and XAddrs for two addresses.
const char* const kMustUnderstandMatch = R"(<?xml version="1.0" encoding="UTF-8"?>
<SOAP-ENV:Envelope xmlns:SOAP-ENV="http://www.w3.org/2003/05/soap-envelope"
 xmlns:SOAP-ENC="http://www.w3.org/2003/05/soap-encoding"
 xmlns:wsa="http://schemas.xmlsoap.org/ws/2004/08/addressing"
 xmlns:wsdd="http://schemas.xmlsoap.org/ws/2005/04/discovery"
 xmlns:tdn="http://www.onvif.org/ver10/network/wsdl" xmlns:tds="http://www.onvif.org/ver10/device/wsdl">
<SOAP-ENV:Header>
<wsa:MessageID>uuid:2419d68a-2dd2-21b2-a205-bcbac2a5e1c4</wsa:MessageID>
<wsa:RelatesTo>uuid:8f2e1ab4-7d93-4c2e-9d67-05bb1ec2a0a7</wsa:RelatesTo>
<wsa:ReplyTo SOAP-ENV:mustUnderstand="true"><wsa:Address>http://schemas.xmlsoap.org/ws/2004/08/addressing/role/anonymous</wsa:Address></wsa:ReplyTo>
<wsa:To SOAP-ENV:mustUnderstand="true">http://schemas.xmlsoap.org/ws/2004/08/addressing/role/anonymous</wsa:To>
<wsa:Action SOAP-ENV:mustUnderstand="true">http://schemas.xmlsoap.org/ws/2005/04/discovery/ProbeMatches</wsa:Action>
<wsdd:AppSequence InstanceId="1700000000" MessageNumber="7"></wsdd:AppSequence>
<vendor:Session xmlns:vendor="urn:example:vendor" SOAP-ENV:mustUnderstand="1">12</vendor:Session>
</SOAP-ENV:Header>
<SOAP-ENV:Body><wsdd:ProbeMatches><wsdd:ProbeMatch>
<wsa:EndpointReference><wsa:Address>urn:uuid:2419d68a-2dd2-21b2-a205-bcbac2a5e1c4</wsa:Address></wsa:EndpointReference>
<wsdd:Types>tdn:NetworkVideoTransmitter tds:Device</wsdd:Types>
<wsdd:Scopes>onvif://www.onvif.org/type/video_encoder onvif://www.onvif.org/Profile/Streaming onvif://www.onvif.org/hardware/DS-2CD2043G2-I onvif://www.onvif.org/name/HIKVISION%20DS-2CD2043G2-I onvif://www.onvif.org/location/city/hangzhou</wsdd:Scopes>
<wsdd:XAddrs>http://192.168.1.64/onvif/device_service http://[fe80::4619:b6ff:fe01:2345]/onvif/device_service</wsdd:XAddrs>
<wsdd:MetadataVersion>10</wsdd:MetadataVersion>
</wsdd:ProbeMatch></wsdd:ProbeMatches></SOAP-ENV:Body></SOAP-ENV:Envelope>
)";

TEST(DiscoveryField, MustUnderstandHeaderBlocksAreIgnored) {
    std::string error;
    auto decoded = decodeDiscovery(kMustUnderstandMatch, error);
    ASSERT_TRUE(decoded) << error;
    EXPECT_EQ(decoded->kind, DiscoveryKind::ProbeMatches);
    EXPECT_EQ(decoded->messageId, "uuid:2419d68a-2dd2-21b2-a205-bcbac2a5e1c4");
    EXPECT_EQ(decoded->relatesTo, "uuid:8f2e1ab4-7d93-4c2e-9d67-05bb1ec2a0a7");
    ASSERT_EQ(decoded->endpoints.size(), 1u);
    const DiscoveredEndpoint& e = decoded->endpoints[0];
    EXPECT_EQ(endpointUuid(e.address), "2419d68a-2dd2-21b2-a205-bcbac2a5e1c4");
    EXPECT_EQ(e.types, (std::vector<std::string>{kNvt, kDevice}));
    EXPECT_TRUE(isCamera(e.types));
    EXPECT_EQ(e.scopes.size(), 5u);
    EXPECT_EQ(e.xaddrs,
              (std::vector<std::string>{"http://192.168.1.64/onvif/device_service",
                                        "http://[fe80::4619:b6ff:fe01:2345]/onvif/device_service"}));
    EXPECT_EQ(e.metadataVersion, 10u);
}

// SOAP 1.1 with WS-Addressing 2005/08: older firmware and WS-Discovery stacks of PCs.
TEST(DiscoveryField, Soap11AndAddressing2005AreRead) {
    const char* text = R"(<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"
 xmlns:a="http://www.w3.org/2005/08/addressing" xmlns:d="http://schemas.xmlsoap.org/ws/2005/04/discovery">
<s:Header><a:Action s:mustUnderstand="1">http://schemas.xmlsoap.org/ws/2005/04/discovery/Hello</a:Action>
<a:MessageID>urn:uuid:5b1f0d4e-63a2-4e7a-bd2f-2f3c1a9e8d11</a:MessageID>
<a:To s:mustUnderstand="1">urn:schemas-xmlsoap-org:ws:2005:04:discovery</a:To></s:Header>
<s:Body><d:Hello><a:EndpointReference><a:Address>urn:uuid:00075f8a-1b2c-4d3e-8f40-001a2b3c4d5e</a:Address></a:EndpointReference>
<d:Types xmlns:dn="http://www.onvif.org/ver10/network/wsdl">dn:NetworkVideoTransmitter</d:Types>
<d:XAddrs>http://10.0.0.21:80/onvif/device_service</d:XAddrs><d:MetadataVersion>1</d:MetadataVersion></d:Hello></s:Body></s:Envelope>)";
    std::string error;
    auto decoded = decodeDiscovery(text, error);
    ASSERT_TRUE(decoded) << error;
    EXPECT_EQ(decoded->kind, DiscoveryKind::Hello);
    EXPECT_EQ(decoded->messageId, "urn:uuid:5b1f0d4e-63a2-4e7a-bd2f-2f3c1a9e8d11");
    ASSERT_EQ(decoded->endpoints.size(), 1u);
    EXPECT_EQ(endpointUuid(decoded->endpoints[0].address), "00075f8a-1b2c-4d3e-8f40-001a2b3c4d5e");
    EXPECT_TRUE(isCamera(decoded->endpoints[0].types));
    EXPECT_EQ(decoded->endpoints[0].xaddrs.size(), 1u);
}

// WS-Discovery 1.1 (OASIS, 2009/01) with WS-Addressing 2005/08 and a default namespace.
TEST(DiscoveryField, OasisDiscoveryWithADefaultNamespaceIsRead) {
    const char* text = R"(<env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope"
 xmlns:wsa="http://www.w3.org/2005/08/addressing">
<env:Header><wsa:MessageID>urn:uuid:a1</wsa:MessageID><wsa:RelatesTo>urn:uuid:p1</wsa:RelatesTo></env:Header>
<env:Body><ProbeMatches xmlns="http://docs.oasis-open.org/ws-dd/ns/discovery/2009/01"><ProbeMatch>
<wsa:EndpointReference><wsa:Address>urn:uuid:C0FFEE00-0000-4000-8000-000000000001</wsa:Address></wsa:EndpointReference>
<Types>NetworkVideoTransmitter</Types>
<XAddrs>https://10.0.0.22/onvif/device_service</XAddrs><MetadataVersion>3</MetadataVersion>
</ProbeMatch></ProbeMatches></env:Body></env:Envelope>)";
    std::string error;
    auto decoded = decodeDiscovery(text, error);
    ASSERT_TRUE(decoded) << error;
    EXPECT_EQ(decoded->kind, DiscoveryKind::ProbeMatches);
    EXPECT_EQ(decoded->relatesTo, "urn:uuid:p1");
    ASSERT_EQ(decoded->endpoints.size(), 1u);
    EXPECT_EQ(endpointUuid(decoded->endpoints[0].address), "c0ffee00-0000-4000-8000-000000000001");
    EXPECT_EQ(decoded->endpoints[0].types, std::vector<std::string>{kNvt});
    EXPECT_EQ(decoded->endpoints[0].metadataVersion, 3u);
}

std::string matchWithTypes(const std::string& typesElement, const std::string& scopes = "") {
    return R"(<env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope"
 xmlns:a="http://schemas.xmlsoap.org/ws/2004/08/addressing" xmlns:d="http://schemas.xmlsoap.org/ws/2005/04/discovery">
<env:Header><a:MessageID>uuid:m</a:MessageID><a:RelatesTo>uuid:p</a:RelatesTo></env:Header>
<env:Body><d:ProbeMatches><d:ProbeMatch><a:EndpointReference><a:Address>urn:uuid:abc</a:Address></a:EndpointReference>)" +
           typesElement + (scopes.empty() ? "" : "<d:Scopes>" + scopes + "</d:Scopes>") +
           R"(<d:XAddrs>http://10.0.0.30/onvif/device_service</d:XAddrs><d:MetadataVersion>1</d:MetadataVersion>
</d:ProbeMatch></d:ProbeMatches></env:Body></env:Envelope>)";
}

std::vector<std::string> typesOf(const std::string& text) {
    std::string error;
    auto decoded = decodeDiscovery(text, error);
    EXPECT_TRUE(decoded) << error;
    return decoded && !decoded->endpoints.empty() ? decoded->endpoints[0].types : std::vector<std::string>{};
}

// Akri's issue 486: a camera whose Types uses a prefix it never declares.
TEST(DiscoveryField, UndeclaredPrefixOnNetworkVideoTransmitterIsACamera) {
    const auto types = typesOf(matchWithTypes("<d:Types>dn:NetworkVideoTransmitter</d:Types>"));
    EXPECT_EQ(types, std::vector<std::string>{kNvt});
    EXPECT_TRUE(isCamera(types));
}

// Akri's issue 659: a camera that answers as tds:Device only, the prefix undeclared.
TEST(DiscoveryField, UndeclaredTdsDeviceIsACamera) {
    const auto types = typesOf(matchWithTypes("<d:Types>tds:Device</d:Types>"));
    EXPECT_EQ(types, std::vector<std::string>{kDevice});
    EXPECT_TRUE(isCamera(types));
}

TEST(DiscoveryField, DefaultNamespaceOfTypesIsUsed) {
    const auto types = typesOf(matchWithTypes(
        "<d:Types xmlns=\"http://www.onvif.org/ver10/network/wsdl\">NetworkVideoTransmitter</d:Types>"));
    EXPECT_EQ(types, std::vector<std::string>{kNvt});
}

TEST(DiscoveryField, UnusualDeclaredPrefixIsResolvedByItsNamespace) {
    const auto types =
        typesOf(matchWithTypes("<d:Types "
                               "xmlns:onvifnet=\"http://www.onvif.org/ver10/network/"
                               "wsdl\">onvifnet:NetworkVideoTransmitter</d:Types>"));
    EXPECT_EQ(types, std::vector<std::string>{kNvt});
}

// Only the ONVIF names are guessed: an undeclared wsdp:Device (a Windows host) is no camera,
// and a declared prefix bound elsewhere keeps its namespace.
TEST(DiscoveryField, OtherUndeclaredOrForeignTypesAreNoCamera) {
    EXPECT_FALSE(isCamera(typesOf(matchWithTypes("<d:Types>wsdp:Device</d:Types>"))));
    EXPECT_FALSE(isCamera(typesOf(
        matchWithTypes("<d:Types xmlns:dn=\"urn:example:printer\">dn:NetworkVideoTransmitter</d:Types>"))));
}

TEST(DiscoveryField, MissingTypesWithOnvifScopesIsACamera) {
    EXPECT_TRUE(isCamera(typesOf(matchWithTypes("", "onvif://www.onvif.org/type/video_encoder"))));
    EXPECT_FALSE(isCamera(typesOf(matchWithTypes("", "ldap:///ou=printers"))));
    EXPECT_FALSE(isCamera(typesOf(matchWithTypes(""))));
}

// An NVR answers for its channels in one ProbeMatches; one match without an address does
// not cost the others.
TEST(DiscoveryField, SeveralProbeMatchesInOneAnswer) {
    std::string text = kMustUnderstandMatch;
    const std::string one = text.substr(text.find("<wsdd:ProbeMatch>"),
                                        text.find("</wsdd:ProbeMatches>") - text.find("<wsdd:ProbeMatch>"));
    std::string second = one;
    second.replace(second.find("2419d68a"), 8, "3529e79b");
    const std::string broken =
        "<wsdd:ProbeMatch><wsdd:Types>tdn:NetworkVideoTransmitter</wsdd:Types></wsdd:ProbeMatch>";
    text.insert(text.find("</wsdd:ProbeMatches>"), broken + second);
    std::string error;
    auto decoded = decodeDiscovery(text, error);
    ASSERT_TRUE(decoded) << error;
    ASSERT_EQ(decoded->endpoints.size(), 2u);
    EXPECT_EQ(decoded->droppedEndpoints, 1u);
    EXPECT_NE(decoded->endpoints[0].address, decoded->endpoints[1].address);
}

TEST(DiscoveryField, AMatchWithoutAnAddressIsNamedInTheError) {
    const char* text = R"(<env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope"
 xmlns:a="http://schemas.xmlsoap.org/ws/2004/08/addressing" xmlns:d="http://schemas.xmlsoap.org/ws/2005/04/discovery">
<env:Body><d:ProbeMatches><d:ProbeMatch><a:EndpointReference></a:EndpointReference></d:ProbeMatch></d:ProbeMatches>
</env:Body></env:Envelope>)";
    std::string error;
    EXPECT_FALSE(decodeDiscovery(text, error));
    EXPECT_NE(error.find("ProbeMatch 1 has no EndpointReference/Address"), std::string::npos) << error;
}

TEST(DiscoveryField, ByteOrderMarkCharsetAndTrailingNulsAreRead) {
    std::string text = kMustUnderstandMatch;
    text.replace(text.find("UTF-8"), 5, "ISO-8859-1");
    text = "\xef\xbb\xbf" + text + std::string(64, '\0');
    std::string error;
    auto decoded = decodeDiscovery(text, error);
    ASSERT_TRUE(decoded) << error;
    EXPECT_EQ(decoded->endpoints.size(), 1u);
}

TEST(DiscoveryField, MetadataVersionThatIsNoNumberReadsAsZero) {
    std::string text = matchWithTypes("<d:Types>dn:NetworkVideoTransmitter</d:Types>");
    text.replace(text.find("<d:MetadataVersion>1<"), 21, "<d:MetadataVersion>x1<");
    std::string error;
    auto decoded = decodeDiscovery(text, error);
    ASSERT_TRUE(decoded) << error;
    EXPECT_EQ(decoded->endpoints.at(0).metadataVersion, 0u);
}

TEST(DiscoveryField, HelloWithoutXAddrsAndItsResolveRoundTrip) {
    DiscoveredEndpoint bare = cameraEndpoint();
    bare.xaddrs.clear();
    std::string error;
    auto hello = decodeDiscovery(encodeHello("uuid:h2", bare), error);
    ASSERT_TRUE(hello) << error;
    EXPECT_TRUE(hello->endpoints.at(0).xaddrs.empty());
    EXPECT_TRUE(isCamera(hello->endpoints.at(0).types));

    auto resolve = decodeDiscovery(encodeResolve("uuid:r1", bare.address), error);
    ASSERT_TRUE(resolve) << error;
    EXPECT_EQ(resolve->kind, DiscoveryKind::Resolve);
    EXPECT_EQ(resolve->messageId, "uuid:r1");
    EXPECT_EQ(resolve->endpoints.at(0).address, bare.address);

    auto matches = decodeDiscovery(encodeResolveMatches("uuid:r2", "uuid:r1", cameraEndpoint()), error);
    ASSERT_TRUE(matches) << error;
    EXPECT_EQ(matches->kind, DiscoveryKind::ResolveMatches);
    EXPECT_EQ(matches->relatesTo, "uuid:r1");
    ASSERT_EQ(matches->endpoints.size(), 1u);
    EXPECT_EQ(matches->endpoints[0], cameraEndpoint());
}

TEST(DiscoveryField, CameraWrittenResolveMatchesIsRead) {
    const char* text = R"(<?xml version="1.0" encoding="utf-8"?><SOAP-ENV:Envelope
 xmlns:SOAP-ENV="http://www.w3.org/2003/05/soap-envelope" xmlns:wsa="http://schemas.xmlsoap.org/ws/2004/08/addressing"
 xmlns:d="http://schemas.xmlsoap.org/ws/2005/04/discovery" xmlns:dn="http://www.onvif.org/ver10/network/wsdl">
<SOAP-ENV:Header><wsa:MessageID>uuid:rm1</wsa:MessageID><wsa:RelatesTo>uuid:r1</wsa:RelatesTo>
<wsa:ReplyTo SOAP-ENV:mustUnderstand="true"><wsa:Address>x</wsa:Address></wsa:ReplyTo></SOAP-ENV:Header>
<SOAP-ENV:Body><d:ResolveMatches><d:ResolveMatch><wsa:EndpointReference><wsa:Address>urn:uuid:abc</wsa:Address></wsa:EndpointReference>
<d:Types>dn:NetworkVideoTransmitter</d:Types><d:XAddrs>http://10.0.0.40/onvif/device_service</d:XAddrs>
<d:MetadataVersion>2</d:MetadataVersion></d:ResolveMatch></d:ResolveMatches></SOAP-ENV:Body></SOAP-ENV:Envelope>)";
    std::string error;
    auto decoded = decodeDiscovery(text, error);
    ASSERT_TRUE(decoded) << error;
    EXPECT_EQ(decoded->kind, DiscoveryKind::ResolveMatches);
    EXPECT_EQ(decoded->endpoints.at(0).xaddrs,
              std::vector<std::string>{"http://10.0.0.40/onvif/device_service"});
    EXPECT_EQ(decoded->endpoints.at(0).metadataVersion, 2u);
}

TEST(DiscoveryField, AFaultIsNoDiscoveryMessage) {
    const char* text =
        R"(<env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope"><env:Body><env:Fault>
<env:Code><env:Value>env:Sender</env:Value></env:Code></env:Fault></env:Body></env:Envelope>)";
    std::string error;
    EXPECT_FALSE(decodeDiscovery(text, error));
    EXPECT_NE(error.find("Fault"), std::string::npos) << error;
}

TEST(DiscoveryField, UrlHostIsComparedWithTheSenderByAddress) {
    EXPECT_TRUE(urlHostIs("http://192.168.1.64/onvif/device_service", "192.168.1.64"));
    EXPECT_TRUE(urlHostIs("http://192.168.1.64:8080/onvif/device_service", "::ffff:192.168.1.64"));
    EXPECT_FALSE(urlHostIs("http://192.168.1.65/onvif/device_service", "192.168.1.64"));
    EXPECT_TRUE(
        urlHostIs("http://[fe80::4619:b6ff:fe01:2345%25eth0]/onvif", "fe80::4619:b6ff:fe01:2345%eth0"));
    EXPECT_TRUE(urlHostIs("http://[2001:db8::0:34]:8080/x", "2001:db8::34"));
    // Host names are not resolved: they never match.
    EXPECT_FALSE(urlHostIs("http://camera.local/onvif/device_service", "192.168.1.64"));
    EXPECT_FALSE(urlHostIs("http://user@192.168.1.64@192.168.1.99/x", "192.168.1.64"));
}

// --- The per-sender rate limit (times are given, not waited for) ---

TEST(SenderRateLimit, ABurstIsAdmittedThenTheRate) {
    SenderRateLimit limit(4, 2);
    const auto start = SenderRateLimit::Clock::time_point{} + std::chrono::hours(1);
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(limit.admit("192.0.2.9", start)) << i;
    EXPECT_FALSE(limit.admit("192.0.2.9", start));
    // Another sender has a bucket of its own.
    EXPECT_TRUE(limit.admit("192.0.2.10", start));
    // Half a second later one more (2 a second), not two.
    EXPECT_TRUE(limit.admit("192.0.2.9", start + std::chrono::milliseconds(500)));
    EXPECT_FALSE(limit.admit("192.0.2.9", start + std::chrono::milliseconds(500)));
    // An idle sender's bucket fills up to the burst, no further.
    const auto later = start + std::chrono::minutes(5);
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(limit.admit("192.0.2.9", later)) << i;
    EXPECT_FALSE(limit.admit("192.0.2.9", later));
}

TEST(SenderRateLimit, TrackedSendersAreBounded) {
    SenderRateLimit limit(2, 1, 3);
    const auto start = SenderRateLimit::Clock::time_point{} + std::chrono::hours(1);
    for (const char* sender : {"a", "b", "c"}) EXPECT_TRUE(limit.admit(sender, start));
    // All three buckets are in use: a fourth sender waits.
    EXPECT_FALSE(limit.admit("d", start));
    EXPECT_EQ(limit.trackedSenders(), 3u);
    // Once their buckets are full again they are forgotten and the new sender is tracked.
    EXPECT_TRUE(limit.admit("d", start + std::chrono::seconds(2)));
    EXPECT_LE(limit.trackedSenders(), 3u);
}

class HostileDatagram : public ::testing::TestWithParam<std::string> {};

TEST_P(HostileDatagram, IsRefusedWithAMessage) {
    std::string error;
    EXPECT_FALSE(decodeDiscovery(GetParam(), error));
    EXPECT_FALSE(error.empty());
}

std::string deepNesting() {
    std::string text = "<env:Envelope xmlns:env=\"http://www.w3.org/2003/05/soap-envelope\"><env:Body>";
    for (int i = 0; i < 5000; ++i) text += "<a>";
    return text;
}

INSTANTIATE_TEST_SUITE_P(
    Inputs, HostileDatagram,
    ::testing::Values(std::string(), std::string("not xml at all"), std::string("<"), std::string(1000, '<'),
                      std::string("\0\0\0\xff", 4), std::string(kForeignMatch).substr(0, 400),
                      // Billion laughs: gSOAP refuses DTDs.
                      std::string("<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\"><!ENTITY lol2 "
                                  "\"&lol;&lol;&lol;&lol;&lol;&lol;\">]><env:Envelope "
                                  "xmlns:env=\"http://www.w3.org/2003/05/soap-envelope\"><env:Body>&lol2;"
                                  "</env:Body></env:Envelope>"),
                      // The right element names in the wrong namespace.
                      std::string("<env:Envelope xmlns:env=\"http://www.w3.org/2003/05/soap-envelope\" "
                                  "xmlns:d=\"urn:not-discovery\"><env:Body><d:ProbeMatches/></env:Body>"
                                  "</env:Envelope>"),
                      // Not a SOAP envelope.
                      std::string("<Envelope><Body><ProbeMatches/></Body></Envelope>"), deepNesting(),
                      std::string(kMaxDatagram + 1, ' ')));

TEST(StreamUri, CredentialsAreRemoved) {
    EXPECT_EQ(withoutCredentials("rtsp://admin:secret@192.0.2.10:554/main"), "rtsp://192.0.2.10:554/main");
    EXPECT_EQ(withoutCredentials("rtsp://192.0.2.10/main?x=1"), "rtsp://192.0.2.10/main?x=1");
    EXPECT_EQ(withoutCredentials("rtsp://u@h"), "rtsp://h");
    EXPECT_EQ(withoutCredentials("javascript:alert(1)"), "");
    EXPECT_EQ(withoutCredentials("rtsp://host/a b"), "");
}

// Xiongmai firmware's GetStreamUri (tests/probes/onvif/corpus/xiongmai): user and password
// in the path, where no user information rule reaches.
TEST(StreamUri, PasswordInAnUnderscorePathLosesItsValue) {
    EXPECT_EQ(withoutCredentials("rtsp://192.168.1.36:554/user=admin_password=tlJwpbo6_channel=1_stream=0.sdp"
                                 "?real_stream"),
              "rtsp://192.168.1.36:554/user=admin_password=_channel=1_stream=0.sdp?real_stream");
}

TEST(StreamUri, PasswordAfterEachDelimiterLosesItsValue) {
    EXPECT_EQ(withoutCredentials("rtsp://h/live?user=admin&password=s3cret&channel=1"),
              "rtsp://h/live?user=admin&password=&channel=1");
    EXPECT_EQ(withoutCredentials("rtsp://h/user=admin&password=s3cret&channel=1&stream=0.sdp?"),
              "rtsp://h/user=admin&password=&channel=1&stream=0.sdp?");
    EXPECT_EQ(withoutCredentials("rtsp://h/live;user=admin;pwd=s3cret;channel=1"),
              "rtsp://h/live;user=admin;pwd=;channel=1");
    EXPECT_EQ(withoutCredentials("rtsp://h/pass=s3cret/ch1"), "rtsp://h/pass=/ch1");
    EXPECT_EQ(withoutCredentials("rtsp://h/live?passwd=s3cret"), "rtsp://h/live?passwd=");
    EXPECT_EQ(withoutCredentials("rtsp://h/live/passwd=s3cret?x=1"), "rtsp://h/live/passwd=?x=1");
}

TEST(StreamUri, PasswordNamesMatchInAnyCase) {
    EXPECT_EQ(withoutCredentials("rtsp://h/live?PassWord=s3cret&PWD=s3cret&Pass=s3cret&PASSWD=s3cret"),
              "rtsp://h/live?PassWord=&PWD=&Pass=&PASSWD=");
}

TEST(StreamUri, EveryPasswordParameterLosesItsValue) {
    EXPECT_EQ(withoutCredentials("rtsp://admin:s3cret@h/a_pwd=s3cret_b=1?password=s3cret&pwd=s3cret#top"),
              "rtsp://h/a_pwd=_b=1?password=&pwd=#top");
}

// A value ends at the next parameter, not at the first character that could end one: no part
// of a password with '_', '/' or '?' in it is left behind.
TEST(StreamUri, APasswordWithDelimitersInItIsLeftOutWhole) {
    EXPECT_EQ(withoutCredentials("rtsp://h/user=admin_password=ab_cd_channel=1"),
              "rtsp://h/user=admin_password=_channel=1");
    EXPECT_EQ(withoutCredentials("rtsp://h/live?password=a/b?c_d&channel=1"),
              "rtsp://h/live?password=&channel=1");
    EXPECT_EQ(withoutCredentials("rtsp://h/user=admin_password=ab_"), "rtsp://h/user=admin_password=");
}

TEST(StreamUri, NamesThatOnlyLookLikePasswordsAreKept) {
    for (const std::string uri :
         {"rtsp://h/live?passage=1&compass=2", "rtsp://h/compass=2/passage=1", "rtsp://h/live?bypass=3",
          "rtsp://h/passwords=4", "rtsp://h/live?user=password", "rtsp://h/live?password",
          "rtsp://h/live?x=password=5", "rtsp://h/my-pwd=6", "rtsp://h/live?password%3D7",
          "rtsp://pass.example/live"})
        EXPECT_EQ(withoutCredentials(uri), uri);
}

TEST(StreamUri, AnEmptyPasswordStaysEmpty) {
    EXPECT_EQ(withoutCredentials("rtsp://h/user=admin_password=_channel=1"),
              "rtsp://h/user=admin_password=_channel=1");
    EXPECT_EQ(withoutCredentials("rtsp://h/live?password=&pwd="), "rtsp://h/live?password=&pwd=");
}

// tt:IPv4Configuration of GetNetworkInterfaces: which listed address the camera uses.
TEST(NetworkInterface, DhcpOnTakesTheAddressFromDhcpOverAStaleManualOne) {
    // The Axis M5525-E of tests/probes/onvif/corpus/axis.
    EXPECT_EQ(ipv4AddressInUse({.manual = {"192.168.0.90"},
                                .linkLocal = "169.254.148.62",
                                .fromDhcp = "192.168.4.12",
                                .dhcp = "true"}),
              "192.168.4.12");
}

TEST(NetworkInterface, DhcpOnWithoutALeaseTakesTheLinkLocalAddress) {
    EXPECT_EQ(ipv4AddressInUse({.manual = {"192.168.0.90"}, .linkLocal = "169.254.148.62", .dhcp = "true"}),
              "169.254.148.62");
    EXPECT_EQ(ipv4AddressInUse({.linkLocal = "169.254.148.62", .fromDhcp = "0.0.0.0", .dhcp = "true"}),
              "169.254.148.62");
}

TEST(NetworkInterface, DhcpOnNeverTakesTheManualAddress) {
    EXPECT_EQ(ipv4AddressInUse({.manual = {"192.168.0.90"}, .dhcp = "true"}), "");
}

TEST(NetworkInterface, DhcpOffTakesTheManualAddress) {
    EXPECT_EQ(ipv4AddressInUse({.manual = {"192.0.2.5", "192.0.2.6"},
                                .linkLocal = "169.254.1.2",
                                .fromDhcp = "192.0.2.99",
                                .dhcp = "false"}),
              "192.0.2.5");
    EXPECT_EQ(ipv4AddressInUse({.linkLocal = "169.254.1.2", .fromDhcp = "192.0.2.99", .dhcp = "false"}),
              "169.254.1.2");
}

TEST(NetworkInterface, DhcpIsReadAsAnXmlSchemaBoolean) {
    const Ipv4Configuration both{.manual = {"192.0.2.5"}, .fromDhcp = "192.0.2.99"};
    for (const char* on : {"true", "1", " True\n", "TRUE"}) {
        Ipv4Configuration config = both;
        config.dhcp = on;
        EXPECT_EQ(ipv4AddressInUse(config), "192.0.2.99") << on;
    }
    for (const char* off : {"false", "0", "False"}) {
        Ipv4Configuration config = both;
        config.dhcp = off;
        EXPECT_EQ(ipv4AddressInUse(config), "192.0.2.5") << off;
    }
}

// A camera that leaves DHCP out (or writes something else) is read as it lists its addresses.
TEST(NetworkInterface, WithoutDhcpTheFirstListedAddressIsTaken) {
    EXPECT_EQ(ipv4AddressInUse({.manual = {"192.0.2.5"}, .fromDhcp = "192.0.2.99"}), "192.0.2.5");
    EXPECT_EQ(ipv4AddressInUse({.manual = {"192.0.2.5"}, .fromDhcp = "192.0.2.99", .dhcp = "yes"}),
              "192.0.2.5");
    EXPECT_EQ(ipv4AddressInUse({.linkLocal = "169.254.1.2", .fromDhcp = "192.0.2.99"}), "192.0.2.99");
    EXPECT_EQ(ipv4AddressInUse({.linkLocal = "169.254.1.2"}), "169.254.1.2");
}

TEST(NetworkInterface, WhatIsNotAnIpv4AddressIsPassedOver) {
    EXPECT_EQ(
        ipv4AddressInUse({.manual = {"", "0.0.0.0", "camera.local", "fe80::1", "192.0.2.300", " 192.0.2.7 "},
                          .dhcp = "false"}),
        "192.0.2.7");
    EXPECT_EQ(ipv4AddressInUse({.fromDhcp = "192.0.2", .dhcp = "true"}), "");
    EXPECT_EQ(ipv4AddressInUse({}), "");
}

TEST(Credentials, ErrorsNeverQuoteAPassword) {
    CredentialStore store;
    Outcome bad = CredentialStore::parse("default: {username: admin, pasword: hunter2}\n", "test", store);
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().find("hunter2"), std::string::npos) << bad.error();
    EXPECT_NE(bad.error().find("did you mean \"password\""), std::string::npos) << bad.error();
    Outcome broken =
        CredentialStore::parse("default: {username: admin, password: \"hunter2\n", "test", store);
    ASSERT_FALSE(broken);
    EXPECT_EQ(broken.error().find("hunter2"), std::string::npos) << broken.error();
}

TEST(Credentials, FileReadableByOthersIsRefused) {
    test::TempDir dir;
    const std::string path = (dir.path() / "credentials.yaml").string();
    test::writeFile(path, "networks: [192.0.2.0/24]\ndefault: {username: admin, password: pw}\n");
    chmod(path.c_str(), 0644);
    CredentialStore store;
    Outcome refused = CredentialStore::load(path, store);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().find("chmod 600"), std::string::npos);
    chmod(path.c_str(), 0600);
    ASSERT_TRUE(CredentialStore::load(path, store));
    EXPECT_EQ(store.find("", "192.0.2.1", "").credential->username, "admin");
}

// HTTP Digest, with a camera's answers played back (QueryOptions::playback) in call order.
std::string soapAnswer(const std::string& status, const std::string& body) {
    const std::string envelope =
        "<?xml version=\"1.0\"?><s:Envelope xmlns:s=\"http://www.w3.org/2003/05/soap-envelope\" "
        "xmlns:tds=\"http://www.onvif.org/ver10/device/wsdl\" xmlns:tt=\"http://www.onvif.org/ver10/schema\" "
        "xmlns:ter=\"http://www.onvif.org/ver10/error\"><s:Body>" +
        body + "</s:Body></s:Envelope>";
    return "HTTP/1.1 " + status +
           "\r\nContent-Type: application/soap+xml\r\nContent-Length: " + std::to_string(envelope.size()) +
           "\r\n\r\n" + envelope;
}

const std::string kTime = soapAnswer("200 OK",
                                     "<tds:GetSystemDateAndTimeResponse><tds:SystemDateAndTime/>"
                                     "</tds:GetSystemDateAndTimeResponse>");
const std::string kCapabilities = soapAnswer(
    "200 OK",
    "<tds:GetCapabilitiesResponse><tds:Capabilities><tt:Media><tt:XAddr>http://192.0.2.10/onvif/media"
    "</tt:XAddr></tt:Media></tds:Capabilities></tds:GetCapabilitiesResponse>");
const std::string kDeviceInformation =
    soapAnswer("200 OK",
               "<tds:GetDeviceInformationResponse><tds:Manufacturer>Acme</tds:Manufacturer>"
               "</tds:GetDeviceInformationResponse>");
const std::string kNotAuthorized =
    soapAnswer("400 Bad Request",
               "<s:Fault><s:Code><s:Value>s:Sender</s:Value><s:Subcode><s:Value>"
               "ter:NotAuthorized</s:Value></s:Subcode></s:Code><s:Reason><s:Text "
               "xml:lang=\"en\">Sender not Authorized</s:Text></s:Reason></s:Fault>");

std::string challenge(const std::string& parameters) {
    return "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Digest realm=\"cam\", nonce=\"6d2f1a\", " +
           parameters + "\r\nContent-Length: 0\r\n\r\n";
}

CameraReport played(const std::vector<std::string>& answers, AuthScheme known = AuthScheme::Unknown) {
    QueryOptions options;
    options.playback = &answers;
    options.authScheme = known;
    return queryCamera("http://192.0.2.10/onvif/device_service", Credential{"admin", "pw-Secret"}, options);
}

TEST(HttpDigest, AChallengeIsAnsweredWithDigestAlone) {
    for (const char* algorithm : {"MD5", "SHA-256", "MD5-sess"}) {
        const CameraReport report = played(
            {kTime, kCapabilities, challenge(std::string("qop=\"auth,auth-int\", algorithm=") + algorithm),
             kDeviceInformation});
        EXPECT_EQ(report.state, CameraState::UpWithAuth) << algorithm << ": " << report.error;
        EXPECT_EQ(report.auth, AuthResult::Accepted) << algorithm;
        EXPECT_EQ(report.authScheme, AuthScheme::HttpDigest) << algorithm;
        EXPECT_EQ(report.manufacturer, "Acme") << algorithm;
    }
}

// A Dahua camera's challenge as it was captured (tests/probes/onvif/corpus/dahua): no space
// after a comma, an empty opaque, stale=false.
TEST(HttpDigest, ARealCamerasChallengeIsAnswered) {
    const std::string dahua =
        "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/soap+xml; charset=utf-8\r\nConnection: "
        "close\r\n"
        "WWW-Authenticate: Digest realm=\"Login to 0ccf58c7410332c7caa363406561b351\",qop=\"auth\","
        "nonce=\"b252aWYtZGlnZXN0OjQ1MzAxNTI3MDYw\", opaque=\"\", stale=\"false\"\r\nContent-Length: "
        "0\r\n\r\n";
    const CameraReport report = played({kTime, kCapabilities, dahua, kDeviceInformation});
    EXPECT_EQ(report.auth, AuthResult::Accepted) << report.error;
    EXPECT_EQ(report.authScheme, AuthScheme::HttpDigest);
}

TEST(HttpDigest, ACameraThatStillWantsATokenGetsBoth) {
    const CameraReport report =
        played({kTime, kCapabilities, challenge("qop=\"auth\""), kNotAuthorized, kDeviceInformation});
    EXPECT_EQ(report.auth, AuthResult::Accepted) << report.error;
    EXPECT_EQ(report.authScheme, AuthScheme::Both);
}

TEST(HttpDigest, AKnownDigestCameraIsAnsweredAtItsFirstChallenge) {
    const CameraReport report =
        played({kTime, kCapabilities, challenge("qop=\"auth\", algorithm=SHA-256"), kDeviceInformation},
               AuthScheme::HttpDigest);
    EXPECT_EQ(report.auth, AuthResult::Accepted) << report.error;
    EXPECT_EQ(report.authScheme, AuthScheme::HttpDigest);
}

TEST(HttpDigest, WhatDevletCannotAnswerIsSaid) {
    const CameraReport intOnly = played({kTime, kCapabilities, challenge("qop=\"auth-int\"")});
    EXPECT_EQ(intOnly.auth, AuthResult::Refused);
    EXPECT_NE(intOnly.error.find("qop=auth-int, which devlet does not support"), std::string::npos)
        << intOnly.error;
    const CameraReport sha512 =
        played({kTime, kCapabilities, challenge("qop=\"auth\", algorithm=SHA-512-256")});
    EXPECT_EQ(sha512.auth, AuthResult::Refused);
    EXPECT_NE(sha512.error.find("algorithm devlet does not support"), std::string::npos) << sha512.error;
    // Refused twice: the Digest answer itself was wrong.
    const CameraReport refused =
        played({kTime, kCapabilities, challenge("qop=\"auth\""), challenge("qop=\"auth\"")});
    EXPECT_EQ(refused.auth, AuthResult::Refused);
    EXPECT_EQ(refused.error, "authentication failed");
    for (const CameraReport* report : {&intOnly, &sha512, &refused})
        EXPECT_EQ(report->error.find("pw-Secret"), std::string::npos);
}

TEST(HttpDigest, NoCredentialNoDigest) {
    const std::vector<std::string> answers = {kTime, kCapabilities, challenge("qop=\"auth\"")};
    QueryOptions options;
    options.playback = &answers;
    options.credentialWithheld = "no credential for this address: outside the credentials file's networks";
    const CameraReport report = queryCamera("http://192.0.2.10/onvif/device_service", std::nullopt, options);
    EXPECT_EQ(report.auth, AuthResult::NoCredentials);
    EXPECT_EQ(report.error, "the camera needs credentials; " + options.credentialWithheld);
}

}  // namespace
}  // namespace devlet::onvif
