#pragma once
// Reads the documents of one configuration file into ParsedConfigurations: every value
// checked with the line it is on. Internal to runtime/ (configuration.cpp drives it); its
// members are defined by part:
//   configuration_parser.cpp      the document and its keys, read strictly
//   configuration_kube_specs.cpp  Akri's broker and service specs, checked against the
//                                 Kubernetes types and kept as JSON
//   configuration_checks.cpp      the name, the discovery details and properties, as the
//                                 handler and the kubelet will take them

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/value.hpp>
#include <yaml-cpp/yaml.h>

#include "kube_schema/kube_schema.h"
#include "runtime/configuration.h"
#include "runtime/strict_yaml.h"

namespace devlet {

class DiscoveryHandler;

class ConfigurationFileParser {
public:
    ConfigurationFileParser(const std::string& text, const std::string& file, const HandlerRegistry& handlers,
                            const std::string& resourceDomain, ParsedConfigurations& out);

    // Reads one document; a good one is added to the configurations.
    void document(const YAML::Node& doc);

    void error(int line, std::string message);
    void warning(int line, std::string message);

private:
    // Where the handler name was given and whether discoveryDetails could be read.
    struct HandlerUse {
        int line = 0;
        int detailsKeyLine = 0;
        bool detailsRead = false;
        std::map<std::string, int> propertyLines;  // discovery property name -> its line
    };

    // The values, each checked for its type.
    std::optional<yaml::Mapping> mapping(const YAML::Node& node, int line, const std::string& where,
                                         const std::vector<std::string>* allowed, bool emptyAllowed = false);
    std::optional<std::string> text(const yaml::Entry& entry, const std::string& what);
    std::optional<long long> integer(const yaml::Entry& entry, const std::string& what);
    std::optional<double> number(const yaml::Entry& entry, const std::string& what);
    std::optional<bool> boolean(const yaml::Entry& entry, const std::string& what);
    static std::string got(const yaml::Entry& entry);
    void fixedValue(const yaml::Mapping& top, const std::string& key, std::string_view expected, int docLine);

    // The document's parts.
    void readMetadata(const yaml::Entry& entry, Configuration& config, int& nameLine);
    void warnUnusedMetadata(const yaml::Mapping& metadata);
    void readSpec(const yaml::Entry& entry, Configuration& config, HandlerUse& handler);
    void readDiscoveryHandler(const yaml::Entry& entry, Configuration& config, HandlerUse& handler);
    int detailsStart(const yaml::Entry& details) const;
    void readDiscoveryProperties(const yaml::Entry& entry, Configuration& config, HandlerUse& handler);
    std::optional<PropertyReference> readValueFrom(const yaml::Entry& entry, const std::string& where);
    void readBrokerProperties(const yaml::Entry& entry, Configuration& config);
    void readDevlet(const yaml::Entry& entry, Configuration& config);

    // Akri's Kubernetes specs (configuration_kube_specs.cpp).
    void readBrokerSpec(const yaml::Entry& entry, Configuration& config);
    void checkKubeFields(const yaml::Entry& entry, std::string_view typeName, const std::string& where,
                         const std::string& object);
    void checkKubeFields(const YAML::Node& node, const kube_schema::Type& type, const std::string& where,
                         int line, const std::string& object);
    std::string objectJson(const yaml::Entry& entry, const std::string& what);
    static boost::json::value yamlToJson(const YAML::Node& node);

    // What the handler and the kubelet will make of it (configuration_checks.cpp).
    void checkName(const Configuration& config, int line);
    void checkDetails(Configuration& config, const HandlerUse& handler);
    void checkDiscoveryProperties(const DiscoveryHandler& found, Configuration& config,
                                  const HandlerUse& handler);

    std::string file_;
    const HandlerRegistry& handlers_;
    std::string resourceDomain_;
    ParsedConfigurations& out_;
    std::vector<std::string_view> lines_;  // views into the caller's text, for block-scalar lines
    std::map<std::string, int> nameLines_;
    bool uniqueDevicesGiven_ = false;  // the current document sets spec.devlet.uniqueDevices
};

}  // namespace devlet
