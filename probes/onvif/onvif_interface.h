// clang-format off
// gSOAP interface syntax (`@` attributes, `//gsoap` directives), not C++.
// The gSOAP interface of the ONVIF and WS-Discovery messages devlet sends and reads, written
// by hand: only the operations and members that are used. soapcpp2 turns it into the
// serializers at build time (probes/onvif/meson.build). Unknown elements in answers are
// skipped (gSOAP's lax mode), so a type lists only what is read. WS-Discovery types are only
// written with these serializers: datagrams are read through gSOAP's DOM (soap_wire.cpp), which
// accepts the namespace variants and header blocks cameras send.

//gsoap wsa schema namespace: http://schemas.xmlsoap.org/ws/2004/08/addressing
//gsoap wsa schema elementForm: qualified
//gsoap wsdd schema namespace: http://schemas.xmlsoap.org/ws/2005/04/discovery
//gsoap wsdd schema elementForm: qualified
//gsoap wsse schema namespace: http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd
//gsoap wsse schema elementForm: qualified
//gsoap wsu schema namespace: http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-utility-1.0.xsd
//gsoap wsu schema elementForm: qualified
//gsoap tt schema namespace: http://www.onvif.org/ver10/schema
//gsoap tt schema elementForm: qualified
//gsoap tdn schema namespace: http://www.onvif.org/ver10/network/wsdl
//gsoap tdn schema elementForm: qualified
//gsoap tds schema namespace: http://www.onvif.org/ver10/device/wsdl
//gsoap tds schema elementForm: qualified
//gsoap trt schema namespace: http://www.onvif.org/ver10/media/wsdl
//gsoap trt schema elementForm: qualified
//gsoap tr2 schema namespace: http://www.onvif.org/ver20/media/wsdl
//gsoap tr2 schema elementForm: qualified


/* WS-Addressing 2004/08, as WS-Discovery 2005/04 uses it */
struct wsa__EndpointReferenceType {
    char* Address;
};
struct wsa__Relationship {
    char* __item;
    @char* RelationshipType;
};

/* WS-Security UsernameToken */
struct wsse__Password {
    char* __item;
    @char* Type;
};
struct wsse__EncodedString {
    char* __item;
    @char* EncodingType;
};
struct wsse__UsernameTokenType {
    char* Username;
    struct wsse__Password* Password;
    struct wsse__EncodedString* Nonce;
    char* wsu__Created;
};
struct _wsse__Security {
    struct wsse__UsernameTokenType* UsernameToken;
};

struct SOAP_ENV__Header {
    char* wsa__MessageID;
    struct wsa__Relationship* wsa__RelatesTo;
    char* wsa__To;
    char* wsa__Action;
    mustUnderstand struct _wsse__Security* wsse__Security;
};

/* WS-Discovery 2005/04 */
struct wsdd__ScopesType {
    char* __item;
    @char* MatchBy;
};
struct wsdd__ProbeType {
    _QName Types;
    struct wsdd__ScopesType* Scopes;
};
struct wsdd__ProbeMatchType {
    struct wsa__EndpointReferenceType wsa__EndpointReference;
    _QName Types;
    struct wsdd__ScopesType* Scopes;
    char* XAddrs;
    unsigned int MetadataVersion;
};
struct wsdd__ProbeMatchesType {
    int __sizeProbeMatch;
    struct wsdd__ProbeMatchType* ProbeMatch;
};
struct wsdd__HelloType {
    struct wsa__EndpointReferenceType wsa__EndpointReference;
    _QName Types;
    struct wsdd__ScopesType* Scopes;
    char* XAddrs;
    unsigned int MetadataVersion;
};
struct wsdd__ByeType {
    struct wsa__EndpointReferenceType wsa__EndpointReference;
};
/* Resolve: what a Hello without XAddrs is answered with, unicast to its sender. */
struct wsdd__ResolveType {
    struct wsa__EndpointReferenceType wsa__EndpointReference;
};
struct wsdd__ResolveMatchType {
    struct wsa__EndpointReferenceType wsa__EndpointReference;
    _QName Types;
    struct wsdd__ScopesType* Scopes;
    char* XAddrs;
    unsigned int MetadataVersion;
};
struct wsdd__ResolveMatchesType {
    struct wsdd__ResolveMatchType* ResolveMatch;
};

