#pragma once
// The `udev` handler's discoveryDetails: Akri's keys (udevRules, groupRecursive,
// permissions) unchanged, plus devlet's optional stableIdentity,
// rescanIntervalSeconds and hotplugEvents. Pure: text in, values and problems out; any thread.

#include <chrono>
#include <string>
#include <vector>

#include "probes/usb/udev_rule.h"
#include "runtime/discovery.h"

namespace devlet::usb {

// What names an instance.
enum class StableIdentity {
    Devpath,  // Akri's id: the sysfs devpath, so a device on another port is another instance
    Usb,      // usb:<vendor>:<product>:<serial> (or :port:<port path>), the same on any port
};

struct UdevDetails {
    std::vector<UdevRule> rules;  // the entries that parsed, in written order
    bool groupRecursive = false;
    std::string permissions = "rwm";
    StableIdentity stableIdentity = StableIdentity::Devpath;
    // The safety-net full rescan; hotplug events do the real work.
    std::chrono::seconds rescanInterval{300};
    // false: no netlink monitor, only the periodic rescan sees changes (the way Akri's
    // handler works); a comparison mode for benchmarks, not for production.
    bool hotplugEvents = true;
};

inline constexpr long kMaxRescanIntervalSeconds = 86400;

// Parses discoveryDetails; problems carry lines relative to the text. A broken rule is
// reported at its list item and left out of `rules`.
UdevDetails parseUdevDetails(const std::string& text, std::vector<DetailsProblem>& problems);

}  // namespace devlet::usb
