#include "runtime/configuration.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <regex>

#include <boost/json.hpp>
#include <fcntl.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include "kube_schema/kube_schema.h"
#include "runtime/discovery.h"
#include "runtime/naming.h"
#include "runtime/settings.h"
#include "runtime/strict_yaml.h"

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
constexpr std::string_view kHashPlaceholder = "xxxxxx";
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
const std::vector<std::string> kBrokerSpecKeys = {"brokerPodSpec", "brokerJobSpec"};
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

// Parses the documents of one file into `out`; every problem carries file:line.
class FileParser {
public:
    FileParser(const std::string& text, const std::string& file, const HandlerRegistry& handlers,
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

    void document(const YAML::Node& doc) {
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

    void error(int line, std::string message) { out_.problems.push_back({file_, line, std::move(message)}); }
    void warning(int line, std::string message) {
        out_.warnings.push_back({file_, line, std::move(message)});
    }

private:
    // Where the handler name was given and whether discoveryDetails could be read.
    struct HandlerUse {
        int line = 0;
        int detailsKeyLine = 0;
        bool detailsRead = false;
        std::map<std::string, int> propertyLines;  // discovery property name -> its line
    };

    std::optional<Mapping> mapping(const YAML::Node& node, int line, const std::string& where,
                                   const std::vector<std::string>* allowed, bool emptyAllowed = false) {
        // `brokerProperties:` with every entry commented out is a common sight.
        return yaml::readMapping(
            node, line, where, allowed,
            [this](int at, std::string message) { error(at, std::move(message)); }, emptyAllowed);
    }

    // A string value; an empty value reads as "".
    std::optional<std::string> text(const Entry& entry, const std::string& what) {
        if (entry.value.IsNull()) return std::string();
        if (!entry.value.IsScalar()) {
            error(entry.valueLine(), what + " must be a string");
            return std::nullopt;
        }
        return entry.value.Scalar();
    }

    std::optional<long long> integer(const Entry& entry, const std::string& what) {
        try {
            if (entry.value.IsScalar()) return entry.value.as<long long>();
        } catch (const YAML::Exception&) {
        }
        error(entry.valueLine(), what + " must be a whole number" + got(entry));
        return std::nullopt;
    }

    std::optional<double> number(const Entry& entry, const std::string& what) {
        try {
            if (entry.value.IsScalar()) {
                double value = entry.value.as<double>();
                if (std::isfinite(value)) return value;
            }
        } catch (const YAML::Exception&) {
        }
        error(entry.valueLine(), what + " must be a number" + got(entry));
        return std::nullopt;
    }

    std::optional<bool> boolean(const Entry& entry, const std::string& what) {
        try {
            if (entry.value.IsScalar()) return entry.value.as<bool>();
        } catch (const YAML::Exception&) {
        }
        error(entry.valueLine(), what + " must be true or false" + got(entry));
        return std::nullopt;
    }

    static std::string got(const Entry& entry) {
        if (entry.value.IsNull()) return " (it is empty)";
        return entry.value.IsScalar() ? " (got " + inQuotes(entry.value.Scalar()) + ")" : "";
    }

    void fixedValue(const Mapping& top, const std::string& key, std::string_view expected, int docLine) {
        const Entry* entry = find(top, key);
        if (!entry) {
            error(docLine, key + " is missing (expected " + inQuotes(expected) + ")");
            return;
        }
        auto value = text(*entry, key);
        if (value && *value != expected) {
            error(entry->valueLine(),
                  key + " must be " + inQuotes(expected) + " (got " + inQuotes(*value) + ")");
        }
    }

    void readMetadata(const Entry& entry, Configuration& config, int& nameLine) {
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
    void warnUnusedMetadata(const Mapping& metadata) {
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

    void readSpec(const Entry& entry, Configuration& config, HandlerUse& handler) {
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
                    error(capacity->valueLine(), "spec.capacity must be at most " +
                                                     std::to_string(kMaxCapacity) + " (got " +
                                                     std::to_string(*value) + ")");
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
            if (!target->empty())
                checkKubeFields(*service, "ServiceSpec", std::string("spec.") + key, "Service");
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

    // Akri: exactly one of brokerPodSpec and brokerJobSpec.
    void readBrokerSpec(const Entry& entry, Configuration& config) {
        auto broker = mapping(entry.value, entry.line, "spec.brokerSpec", &kBrokerSpecKeys);
        if (!broker) return;
        const Entry* pod = find(*broker, "brokerPodSpec");
        const Entry* job = find(*broker, "brokerJobSpec");
        if (pod && job) {
            error(job->line, "spec.brokerSpec has both brokerPodSpec and brokerJobSpec; give one");
            return;
        }
        if (pod) config.brokerPodSpec = objectJson(*pod, "spec.brokerSpec.brokerPodSpec");
        if (job) config.brokerJobSpec = objectJson(*job, "spec.brokerSpec.brokerJobSpec");
        if (!config.brokerPodSpec.empty())
            checkKubeFields(*pod, "core.v1.PodSpec", "spec.brokerSpec.brokerPodSpec", "broker");
        if (!config.brokerJobSpec.empty())
            checkKubeFields(*job, "batch.v1.JobSpec", "spec.brokerSpec.brokerJobSpec", "broker");
    }

    // A field the Kubernetes type lacks, at any depth: Akri's webhook refuses the
    // Configuration, the API server drops the field from an update and refuses it in an
    // apply, and devlet's cluster mode applies no `object` from the spec (cluster/brokers.h).
    void checkKubeFields(const Entry& entry, std::string_view typeName, const std::string& where,
                         const std::string& object) {
        const kube_schema::Type* type = kube_schema::findType(typeName);
        if (type) checkKubeFields(entry.value, *type, where, entry.line, object);
    }

    void checkKubeFields(const YAML::Node& node, const kube_schema::Type& type, const std::string& where,
                         int line, const std::string& object) {
        if (!node.IsMap() || type.preserveUnknownFields) return;
        for (const auto& item : node) {
            const std::string key = item.first.Scalar();
            const int keyLine = lineOf(item.first, line);
            const std::string path = where + "." + key;
            const kube_schema::Field* field = kube_schema::findField(type, key);
            if (!field) {
                const std::string meant = nearMiss(key, kube_schema::fieldNames(type));
                warning(keyLine, path + ": not a field of the Kubernetes " +
                                     std::string(kube_schema::shortName(type)) +
                                     (meant.empty() ? "" : " (did you mean " + inQuotes(meant) + "?)") +
                                     "; Akri's webhook refuses this Configuration, and devlet applies no " +
                                     object + " from it");
                continue;
            }
            const kube_schema::Type* inner = kube_schema::typeAt(field->type);
            if (!inner) continue;
            if (field->kind == kube_schema::Kind::Object) {
                checkKubeFields(item.second, *inner, path, keyLine, object);
            } else if (field->kind == kube_schema::Kind::ObjectList && item.second.IsSequence()) {
                std::size_t index = 0;
                for (const auto& element : item.second) {
                    checkKubeFields(element, *inner, path + "[" + std::to_string(index++) + "]",
                                    lineOf(element, keyLine), object);
                }
            } else if (field->kind == kube_schema::Kind::ObjectMap && item.second.IsMap()) {
                for (const auto& value : item.second) {
                    checkKubeFields(value.second, *inner, path + "[" + value.first.Scalar() + "]",
                                    lineOf(value.first, keyLine), object);
                }
            }
        }
    }

    // A Kubernetes object spec, kept as JSON text for the API.
    std::string objectJson(const Entry& entry, const std::string& what) {
        if (!entry.value.IsMap()) {
            error(entry.valueLine(), what + " must be a mapping (a Kubernetes object spec)");
            return {};
        }
        try {
            return boost::json::serialize(yamlToJson(entry.value));
        } catch (const YAML::Exception& e) {
            error(entry.valueLine(), what + ": " + e.what());
            return {};
        }
    }

    // Plain scalars take the JSON type YAML 1.2's core schema gives them (a port is a
    // number, `"1"` stays a string), as kubectl reads a manifest.
    static boost::json::value yamlToJson(const YAML::Node& node) {
        if (node.IsMap()) {
            boost::json::object object;
            for (const auto& item : node) object[item.first.as<std::string>()] = yamlToJson(item.second);
            return object;
        }
        if (node.IsSequence()) {
            boost::json::array array;
            for (const auto& item : node) array.push_back(yamlToJson(item));
            return array;
        }
        if (!node.IsScalar()) return nullptr;
        const std::string& text = node.Scalar();
        if (node.Tag() != "?") return boost::json::string(text);  // quoted or tagged
        if (text == "null" || text == "Null" || text == "NULL" || text == "~" || text.empty()) return nullptr;
        if (text == "true" || text == "True" || text == "TRUE") return true;
        if (text == "false" || text == "False" || text == "FALSE") return false;
        static const std::regex integer("[-+]?[0-9]+");
        static const std::regex real("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
        if (std::regex_match(text, integer)) {
            try {
                return std::stoll(text);
            } catch (const std::exception&) {
                return boost::json::string(text);
            }
        }
        if (std::regex_match(text, real)) {
            try {
                return std::stod(text);
            } catch (const std::exception&) {
                return boost::json::string(text);
            }
        }
        return boost::json::string(text);
    }

    void readDiscoveryHandler(const Entry& entry, Configuration& config, HandlerUse& handler) {
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
    int detailsStart(const Entry& details) const {
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

    void readDiscoveryProperties(const Entry& entry, Configuration& config, HandlerUse& handler) {
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
                    warning(valueFrom->line,
                            what +
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
                warning(name->line,
                        itemWhere + " (" + *propertyName +
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
    std::optional<PropertyReference> readValueFrom(const Entry& entry, const std::string& where) {
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

    void readBrokerProperties(const Entry& entry, Configuration& config) {
        auto properties = mapping(entry.value, entry.line, "spec.brokerProperties", nullptr, true);
        if (!properties) return;
        for (const auto& [key, property] : *properties) {
            // They become container environment variables.
            if (key.empty() || key.find('=') != std::string::npos) {
                error(property.line,
                      "spec.brokerProperties: " + inQuotes(key) +
                          " is not a usable environment variable name (empty or contains '=')");
                continue;
            }
            if (auto value = text(property, "spec.brokerProperties." + key))
                config.brokerProperties[key] = *value;
        }
    }

    void readDevlet(const Entry& entry, Configuration& config) {
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
                    std::string message = where + ".allocationPolicy must be \"spread\" or \"pack\" (got " +
                                          inQuotes(*value) + ")";
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
                    error(grace->valueLine(),
                          where + ".removalGracePeriodSeconds must be between 0 and 86400 (got " +
                              grace->value.Scalar() + ")");
                } else {
                    config.removalGrace = std::chrono::milliseconds(std::llround(*seconds * 1000));
                }
            }
        }
    }

    // The configuration's name becomes part of Kubernetes resource names and device ids.
    // Accepted as Akri accepts it; where the kubelet would refuse a name derived from it,
    // the error says which and why.
    void checkName(const Configuration& config, int line) {
        const std::string& name = config.name;
        if (name.empty()) return;
        if (std::string problem = configurationNameProblem(name); !problem.empty()) {
            error(line, "metadata.name " + inQuotes(name) + " " + problem);
            return;
        }
        const std::string instanceResource = resourceDomain_ + "/" + instanceName(name, "000000");
        if (std::string problem = resourceNameProblem(instanceResource); !problem.empty()) {
            error(line, "the instance-level resource name " + resourceDomain_ + "/" +
                            instanceName(name, kHashPlaceholder) +
                            " is not valid for the kubelet: " + problem);
            return;
        }
        if (config.configurationResource.empty()) {
            const std::string resource = resourceDomain_ + "/" + name;
            if (std::string problem = resourceNameProblem(resource); !problem.empty()) {
                error(line, "the configuration-level resource name " + resource +
                                " is not valid for the kubelet: " + problem);
            }
        }
        // Akri's slot ids are the same and work; the device-plugin API's comment is stricter.
        const std::string lastSlot = slotId(instanceName(name, kHashPlaceholder), config.capacity - 1);
        if (lastSlot.size() > kDocumentedDeviceIdLength) {
            warning(line, "slot ids up to " + lastSlot + " have " + std::to_string(lastSlot.size()) +
                              " characters, more than the " + std::to_string(kDocumentedDeviceIdLength) +
                              " the device-plugin API documents for a device id; the kubelet is not known to "
                              "check it, and Akri gives the same ids");
        }
    }

    void checkDetails(Configuration& config, const HandlerUse& handler) {
        const DiscoveryHandler* found = handlers_.find(config.handler);
        if (!found) {
            std::vector<std::string> known = handlers_.names();
            std::string message = "unknown discovery handler " + inQuotes(config.handler);
            if (std::string hint = nearMiss(config.handler, known); !hint.empty()) {
                message += "; did you mean " + inQuotes(hint) + "?";
            }
            message +=
                known.empty() ? " (no discovery handlers are available)" : " (known: " + joined(known) + ")";
            error(handler.line, message);
            return;
        }
        if (!handler.detailsRead) return;
        std::vector<DetailsProblem> problems;
        try {
            problems = found->check(config);
        } catch (const std::exception& e) {
            problems.push_back({0, std::string("the handler could not check them: ") + e.what()});
        } catch (...) {
            problems.push_back({0, "the handler could not check them"});
        }
        for (const auto& problem : problems) {
            int line = problem.line > 0 ? config.detailsLine + problem.line - 1 : handler.detailsKeyLine;
            std::string message = "discoveryDetails (" + config.handler + "): " + problem.message;
            if (problem.warning) {
                warning(line, std::move(message));
            } else {
                error(line, std::move(message));
            }
        }
        checkDiscoveryProperties(*found, config, handler);
    }

    void checkDiscoveryProperties(const DiscoveryHandler& found, Configuration& config,
                                  const HandlerUse& handler) {
        for (const PropertyReference& reference : config.propertyReferences) {
            const std::string what = reference.where + " (" + reference.property + "): ";
            if (!found.readsReferencedProperties()) {
                warning(reference.line, what + "the " + config.handler +
                                            " handler reads no property from a Secret; left out");
                continue;
            }
            // Outside cluster mode there is no API to read it from: warned then (and left out).
            out_.warnings.push_back(
                {file_, reference.line,
                 what + "devlet reads Secrets only in cluster mode (cluster.kubeconfig in the settings); "
                        "without it, secrets come from root-only files or systemd credentials "
                        "(LoadCredential=); the property is left out",
                 true});
        }
        if (!found.readsReferencedProperties()) config.propertyReferences.clear();
        if (config.discoveryProperties.empty()) return;
        std::vector<PropertyWarning> warnings;
        try {
            warnings = found.checkDiscoveryProperties(config);
        } catch (const std::exception& e) {
            warnings.push_back({"", std::string("the handler could not check them: ") + e.what()});
        } catch (...) {
            warnings.push_back({"", "the handler could not check them"});
        }
        for (const auto& [property, message] : warnings) {
            auto line = handler.propertyLines.find(property);
            warning(line == handler.propertyLines.end() ? handler.detailsKeyLine : line->second,
                    "spec.discoveryHandler.discoveryProperties (" + property + "): " + message);
        }
    }

    std::string file_;
    const HandlerRegistry& handlers_;
    std::string resourceDomain_;
    ParsedConfigurations& out_;
    std::vector<std::string_view> lines_;  // views into the caller's text, for block-scalar lines
    std::map<std::string, int> nameLines_;
    bool uniqueDevicesGiven_ = false;  // the current document sets spec.devlet.uniqueDevices
};

bool endsWith(std::string_view text, std::string_view suffix) {
    return text.ends_with(suffix);
}

// Names that editors, package managers and half-finished copies leave behind.
bool isConfigurationFileName(std::string_view name) {
    if (!(endsWith(name, ".yaml") || endsWith(name, ".yml"))) return false;
    if (name.starts_with('.') || name.starts_with('#')) return false;  // hidden, emacs autosave
    for (std::string_view marker : {".dpkg-", ".ucf-", ".swp", ".swx", ".tmp", "~"}) {
        if (name.find(marker) != std::string_view::npos) return false;
    }
    return true;
}

}  // namespace

std::string ConfigProblem::str() const {
    if (line > 0) return file + ":" + std::to_string(line) + ": " + message;
    return file + ": " + message;
}

ParsedConfigurations parseConfigurations(const std::string& text, const std::string& fileName,
                                         const HandlerRegistry& handlers, const std::string& resourceDomain) {
    ParsedConfigurations out;
    std::vector<YAML::Node> documents;
    try {
        documents = yaml::loadAll(text);
    } catch (const YAML::Exception& e) {
        out.problems.push_back(
            {fileName, e.mark.line >= 0 ? e.mark.line + 1 : 0, "YAML syntax error: " + e.msg});
        return out;
    } catch (const std::exception& e) {
        out.problems.push_back({fileName, 0, std::string("cannot parse YAML: ") + e.what()});
        return out;
    }
    FileParser parser(text, fileName, handlers, resourceDomain, out);
    for (const auto& document : documents) {
        if (document.IsNull()) continue;  // empty document (a stray "---", only comments)
        try {
            parser.document(document);
        } catch (const YAML::Exception& e) {
            parser.error(e.mark.line >= 0 ? e.mark.line + 1 : lineOf(document, 0), e.msg);
        } catch (const std::exception& e) {
            parser.error(lineOf(document, 0), e.what());
        }
    }
    auto byLine = [](const ConfigProblem& a, const ConfigProblem& b) { return a.line < b.line; };
    std::stable_sort(out.problems.begin(), out.problems.end(), byLine);
    std::stable_sort(out.warnings.begin(), out.warnings.end(), byLine);
    // The file is rejected as a whole: a half-applied file is harder to reason about.
    if (!out.problems.empty()) out.configurations.clear();
    return out;
}

ParsedConfigurations loadConfigurationFile(const std::string& path, const HandlerRegistry& handlers,
                                           const std::string& resourceDomain) {
    int error = 0;
    auto text = yaml::readText(path, error);
    if (!text) {
        ParsedConfigurations out;
        out.problems.push_back({path, 0, std::string("cannot read: ") + std::strerror(error)});
        return out;
    }
    ParsedConfigurations parsed = parseConfigurations(*text, path, handlers, resourceDomain);
    if (!parsed.problems.empty() && looksLikeSettings(*text))
        parsed.problems = {
            {path, 0,
             "this looks like devlet's settings (devlet.yaml), not an Akri Configuration: give it "
             "with --config " +
                 path}};
    return parsed;
}

std::vector<std::string> configurationFiles(const std::string& dir) {
    std::vector<std::string> files;
    std::error_code ec;
    std::filesystem::directory_iterator it(dir, ec);
    if (ec) return files;
    for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
        if (ec) break;
        std::string name = it->path().filename().string();
        if (!isConfigurationFileName(name)) continue;
        std::error_code statError;
        if (!it->is_regular_file(statError)) continue;  // follows symlinks, as conf.d users expect
        files.push_back(it->path().string());
    }
    std::sort(files.begin(), files.end());
    return files;
}

std::string configurationLevelResource(const Configuration& configuration,
                                       const std::string& resourceDomain) {
    return configuration.configurationResource.empty() ? resourceDomain + "/" + configuration.name
                                                       : configuration.configurationResource;
}

std::string resourceConflict(const Configuration& candidate, const std::vector<Configuration>& accepted,
                             const std::string& resourceDomain) {
    const std::string resource = configurationLevelResource(candidate, resourceDomain);
    auto isHash = [](std::string_view text) {
        return text.size() == 6 && std::all_of(text.begin(), text.end(),
                                               [](char c) { return std::isxdigit(c) && !std::isupper(c); });
    };
    auto where = [](const Configuration& c) { return c.sourceFile + ":" + std::to_string(c.sourceLine); };
    std::vector<const Configuration*> everyone;
    for (const Configuration& other : accepted) everyone.push_back(&other);
    everyone.push_back(&candidate);  // its own instances count too
    for (const Configuration* other : everyone) {
        if (other != &candidate && configurationLevelResource(*other, resourceDomain) == resource) {
            return "resource " + inQuotes(resource) + " is already offered by configuration " +
                   inQuotes(other->name) + " (" + where(*other) + ")";
        }
        const std::string instancePrefix = resourceDomain + "/" + other->name + "-";
        if (resource.starts_with(instancePrefix) &&
            isHash(std::string_view(resource).substr(instancePrefix.size()))) {
            return "resource " + inQuotes(resource) +
                   " has the form of an instance resource of configuration " + inQuotes(other->name) +
                   (other == &candidate ? "" : " (" + where(*other) + ")") +
                   "; choose a name that does not end in '-' and six hex digits";
        }
        // The other way round: a configuration already accepted has the form of one of
        // this one's instance resources. Either order of loading is refused.
        const std::string otherResource = configurationLevelResource(*other, resourceDomain);
        const std::string ownPrefix = resourceDomain + "/" + candidate.name + "-";
        if (other != &candidate && otherResource.starts_with(ownPrefix) &&
            isHash(std::string_view(otherResource).substr(ownPrefix.size()))) {
            return "configuration " + inQuotes(other->name) + " (" + where(*other) + ") offers " +
                   inQuotes(otherResource) + ", which has the form of an instance resource of this one";
        }
    }
    return {};
}

ChosenConfigurations chooseConfigurations(const std::vector<const Configuration*>& candidates,
                                          const std::function<bool(const Configuration&)>& running,
                                          const std::string& resourceDomain) {
    std::vector<const Configuration*> ordered = candidates;
    std::stable_partition(ordered.begin(), ordered.end(),
                          [&](const Configuration* c) { return running(*c); });
    ChosenConfigurations chosen;
    std::map<std::string, std::string> definedAt;
    auto where = [](const Configuration& c) { return c.sourceFile + ":" + std::to_string(c.sourceLine); };
    auto reject = [&](const Configuration& configuration, const std::string& why) {
        chosen.rejected.push_back(where(configuration) + ": configuration \"" + configuration.name + "\" " +
                                  why + "; this one is ignored");
    };
    for (const Configuration* candidate : ordered) {
        const Configuration& configuration = *candidate;
        if (auto it = definedAt.find(configuration.name); it != definedAt.end()) {
            reject(configuration, "is already defined at " + it->second);
            continue;
        }
        if (std::string conflict = resourceConflict(configuration, chosen.accepted, resourceDomain);
            !conflict.empty()) {
            reject(configuration, "cannot be offered: " + conflict);
            continue;
        }
        definedAt[configuration.name] = where(configuration);
        chosen.accepted.push_back(configuration);
    }
    return chosen;
}

}  // namespace devlet
