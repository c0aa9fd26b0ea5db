#include "probes/gpu/gpu_details.h"

#include <algorithm>
#include <cctype>

#include <yaml-cpp/yaml.h>

#include "runtime/strict_yaml.h"

namespace devlet::gpu {

namespace {

const std::vector<std::string> kKeys = {"vendors",
                                        "drivers",
                                        "allowIds",
                                        "denyIds",
                                        "type",
                                        "deviceNodes",
                                        "byPath",
                                        "allocationPolicy",
                                        "topologyAware",
                                        "queryMemory",
                                        "rescanIntervalSeconds"};
const std::vector<std::string> kTypes = {"any", "integrated", "discrete"};
const std::vector<std::string> kDeviceNodes = {"all", "render"};
const std::vector<std::string> kByPath = {"single", "none", "all"};
const std::vector<std::string> kPolicies = {"none", "balanced", "packed"};

std::string oneOfMessage(const std::string& key, const std::string& got,
                         const std::vector<std::string>& allowed) {
    std::string message = key + " must be one of " + yaml::joined(allowed) + "; got " + yaml::inQuotes(got);
    if (std::string hint = yaml::nearMiss(got, allowed); !hint.empty()) {
        message += "; did you mean " + yaml::inQuotes(hint) + "?";
    }
    return message;
}

// A list of strings (a single string is a list of one); nullopt after reporting.
std::optional<std::vector<std::pair<std::string, int>>> strings(const YAML::Node& value, int line,
                                                                const std::string& key,
                                                                std::vector<DetailsProblem>& problems) {
    std::vector<std::pair<std::string, int>> items;
    if (value.IsScalar()) {
        items.emplace_back(value.Scalar(), line);
        return items;
    }
    if (!value.IsSequence()) {
        problems.push_back({line, key + " must be a list of strings"});
        return std::nullopt;
    }
    for (const auto& item : value) {
        const int itemLine = yaml::lineOf(item, line);
        if (!item.IsScalar()) {
            problems.push_back({itemLine, key + " must be a list of strings"});
            return std::nullopt;
        }
        items.emplace_back(item.Scalar(), itemLine);
    }
    return items;
}

void readIds(const YAML::Node& value, int line, const std::string& key, std::set<std::string>& ids,
             std::vector<DetailsProblem>& problems) {
    auto items = strings(value, line, key, problems);
    if (!items) return;
    for (const auto& [text, itemLine] : *items) {
        std::string id = normalisedPciId(text);
        if (id.empty()) {
            problems.push_back({itemLine, key + ": " + yaml::inQuotes(text) +
                                              " is not a PCI id (four hex digits, such as 0x56a0)"});
        } else {
            ids.insert(std::move(id));
        }
    }
}

template <typename Enum>
void readChoice(const YAML::Node& value, int line, const std::string& key,
                const std::vector<std::string>& names, const std::vector<Enum>& values, Enum& out,
                std::vector<DetailsProblem>& problems) {
    if (!value.IsScalar()) {
        problems.push_back({line, key + " must be one of " + yaml::joined(names)});
        return;
    }
    auto it = std::find(names.begin(), names.end(), value.Scalar());
    if (it == names.end()) {
        problems.push_back({line, oneOfMessage(key, value.Scalar(), names)});
        return;
    }
    out = values[static_cast<std::size_t>(it - names.begin())];
}

void readBool(const YAML::Node& value, int line, const std::string& key, bool& out,
              std::vector<DetailsProblem>& problems) {
    try {
        if (!value.IsScalar()) throw YAML::Exception(YAML::Mark(), "");
        out = value.as<bool>();
    } catch (const YAML::Exception&) {
        problems.push_back({line, key + " must be true or false"});
    }
}

bool blank(const std::string& text) {
    // Only whitespace and comments: the defaults.
    std::size_t i = 0;
    while (i < text.size()) {
        const std::size_t end = text.find('\n', i);
        const std::string lineText = text.substr(i, end == std::string::npos ? std::string::npos : end - i);
        const std::size_t first = lineText.find_first_not_of(" \t\r");
        if (first != std::string::npos && lineText[first] != '#') return false;
        if (end == std::string::npos) break;
        i = end + 1;
    }
    return true;
}

}  // namespace

std::string normalisedPciId(const std::string& text) {
    std::string digits = text;
    if (digits.starts_with("0x") || digits.starts_with("0X")) digits = digits.substr(2);
    if (digits.size() != 4 ||
        !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isxdigit(c); }))
        return {};
    std::transform(digits.begin(), digits.end(), digits.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    return "0x" + digits;
}

