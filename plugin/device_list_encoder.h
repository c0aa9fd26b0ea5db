#pragma once
// A resource's device list as a serialized ListAndWatchResponse, written in protobuf's
// wire format directly. A configuration-level list holds every slot of the
// configuration (thousands) and is sent again whenever one slot changes: writing the
// bytes straight away is faster than building messages, and nothing is kept between
// lists (with a thousand plugins, kept entries would cost more memory than they save).

#include <string>
#include <vector>

#include "runtime/inventory.h"

namespace devlet::plugin {

// `headroom` zero bytes come first, for a prefix the caller writes in place (gRPC's).
std::string encodeDeviceList(const std::vector<DeviceState>& devices, std::size_t headroom = 0);

}  // namespace devlet::plugin