//gsoap wsdd service name: Discovery
//gsoap wsdd service style: document
//gsoap wsdd service encoding: literal
//gsoap wsdd service method-action: Probe http://schemas.xmlsoap.org/ws/2005/04/discovery/Probe
int __wsdd__Probe(struct wsdd__ProbeType* wsdd__Probe, void);
//gsoap wsdd service method-action: ProbeMatches http://schemas.xmlsoap.org/ws/2005/04/discovery/ProbeMatches
int __wsdd__ProbeMatches(struct wsdd__ProbeMatchesType* wsdd__ProbeMatches, void);
//gsoap wsdd service method-action: Hello http://schemas.xmlsoap.org/ws/2005/04/discovery/Hello
int __wsdd__Hello(struct wsdd__HelloType* wsdd__Hello, void);
//gsoap wsdd service method-action: Bye http://schemas.xmlsoap.org/ws/2005/04/discovery/Bye
int __wsdd__Bye(struct wsdd__ByeType* wsdd__Bye, void);
//gsoap wsdd service method-action: Resolve http://schemas.xmlsoap.org/ws/2005/04/discovery/Resolve
int __wsdd__Resolve(struct wsdd__ResolveType* wsdd__Resolve, void);
//gsoap wsdd service method-action: ResolveMatches http://schemas.xmlsoap.org/ws/2005/04/discovery/ResolveMatches
int __wsdd__ResolveMatches(struct wsdd__ResolveMatchesType* wsdd__ResolveMatches, void);

/* ONVIF schema types (tt) */
struct tt__Date {
    int Year;
    int Month;
    int Day;
};
struct tt__Time {
    int Hour;
    int Minute;
    int Second;
};
struct tt__DateTime {
    struct tt__Time* Time;
    struct tt__Date* Date;
};
struct tt__SystemDateAndTime {
    struct tt__DateTime* UTCDateTime;
};
struct tt__MediaCapabilities {
    char* XAddr;
};
struct tt__Capabilities {
    struct tt__MediaCapabilities* Media;
};
struct tt__NetworkInterfaceInfo {
    char* Name;
    char* HwAddress;
};
struct tt__PrefixedIPv4Address {
    char* Address;
    int PrefixLength;
};
/* Which address is in use follows DHCP (xs:boolean, kept as text so that a camera writing
   "True" or leaving it out is read, not refused): the FromDHCP or LinkLocal address when
   true, else Manual; cameras keep a stale Manual address while on DHCP. */
struct tt__IPv4Configuration {
    int __sizeManual;
    struct tt__PrefixedIPv4Address* Manual;
    struct tt__PrefixedIPv4Address* LinkLocal;
    struct tt__PrefixedIPv4Address* FromDHCP;
    char* DHCP;
};
struct tt__IPv4NetworkInterface {
    char* Enabled;
    struct tt__IPv4Configuration* Config;
};
struct tt__NetworkInterface {
    @char* token;
    char* Enabled;
    struct tt__NetworkInterfaceInfo* Info;
    struct tt__IPv4NetworkInterface* IPv4;
};
struct tt__VideoResolution {
    int Width;
    int Height;
};
struct tt__VideoEncoderConfiguration {
    @char* token;
    char* Name;
    char* Encoding;
    struct tt__VideoResolution* Resolution;
};
struct tt__Profile {
    @char* token;
    char* Name;
    struct tt__VideoEncoderConfiguration* VideoEncoderConfiguration;
};
struct tt__Transport {
    char* Protocol;
};
struct tt__StreamSetup {
    char* Stream;
    struct tt__Transport* Transport;
};
struct tt__MediaUri {
    char* Uri;
};
/* Media2 (ver20) profiles: the encoder's configuration is inside a ConfigurationSet. */
struct tt__VideoResolution2 {
    int Width;
    int Height;
};
struct tt__VideoEncoder2Configuration {
    @char* token;
    char* Name;
    char* Encoding;
    struct tt__VideoResolution2* Resolution;
};
struct tr2__ConfigurationSet {
    struct tt__VideoEncoder2Configuration* VideoEncoder;
};
struct tr2__MediaProfile {
    @char* token;
    char* Name;
    struct tr2__ConfigurationSet* Configurations;
};
struct tds__Service {
    char* Namespace;
    char* XAddr;
};

/* Device service (tds) */
struct _tds__GetSystemDateAndTime {
    char* __dummy_ignored;
};
struct _tds__GetSystemDateAndTimeResponse {
    struct tt__SystemDateAndTime* SystemDateAndTime;
};
struct _tds__GetCapabilities {
    char* Category;
};
struct _tds__GetCapabilitiesResponse {
    struct tt__Capabilities* Capabilities;
};
struct _tds__GetServices {
    char* IncludeCapability;
};
struct _tds__GetServicesResponse {
    int __sizeService;
    struct tds__Service* Service;
};
struct _tds__GetDeviceInformation {
    char* __dummy_ignored;
};
struct _tds__GetDeviceInformationResponse {
    char* Manufacturer;
    char* Model;
    char* FirmwareVersion;
    char* SerialNumber;
    char* HardwareId;
};
struct _tds__GetNetworkInterfaces {
    char* __dummy_ignored;
};
struct _tds__GetNetworkInterfacesResponse {
    int __sizeNetworkInterfaces;
    struct tt__NetworkInterface* NetworkInterfaces;
};

