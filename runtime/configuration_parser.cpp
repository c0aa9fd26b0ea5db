#include "runtime/configuration_parser.h"

#include <algorithm>
#include <cmath>

#include "runtime/discovery.h"
#include "runtime/naming.h"

namespace devlet {

namespace {

using yaml::Entry;
using yaml::find;
using yaml::inQuotes;
using yaml::joined;
using yaml::lineOf;
using yaml::Mapping;
using yaml::nearMiss;

constexpr std::string_view kApiVersion = "akri.sh/v0";
constexpr std::string_view kKind = "Configuration";
constexpr long long kMaxCapacity = 1024;
constexpr double kMaxRemovalGraceSeconds = 86400;

const std::vector<std::string> kDocumentKeys = {"apiVersion", "kind", "metadata", "spec"};
// Kubernetes object metadata a `kubectl get -o yaml` export carries; all but name warned.
const std::vector<std::string> kMetadataKeys = {
    "name",         "namespace",       "labels",        "annotations",       "uid",
    "generateName", "resourceVersion", "generation",    "creationTimestamp", "deletionTimestamp",
    "finalizers",   "ownerReferences", "managedFields", "selfLink",          "deletionGracePeriodSeconds",
};
const std::vector<std::string> kSpecKeys = {
    "discoveryHandler",         "capacity", "brokerProperties", "brokerSpec", "instanceServiceSpec",
    "configurationServiceSpec", "devlet",
};
// Akri's controller acts on these; devlet does in cluster mode (cluster/brokers.h).
const std::vector<std::string> kClusterOnlySpecKeys = {"brokerSpec", "instanceServiceSpec",
                                                       "configurationServiceSpec"};
const std::vector<std::string> kDiscoveryHandlerKeys = {"name", "discoveryDetails", "discoveryProperties"};
const std::vector<std::string> kDiscoveryPropertyKeys = {"name", "value", "valueFrom"};
const std::vector<std::string> kValueFromKeys = {"secretKeyRef", "configMapKeyRef"};
const std::vector<std::string> kKeyRefKeys = {"name", "key", "namespace", "optional"};
const std::vector<std::string> kDevletKeys = {"allocationPolicy", "uniqueDevices", "configurationResource",
                                              "removalGracePeriodSeconds"};
const std::vector<std::string> kAllocationPolicies = {"spread", "pack"};

bool isCIdentifier(std::string_view name) {
    auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
    if (name.empty() || !letter(name.front())) return false;
    return std::all_of(name.begin(), name.end(), [&](char c) { return letter(c) || (c >= '0' && c <= '9'); });
}
}  // namespace

ConfigurationFileParser::ConfigurationFileParser(const std::string& text, const std::string& file,
                                                 const HandlerRegistry& handlers,
                                                 const std::string& resourceDomain, ParsedConfigurations& out)
    : file_(file), handlers_(handlers), resourceDomain_(resourceDomain), out_(out) {
    std::size_t start = 0;
    while (start <= text.size()) {
        std::size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        lines_.emplace_back(text.data() + start, end - start);
        start = end + 1;
    }
}

void ConfigurationFileParser::document(const YAML::Node& doc) {
    int docLine = lineOf(doc, 1);
    if (!doc.IsMap()) {
        error(docLine, "expected a Configuration: a mapping with apiVersion, kind, metadata and spec");
        return;
    }
    std::size_t problemsBefore = out_.problems.size();
    Mapping top = mapping(doc, docLine, "the document", &kDocumentKeys).value_or(Mapping{});
    Configuration config;
    config.sourceFile = file_;
    config.sourceLine = docLine;

    fixedValue(top, "apiVersion", kApiVersion, docLine);
    fixedValue(top, "kind", kKind, docLine);
    int nameLine = docLine;
    if (const Entry* metadata = find(top, "metadata")) {
        readMetadata(*metadata, config, nameLine);
    } else {
        error(docLine, "metadata is missing (it holds the configuration's name)");
    }
    HandlerUse handler;
    if (const Entry* spec = find(top, "spec")) {
        readSpec(*spec, config, handler);
    } else {
        error(docLine, "spec is missing");
    }
    // A configuration-level request gets distinct devices, as in Akri, unless the
    // configuration or its handler says otherwise.
    if (!uniqueDevicesGiven_) {
        if (const DiscoveryHandler* found = handlers_.find(config.handler))
            config.uniqueDevices = found->defaultUniqueDevices();
    }
    uniqueDevicesGiven_ = false;
    checkName(config, nameLine);
    if (handler.line > 0) checkDetails(config, handler);

    if (!config.name.empty()) {
        auto [it, inserted] = nameLines_.try_emplace(config.name, nameLine);
        if (!inserted) {
            error(nameLine, "duplicate configuration name " + inQuotes(config.name) + " (lines " +
                                std::to_string(it->second) + " and " + std::to_string(nameLine) + ")");
        }
    }
    if (out_.problems.size() == problemsBefore) out_.configurations.push_back(std::move(config));
}

void ConfigurationFileParser::error(int line, std::string message) {
    out_.problems.push_back({file_, line, std::move(message)});
}

void ConfigurationFileParser::warning(int line, std::string message) {
    out_.warnings.push_back({file_, line, std::move(message)});
}

std::optional<Mapping> ConfigurationFileParser::mapping(const YAML::Node& node, int line,
                                                        const std::string& where,
                                                        const std::vector<std::string>* allowed,
                                                        bool emptyAllowed) {
    // `brokerProperties:` with every entry commented out is a common sight.
    return yaml::readMapping(
        node, line, where, allowed, [this](int at, std::string message) { error(at, std::move(message)); },
        emptyAllowed);
}

// A string value; an empty value reads as "".
std::optional<std::string> ConfigurationFileParser::text(const Entry& entry, const std::string& what) {
    if (entry.value.IsNull()) return std::string();
    if (!entry.value.IsScalar()) {
        error(entry.valueLine(), what + " must be a string");
        return std::nullopt;
    }
    return entry.value.Scalar();
}

std::optional<long long> ConfigurationFileParser::integer(const Entry& entry, const std::string& what) {
    if (auto value = yaml::scalarAs<long long>(entry.value)) return value;
    error(entry.valueLine(), what + " must be a whole number" + got(entry));
    return std::nullopt;
}

std::optional<double> ConfigurationFileParser::number(const Entry& entry, const std::string& what) {
    if (auto value = yaml::scalarAs<double>(entry.value); value && std::isfinite(*value)) return value;
    error(entry.valueLine(), what + " must be a number" + got(entry));
    return std::nullopt;
}

std::optional<bool> ConfigurationFileParser::boolean(const Entry& entry, const std::string& what) {
    if (auto value = yaml::scalarAs<bool>(entry.value)) return value;
    error(entry.valueLine(), what + " must be true or false" + got(entry));
    return std::nullopt;
}

std::string ConfigurationFileParser::got(const Entry& entry) {
    if (entry.value.IsNull()) return " (it is empty)";
    return entry.value.IsScalar() ? " (got " + inQuotes(entry.value.Scalar()) + ")" : "";
}

void ConfigurationFileParser::fixedValue(const Mapping& top, const std::string& key,
                                         std::string_view expected, int docLine) {
    const Entry* entry = find(top, key);
    if (!entry) {
        error(docLine, key + " is missing (expected " + inQuotes(expected) + ")");
        return;
    }
    auto value = text(*entry, key);
    if (value && *value != expected) {
        error(entry->valueLine(), key + " must be " + inQuotes(expected) + " (got " + inQuotes(*value) + ")");
    }
}

void ConfigurationFileParser::readMetadata(const Entry& entry, Configuration& config, int& nameLine) {
    auto metadata = mapping(entry.value, entry.line, "metadata", &kMetadataKeys);
    if (!metadata) return;
    warnUnusedMetadata(*metadata);
    const Entry* name = find(*metadata, "name");
    if (!name) {
        error(entry.line, "metadata.name is missing: every configuration needs a name");
        return;
    }
    nameLine = name->valueLine();
    auto value = text(*name, "metadata.name");
    if (!value) return;
    if (value->empty()) {
        error(nameLine, "metadata.name is empty");
        return;
    }
    config.name = *value;
}

// A Kubernetes export carries the object's bookkeeping; Akri acts on some of it (its
// Instances, Services and broker pods live in the namespace). devlet reads only the name.
void ConfigurationFileParser::warnUnusedMetadata(const Mapping& metadata) {
    for (const auto& [key, entry] : metadata) {
        if (key == "name") continue;
        if (key == "namespace") {
            warning(entry.line,
                    "metadata.namespace: devlet has no namespaces (resource names come from "
                    "metadata.name alone); ignored");
        } else {
            warning(entry.line,
                    "metadata." + key + ": Kubernetes object metadata, not read by devlet; ignored");
        }
    }
}

void ConfigurationFileParser::readSpec(const Entry& entry, Configuration& config, HandlerUse& handler) {
    auto spec = mapping(entry.value, entry.line, "spec", &kSpecKeys);
    if (!spec) return;
    if (const Entry* discoveryHandler = find(*spec, "discoveryHandler")) {
        readDiscoveryHandler(*discoveryHandler, config, handler);
    } else {
        error(entry.line,
              "spec.discoveryHandler is missing (it names the discovery handler and its details)");
    }
    if (const Entry* capacity = find(*spec, "capacity")) {
        if (auto value = integer(*capacity, "spec.capacity")) {
            if (*value < 1) {
                error(capacity->valueLine(),
                      "spec.capacity must be at least 1 (got " + std::to_string(*value) + ")");
            } else if (*value > kMaxCapacity) {
                error(capacity->valueLine(), "spec.capacity must be at most " + std::to_string(kMaxCapacity) +
                                                 " (got " + std::to_string(*value) + ")");
            } else {
                config.capacity = static_cast<int>(*value);
            }
        }
    }
    if (const Entry* brokerProperties = find(*spec, "brokerProperties")) {
        readBrokerProperties(*brokerProperties, config);
    }
    if (const Entry* broker = find(*spec, "brokerSpec")) readBrokerSpec(*broker, config);
    for (auto [key, target] : {std::pair{"instanceServiceSpec", &config.instanceServiceSpec},
                               std::pair{"configurationServiceSpec", &config.configurationServiceSpec}}) {
        const Entry* service = find(*spec, key);
        if (!service) continue;
        *target = objectJson(*service, std::string("spec.") + key);
        if (!target->empty()) checkKubeFields(*service, "ServiceSpec", std::string("spec.") + key, "Service");
    }
    for (const auto& key : kClusterOnlySpecKeys) {
        if (const Entry* used = find(*spec, key)) {
            out_.warnings.push_back({file_, used->line,
                                     "spec." + key +
                                         ": devlet deploys brokers and services only in cluster mode "
                                         "(cluster.kubeconfig in the settings); ignored",
                                     true});
        }
    }
    if (const Entry* devlet = find(*spec, "devlet")) readDevlet(*devlet, config);
}

void ConfigurationFileParser::readDiscoveryHandler(const Entry& entry, Configuration& config,
                                                   HandlerUse& handler) {
    const std::string where = "spec.discoveryHandler";
    auto discoveryHandler = mapping(entry.value, entry.line, where, &kDiscoveryHandlerKeys);
    if (!discoveryHandler) return;
    if (const Entry* name = find(*discoveryHandler, "name")) {
        auto value = text(*name, where + ".name");
        if (value && value->empty()) error(name->valueLine(), where + ".name is empty");
        if (value && !value->empty()) {
            config.handler = *value;
            handler.line = name->valueLine();
        }
    } else {
        error(entry.line, where + ".name is missing (known handlers: " + joined(handlers_.names()) + ")");
    }
    handler.detailsKeyLine = entry.line;
    config.detailsLine = entry.line;
    handler.detailsRead = true;
    if (const Entry* details = find(*discoveryHandler, "discoveryDetails")) {
        handler.detailsKeyLine = details->line;
        auto value = text(*details, where + ".discoveryDetails");
        handler.detailsRead = value.has_value();
        if (value) {
            config.discoveryDetails = *value;
            config.detailsLine = detailsStart(*details);
        }
    }
    if (const Entry* properties = find(*discoveryHandler, "discoveryProperties")) {
        readDiscoveryProperties(*properties, config, handler);
    }
}

// The file line of the details text's first line. A block scalar (`discoveryDetails: |`)
// starts on the line after its indicator; any other scalar where its value starts.
int ConfigurationFileParser::detailsStart(const Entry& details) const {
    if (details.value.IsNull()) return details.line;
    YAML::Mark mark = details.value.Mark();
    if (mark.line < 0 || static_cast<std::size_t>(mark.line) >= lines_.size()) return details.line;
    std::string_view rest = lines_[mark.line];
    rest = rest.substr(std::min(rest.size(), static_cast<std::size_t>(std::max(mark.column, 0))));
    // Skip a tag (!!str) or an anchor (&a) in front of the scalar itself.
    while (true) {
        std::size_t start = rest.find_first_not_of(" \t");
        if (start == std::string_view::npos) return mark.line + 1;
        rest = rest.substr(start);
        if (rest.front() != '!' && rest.front() != '&') break;
        std::size_t end = rest.find_first_of(" \t");
        if (end == std::string_view::npos) return mark.line + 1;
        rest = rest.substr(end);
    }
    bool block = rest.front() == '|' || rest.front() == '>';
    return block ? mark.line + 2 : mark.line + 1;
}

void ConfigurationFileParser::readDiscoveryProperties(const Entry& entry, Configuration& config,
                                                      HandlerUse& handler) {
    const std::string where = "spec.discoveryHandler.discoveryProperties";
    if (entry.value.IsNull()) return;
    if (!entry.value.IsSequence()) {
        error(entry.valueLine(), where + " must be a list of {name, value}");
        return;
    }
    std::map<std::string, int> seen;
    std::size_t index = 0;
    for (const auto& item : entry.value) {
        std::string itemWhere = where + "[" + std::to_string(index++) + "]";
        int itemLine = lineOf(item, entry.line);
        auto property = mapping(item, itemLine, itemWhere, &kDiscoveryPropertyKeys);
        if (!property) continue;
        const Entry* name = find(*property, "name");
        if (!name) {
            error(itemLine, itemWhere + ".name is missing");
            continue;
        }
        auto propertyName = text(*name, itemWhere + ".name");
        if (!propertyName) continue;
        if (!isCIdentifier(*propertyName)) {
            error(name->valueLine(), itemWhere + ".name " + inQuotes(*propertyName) +
                                         " must be a C identifier (letters, digits and '_', not starting "
                                         "with a digit)");
            continue;
        }
        if (const Entry* valueFrom = find(*property, "valueFrom")) {
            if (find(*property, "value")) {
                error(valueFrom->line, itemWhere + " has both value and valueFrom; give one");
                continue;
            }
            auto reference = readValueFrom(*valueFrom, itemWhere + ".valueFrom");
            if (!reference) continue;
            auto [first, inserted] = seen.try_emplace(*propertyName, name->valueLine());
            if (!inserted) {
                error(name->valueLine(), "duplicate discovery property " + inQuotes(*propertyName) +
                                             " (first at line " + std::to_string(first->second) + ")");
                continue;
            }
            reference->property = *propertyName;
            handler.propertyLines[*propertyName] = name->valueLine();
            const std::string what = itemWhere + ".valueFrom (" + *propertyName + ")";
            if (!reference->secret) {
                warning(valueFrom->line, what +
                                             ": devlet does not read ConfigMaps (only Secrets, in cluster "
                                             "mode); give the text as value; the property is left out");
                continue;
            }
            config.propertyReferences.push_back(std::move(*reference));
            continue;
        }
        std::string value;
        if (const Entry* given = find(*property, "value")) {
            auto givenValue = text(*given, itemWhere + ".value");
            if (!givenValue) continue;
            value = *givenValue;
        } else {
            // Akri's schema wants one of value and valueFrom.
            warning(name->line, itemWhere + " (" + *propertyName +
                                    ") has neither value nor valueFrom: Akri's API server refuses this "
                                    "Configuration; devlet gives the property as empty (write value: \"\")");
        }
        auto [first, inserted] = seen.try_emplace(*propertyName, name->valueLine());
        if (!inserted) {
            error(name->valueLine(), "duplicate discovery property " + inQuotes(*propertyName) +
                                         " (first at line " + std::to_string(first->second) + ")");
            continue;
        }
        config.discoveryProperties[*propertyName] = value;
        handler.propertyLines[*propertyName] = name->valueLine();
    }
}

// Akri's valueFrom: exactly one of secretKeyRef and configMapKeyRef, each with name and
// key (namespace "default" and optional false when not given).
std::optional<PropertyReference> ConfigurationFileParser::readValueFrom(const Entry& entry,
                                                                        const std::string& where) {
    auto valueFrom = mapping(entry.value, entry.line, where, &kValueFromKeys);
    if (!valueFrom) return std::nullopt;
    const Entry* secret = find(*valueFrom, "secretKeyRef");
    const Entry* configMap = find(*valueFrom, "configMapKeyRef");
    if ((secret == nullptr) == (configMap == nullptr)) {
        error(entry.line, where + " must have one of secretKeyRef and configMapKeyRef");
        return std::nullopt;
    }
    const Entry& ref = secret ? *secret : *configMap;
    const std::string refWhere = where + (secret ? ".secretKeyRef" : ".configMapKeyRef");
    auto fields = mapping(ref.value, ref.line, refWhere, &kKeyRefKeys);
    if (!fields) return std::nullopt;
    PropertyReference reference;
    reference.secret = secret != nullptr;
    reference.line = entry.line;
    reference.where = where;
    for (const auto& [key, target] : {std::pair<const char*, std::string*>{"name", &reference.name},
                                      {"key", &reference.key},
                                      {"namespace", &reference.namespaceName}}) {
        const Entry* given = find(*fields, key);
        if (!given) continue;
        auto value = text(*given, refWhere + "." + key);
        if (!value) return std::nullopt;
        *target = *value;
    }
    // Akri's schema lets them out (and its agent then cannot read the configuration).
    for (const auto& [key, value] : {std::pair<const char*, const std::string*>{"name", &reference.name},
                                     {"key", &reference.key},
                                     {"namespace", &reference.namespaceName}}) {
        if (value->empty()) {
            warning(entry.line, refWhere + "." + key + " is missing or empty; the property is left out");
            return std::nullopt;
        }
    }
    if (const Entry* optional = find(*fields, "optional")) {
        auto value = boolean(*optional, refWhere + ".optional");
        if (!value) return std::nullopt;
        reference.optional = *value;
    }
    return reference;
}

void ConfigurationFileParser::readBrokerProperties(const Entry& entry, Configuration& config) {
    auto properties = mapping(entry.value, entry.line, "spec.brokerProperties", nullptr, true);
    if (!properties) return;
    for (const auto& [key, property] : *properties) {
        // They become container environment variables.
        if (key.empty() || key.find('=') != std::string::npos) {
            error(property.line, "spec.brokerProperties: " + inQuotes(key) +
                                     " is not a usable environment variable name (empty or contains '=')");
            continue;
        }
        if (auto value = text(property, "spec.brokerProperties." + key))
            config.brokerProperties[key] = *value;
    }
}

void ConfigurationFileParser::readDevlet(const Entry& entry, Configuration& config) {
    const std::string where = "spec.devlet";
    auto devlet = mapping(entry.value, entry.line, where, &kDevletKeys, true);
    if (!devlet) return;
    if (const Entry* policy = find(*devlet, "allocationPolicy")) {
        if (auto value = text(*policy, where + ".allocationPolicy")) {
            if (*value == "spread") {
                config.allocationPolicy = AllocationPolicy::Spread;
            } else if (*value == "pack") {
                config.allocationPolicy = AllocationPolicy::Pack;
            } else {
                std::string message =
                    where + ".allocationPolicy must be \"spread\" or \"pack\" (got " + inQuotes(*value) + ")";
                if (std::string hint = nearMiss(*value, kAllocationPolicies); !hint.empty()) {
                    message += "; did you mean " + inQuotes(hint) + "?";
                }
                error(policy->valueLine(), message);
            }
        }
    }
    if (const Entry* unique = find(*devlet, "uniqueDevices")) {
        uniqueDevicesGiven_ = true;
        if (auto value = boolean(*unique, where + ".uniqueDevices")) config.uniqueDevices = *value;
    }
    if (const Entry* resource = find(*devlet, "configurationResource")) {
        if (auto value = text(*resource, where + ".configurationResource")) {
            if (std::string problem = resourceNameProblem(*value); !problem.empty()) {
                error(resource->valueLine(), where + ".configurationResource " + inQuotes(*value) +
                                                 " is not a valid extended resource name: " + problem);
            } else {
                config.configurationResource = *value;
            }
        }
    }
    if (const Entry* grace = find(*devlet, "removalGracePeriodSeconds")) {
        if (auto seconds = number(*grace, where + ".removalGracePeriodSeconds")) {
            if (*seconds < 0 || *seconds > kMaxRemovalGraceSeconds) {
                error(grace->valueLine(), where +
                                              ".removalGracePeriodSeconds must be between 0 and 86400 (got " +
                                              grace->value.Scalar() + ")");
            } else {
                config.removalGrace = std::chrono::milliseconds(std::llround(*seconds * 1000));
            }
        }
    }
}

}  // namespace devlet
