#include "probes/onvif/onvif_details.h"

#include <algorithm>
#include <charconv>

#include <arpa/inet.h>
#include <yaml-cpp/yaml.h>

#include "runtime/strict_yaml.h"

namespace devlet::onvif {

namespace {

const std::vector<std::string> kKeys = {"ipAddresses",
                                        "macAddresses",
                                        "scopes",
                                        "uuids",
                                        "discoveryTimeoutSeconds",
                                        "probeRetransmissions",
                                        "interfaces",
                                        "ipv6",
                                        "unicastTargets",
                                        "unicastConcurrency",
                                        "rescanIntervalSeconds",
                                        "livenessIntervalSeconds",
                                        "missedChecks",
                                        "credentialsFile",
                                        "credential",
                                        "offerUnauthenticated"};
const std::vector<std::string> kFilterKeys = {"action", "items"};
const std::vector<std::string> kActions = {"Include", "Exclude"};

using Problems = std::vector<DetailsProblem>;

std::optional<FilterList> readFilter(const std::string& key, const YAML::Node& value, int line,
                                     Problems& problems) {
    auto mapping = yaml::readMapping(
        value, line, key, &kFilterKeys,
        [&](int l, std::string message) {
            problems.push_back({l, std::move(message)});
        },
        true);
    if (!mapping) return std::nullopt;
    FilterList filter;
    bool ok = true;
    if (const yaml::Entry* action = yaml::find(*mapping, "action")) {
        const std::string text = action->value.IsScalar() ? action->value.Scalar() : "";
        if (text == "Include") {
            filter.action = FilterAction::Include;
        } else if (text == "Exclude") {
            filter.action = FilterAction::Exclude;
        } else {
            std::string message = key + ".action must be Include or Exclude; got " + yaml::inQuotes(text);
            if (std::string hint = yaml::nearMiss(text, kActions); !hint.empty())
                message += "; did you mean " + yaml::inQuotes(hint) + "?";
            problems.push_back({action->valueLine(), message});
            ok = false;
        }
    }
    if (const yaml::Entry* items = yaml::find(*mapping, "items")) {
        if (items->value.IsNull()) {
            // `items:` with nothing after it: an empty list.
        } else if (!items->value.IsSequence()) {
            problems.push_back({items->valueLine(), key + ".items must be a list of strings"});
            ok = false;
        } else {
            for (const auto& item : items->value) {
                if (!item.IsScalar() || item.Scalar().empty()) {
                    problems.push_back(
                        {yaml::lineOf(item, items->line), key + ".items must hold non-empty strings"});
                    ok = false;
                    continue;
                }
                filter.items.push_back(item.Scalar());
            }
        }
    }
    if (!ok) return std::nullopt;
    return filter;
}

std::optional<long> readWhole(const std::string& key, const YAML::Node& value, int line, long min, long max,
                              Problems& problems) {
    long number = 0;
    bool whole = value.IsScalar();
    if (whole) {
        try {
            number = value.as<long>();
        } catch (const YAML::Exception&) {
            whole = false;
        }
    }
    if (!whole || number < min || number > max) {
        problems.push_back({line, key + " must be a whole number from " + std::to_string(min) + " to " +
                                      std::to_string(max) + "; got " +
                                      yaml::inQuotes(value.IsScalar() ? value.Scalar() : "(not a number)")});
        return std::nullopt;
    }
    return number;
}

std::vector<std::string> readStrings(const std::string& key, const YAML::Node& value, int line,
                                     Problems& problems) {
    std::vector<std::string> strings;
    if (!value.IsSequence()) {
        problems.push_back({line, key + " must be a list of strings"});
        return strings;
    }
    for (const auto& item : value) {
        if (!item.IsScalar() || item.Scalar().empty()) {
            problems.push_back({yaml::lineOf(item, line), key + " must hold non-empty strings"});
            continue;
        }
        strings.push_back(item.Scalar());
    }
    return strings;
}

}  // namespace

std::optional<Ipv4Range> parseIpv4Range(const std::string& text, std::string& error) {
    const auto slash = text.find('/');
    const std::string address = text.substr(0, slash);
    in_addr parsed{};
    if (inet_pton(AF_INET, address.c_str(), &parsed) != 1) {
        error = "not an IPv4 address or CIDR range: " + yaml::inQuotes(text);
        return std::nullopt;
    }
    int prefix = 32;
    if (slash != std::string::npos) {
        const std::string bits = text.substr(slash + 1);
        auto [end, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), prefix);
        if (ec != std::errc() || end != bits.data() + bits.size() || bits.empty() || prefix < 0 ||
            prefix > 32) {
            error = "the prefix length of " + yaml::inQuotes(text) + " must be 0 to 32";
            return std::nullopt;
        }
    }
    const std::uint32_t host = ntohl(parsed.s_addr);
    const std::uint32_t mask = prefix == 0 ? 0 : ~std::uint32_t(0) << (32 - prefix);
    Ipv4Range range;
    range.text = text;
    range.first = host & mask;
    range.last = range.first | ~mask;
    if (prefix < 31) {
        ++range.first;
        --range.last;
    }
    return range;
}

