#include "runtime/discovery.h"

namespace devlet {

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
    for (const auto& handler : handlers_) result.emplace_back(handler->name());
    return result;
}

}  // namespace devlet