//gsoap tds service name: Device
//gsoap tds service style: document
//gsoap tds service encoding: literal
//gsoap tds service method-action: GetSystemDateAndTime http://www.onvif.org/ver10/device/wsdl/GetSystemDateAndTime
int __tds__GetSystemDateAndTime(struct _tds__GetSystemDateAndTime* tds__GetSystemDateAndTime,
                                struct _tds__GetSystemDateAndTimeResponse* tds__GetSystemDateAndTimeResponse);
//gsoap tds service method-action: GetCapabilities http://www.onvif.org/ver10/device/wsdl/GetCapabilities
int __tds__GetCapabilities(struct _tds__GetCapabilities* tds__GetCapabilities,
                           struct _tds__GetCapabilitiesResponse* tds__GetCapabilitiesResponse);
//gsoap tds service method-action: GetServices http://www.onvif.org/ver10/device/wsdl/GetServices
int __tds__GetServices(struct _tds__GetServices* tds__GetServices,
                       struct _tds__GetServicesResponse* tds__GetServicesResponse);
//gsoap tds service method-action: GetDeviceInformation http://www.onvif.org/ver10/device/wsdl/GetDeviceInformation
int __tds__GetDeviceInformation(struct _tds__GetDeviceInformation* tds__GetDeviceInformation,
                                struct _tds__GetDeviceInformationResponse* tds__GetDeviceInformationResponse);
//gsoap tds service method-action: GetNetworkInterfaces http://www.onvif.org/ver10/device/wsdl/GetNetworkInterfaces
int __tds__GetNetworkInterfaces(struct _tds__GetNetworkInterfaces* tds__GetNetworkInterfaces,
                                struct _tds__GetNetworkInterfacesResponse* tds__GetNetworkInterfacesResponse);

/* Media service (trt) */
struct _trt__GetProfiles {
    char* __dummy_ignored;
};
struct _trt__GetProfilesResponse {
    int __sizeProfiles;
    struct tt__Profile* Profiles;
};
struct _trt__GetProfile {
    char* ProfileToken;
};
struct _trt__GetProfileResponse {
    struct tt__Profile* Profile;
};
struct _trt__GetStreamUri {
    struct tt__StreamSetup* StreamSetup;
    char* ProfileToken;
};
struct _trt__GetStreamUriResponse {
    struct tt__MediaUri* MediaUri;
};

//gsoap trt service name: Media
//gsoap trt service style: document
//gsoap trt service encoding: literal
//gsoap trt service method-action: GetProfiles http://www.onvif.org/ver10/media/wsdl/GetProfiles
int __trt__GetProfiles(struct _trt__GetProfiles* trt__GetProfiles,
                       struct _trt__GetProfilesResponse* trt__GetProfilesResponse);
//gsoap trt service method-action: GetProfile http://www.onvif.org/ver10/media/wsdl/GetProfile
int __trt__GetProfile(struct _trt__GetProfile* trt__GetProfile, struct _trt__GetProfileResponse* trt__GetProfileResponse);
//gsoap trt service method-action: GetStreamUri http://www.onvif.org/ver10/media/wsdl/GetStreamUri
int __trt__GetStreamUri(struct _trt__GetStreamUri* trt__GetStreamUri,
                        struct _trt__GetStreamUriResponse* trt__GetStreamUriResponse);

/* Media2 service (tr2, ver20): Profile T cameras may offer it alone */
struct _tr2__GetProfiles {
    char* Token;
    int __sizeType;
    char** Type;  // the configurations to include: without one, a profile has only its name and token
};
struct _tr2__GetProfilesResponse {
    int __sizeProfiles;
    struct tr2__MediaProfile* Profiles;
};
struct _tr2__GetStreamUri {
    char* Protocol;
    char* ProfileToken;
};
struct _tr2__GetStreamUriResponse {
    char* Uri;
};

//gsoap tr2 service name: Media2
//gsoap tr2 service style: document
//gsoap tr2 service encoding: literal
//gsoap tr2 service method-action: GetProfiles http://www.onvif.org/ver20/media/wsdl/GetProfiles
int __tr2__GetProfiles(struct _tr2__GetProfiles* tr2__GetProfiles,
                       struct _tr2__GetProfilesResponse* tr2__GetProfilesResponse);
//gsoap tr2 service method-action: GetStreamUri http://www.onvif.org/ver20/media/wsdl/GetStreamUri
int __tr2__GetStreamUri(struct _tr2__GetStreamUri* tr2__GetStreamUri,
                        struct _tr2__GetStreamUriResponse* tr2__GetStreamUriResponse);
