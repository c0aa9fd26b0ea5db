#include <algorithm>
#include <cctype>

#include "runtime/configuration.h"
#include "runtime/naming.h"
#include "runtime/strict_yaml.h"

namespace devlet {

using yaml::inQuotes;

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
    everyone.reserve(accepted.size() + 1);
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
