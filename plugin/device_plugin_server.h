#pragma once
// One kubelet device plugin: a gRPC server on its own unix socket serving one
// resource's ListAndWatch, Allocate and GetPreferredAllocation. Created, published
// to and stopped on the loop thread; gRPC's threads hand Allocate and
// GetPreferredAllocation to the loop with asio::post, where the Inventory decides.

#include <memory>
#include <string>

#include "plugin/device_list_encoder.h"
#include "runtime/inventory.h"
#include "runtime/outcome.h"

namespace boost::asio {
class io_context;
}
namespace grpc {
class Server;
}

namespace devlet::plugin {

class DevicePluginService;

class DevicePluginServer {
public:
    DevicePluginServer(std::string resource, bool preferredAllocation, boost::asio::io_context& loop,
                       Inventory& inventory);
    ~DevicePluginServer();
    DevicePluginServer(const DevicePluginServer&) = delete;
    DevicePluginServer& operator=(const DevicePluginServer&) = delete;

    // Serves on socketPath (a fresh file name per registration).
    Outcome start(const std::string& socketPath);
    // Ends every ListAndWatch stream, answers pending calls, removes the socket.
    void stop();
    // Sends the full device list to every ListAndWatch stream now and to later ones.
    void publish(const ResourceState& state);

    const std::string& socketPath() const { return socketPath_; }
    const std::string& resource() const { return resource_; }

private:
    std::string resource_;
    std::string socketPath_;
    DeviceListEncoder encoder_;
    std::shared_ptr<DevicePluginService> service_;
    std::unique_ptr<grpc::Server> server_;
};

}  // namespace devlet::plugin
