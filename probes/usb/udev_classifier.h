#pragma once
// What becomes an instance: the observations the OS adapter made, matched against a
// configuration's udevRules and turned into Akri-compatible instances (id = devpath,
// UDEV_DEVNODE, UDEV_DEVPATH) with devlet's USB_* properties and, when asked, an id that
// survives a move to another USB port. Pure; any thread.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "probes/usb/udev_details.h"
#include "probes/usb/udev_rule.h"
#include "runtime/instance.h"

namespace devlet::usb {

// The full snapshot for one configuration: every observation that matches any rule,
// deduplicated and grouped as probes/usb/README.md describes, sorted by id.
std::vector<Instance> classifyUdev(const std::vector<UdevObservation>& seen, const UdevDetails& details);

// Akri's variable for devicePluginResourceName: `prefix` ("USB_RESOURCE", "PCI_RESOURCE"),
// '_', and the name upper-cased with '.' and '/' made '_' ("akri.sh/udev-gpu" ->
// PCI_RESOURCE_AKRI_SH_UDEV-GPU).
std::string resourceVariable(std::string_view prefix, std::string_view resourceName);
// "<bus>:<device>" without leading zeros for a usbfs node /dev/bus/usb/BBB/DDD; else nullopt.
std::optional<std::string> usbAddress(std::string_view devnode);
// The last component of a devpath that is a PCI address (0000:01:00.0); else nullopt.
std::optional<std::string> pciAddress(std::string_view devpath);

}  // namespace devlet::usb
