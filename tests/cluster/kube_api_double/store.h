#pragma once
// The object store of the Kubernetes API double: every object of every modelled resource,
// one global resourceVersion counter, the event history watches replay from, and the
// verbs' semantics (create, get, list, replace, patch, apply, delete, garbage collection).
// No I/O: the HTTP layer (server.cpp) calls it on its one thread.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <boost/json.hpp>

#include "kube_schema/kube_schema.h"

namespace devlet::kubedouble {

namespace json = boost::json;

struct ResourceType {
    std::string group;  // "" for the core group
    std::string version;
    std::string resource;  // plural, as in paths
    std::string kind;
    std::string singular;
    bool namespaced = true;
    std::vector<std::string> shortNames;
    std::string apiVersion() const { return group.empty() ? version : group + "/" + version; }
    // "leases.coordination.k8s.io" as Kubernetes writes it in messages.
    std::string qualified() const { return group.empty() ? resource : resource + "." + group; }
};

const std::vector<ResourceType>& resourceTypes();
const ResourceType* findResource(const std::string& group, const std::string& version,
                                 const std::string& resource);

// An answer: an HTTP status code and its JSON body (an object or a Status).
struct Outcome {
    int code = 200;
    json::value body;
};

// Fields the Kubernetes schema lacks in a Pod, Service or Job body; none for other
// resources. Each path as upstream writes it: `path` as a create's Warning does
// ("spec.containers[0].foo"), `keyPath` as a server-side apply does
// ("spec.containers[name=\"c\"].foo"). The schema is kube_schema's table, generated from
// upstream's OpenAPI documents, so devlet and the double agree.
struct UnknownFieldPath {
    std::string path;
    std::string keyPath;
};
// `report`: all of them (a create's Warnings, Strict), or those a server-side apply names
// (up to the first unknown field of each object).
std::vector<UnknownFieldPath> unknownFields(const ResourceType& type, const json::object& object,
                                            kube_schema::Report report = kube_schema::Report::All);
void dropUnknownFields(const ResourceType& type, json::object& object);

// A Status object as the API server writes it.
json::object statusObject(int code, const std::string& reason, const std::string& message,
                          const json::object& details = {});
Outcome failure(int code, const std::string& reason, const std::string& message,
                const json::object& details = {});

// labelSelector and fieldSelector, parsed.
class Selector {
public:
    // nullopt and an error message when the text is not a selector.
    static std::optional<Selector> parse(const std::string& labels, const std::string& fields,
                                         const ResourceType& type, std::string& error);
    bool matches(const json::object& object) const;

private:
    struct Requirement {
        std::string key;
        enum class Op { Equal, NotEqual, Exists, NotExists, In, NotIn } op = Op::Equal;
        std::vector<std::string> values;
    };
    static bool test(const Requirement& r, const std::optional<std::string>& value);
    std::vector<Requirement> labels_;
    std::vector<Requirement> fields_;  // keys: field paths
};

struct Event {
    std::uint64_t resourceVersion = 0;
    const ResourceType* type = nullptr;
    std::string ns;
    std::string kind;  // ADDED, MODIFIED, DELETED
    std::shared_ptr<const json::object> object;
    std::shared_ptr<const json::object> previous;  // MODIFIED: the object before
};

struct WriteOptions {
    std::string fieldManager;  // as given or derived from the User-Agent
    bool force = false;        // server-side apply
    bool dryRun = false;
    bool statusOnly = false;           // the /status subresource: only .status changes
    std::string operation = "Update";  // as managedFields records it
};

class Store {
public:
    Store();

    Outcome create(const ResourceType& type, const std::string& ns, json::value body, const WriteOptions& o);
    Outcome get(const ResourceType& type, const std::string& ns, const std::string& name) const;
    // ns empty for a namespaced resource: all namespaces.
    Outcome list(const ResourceType& type, const std::string& ns, const Selector& selector, std::size_t limit,
                 const std::string& continueToken, const std::string& resourceVersion,
                 const std::string& resourceVersionMatch) const;
    Outcome replace(const ResourceType& type, const std::string& ns, const std::string& name,
                    json::value body, const WriteOptions& o);
    // contentType: application/merge-patch+json, application/strategic-merge-patch+json,
    // application/json-patch+json or application/apply-patch+yaml.
    Outcome patch(const ResourceType& type, const std::string& ns, const std::string& name,
                  const std::string& contentType, const std::string& body, const WriteOptions& o);
    Outcome remove(const ResourceType& type, const std::string& ns, const std::string& name,
                   const std::string& body);
    Outcome removeCollection(const ResourceType& type, const std::string& ns, const Selector& selector);

    // Where a watch from resourceVersion starts: the events after it (filtered by the caller),
    // or a 410 Status when that history is compacted. "" and "0" start from now with an
    // ADDED event per existing object.
    std::optional<Outcome> replay(const ResourceType& type, const std::string& ns,
                                  const std::string& resourceVersion, std::vector<Event>& events) const;

    std::uint64_t resourceVersion() const { return resourceVersion_; }
    // Drops the history up to now: watches and continue tokens from older versions get 410.
    void compact();
    std::size_t objectCount() const { return objects_.size(); }

    // Called for every committed change, in order.
    std::function<void(const Event&)> onEvent;

private:
    using Key = std::tuple<std::string, std::string, std::string>;  // resource, namespace, name
    struct Stored {
        json::object object;
        // Server-side apply: each manager's last applied configuration (ownership is modelled
        // as "the fields a manager last applied").
        std::map<std::string, json::object> applied;
    };

    std::optional<Outcome> checkNamespace(const ResourceType& type, const std::string& ns) const;
    Outcome commitUpdate(const ResourceType& type, const Key& key, json::object updated,
                         const WriteOptions& o, const std::string& operation, const json::value& fieldsFrom);
    Outcome apply(const ResourceType& type, const std::string& ns, const std::string& name,
                  json::object config, const WriteOptions& o);
    void commit(const ResourceType& type, const std::string& ns, const std::string& kind,
                json::object& object, std::shared_ptr<const json::object> previous);
    void erase(const ResourceType& type, const Key& key, bool collectDependents);
    void recordManager(json::object& object, const std::string& manager, const std::string& operation,
                       const json::value& fieldsFrom) const;

    std::map<Key, Stored> objects_;
    std::deque<Event> history_;
    std::uint64_t resourceVersion_ = 0;
    std::uint64_t compactedThrough_ = 0;  // watches from a version before this get 410
    std::uint32_t nextClusterIp_ = 10;
};

}  // namespace devlet::kubedouble
