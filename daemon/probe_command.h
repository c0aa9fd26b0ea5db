#pragma once
// `devlet probe usb` (alias `devlet probe udev`): one udev enumeration matched against the
// rules given on the command line or the udev configurations of the conf dir, printed for
// people or as JSON: what matches, the instance it becomes, and which filter excluded the
// devices that come close. No daemon, no event loop left running; main thread only.

#include <string>
#include <vector>

namespace devlet {

class HandlerRegistry;

// `args` follow `probe usb`. `usage` is printed after a usage error. Returns the exit code:
// 0 done (also when nothing matches), 1 udev cannot be read, 2 a usage, rule or
// configuration error.
int probeUsbCommand(const std::vector<std::string>& args, const HandlerRegistry& handlers,
                    const std::string& usage);

}  // namespace devlet