OnvifDetails parseOnvifDetails(const std::string& text, std::vector<DetailsProblem>& problems) {
    OnvifDetails details;
    // Akri's handler runs with no details at all; so does devlet's.
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) return details;
    try {
        if (yaml::load(text).IsNull()) return details;
    } catch (const YAML::Exception&) {  // NOLINT(bugprone-empty-catch)
        // readDetails reports it with its line.
    }
    auto mapping = yaml::readDetails(text, "onvif", kKeys, "discoveryTimeoutSeconds",
                                     [&](int line, std::string message) {
                                         problems.push_back({line, std::move(message)});
                                     });
    if (!mapping) return details;
    for (const auto& [key, entry] : *mapping) {
        const YAML::Node& value = entry.value;
        const int line = entry.valueLine();
        if (key == "ipAddresses") {
            details.ipAddresses = readFilter(key, value, line, problems);
        } else if (key == "macAddresses") {
            details.macAddresses = readFilter(key, value, line, problems);
        } else if (key == "scopes") {
            details.scopes = readFilter(key, value, line, problems);
        } else if (key == "uuids") {
            details.uuids = readFilter(key, value, line, problems);
        } else if (key == "discoveryTimeoutSeconds") {
            if (auto n = readWhole(key, value, line, 1, 60, problems))
                details.discoveryTimeout = std::chrono::seconds(*n);
        } else if (key == "probeRetransmissions") {
            if (auto n = readWhole(key, value, line, 0, 5, problems)) details.probeRetransmissions = int(*n);
        } else if (key == "interfaces") {
            details.interfaces = readStrings(key, value, line, problems);
        } else if (key == "unicastTargets") {
            std::uint64_t total = 0;
            for (const std::string& target : readStrings(key, value, line, problems)) {
                std::string error;
                if (auto range = parseIpv4Range(target, error)) {
                    total += range->size();
                    details.unicastTargets.push_back(*range);
                } else {
                    problems.push_back({line, "unicastTargets: " + error});
                }
            }
            if (total > kMaxUnicastTargets) {
                problems.push_back({line, "unicastTargets name " + std::to_string(total) +
                                              " addresses; at most " + std::to_string(kMaxUnicastTargets) +
                                              " (a /16) are probed"});
            }
        } else if (key == "unicastConcurrency") {
            if (auto n = readWhole(key, value, line, 1, 4096, problems)) details.unicastConcurrency = int(*n);
        } else if (key == "rescanIntervalSeconds") {
            if (auto n = readWhole(key, value, line, 5, 86400, problems))
                details.rescanInterval = std::chrono::seconds(*n);
        } else if (key == "livenessIntervalSeconds") {
            if (auto n = readWhole(key, value, line, 1, 3600, problems))
                details.livenessInterval = std::chrono::seconds(*n);
        } else if (key == "missedChecks") {
            if (auto n = readWhole(key, value, line, 1, 100, problems)) details.missedChecks = int(*n);
        } else if (key == "credentialsFile" || key == "credential") {
            if (!value.IsScalar() || value.Scalar().empty()) {
                problems.push_back(
                    {line, key + " must be a " + (key == "credential" ? "credential name" : "file path")});
                continue;
            }
            if (key == "credentialsFile") {
                if (value.Scalar().front() != '/') {
                    problems.push_back({line, "credentialsFile must be an absolute path; got " +
                                                  yaml::inQuotes(value.Scalar())});
                    continue;
                }
                details.credentialsFile = value.Scalar();
            } else {
                if (value.Scalar().find('/') != std::string::npos) {
                    problems.push_back({line, "credential names a systemd credential, not a path; got " +
                                                  yaml::inQuotes(value.Scalar())});
                    continue;
                }
                details.credential = value.Scalar();
            }
        } else if (key == "ipv6") {
            try {
                details.ipv6 = value.as<bool>();
            } catch (const YAML::Exception&) {
                problems.push_back({line, "ipv6 must be true or false"});
            }
        } else if (key == "offerUnauthenticated") {
            try {
                details.offerUnauthenticated = value.as<bool>();
            } catch (const YAML::Exception&) {
                problems.push_back({line, "offerUnauthenticated must be true or false"});
            }
        }
    }
    if (!details.credentialsFile.empty() && !details.credential.empty())
        problems.push_back({1, "credentialsFile and credential both name where credentials are: keep one"});
    return details;
}

