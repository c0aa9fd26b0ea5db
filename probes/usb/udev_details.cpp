#include "probes/usb/udev_details.h"

#include <algorithm>
#include <cctype>

#include <yaml-cpp/yaml.h>

#include "runtime/strict_yaml.h"

namespace devlet::usb {

namespace {

const std::vector<std::string> kKeys = {"udevRules",      "groupRecursive",        "permissions",
                                        "stableIdentity", "rescanIntervalSeconds", "hotplugEvents"};
// Exactly the strings Akri's webhook and handler accept.
const std::vector<std::string> kPermissions = {"r", "w", "m", "rw", "rm", "rwm", "wm"};
const std::vector<std::string> kIdentities = {"devpath", "usb"};

void readRules(const YAML::Node& value, int line, UdevDetails& details,
               std::vector<DetailsProblem>& problems) {
    if (!value.IsSequence()) {
        problems.push_back({line, "udevRules must be a list of udev rules (strings)"});
        return;
    }
    if (value.size() == 0) {
        // Akri accepts it and finds nothing; so does devlet, and says so.
        problems.push_back({line, "udevRules is empty: this configuration has no devices", /*warning=*/true});
        return;
    }
    std::size_t index = 0;
    for (const auto& item : value) {
        const int itemLine = yaml::lineOf(item, line);
        if (!item.IsScalar()) {
            problems.push_back({itemLine, "udevRules[" + std::to_string(index) +
                                              "] must be a string holding one udev rule"});
        } else {
            std::string error;
            if (std::optional<UdevRule> rule = UdevRule::parse(item.Scalar(), index, error)) {
                details.rules.push_back(std::move(*rule));
            } else {
                problems.push_back({itemLine, std::move(error)});
            }
        }
        ++index;
    }
}

std::string trimmed(std::string_view value) {
    constexpr std::string_view kBlank = " \t\n\r\f\v";
    const auto first = value.find_first_not_of(kBlank);
    if (first == std::string_view::npos) return {};
    return std::string(value.substr(first, value.find_last_not_of(kBlank) - first + 1));
}

bool isTrue(std::string_view value) {
    const std::string clean = trimmed(value);
    return clean.size() == 4 && std::equal(clean.begin(), clean.end(), "true", [](char a, char b) {
               return std::tolower(static_cast<unsigned char>(a)) == b;
           });
}

std::string oneOfMessage(const std::string& key, const std::string& got,
                         const std::vector<std::string>& allowed) {
    std::string message = key + " must be one of " + yaml::joined(allowed) + "; got " + yaml::inQuotes(got);
    if (std::string hint = yaml::nearMiss(got, allowed); !hint.empty()) {
        message += "; did you mean " + yaml::inQuotes(hint) + "?";
    }
    return message;
}

}  // namespace

UdevDetails parseUdevDetails(const std::string& text, std::vector<DetailsProblem>& problems) {
    UdevDetails details;
    auto mapping = yaml::readDetails(text, "udev", kKeys, "udevRules", [&](int line, std::string message) {
        problems.push_back({line, std::move(message)});
    });
    if (!mapping) return details;
    if (!yaml::find(*mapping, "udevRules")) {
        problems.push_back(
            {1, "udev needs \"udevRules\": a list of udev rules, a device matching any is found"});
    }
    for (const auto& [key, entry] : *mapping) {
        const YAML::Node& value = entry.value;
        const int line = entry.valueLine();
        if (key == "udevRules") {
            readRules(value, line, details, problems);
            continue;
        }
        if (!value.IsScalar()) {
            problems.push_back({line, "\"" + key + "\" must be a single value"});
            continue;
        }
        const std::string& scalar = value.Scalar();
        if (key == "groupRecursive") {
            try {
                details.groupRecursive = value.as<bool>();
            } catch (const YAML::Exception&) {
                problems.push_back(
                    {line, "groupRecursive must be true or false; got " + yaml::inQuotes(scalar)});
            }
        } else if (key == "hotplugEvents") {
            try {
                details.hotplugEvents = value.as<bool>();
            } catch (const YAML::Exception&) {
                problems.push_back(
                    {line, "hotplugEvents must be true or false; got " + yaml::inQuotes(scalar)});
            }
        } else if (key == "permissions") {
            if (std::find(kPermissions.begin(), kPermissions.end(), scalar) == kPermissions.end()) {
                problems.push_back({line, oneOfMessage("permissions", scalar, kPermissions)});
            } else {
                details.permissions = scalar;
            }
        } else if (key == "stableIdentity") {
            if (scalar == "devpath") {
                details.stableIdentity = StableIdentity::Devpath;
            } else if (scalar == "usb") {
                details.stableIdentity = StableIdentity::Usb;
            } else {
                problems.push_back({line, oneOfMessage("stableIdentity", scalar, kIdentities)});
            }
        } else if (key == "rescanIntervalSeconds") {
            long seconds = 0;
            bool whole = true;
            try {
                seconds = value.as<long>();
            } catch (const YAML::Exception&) {
                whole = false;
            }
            if (!whole || seconds < 1 || seconds > kMaxRescanIntervalSeconds) {
                problems.push_back(
                    {line, "rescanIntervalSeconds must be a whole number of seconds from 1 to " +
                               std::to_string(kMaxRescanIntervalSeconds) + "; got " +
                               yaml::inQuotes(scalar)});
            } else {
                details.rescanInterval = std::chrono::seconds(seconds);
            }
        }
    }
    return details;
}

void applyDiscoveryProperties(const std::map<std::string, std::string>& properties, UdevDetails& details) {
    details.devicePluginResourceName.reset();
    details.vfioPassthrough = false;
    if (auto it = properties.find(std::string(kResourceNameProperty)); it != properties.end()) {
        if (std::string name = trimmed(it->second); !name.empty()) details.devicePluginResourceName = name;
    }
    if (auto it = properties.find(std::string(kVfioPassthroughProperty)); it != properties.end()) {
        details.vfioPassthrough = isTrue(it->second);
    }
}

std::vector<PropertyWarning> udevPropertyWarnings(const std::map<std::string, std::string>& properties) {
    std::vector<PropertyWarning> warnings;
    const std::string resourceKey(kResourceNameProperty);
    const std::string vfioKey(kVfioPassthroughProperty);
    for (const auto& [name, value] : properties) {
        if (name == resourceKey) {
            if (trimmed(value).empty())
                warnings.push_back({name, "empty: no USB_RESOURCE_* or PCI_RESOURCE_* variables are set"});
        } else if (name == vfioKey) {
            const std::string clean = trimmed(value);
            const bool on = isTrue(clean);
            if (!on && clean != "false" && clean != "False" && clean != "FALSE") {
                warnings.push_back(
                    {name, yaml::inQuotes(value) + " reads as false (only \"true\" turns it on)"});
            } else if (on) {
                auto resource = properties.find(resourceKey);
                if (resource == properties.end() || trimmed(resource->second).empty()) {
                    warnings.push_back({name,
                                        "has no effect without devicePluginResourceName (as in Akri, VFIO "
                                        "groups are passed through only for devices that get "
                                        "PCI_RESOURCE_<NAME>)"});
                }
            }
        } else {
            std::string message =
                "the udev handler does not read it (it reads devicePluginResourceName and "
                "vfioPassthrough); ignored";
            if (std::string hint = yaml::nearMiss(name, {resourceKey, vfioKey}); !hint.empty())
                message += "; did you mean " + yaml::inQuotes(hint) + "?";
            warnings.push_back({name, message});
        }
    }
    return warnings;
}

}  // namespace devlet::usb
