#include "cluster/secrets.h"

#include "runtime/base64.h"
#include "runtime/log.h"

namespace devlet::kube {

namespace json = boost::json;

namespace {
constexpr Log log{"cluster"};

std::string describe(const SecretName& name) {
    return "Secret " + name.first + "/" + name.second;
}
}  // namespace

struct Secrets::Watched {
    SecretName name;
    std::unique_ptr<Informer> informer;
    bool exists = false;
    std::map<std::string, std::string> data;  // decoded
    std::string lastError;                    // as last reported, to log each new one once
};

Secrets::Secrets(ApiClient& client) : client_(client) {}

Secrets::~Secrets() {
    stop();
}

void Secrets::stop() {
    loopThread_.check();
    for (auto& [name, watched] : watched_) watched->informer->stop();
}

void Secrets::want(const std::set<SecretName>& names) {
    loopThread_.check();
    for (auto it = watched_.begin(); it != watched_.end();) {
        if (names.count(it->first)) {
            ++it;
            continue;
        }
        it->second->informer->stop();
        it = watched_.erase(it);
    }
    for (const SecretName& name : names) {
        if (watched_.count(name)) continue;
        auto watched = std::make_unique<Watched>();
        watched->name = name;
        Watched* w = watched.get();
        Informer::Handlers handlers;
        handlers.added = [this, w](const json::object& o) { dataChanged(*w, &o); };
        handlers.modified = [this, w](const json::object& o) { dataChanged(*w, &o); };
        handlers.deleted = [this, w](const json::object&) { dataChanged(*w, nullptr); };
        handlers.synced = [this] { notify(); };
        handlers.stateChanged = [this, w] {
            const std::string& error = w->informer->state().lastError;
            if (error != w->lastError && !error.empty())
                log.warning() << "cannot read " << describe(w->name) << ": " << error;
            w->lastError = error;
            notify();
        };
        Informer::Options options;
        // One object: what RBAC's resourceNames can grant list and watch on.
        options.fieldSelector = "metadata.name=" + name.second;
        watched->informer = std::make_unique<Informer>(client_, collectionPath("v1", name.first, "secrets"),
                                                       std::move(handlers), options);
        watched_.emplace(name, std::move(watched));
        w->informer->start();
    }
}

void Secrets::dataChanged(Watched& watched, const json::object* secret) {
    watched.exists = secret != nullptr;
    watched.data.clear();
    if (secret) {
        const json::value* data = secret->if_contains("data");
        if (data && data->is_object()) {
            for (const auto& [key, value] : data->as_object()) {
                if (!value.is_string()) continue;
                // The API always sends base64; a value that is not is no value.
                if (auto decoded = base64Decode(std::string(value.as_string())))
                    watched.data[std::string(key)] = std::move(*decoded);
            }
        }
    }
    notify();
}

void Secrets::notify() {
    if (changed_) changed_();
}

ResolvedProperties Secrets::resolve(const std::vector<PropertyReference>& references) const {
    loopThread_.check();
    ResolvedProperties resolved;
    for (const PropertyReference& reference : references) {
        if (!reference.secret) continue;
        const SecretName name{reference.namespaceName, reference.name};
        auto it = watched_.find(name);
        const Watched* watched = it == watched_.end() ? nullptr : it->second.get();
        const std::string what = "property " + reference.property + ": ";
        if (!watched || !watched->informer->state().synced) {
            const std::string error = watched ? watched->informer->state().lastError : std::string();
            resolved.problems.push_back(what + describe(name) + " not read yet" +
                                        (error.empty() ? "" : " (" + error + ")"));
            continue;
        }
        if (!watched->exists) {
            if (!reference.optional) resolved.problems.push_back(what + describe(name) + " does not exist");
            continue;
        }
        auto value = watched->data.find(reference.key);
        if (value == watched->data.end()) {
            if (!reference.optional)
                resolved.problems.push_back(what + describe(name) + " has no key " + reference.key);
            continue;
        }
        resolved.values[reference.property] = value->second;
    }
    return resolved;
}

std::vector<Secrets::State> Secrets::states() const {
    loopThread_.check();
    std::vector<State> states;
    for (const auto& [name, watched] : watched_) {
        State state;
        state.name = name;
        state.read = watched->informer->state().synced;
        state.exists = watched->exists;
        state.error = watched->informer->state().lastError;
        for (const auto& [key, value] : watched->data) state.keys.push_back(key);
        states.push_back(std::move(state));
    }
    return states;
}

std::set<SecretName> secretsNamed(const std::vector<Configuration>& configurations) {
    std::set<SecretName> names;
    for (const Configuration& configuration : configurations) {
        for (const PropertyReference& reference : configuration.propertyReferences) {
            if (reference.secret) names.emplace(reference.namespaceName, reference.name);
        }
    }
    return names;
}

}  // namespace devlet::kube
