#include "daemon/probe_command.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include "probes/usb/udev_classifier.h"
#include "probes/usb/udev_details.h"
#include "probes/usb/udev_rule.h"
#include "probes/usb/udev_source.h"
#include "probes/usb/usb_descriptors.h"
#include "probes/usb/usb_string_cache.h"
#include "runtime/configuration.h"
#include "runtime/discovery.h"
#include "runtime/instance.h"
#include "runtime/settings.h"

namespace devlet {
namespace {

using usb::UdevObservation;
using usb::UdevRule;

struct ProbeOptions {
    std::vector<std::string> rules;
    SettingsOverrides overrides;
    std::vector<std::string> configurations;  // --configuration FILE...: instead of the conf dir
    bool json = false;
    bool all = false;  // list every device a rule does not match, not only those close to it
};

// The rules of one configuration, or of the command line.
struct RuleSet {
    std::string name;    // the configuration's name; empty for --rule
    std::string source;  // file:line of the configuration; empty for --rule
    usb::UdevDetails details;
};

// A libusb read of the strings a matched device's USB device lacks in sysfs.
struct StringRead {
    usb::UsbStringRequest request;
    usb::UsbStrings answer;
};
using StringReads = std::map<std::string, StringRead>;  // by UdevObservation devpath

struct Verdict {
    const UdevObservation* observation = nullptr;
    std::string explanation;
    const StringRead* strings = nullptr;  // for matches whose USB device lacks strings
};

struct RuleReport {
    const UdevRule* rule = nullptr;
    std::vector<Verdict> matches;
    std::vector<Verdict> excluded;  // near misses, or every other device with --all
    std::size_t unlisted = 0;       // devices that do not match and are not listed
};

struct SetReport {
    const RuleSet* set = nullptr;
    std::vector<RuleReport> rules;
    std::vector<Instance> instances;
};

int usageError(const std::string& message, const std::string& usage) {
    std::cerr << "devlet: " << message << "\n" << usage;
    return 2;
}

// Returns an error message, empty when the arguments parse.
std::string parseOptions(const std::vector<std::string>& args, ProbeOptions& options) {
    for (std::size_t i = 0; i < args.size(); ++i) {
        std::string arg = args[i];
        if (arg == "--json") {
            options.json = true;
            continue;
        }
        if (arg == "--all") {
            options.all = true;
            continue;
        }
        std::optional<std::string> value;
        if (auto eq = arg.find('='); eq != std::string::npos && arg.rfind("--", 0) == 0) {
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
        }
        if (arg != "--rule" && arg != "--conf-dir" && arg != "--config" && arg != "--configuration")
            return "unknown option for probe: " + args[i];
        if (!value) {
            if (i + 1 >= args.size()) return arg + " needs a value";
            value = args[++i];
        }
        if (arg == "--rule") {
            options.rules.push_back(*value);
        } else if (arg == "--configuration") {
            options.configurations.push_back(std::filesystem::absolute(*value).lexically_normal().string());
        } else {
            // Paths on the command line are relative to where devlet was started.
            std::string path = std::filesystem::absolute(*value).lexically_normal().string();
            (arg == "--conf-dir" ? options.overrides.confDir : options.overrides.configFile) =
                std::move(path);
        }
    }
    return {};
}

// The --rule texts as one rule set. Returns false after printing the first broken rule.
bool commandLineRules(const std::vector<std::string>& texts, std::vector<RuleSet>& sets) {
    RuleSet set;
    for (std::size_t i = 0; i < texts.size(); ++i) {
        std::string error;
        std::optional<UdevRule> rule = UdevRule::parse(texts[i], i, error);
        if (!rule) {
            std::cerr << "devlet: --rule: " << error << "\n";
            return false;
        }
        set.details.rules.push_back(std::move(*rule));
    }
    sets.push_back(std::move(set));
    return true;
}

std::string sourceOf(const Configuration& configuration) {
    return configuration.sourceFile + ":" + std::to_string(configuration.sourceLine);
}

// Every udev configuration of the conf dir. Returns false after printing why it cannot.
bool configuredRules(const ProbeOptions& options, const HandlerRegistry& handlers,
                     std::vector<RuleSet>& sets) {
    std::vector<Configuration> configurations;
    if (!configurationsOf("udev", options.overrides, options.configurations, handlers, configurations,
                          "give rules with --rule or a directory with --conf-dir"))
        return false;
    for (const Configuration& configuration : configurations) {
        std::vector<DetailsProblem> problems;
        usb::UdevDetails details = usb::parseUdevDetails(configuration.discoveryDetails, problems);
        usb::applyDiscoveryProperties(configuration.discoveryProperties, details);
        sets.push_back(RuleSet{configuration.name, sourceOf(configuration), std::move(details)});
    }
    return true;
}

bool hasSubsystemFilter(const UdevRule& rule) {
    return std::any_of(rule.filters().begin(), rule.filters().end(), [](const usb::UdevFilter& filter) {
        return filter.key == usb::UdevKey::Subsystem && !filter.negated;
    });
}

// A device comes close to a rule when its subsystem is one the rule asks for.
bool sharesSubsystem(const UdevRule& rule, const UdevObservation& observation) {
    return std::any_of(rule.filters().begin(), rule.filters().end(), [&](const usb::UdevFilter& filter) {
        return filter.key == usb::UdevKey::Subsystem && !filter.negated &&
               filter.pattern.matches(observation.device.subsystem);
    });
}

SetReport report(const RuleSet& set, const std::vector<UdevObservation>& seen, const StringReads& reads,
                 bool all) {
    SetReport result{&set, {}, usb::classifyUdev(seen, set.details)};
    for (const UdevRule& rule : set.details.rules) {
        RuleReport entry{&rule, {}, {}, 0};
        for (const UdevObservation& observation : seen) {
            const usb::UdevMatch match = rule.explain(observation);
            if (match.matched) {
                auto read = reads.find(observation.device.devpath);
                entry.matches.push_back(
                    {&observation, match.explanation, read == reads.end() ? nullptr : &read->second});
            } else if (all || sharesSubsystem(rule, observation)) {
                entry.excluded.push_back({&observation, match.explanation});
            } else {
                ++entry.unlisted;
            }
        }
        result.rules.push_back(std::move(entry));
    }
    return result;
}

std::string deviceName(const UdevObservation& observation) {
    std::string name = observation.device.devpath;
    if (!observation.devnode.empty()) name += " (" + observation.devnode + ")";
    return name;
}

// One line: what libusb read of the strings sysfs lacks, and why the rest failed.
std::string describeRead(const StringRead& read) {
    std::string line = "libusb read of the USB strings sysfs lacks (";
    std::string separator;
    for (const std::string& name : read.request.names) {
        line += separator + name;
        separator = ", ";
    }
    line += "):";
    for (const auto& [name, value] : read.answer.strings)
        line.append(" ").append(name).append("=\"").append(value).append("\"");
    if (read.answer.strings.empty()) line += " nothing read";
    if (!read.answer.problems.empty()) {
        line += "; failed:";
        separator = " ";
        for (const std::string& problem : read.answer.problems) {
            line += separator + problem;
            separator = "; ";
        }
    }
    return line;
}

void printText(const std::vector<SetReport>& reports, std::size_t deviceCount) {
    std::cout << "udev: " << deviceCount << " devices\n";
    for (const SetReport& set : reports) {
        std::cout << "\n";
        if (set.set->name.empty()) {
            std::cout << "rules from the command line\n";
        } else {
            std::cout << "configuration " << set.set->name << " (" << set.set->source << ")\n";
        }
        for (const RuleReport& rule : set.rules) {
            std::cout << "  rule " << rule.rule->text() << "\n";
            for (const Verdict& match : rule.matches) {
                std::cout << "    matches " << deviceName(*match.observation) << "\n";
                // Which device the parent filters (ATTRS, KERNELS, ...) held on: a hub or
                // a USB device several levels up is not obvious from the rule.
                if (constexpr std::string_view kPrefix = "matches; "; match.explanation.starts_with(kPrefix))
                    std::cout << "      " << match.explanation.substr(kPrefix.size()) << "\n";
                if (match.strings) std::cout << "      " << describeRead(*match.strings) << "\n";
            }
            for (const Verdict& miss : rule.excluded) {
                std::cout << "    does not match " << deviceName(*miss.observation) << "\n"
                          << "      " << miss.explanation << "\n";
            }
            if (rule.matches.empty()) std::cout << "    no device matches\n";
            if (rule.unlisted > 0) {
                std::cout << "    " << rule.unlisted << " other device(s)"
                          << (hasSubsystemFilter(*rule.rule) ? " in other subsystems" : "")
                          << " do not match (--all lists them)\n";
            }
        }
        if (set.instances.empty()) std::cout << "  no instance\n";
        for (const Instance& instance : set.instances) {
            std::cout << "  instance " << instance.id << "\n";
            for (const DeviceNode& node : instance.nodes) {
                std::cout << "    node " << node.hostPath << " (" << node.permissions << ")\n";
            }
            for (const auto& [key, value] : instance.properties)
                std::cout << "    " << key << "=" << value << "\n";
        }
    }
}

boost::json::object deviceJson(const Verdict& verdict, const char* reasonKey) {
    boost::json::object device;
    device["devpath"] = verdict.observation->device.devpath;
    device["subsystem"] = verdict.observation->device.subsystem;
    if (!verdict.observation->devnode.empty()) device["devnode"] = verdict.observation->devnode;
    device[reasonKey] = verdict.explanation;
    if (verdict.strings) {
        const StringRead& read = *verdict.strings;
        boost::json::array wanted;
        for (const std::string& name : read.request.names) wanted.push_back(boost::json::string(name));
        boost::json::object strings;
        for (const auto& [name, value] : read.answer.strings) strings[name] = value;
        boost::json::array failed;
        for (const std::string& problem : read.answer.problems)
            failed.push_back(boost::json::string(problem));
        device["usbStrings"] = boost::json::object{{"usbDevice", read.request.devpath},
                                                   {"sysfsLacks", std::move(wanted)},
                                                   {"read", std::move(strings)},
                                                   {"failed", std::move(failed)}};
    }
    return device;
}

void printJson(const std::vector<SetReport>& reports, std::size_t deviceCount) {
    boost::json::array sets;
    for (const SetReport& set : reports) {
        boost::json::object entry;
        if (set.set->name.empty()) {
            entry["source"] = "command line";
        } else {
            entry["configuration"] = set.set->name;
            entry["source"] = set.set->source;
        }
        boost::json::array rules;
        for (const RuleReport& rule : set.rules) {
            boost::json::array matches;
            for (const Verdict& match : rule.matches) matches.push_back(deviceJson(match, "explanation"));
            boost::json::array excluded;
            for (const Verdict& miss : rule.excluded) excluded.push_back(deviceJson(miss, "excludedBy"));
            rules.push_back(boost::json::object{{"rule", rule.rule->text()},
                                                {"matches", std::move(matches)},
                                                {"excluded", std::move(excluded)},
                                                {"unlisted", rule.unlisted}});
        }
        boost::json::array instances;
        for (const Instance& instance : set.instances) {
            boost::json::array nodes;
            for (const DeviceNode& node : instance.nodes) {
                nodes.push_back(boost::json::object{{"hostPath", node.hostPath},
                                                    {"containerPath", node.containerPath},
                                                    {"permissions", node.permissions}});
            }
            boost::json::object properties;
            for (const auto& [key, value] : instance.properties) properties[key] = value;
            instances.push_back(boost::json::object{
                {"id", instance.id}, {"nodes", std::move(nodes)}, {"properties", std::move(properties)}});
        }
        entry["rules"] = std::move(rules);
        entry["instances"] = std::move(instances);
        sets.push_back(std::move(entry));
    }
    const boost::json::object document{{"devices", deviceCount}, {"ruleSets", std::move(sets)}};
    std::cout << boost::json::serialize(document) << "\n";
}

// As the daemon does for a matched device whose USB device lacks strings in sysfs: asks
// the device through libusb (once per USB device) and gives the classifier what it read,
// so the instances printed are the daemon's. Here the reads block: one pass, no loop.
StringReads readMissingStrings(const std::vector<RuleSet>& sets, std::vector<UdevObservation>& seen) {
    std::map<std::string, StringRead> byUsbDevice;  // by UsbStringRequest::key()
    StringReads reads;
    for (UdevObservation& observation : seen) {
        const bool matched = std::any_of(sets.begin(), sets.end(), [&](const RuleSet& set) {
            return usb::firstMatchingRule(set.details.rules, observation).has_value();
        });
        if (!matched) continue;
        std::optional<usb::UsbStringRequest> wanted = usb::usbStringsWanted(observation);
        if (!wanted) continue;
        auto [read, fresh] = byUsbDevice.try_emplace(wanted->key());
        if (fresh) {
            read->second.answer = usb::readUsbStrings(wanted->busnum, wanted->devnum, wanted->names);
            read->second.request = std::move(*wanted);
        }
        usb::addUsbStrings(observation, read->second.answer.strings);
        reads[observation.device.devpath] = read->second;
    }
    return reads;
}

}  // namespace

bool configurationsOf(const std::string& handler, const SettingsOverrides& overrides,
                      const std::vector<std::string>& files, const HandlerRegistry& handlers,
                      std::vector<Configuration>& found, const std::string& hint) {
    LoadedSettings loaded = loadSettings(overrides);
    if (!loaded.problems.empty()) {
        for (const auto& problem : loaded.problems) std::cerr << "devlet: " << problem.str() << "\n";
        return false;
    }
    const Settings& settings = loaded.settings;
    bool valid = true;
    for (const std::string& file : files.empty() ? configurationFiles(settings.confDir) : files) {
        ParsedConfigurations parsed = loadConfigurationFile(file, handlers, settings.resourceDomain);
        for (const auto& warning : parsed.warnings) std::cerr << warning.str() << " (warning)\n";
        for (const auto& problem : parsed.problems) std::cerr << problem.str() << "\n";
        if (!parsed.problems.empty()) {
            valid = false;
            continue;
        }
        for (Configuration& configuration : parsed.configurations) {
            if (configuration.handler == handler) found.push_back(std::move(configuration));
        }
    }
    if (!valid) return false;
    if (found.empty()) {
        std::string where = settings.confDir;
        if (!files.empty()) {
            where.clear();
            for (const std::string& file : files) where += (where.empty() ? "" : ", ") + file;
        }
        std::cerr << "devlet: no " << handler << " configuration in " << where << "; " << hint << "\n";
        return false;
    }
    return true;
}

int probeUsbCommand(const std::vector<std::string>& args, const HandlerRegistry& handlers,
                    const std::string& usage) {
    ProbeOptions options;
    if (std::string error = parseOptions(args, options); !error.empty()) return usageError(error, usage);
    std::vector<RuleSet> sets;
    const bool loaded = options.rules.empty() ? configuredRules(options, handlers, sets)
                                              : commandLineRules(options.rules, sets);
    if (!loaded) return 2;

    // One pass: the source is opened (which also arms a monitor nobody reads), read, closed.
    boost::asio::io_context loop;
    usb::UdevSource source(loop);
    std::vector<UdevObservation> seen;
    std::string error = source.open();
    if (error.empty()) error = source.enumerate(seen);
    source.close();
    if (!error.empty()) {
        std::cerr << "devlet: cannot read udev devices: " << error << "\n";
        return 1;
    }
    std::sort(seen.begin(), seen.end(), [](const UdevObservation& a, const UdevObservation& b) {
        return a.device.devpath < b.device.devpath;
    });

    const StringReads reads = readMissingStrings(sets, seen);
    std::vector<SetReport> reports;
    reports.reserve(sets.size());
    for (const RuleSet& set : sets) reports.push_back(report(set, seen, reads, options.all));
    if (options.json) {
        printJson(reports, seen.size());
    } else {
        printText(reports, seen.size());
    }
    return 0;
}

}  // namespace devlet
