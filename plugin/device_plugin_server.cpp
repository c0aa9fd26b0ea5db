#include "plugin/device_plugin_server.h"

#include <algorithm>
#include <chrono>
#include <variant>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <unistd.h>

#include "deviceplugin/v1beta1/api.pb.h"
#include "runtime/log.h"

namespace devlet::plugin {

namespace {
constexpr Log log{"plugin"};
constexpr std::string_view kService = "/v1beta1.DevicePlugin/";
constexpr std::size_t kMaxConnections = 8;

void fillResponse(const ContainerGrant& grant, v1beta1::ContainerAllocateResponse& response) {
    for (const auto& [key, value] : grant.envs) (*response.mutable_envs())[key] = value;
    for (const DeviceNode& node : grant.devices) {
        auto* spec = response.add_devices();
        spec->set_host_path(node.hostPath);
        spec->set_container_path(node.containerPath.empty() ? node.hostPath : node.containerPath);
        spec->set_permissions(node.permissions);
    }
    for (const Mount& mount : grant.mounts) {
        auto* m = response.add_mounts();
        m->set_host_path(mount.hostPath);
        m->set_container_path(mount.containerPath);
        m->set_read_only(mount.readOnly);
    }
}

template <typename Message>
bool parse(std::string_view bytes, Message& message) {
    return message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}
}  // namespace

DevicePluginServer::DevicePluginServer(std::string resource, bool preferredAllocation,
                                       boost::asio::io_context& loop, Inventory& inventory,
                                       SlotArbiter& arbiter)
    : resource_(std::move(resource)),
      preferred_(preferredAllocation),
      loop_(loop),
      inventory_(inventory),
      arbiter_(arbiter) {}

DevicePluginServer::~DevicePluginServer() {
    loopThread_.release();
    stop();
}

Outcome DevicePluginServer::start(const std::string& socketPath) {
    loopThread_.check();
    using boost::asio::local::stream_protocol;
    socketPath_ = socketPath;
    ::unlink(socketPath.c_str());
    auto acceptor = std::make_unique<stream_protocol::acceptor>(loop_);
    boost::system::error_code ec;
    acceptor->open(stream_protocol(), ec);
    if (!ec) acceptor->bind(stream_protocol::endpoint(socketPath), ec);
    if (!ec) acceptor->listen(boost::asio::socket_base::max_listen_connections, ec);
    if (ec) return Outcome::failure("cannot serve " + resource_ + " on " + socketPath + ": " + ec.message());
    acceptor_ = std::move(acceptor);
    accept();
    return Outcome::ok();
}

void DevicePluginServer::accept() {
    using boost::asio::local::stream_protocol;
    acceptor_->async_accept([this, alive = lifetime_.token()](boost::system::error_code ec,
                                                              stream_protocol::socket socket) {
        if (alive.expired() || ec == boost::asio::error::operation_aborted) return;
        DevicePluginServer& server = *this;
        if (!server.acceptor_) return;
        if (ec) {
            // Out of file descriptors, most likely: try again shortly rather than spin.
            log.warning() << server.resource_ << ": accepting a kubelet connection failed: " << ec.message();
            auto timer =
                std::make_shared<boost::asio::steady_timer>(server.loop_, std::chrono::milliseconds(100));
            timer->async_wait([this, alive, timer](boost::system::error_code waited) {
                if (!waited && !alive.expired() && acceptor_) accept();
            });
            return;
        }
        server.dropClosedConnections();
        if (server.connections_.size() >= kMaxConnections) {
            // The kubelet holds one connection (two for a moment when it restarts): more
            // are someone else's, and each would keep an HTTP/2 session.
            log.warning() << server.resource_ << ": refusing a connection beyond " << kMaxConnections;
            server.accept();
            return;
        }
        rpc::GrpcConnection::Service& service = server;
        auto connection = std::make_shared<rpc::GrpcConnection>(std::move(socket), service);
        server.connections_.push_back(connection);
        connection->start();
        server.accept();
    });
}

void DevicePluginServer::stop() {
    loopThread_.check();
    if (!acceptor_) return;
    boost::system::error_code ec;
    acceptor_->close(ec);
    acceptor_.reset();
    const std::vector<Watch> watches = std::move(watches_);
    watches_.clear();
    for (const Watch& watch : watches) watch.connection->endStream(watch.stream, {});
    for (const auto& connection : connections_) connection->close();
    connections_.clear();
    ::unlink(socketPath_.c_str());
}

void DevicePluginServer::publish(rpc::GrpcFrame list) {
    loopThread_.check();
    latest_ = std::move(list);
    for (const Watch& watch : watches_) watch.connection->sendLatest(watch.stream, latest_);
    dropClosedConnections();
}

void DevicePluginServer::dropClosedConnections() {
    std::erase_if(connections_, [](const auto& connection) { return connection->closed(); });
}

void DevicePluginServer::onCall(rpc::GrpcConnection& connection, std::int32_t stream, std::string_view method,
                                std::string_view request) {
    if (!acceptor_) {
        connection.fail(stream, {rpc::GrpcCode::Unavailable, "device plugin is stopping"});
        return;
    }
    const std::string_view name =
        method.substr(0, kService.size()) == kService ? method.substr(kService.size()) : std::string_view();
    rpc::GrpcStatus status;
    std::string response;
    try {
        if (name == "ListAndWatch") {
            connection.beginStream(stream);
            if (latest_) connection.sendLatest(stream, latest_);
            watches_.push_back({&connection, stream});
            return;
        }
        if (name == "GetDevicePluginOptions") {
            v1beta1::DevicePluginOptions options;
            options.set_pre_start_required(false);
            options.set_get_preferred_allocation_available(preferred_);
            response = options.SerializeAsString();
        } else if (name == "Allocate") {
            allocate(connection, stream, request);
            return;
        } else if (name == "GetPreferredAllocation") {
            status = preferredAllocation(request, response);
        } else if (name == "PreStartContainer") {
            response.clear();  // PreStartContainerResponse has no fields
        } else {
            status = {rpc::GrpcCode::Unimplemented, "unknown method " + std::string(method)};
        }
    } catch (const std::exception& e) {
        status = {rpc::GrpcCode::Internal, e.what()};
    }
    if (status.code == rpc::GrpcCode::Ok) {
        connection.reply(stream, response);
    } else {
        connection.fail(stream, status);
    }
}

void DevicePluginServer::allocate(rpc::GrpcConnection& connection, std::int32_t stream,
                                  std::string_view request) {
    v1beta1::AllocateRequest in;
    if (!parse(request, in)) {
        connection.fail(stream, {rpc::GrpcCode::InvalidArgument, "malformed AllocateRequest"});
        return;
    }
    // The kubelet sends one container per call, but the API allows several: they are one
    // decision, all granted or none, and the arbiter's.
    SlotArbiter::Request asked;
    asked.resource = resource_;
    for (const auto& container : in.container_requests())
        asked.containers.emplace_back(container.devices_ids().begin(), container.devices_ids().end());
    std::weak_ptr<rpc::GrpcConnection> weak;
    for (const auto& c : connections_) {
        if (c.get() == &connection) weak = c;
    }
    // The answer may come after an awaited step (cluster mode): the call, the connection or
    // this server may be gone by then.
    auto answering = [alive = lifetime_.token(), weak, stream]() -> std::shared_ptr<rpc::GrpcConnection> {
        auto connection = weak.lock();
        if (alive.expired() || !connection || !connection->awaiting(stream)) return nullptr;
        return connection;
    };
    asked.stillWanted = [answering] { return answering() != nullptr; };
    arbiter_.allocate(std::move(asked), [this, answering, stream](SlotArbiter::Decision decision) {
        auto connection = answering();
        if (!connection) return;
        if (auto* refused = std::get_if<AllocationRefused>(&decision)) {
            log.warning() << "Allocate " << resource_ << " refused: " << refused->message;
            connection->fail(stream, {rpc::GrpcCode::FailedPrecondition, refused->message});
            return;
        }
        v1beta1::AllocateResponse out;
        for (const ContainerGrant& grant : std::get<std::vector<ContainerGrant>>(decision))
            fillResponse(grant, *out.add_container_responses());
        connection->reply(stream, out.SerializeAsString());
    });
}

rpc::GrpcStatus DevicePluginServer::preferredAllocation(std::string_view request,
                                                        std::string& response) const {
    v1beta1::PreferredAllocationRequest in;
    if (!parse(request, in)) return {rpc::GrpcCode::InvalidArgument, "malformed PreferredAllocationRequest"};
    v1beta1::PreferredAllocationResponse out;
    for (const auto& container : in.container_requests()) {
        std::vector<std::string> available(container.available_deviceids().begin(),
                                           container.available_deviceids().end());
        std::vector<std::string> must(container.must_include_deviceids().begin(),
                                      container.must_include_deviceids().end());
        auto* chosen = out.add_container_responses();
        for (auto& id :
             inventory_.preferredAllocation(resource_, available, must, container.allocation_size()))
            chosen->add_deviceids(std::move(id));
    }
    response = out.SerializeAsString();
    return {};
}

void DevicePluginServer::onStreamClosed(rpc::GrpcConnection& connection, std::int32_t stream) {
    std::erase_if(watches_,
                  [&](const Watch& w) { return w.connection == &connection && w.stream == stream; });
}

void DevicePluginServer::onDisconnected(rpc::GrpcConnection& connection) {
    std::erase_if(watches_, [&](const Watch& w) { return w.connection == &connection; });
}

}  // namespace devlet::plugin
