#include <exception>

#include "runtime/configuration_parser.h"
#include "runtime/discovery.h"
#include "runtime/naming.h"

namespace devlet {

namespace {

using yaml::inQuotes;
using yaml::joined;
using yaml::nearMiss;

constexpr std::string_view kHashPlaceholder = "xxxxxx";

}  // namespace

// The configuration's name becomes part of Kubernetes resource names and device ids.
// Accepted as Akri accepts it; where the kubelet would refuse a name derived from it,
// the error says which and why.
void ConfigurationFileParser::checkName(const Configuration& config, int line) {
    const std::string& name = config.name;
    if (name.empty()) return;
    if (std::string problem = configurationNameProblem(name); !problem.empty()) {
        error(line, "metadata.name " + inQuotes(name) + " " + problem);
        return;
    }
    const std::string instanceResource = resourceDomain_ + "/" + instanceName(name, "000000");
    if (std::string problem = resourceNameProblem(instanceResource); !problem.empty()) {
        error(line, "the instance-level resource name " + resourceDomain_ + "/" +
                        instanceName(name, kHashPlaceholder) + " is not valid for the kubelet: " + problem);
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

void ConfigurationFileParser::checkDetails(Configuration& config, const HandlerUse& handler) {
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

void ConfigurationFileParser::checkDiscoveryProperties(const DiscoveryHandler& found, Configuration& config,
                                                       const HandlerUse& handler) {
    for (const PropertyReference& reference : config.propertyReferences) {
        const std::string what = reference.where + " (" + reference.property + "): ";
        if (!found.readsReferencedProperties()) {
            warning(reference.line,
                    what + "the " + config.handler + " handler reads no property from a Secret; left out");
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
        std::string where = "spec.discoveryHandler.discoveryProperties (" + property + "): ";
        warning(line == handler.propertyLines.end() ? handler.detailsKeyLine : line->second, where + message);
    }
}

}  // namespace devlet
