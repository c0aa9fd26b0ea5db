// Writes the seed inputs of the fuzz targets that are binary or generated: WS-Discovery
// messages as devlet's own encoders write them, HTTP/2 conversations as a gRPC client
// opens them (nghttp2's client), and PodResources answers and gRPC bodies (protobuf). The
// committed corpus holds its output; run it again after a change of those formats:
//
//   build/fuzz/make_seeds fuzz/corpus

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nghttp2/nghttp2.h>

#include "deviceplugin/v1beta1/api.pb.h"
#include "grpc/grpc_wire.h"
#include "podresources/v1/api.pb.h"
#include "probes/onvif/soap_wire.h"

namespace {

std::filesystem::path root;

void write(const std::string& target, const std::string& name, const std::string& bytes) {
    std::filesystem::create_directories(root / target);
    std::ofstream(root / target / name, std::ios::binary) << bytes;
}

// ---- WS-Discovery ----

void discovery() {
    using namespace devlet::onvif;
    DiscoveredEndpoint camera;
    camera.address = "urn:uuid:3fa1fe68-b915-4053-a3e1-ac15a21f5f91";
    camera.types = {std::string("{") + kOnvifNetworkNamespace + "}NetworkVideoTransmitter",
                    std::string("{") + kOnvifDeviceNamespace + "}Device"};
    camera.scopes = {"onvif://www.onvif.org/name/Lobby", "onvif://www.onvif.org/hardware/SimCam",
                     "onvif://www.onvif.org/location/country/nl"};
    camera.xaddrs = {"http://192.0.2.10/onvif/device_service", "http://[fe80::1]:8080/onvif/device_service"};
    camera.metadataVersion = 7;
    DiscoveredEndpoint host;
    host.address = "urn:uuid:00000000-0000-4000-8000-000000000001";
    host.types = {"{http://schemas.xmlsoap.org/ws/2006/02/devprof}Device"};
    host.xaddrs = {"http://192.0.2.20:5357/"};
    write("discovery", "probe", encodeProbe("uuid:7d0b1e42-2c3a-4f6f-9f53-0c1f9d0a7c11"));
    write("discovery", "probe-any-type",
          encodeProbeForType("uuid:1", "http://schemas.xmlsoap.org/ws/2006/02/devprof", "Device"));
    write("discovery", "probe-matches",
          encodeProbeMatches("uuid:2", "uuid:7d0b1e42-2c3a-4f6f-9f53-0c1f9d0a7c11", {camera, host}));
    write("discovery", "hello", encodeHello("uuid:3", camera));
    write("discovery", "bye", encodeBye("uuid:4", camera));
    write("discovery", "resolve", encodeResolve("uuid:5", camera.address));
    write("discovery", "resolve-matches", encodeResolveMatches("uuid:6", "uuid:5", camera));
}

// ---- HTTP/2 conversations ----

struct Request {
    Request(std::string path, std::string body, std::string method = "POST",
            std::string contentType = "application/grpc", std::string encoding = "")
        : path(std::move(path)),
          body(std::move(body)),
          method(std::move(method)),
          contentType(std::move(contentType)),
          encoding(std::move(encoding)) {}
    std::string path;
    std::string body;  // a gRPC body (framed messages)
    std::string method;
    std::string contentType;
    std::string encoding;  // grpc-encoding
};

struct Body {
    std::string data;
    std::size_t offset = 0;
};

// What a client writes for these requests: the preface, its SETTINGS and a larger
// connection window (as grpc-go does), then each request; `after` runs before the
// output is taken (RST_STREAM, PING, GOAWAY).
std::string conversation(const std::vector<Request>& requests,
                         void (*after)(nghttp2_session*, const std::vector<std::int32_t>&) = nullptr) {
    nghttp2_session_callbacks* callbacks = nullptr;
    nghttp2_session_callbacks_new(&callbacks);
    nghttp2_session* session = nullptr;
    nghttp2_session_client_new(&session, callbacks, nullptr);
    nghttp2_session_callbacks_del(callbacks);
    const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                               {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 4194304},
                                               {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 16777216}};
    nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, settings, 3);
    nghttp2_submit_window_update(session, NGHTTP2_FLAG_NONE, 0, 4128769);
    std::vector<Body> bodies(requests.size());
    std::vector<std::int32_t> streams;
    for (std::size_t i = 0; i < requests.size(); ++i) {
        const Request& r = requests[i];
        std::vector<std::pair<std::string, std::string>> headers = {
            {":method", r.method},
            {":scheme", "http"},
            {":path", r.path},
            {":authority", "/var/lib/kubelet/device-plugins/devlet-cams.sock"},
            {"content-type", r.contentType},
            {"user-agent", "grpc-go/1.60.1"},
            {"te", "trailers"}};
        if (!r.encoding.empty()) headers.emplace_back("grpc-encoding", r.encoding);
        std::vector<nghttp2_nv> nva;
        nva.reserve(headers.size());
        for (auto& [name, value] : headers) {
            nva.push_back({reinterpret_cast<std::uint8_t*>(name.data()),
                           reinterpret_cast<std::uint8_t*>(value.data()), name.size(), value.size(),
                           NGHTTP2_NV_FLAG_NONE});
        }
        bodies[i].data = r.body;
        nghttp2_data_provider provider{};
        provider.source.ptr = &bodies[i];
        provider.read_callback = [](nghttp2_session*, std::int32_t, std::uint8_t* buffer, std::size_t length,
                                    std::uint32_t* flags, nghttp2_data_source* source, void*) -> ssize_t {
            auto& body = *static_cast<Body*>(source->ptr);
            const std::size_t n = std::min(length, body.data.size() - body.offset);
            std::copy_n(body.data.data() + body.offset, n, buffer);
            body.offset += n;
            if (body.offset == body.data.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
            return static_cast<ssize_t>(n);
        };
        streams.push_back(nghttp2_submit_request(session, nullptr, nva.data(), nva.size(),
                                                 r.method == "GET" ? nullptr : &provider, nullptr));
    }
    std::string out;
    auto drain = [&] {
        const std::uint8_t* data = nullptr;
        for (ssize_t n; (n = nghttp2_session_mem_send(session, &data)) > 0;)
            out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
    };
    drain();
    if (after) {
        after(session, streams);
        drain();
    }
    nghttp2_session_del(session);
    return out;
}

