// Fuzz target: Akri's udevRules entries and udev's match patterns. The first line of an
// input is a rule: parsed, then matched and explained against an observation (device and
// two parents) made of the other lines, one value per attribute, property, kernel name,
// driver, subsystem and tag. Every line is also a pattern matched against every line, and
// a glob pattern's answer is compared with fnmatch(3), whose semantics udev uses (no
// flags, the C locale): a difference is a bug in devlet's matcher.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <fnmatch.h>

#include "probes/usb/udev_rule.h"

namespace {

using devlet::usb::SyntaxError;
using devlet::usb::UdevDevice;
using devlet::usb::UdevObservation;
using devlet::usb::UdevPattern;
using devlet::usb::UdevRule;

std::vector<std::string> splitLines(std::string_view text) {
    std::vector<std::string> lines;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t end = std::min(text.find('\n', start), text.size());
        lines.emplace_back(text.substr(start, end - start));
        start = end + 1;
    }
    return lines;
}

// fnmatch(3) over each '|' alternative, as udev does for a value with a glob character.
bool fnmatchAny(const std::string& pattern, const std::string& value) {
    std::size_t start = 0;
    while (true) {
        const std::size_t bar = pattern.find('|', start);
        const std::string alternative = pattern.substr(start, bar == std::string::npos ? bar : bar - start);
        if (fnmatch(alternative.c_str(), value.c_str(), 0) == 0) return true;
        if (bar == std::string::npos) return false;
        start = bar + 1;
    }
}

// Every pair of the first lines: quadratic, so a long input does not compare them all.
constexpr std::size_t kComparedLines = 24;

void comparePatterns(std::vector<std::string> lines) {
    if (lines.size() > kComparedLines) lines.resize(kComparedLines);
    for (const std::string& text : lines) {
        SyntaxError error;
        const auto pattern = UdevPattern::parse(text, error);
        if (!pattern) {
            if (error.offset > text.size()) std::abort();
            continue;
        }
        const bool glob = text.find_first_of("*?[") != std::string::npos;
        for (const std::string& value : lines) {
            const bool ours = pattern->matches(value);
            if (!glob || text.find('\0') != std::string::npos || value.find('\0') != std::string::npos)
                continue;
            if (ours != fnmatchAny(text, value)) {
                std::cerr << "pattern \"" << text << "\" on \"" << value << "\": devlet says "
                          << (ours ? "match" : "no match") << ", fnmatch(3) the opposite\n";
                std::abort();
            }
        }
    }
}

UdevDevice deviceFrom(const std::vector<std::string>& values, std::size_t shift, const UdevRule* rule) {
    auto value = [&](std::size_t i) -> const std::string& { return values[(i + shift) % values.size()]; };
    UdevDevice device;
    device.devpath = "/devices/pci0000:00/0000:00:14.0/usb1/" + value(0);
    device.kernel = value(1);
    device.subsystem = value(2);
    device.driver = value(3);
    device.tags = {value(4), value(5)};
    std::size_t next = 6;
    if (rule) {
        for (const auto& filter : rule->filters()) {
            if (!filter.name.empty()) device.attributes[filter.name] = value(next++);
        }
    }
    device.attributes["idVendor"] = value(next++);
    return device;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::vector<std::string> lines =
        splitLines(std::string_view(reinterpret_cast<const char*>(data), size));
    comparePatterns(lines);

    std::string error;
    const auto rule = UdevRule::parse(lines.front(), 0, error);
    if (!rule) {
        if (error.empty()) std::abort();
        return 0;
    }
    for (const auto& filter : rule->filters()) (void)filter.text();
    UdevObservation observation;
    observation.device = deviceFrom(lines, 1, &*rule);
    observation.devnode = "/dev/" + observation.device.kernel;
    for (const auto& filter : rule->filters()) {
        if (!filter.name.empty()) observation.properties[filter.name] = observation.device.kernel;
    }
    observation.parents = {deviceFrom(lines, 2, &*rule), deviceFrom(lines, 3, nullptr)};
    const bool matched = rule->matches(observation);
    const auto explained = rule->explain(observation);
    if (explained.matched != matched || explained.explanation.empty()) std::abort();
    std::vector<std::string> problems;
    const auto rules = devlet::usb::parseUdevRules(lines, problems);
    if (rules.size() + problems.size() != lines.size()) std::abort();
    (void)devlet::usb::firstMatchingRule(rules, observation);
    return 0;
}