GpuDetails parseGpuDetails(const std::string& text, std::vector<DetailsProblem>& problems) {
    GpuDetails details;
    if (blank(text)) return details;
    auto mapping = yaml::readDetails(text, "gpu", kKeys, "vendors", [&](int line, std::string message) {
        problems.push_back({line, std::move(message)});
    });
    if (!mapping) return details;
    for (const auto& [key, entry] : *mapping) {
        const YAML::Node& value = entry.value;
        const int line = entry.valueLine();
        if (key == "vendors") {
            details.vendors.clear();
            auto items = strings(value, line, key, problems);
            if (!items) continue;
            for (const auto& [vendor, itemLine] : *items) {
                if (vendor == "any") {
                    if (items->size() != 1)
                        problems.push_back(
                            {itemLine, "vendors: \"any\" stands alone (it means every vendor)"});
                    continue;
                }
                std::string id = normalisedPciId(vendor);
                if (id.empty()) {
                    problems.push_back({itemLine, "vendors: " + yaml::inQuotes(vendor) +
                                                      " is not a PCI vendor id (such as 0x8086) or \"any\""});
                } else {
                    details.vendors.insert(std::move(id));
                }
            }
            if (items->empty()) problems.push_back({line, "vendors is empty: name vendor ids, or \"any\""});
        } else if (key == "drivers") {
            details.drivers.clear();
            auto items = strings(value, line, key, problems);
            if (!items) continue;
            for (const auto& [driver, itemLine] : *items) {
                if (driver.empty() || driver.find('/') != std::string::npos) {
                    problems.push_back(
                        {itemLine, "drivers: " + yaml::inQuotes(driver) + " is not a driver name"});
                } else {
                    details.drivers.insert(driver);
                }
            }
            if (items->empty())
                problems.push_back({line, "drivers is empty: name kernel drivers (i915, xe)"});
        } else if (key == "allowIds") {
            readIds(value, line, key, details.allowIds, problems);
        } else if (key == "denyIds") {
            readIds(value, line, key, details.denyIds, problems);
        } else if (key == "type") {
            readChoice(value, line, key, kTypes, {GpuType::Any, GpuType::Integrated, GpuType::Discrete},
                       details.type, problems);
        } else if (key == "deviceNodes") {
            readChoice(value, line, key, kDeviceNodes, {DeviceNodes::All, DeviceNodes::Render},
                       details.deviceNodes, problems);
        } else if (key == "byPath") {
            readChoice(value, line, key, kByPath, {ByPath::Single, ByPath::None, ByPath::All}, details.byPath,
                       problems);
        } else if (key == "allocationPolicy") {
            GpuAllocationPolicy policy = GpuAllocationPolicy::None;
            const std::size_t before = problems.size();
            readChoice(
                value, line, key, kPolicies,
                {GpuAllocationPolicy::None, GpuAllocationPolicy::Balanced, GpuAllocationPolicy::Packed},
                policy, problems);
            if (problems.size() == before) details.allocationPolicy = policy;
        } else if (key == "topologyAware") {
            readBool(value, line, key, details.topologyAware, problems);
        } else if (key == "queryMemory") {
            readBool(value, line, key, details.queryMemory, problems);
        } else if (key == "rescanIntervalSeconds") {
            long seconds = 0;
            bool whole = value.IsScalar();
            try {
                if (whole) seconds = value.as<long>();
            } catch (const YAML::Exception&) {
                whole = false;
            }
            if (!whole || seconds < 1 || seconds > kMaxRescanIntervalSeconds) {
                problems.push_back(
                    {line, "rescanIntervalSeconds must be a whole number of seconds from 1 to " +
                               std::to_string(kMaxRescanIntervalSeconds)});
            } else {
                details.rescanInterval = std::chrono::seconds(seconds);
            }
        }
    }
    if (const yaml::Entry* allow = yaml::find(*mapping, "allowIds");
        allow && yaml::find(*mapping, "denyIds")) {
        problems.push_back({allow->line, "allowIds and denyIds exclude each other: use one of them"});
    }
    return details;
}

}  // namespace devlet::gpu
