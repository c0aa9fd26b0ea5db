#pragma once
// The Secrets configurations name in Akri's `valueFrom.secretKeyRef` (ONVIF credentials),
// read in cluster mode. Each Secret is watched on its own, by a field selector on its name,
// so that a Role can grant exactly the Secrets named (`resourceNames`) and nothing else; a
// changed Secret reaches the probe without polling. The values stay in this object and in
// the configurations handed to probes: never logged, never in the status.
//
// Akri's rules: `namespace` defaults to "default"; a missing Secret or key leaves an
// `optional` property out and is a problem for a required one (Akri stops discovery then;
// devlet discovers without the property and says why).

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cluster/api_client.h"
#include "runtime/configuration.h"
#include "runtime/thread_bound.h"

namespace devlet::kube {

// A Secret by namespace and name.
using SecretName = std::pair<std::string, std::string>;

// One configuration's `valueFrom` properties as far as they can be read now.
struct ResolvedProperties {
    std::map<std::string, std::string> values;  // by property name
    std::vector<std::string> problems;          // "property P: Secret ns/name has no key K", …
};

class Secrets {
public:
    // What the status shows of one watched Secret (no data).
    struct State {
        SecretName name;
        bool read = false;    // listed at least once
        bool exists = false;  // as of the last list or event
        std::string error;    // the last failed list or watch, e.g. "403 Forbidden: …"
        std::vector<std::string> keys;
        bool operator==(const State&) const = default;
    };

    explicit Secrets(ApiClient& client);
    ~Secrets();
    Secrets(const Secrets&) = delete;
    Secrets& operator=(const Secrets&) = delete;

    // Watches exactly these Secrets from now on (new ones start, dropped ones stop and
    // their data is forgotten).
    void want(const std::set<SecretName>& names);
    // Called on the loop after a watched Secret's data or readability changed.
    void onChanged(std::function<void()> changed) { changed_ = std::move(changed); }
    void stop();

    ResolvedProperties resolve(const std::vector<PropertyReference>& references) const;
    std::vector<State> states() const;

private:
    struct Watched;
    void dataChanged(Watched& watched, const boost::json::object* secret);
    void notify();

    ApiClient& client_;
    std::map<SecretName, std::unique_ptr<Watched>> watched_;
    std::function<void()> changed_;
    ThreadBound loopThread_;  // every public member is called on the loop thread
};

// The Secrets the configurations' references name.
std::set<SecretName> secretsNamed(const std::vector<Configuration>& configurations);

}  // namespace devlet::kube
