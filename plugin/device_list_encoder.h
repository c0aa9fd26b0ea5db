#pragma once
// A resource's device list as a serialized ListAndWatchResponse, written in protobuf's
// wire format directly. A configuration-level list holds every slot of the
// configuration (thousands) and is sent again whenever one slot changes: writing the
// bytes straight away is faster than building messages, and a slot taken or freed is
// patched into the list as last sent, so the thousands of others are not looked up and
// encoded again. Nothing but the encoded list is kept (with a thousand plugins, kept
// entries would cost more memory than they save).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/inventory.h"

namespace devlet::plugin {

// Both write into a buffer sized first and never past its end: where the bytes would not
// fit the size computed for them, the answer is nullopt instead of a list.

// `headroom` zero bytes come first, for a prefix the caller writes in place (gRPC's).
std::optional<std::string> encodeDeviceList(const std::vector<DeviceState>& devices,
                                            std::size_t headroom = 0);
// `list` (as encodeDeviceList wrote it) with the entries whose ids `changes` names written
// anew, in place: a slot taken in a configuration of thousands changes one entry. nullopt
// if the list does not hold every one of them, or is not a list this encoder wrote.
std::optional<std::string> patchDeviceList(std::string_view list, const std::vector<DeviceState>& changes,
                                           std::size_t headroom = 0);

}  // namespace devlet::plugin
