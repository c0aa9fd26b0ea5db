#pragma once
// What becomes an instance: the observations the OS adapter made, matched against a
// configuration's udevRules and turned into Akri-compatible instances (id = devpath,
// UDEV_DEVNODE, UDEV_DEVPATH) with devlet's USB_* properties and, when asked, an id that
// survives a move to another USB port. Pure; any thread.

#include <vector>

#include "probes/usb/udev_details.h"
#include "probes/usb/udev_rule.h"
#include "runtime/instance.h"

namespace devlet::usb {

// The full snapshot for one configuration: every observation that matches any rule,
// deduplicated and grouped as probes/usb/README.md describes, sorted by id.
std::vector<Instance> classifyUdev(const std::vector<UdevObservation>& seen, const UdevDetails& details);

}  // namespace devlet::usb
