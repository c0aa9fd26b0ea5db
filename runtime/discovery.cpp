#include "runtime/discovery.h"

#include "runtime/configuration.h"

namespace devlet {

std::vector<PropertyWarning> DiscoveryHandler::checkDiscoveryProperties(
    const Configuration& configuration) const {
    std::vector<PropertyWarning> warnings;
    for (const auto& [property, value] : configuration.discoveryProperties) {
        (void)value;
        warnings.push_back({property, "the " + std::string(name()) + " handler does not read it; ignored"});
    }
    return warnings;
}

void HandlerRegistry::add(std::unique_ptr<DiscoveryHandler> handler) {
    handlers_.push_back(std::move(handler));
}

DiscoveryHandler* HandlerRegistry::find(std::string_view name) const {
    for (const auto& handler : handlers_) {
        if (handler->name() == name) return handler.get();
    }
    return nullptr;
}

std::vector<std::string> HandlerRegistry::names() const {
    std::vector<std::string> result;
    result.reserve(handlers_.size());
    for (const auto& handler : handlers_) result.emplace_back(handler->name());
    return result;
}

}  // namespace devlet
