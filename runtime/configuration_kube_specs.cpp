#include <regex>

#include <boost/json.hpp>

#include "runtime/configuration_parser.h"

namespace devlet {

namespace {

using yaml::Entry;
using yaml::find;
using yaml::inQuotes;
using yaml::lineOf;
using yaml::nearMiss;

const std::vector<std::string> kBrokerSpecKeys = {"brokerPodSpec", "brokerJobSpec"};

}  // namespace

// Akri: exactly one of brokerPodSpec and brokerJobSpec.
void ConfigurationFileParser::readBrokerSpec(const Entry& entry, Configuration& config) {
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
void ConfigurationFileParser::checkKubeFields(const Entry& entry, std::string_view typeName,
                                              const std::string& where, const std::string& object) {
    const kube_schema::Type* type = kube_schema::findType(typeName);
    if (type) checkKubeFields(entry.value, *type, where, entry.line, object);
}

void ConfigurationFileParser::checkKubeFields(const YAML::Node& node, const kube_schema::Type& type,
                                              const std::string& where, int line, const std::string& object) {
    if (!node.IsMap() || type.preserveUnknownFields) return;
    for (const auto& item : node) {
        const std::string key = item.first.Scalar();
        const int keyLine = lineOf(item.first, line);
        std::string path = where + ".";
        path += key;
        const kube_schema::Field* field = kube_schema::findField(type, key);
        if (!field) {
            const std::string meant = nearMiss(key, kube_schema::fieldNames(type));
            std::string message =
                path + ": not a field of the Kubernetes " + std::string(kube_schema::shortName(type));
            if (!meant.empty()) message += " (did you mean " + inQuotes(meant) + "?)";
            message +=
                "; Akri's webhook refuses this Configuration, and devlet applies no " + object + " from it";
            warning(keyLine, std::move(message));
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
std::string ConfigurationFileParser::objectJson(const Entry& entry, const std::string& what) {
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
boost::json::value ConfigurationFileParser::yamlToJson(const YAML::Node& node) {
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

}  // namespace devlet