namespace {

constexpr const char* kNotUsed =
    "; devlet does not take passwords from a configuration, whose text others may read and devlet may "
    "show: it is not used, and cameras are queried without it. Put it in the credentials file "
    "(discoveryDetails credentialsFile or credential) ";

// The property names a JSON list names (["a", "b"]); empty when the text is not one.
std::vector<std::string> namedProperties(const std::string& text) {
    std::vector<std::string> names;
    try {
        const YAML::Node list = YAML::Load(text);
        if (!list.IsSequence()) return names;
        for (const auto& item : list) {
            if (item.IsScalar()) names.push_back(item.Scalar());
        }
    } catch (const YAML::Exception&) {
        return {};  // not YAML, so not a list
    }
    return names;
}

// The username_ref and password_ref properties a device_credential_ref_list entry names:
// {"<uuid>": {"username_ref": "...", "password_ref": "..."}}.
std::vector<std::string> referencedProperties(const std::string& text) {
    std::vector<std::string> names;
    try {
        const YAML::Node map = YAML::Load(text);
        if (!map.IsMap()) return names;
        for (const auto& device : map) {
            if (!device.second.IsMap()) continue;
            for (const char* key : {"username_ref", "password_ref"}) {
                if (device.second[key] && device.second[key].IsScalar())
                    names.push_back(device.second[key].Scalar());
            }
        }
    } catch (const YAML::Exception&) {
        return {};  // not YAML, so names nothing
    }
    return names;
}

// Akri's per-device suffix is the uuid with '-' written as '_'.
std::string uuidOfSuffix(std::string suffix) {
    std::replace(suffix.begin(), suffix.end(), '_', '-');
    return suffix;
}

}  // namespace

namespace {
constexpr const char* kCredentialLists[] = {"device_credential_list", "device_credential_ref_list"};
}  // namespace

std::map<std::string, std::string> akriCredentialProperties(
    const std::map<std::string, std::string>& inline_,
    const std::map<std::string, std::string>& fromSecrets) {
    if (fromSecrets.empty()) return {};
    std::map<std::string, std::string> properties = fromSecrets;
    for (const char* list : kCredentialLists) {
        if (auto it = inline_.find(list); it != inline_.end()) properties.emplace(it->first, it->second);
    }
    return properties;
}

std::vector<PropertyWarning> onvifPropertyWarnings(const std::map<std::string, std::string>& properties,
                                                   const std::set<std::string>& fromSecrets) {
    // Which properties the lists make credential holders, and by which list.
    std::map<std::string, std::string> listed;
    for (const char* list : {"device_credential_list", "device_credential_ref_list"}) {
        auto it = properties.find(list);
        if (it == properties.end()) continue;
        for (const std::string& name : namedProperties(it->second)) {
            listed.emplace(name, list);
            auto holder = properties.find(name);
            if (std::string(list) == "device_credential_ref_list" && holder != properties.end()) {
                for (const std::string& ref : referencedProperties(holder->second))
                    listed.emplace(ref, "a device_credential_ref_list entry");
            }
        }
    }
    std::vector<PropertyWarning> warnings;
    for (const auto& [name, value] : properties) {
        std::string message;
        if (name == "username_default" || name == "password_default") {
            message = std::string("an Akri credential (the default)") + kNotUsed +
                      "as default, beside networks (the addresses it may go to).";
        } else if (name.starts_with("username_") || name.starts_with("password_")) {
            message = "an Akri credential (for camera " + uuidOfSuffix(name.substr(9)) + ")" + kNotUsed +
                      "under cameras with that uuid, beside networks (the addresses it may go to).";
        } else if (name == "device_credential_list" || name == "device_credential_ref_list") {
            const std::vector<std::string> named = namedProperties(value);
            if (!named.empty() && std::all_of(named.begin(), named.end(),
                                              [&](const std::string& n) { return fromSecrets.count(n) > 0; }))
                continue;  // names of properties read from Secrets: used in cluster mode
            const bool parsed = !named.empty();
            message = std::string("Akri's list of credential properties") + kNotUsed +
                      "under cameras, an entry per uuid, beside networks (passwords are plain text there: no "
                      "base64encoded)." +
                      (parsed ? "" : " It is also not a JSON list of property names.");
        } else if (auto it = listed.find(name); it != listed.end()) {
            message = "Akri credentials (named by " + it->second + ")" + kNotUsed +
                      "under cameras, an entry per uuid, beside networks.";
        } else {
            message =
                "the onvif handler reads no discovery property (its settings are discoveryDetails); "
                "ignored";
        }
        warnings.push_back({name, message});
    }
    return warnings;
}

}  // namespace devlet::onvif
