#pragma once
// `devlet probe usb|onvif`: one discovery pass, printed for people or as JSON, for writing
// filters: what is found, the instance it becomes, and which filter excluded the rest
// (for USB devices also what libusb read of the strings sysfs lacks, and which reads
// failed). No daemon, no event loop left running; main thread only (onvif's pass runs
// its own loop).

#include <string>
#include <vector>

namespace devlet {

class HandlerRegistry;
struct Configuration;
struct SettingsOverrides;

// Every configuration of `handler` in `files` (--configuration FILE...) or, without any, in
// the conf dir of the settings. Returns false after printing why it cannot (a broken file,
// or none for that handler; `hint` says what to do).
bool configurationsOf(const std::string& handler, const SettingsOverrides& overrides,
                      const std::vector<std::string>& files, const HandlerRegistry& handlers,
                      std::vector<Configuration>& found, const std::string& hint);

// `devlet probe usb` (alias `devlet probe udev`): one udev enumeration matched against the
// rules given on the command line or the udev configurations of the conf dir. `args` follow
// `probe usb`. `usage` is printed after a usage error. Returns the exit code:
// 0 done (also when nothing matches), 1 udev cannot be read, 2 a usage, rule or
// configuration error.
int probeUsbCommand(const std::vector<std::string>& args, const HandlerRegistry& handlers,
                    const std::string& usage);

// `devlet probe onvif`: one WS-Discovery pass (multicast, and unicast to --target ranges),
// every camera queried as the daemon would, printed for people or as JSON: its state, what
// it said about itself, its stream URIs, and whether it is offered or which filter excluded
// it. Without --conf-dir or --config every camera counts (no filters). The password comes
// from a file (--password-file), never from the command line. Returns the exit code: 0 done
// (also when no camera answers), 1 the network cannot be used, 2 a usage, password-file or
// configuration error.
int probeOnvifCommand(const std::vector<std::string>& args, const HandlerRegistry& handlers,
                      const std::string& usage);

}  // namespace devlet
