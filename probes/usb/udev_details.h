#pragma once
// The `udev` handler's discoveryDetails: Akri's keys (udevRules, groupRecursive,
// permissions) unchanged, plus devlet's optional stableIdentity,
// rescanIntervalSeconds and hotplugEvents. Pure: text in, values and problems out; any thread.

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
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
    // Akri's udev discoveryProperties (spec.discoveryHandler.discoveryProperties), read as
    // its handler reads them: devicePluginResourceName adds USB_RESOURCE_<NAME> or
    // PCI_RESOURCE_<NAME>; with it, vfioPassthrough hands a PCI device's VFIO group over.
    std::optional<std::string> devicePluginResourceName;
    bool vfioPassthrough = false;
};

inline constexpr std::string_view kResourceNameProperty = "devicePluginResourceName";
inline constexpr std::string_view kVfioPassthroughProperty = "vfioPassthrough";

// Sets the discoveryProperties udev reads into `details` (values trimmed; vfioPassthrough
// is on only for "true" in any case, as in Akri; an empty resource name is none).
void applyDiscoveryProperties(const std::map<std::string, std::string>& properties, UdevDetails& details);

// Why each given property does nothing: a name udev does not read, vfioPassthrough without
// devicePluginResourceName (Akri passes VFIO groups only with it), a value that reads as off.
std::vector<PropertyWarning> udevPropertyWarnings(const std::map<std::string, std::string>& properties);

inline constexpr long kMaxRescanIntervalSeconds = 86400;

// Parses discoveryDetails; problems carry lines relative to the text. A broken rule is
// reported at its list item and left out of `rules`.
UdevDetails parseUdevDetails(const std::string& text, std::vector<DetailsProblem>& problems);

}  // namespace devlet::usb