std::string framed(const std::string& message) {
    return *devlet::rpc::frameMessage(message);
}

std::string allocate(const std::vector<std::vector<std::string>>& containers) {
    v1beta1::AllocateRequest request;
    for (const auto& ids : containers) {
        auto* container = request.add_container_requests();
        for (const auto& id : ids) container->add_devices_ids(id);
    }
    return framed(request.SerializeAsString());
}

void grpcServer() {
    const std::string kService = "/v1beta1.DevicePlugin/";
    const std::string empty = framed("");
    write("grpc_server", "options", conversation({{kService + "GetDevicePluginOptions", empty}}));
    write("grpc_server", "list-and-watch", conversation({{kService + "ListAndWatch", empty}}));
    write("grpc_server", "allocate",
          conversation(
              {{kService + "Allocate", allocate({{"cams-4294ea-0", "cams-4294ea-1"}, {"cams-4294ea-2"}})}}));
    write("grpc_server", "allocate-refused",
          conversation({{kService + "Allocate", allocate({{"other-0 \xc3\xa9\n%"}})}}));
    v1beta1::PreferredAllocationRequest preferred;
    auto* container = preferred.add_container_requests();
    for (const char* id : {"cams-4294ea-0", "cams-4294ea-1", "cams-4294ea-2"})
        container->add_available_deviceids(id);
    container->add_must_include_deviceids("cams-4294ea-1");
    container->set_allocation_size(2);
    write("grpc_server", "preferred",
          conversation({{kService + "GetPreferredAllocation", framed(preferred.SerializeAsString())}}));
    v1beta1::PreStartContainerRequest prestart;
    prestart.add_devices_ids("cams-4294ea-0");
    write("grpc_server", "prestart",
          conversation({{kService + "PreStartContainer", framed(prestart.SerializeAsString())}}));
    // The kubelet's usual day: a stream, a call, then it cancels the stream, pings and leaves.
    write("grpc_server", "watch-allocate-cancel",
          conversation({{kService + "ListAndWatch", empty},
                        {kService + "Allocate", allocate({{"cams-4294ea-3"}})},
                        {"/v1beta1.DevicePlugin/Unknown", empty}},
                       [](nghttp2_session* session, const std::vector<std::int32_t>& streams) {
                           nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, streams[0], NGHTTP2_CANCEL);
                           const std::uint8_t ping[8] = {1, 2, 3, 4, 5, 6, 7, 8};
                           nghttp2_submit_ping(session, NGHTTP2_FLAG_NONE, ping);
                           nghttp2_submit_goaway(session, NGHTTP2_FLAG_NONE, streams.back(), NGHTTP2_NO_ERROR,
                                                 nullptr, 0);
                       }));
    write("grpc_server", "not-grpc",
          conversation(
              {{"/", "", "GET", "text/html"}, {kService + "Allocate", "x", "POST", "application/json"}}));
    write("grpc_server", "compressed-and-short",
          conversation({{kService + "Allocate", std::string("\x01\0\0\0\x02xx", 7), "POST",
                         "application/grpc+proto", "gzip"},
                        {kService + "Allocate", std::string("\0\0\0", 3)},
                        {kService + "Allocate", empty + empty}}));
    std::string big = allocate({std::vector<std::string>(1200, "cams-4294ea-0")});
    write("grpc_server", "large-request", conversation({{kService + "Allocate", big}}));
}

// ---- PodResources and gRPC bodies ----

void grpcWire() {
    v1::ListPodResourcesResponse response;
    auto* pod = response.add_pod_resources();
    pod->set_name("camera-0");
    pod->set_namespace_("video");
    auto* container = pod->add_containers();
    container->set_name("broker");
    container->add_cpu_ids(3);
    auto* memory = container->add_memory();
    memory->set_memory_type("memory");
    memory->set_size(1 << 30);
    auto* devices = container->add_devices();
    devices->set_resource_name("akri.sh/cams");
    devices->add_device_ids("cams-4294ea-0");
    devices->add_device_ids("cams-4294ea-1");
    devices->mutable_topology()->add_nodes()->set_id(0);
    auto* other = container->add_devices();
    other->set_resource_name("gpu.intel.com/i915");
    other->add_device_ids("gpu-8120fe-0");
    container->add_dynamic_resources()->set_claim_name("claim");
    response.add_pod_resources()->set_name("no-devices");
    write("grpc_wire", "pod-resources", response.SerializeAsString());
    write("grpc_wire", "pod-resources-framed", framed(response.SerializeAsString()));
    write("grpc_wire", "grpc-message", "slot akri-cam-0 is held: 100%25 taken %C3%A9%0A%zz%4");
    write("grpc_wire", "grpc-status", "14");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: make_seeds CORPUS_DIR\n";
        return 2;
    }
    root = argv[1];
    discovery();
    grpcServer();
    grpcWire();
    return 0;
}
