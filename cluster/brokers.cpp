#include "cluster/brokers.h"

#include <algorithm>
#include <cstdio>

#include <boost/asio/post.hpp>
#include <boost/json.hpp>

#include "cluster/lease.h"
#include "kube_schema/kube_schema.h"
#include "runtime/log.h"

namespace devlet::kube {

namespace {
constexpr Log log{"brokers"};
namespace json = boost::json;

constexpr char kPlaceholder[] = "{{PLACEHOLDER}}";

std::string normalized(std::string name) {
    std::replace(name.begin(), name.end(), '.', '-');
    return name;
}

json::object parsedObject(const std::string& text) {
    boost::system::error_code ec;
    json::value value = json::parse(text, ec);
    if (ec || !value.is_object()) return {};
    return std::move(value.as_object());
}

json::object labelObject(const std::map<std::string, std::string>& labels) {
    json::object object;
    for (const auto& [key, value] : labels) object[key] = value;
    return object;
}

// Akri's PLACEHOLDER: a broker's request for "{{PLACEHOLDER}}" becomes one slot of its
// instance's resource.
void replacePlaceholders(json::object& podSpec, const std::string& resource) {
    for (const char* list : {"containers", "initContainers"}) {
        json::value* containers = podSpec.if_contains(list);
        if (!containers || !containers->is_array()) continue;
        for (json::value& container : containers->as_array()) {
            if (!container.is_object()) continue;
            json::value* resources = container.as_object().if_contains("resources");
            if (!resources || !resources->is_object()) continue;
            for (const char* kind : {"requests", "limits"}) {
                json::value* amounts = resources->as_object().if_contains(kind);
                if (!amounts || !amounts->is_object() || !amounts->as_object().contains(kPlaceholder))
                    continue;
                amounts->as_object().erase(kPlaceholder);
                amounts->as_object()[resource] = "1";
            }
        }
    }
}

std::string objectName(const json::object& object) {
    const json::value* metadata = object.if_contains("metadata");
    if (!metadata || !metadata->is_object()) return {};
    const json::value* name = metadata->as_object().if_contains("name");
    return name && name->is_string() ? std::string(name->as_string()) : std::string();
}

std::string labelOf(const json::object& object, const char* key) {
    const json::value* metadata = object.if_contains("metadata");
    if (!metadata || !metadata->is_object()) return {};
    const json::value* labels = metadata->as_object().if_contains("labels");
    if (!labels || !labels->is_object()) return {};
    const json::value* value = labels->as_object().if_contains(key);
    return value && value->is_string() ? std::string(value->as_string()) : std::string();
}

struct PodCondition {
    std::string phase;   // "" before the API says
    std::string reason;  // why it failed or waits (the Pod's or a container's reason)
    bool failed = false;
};

PodCondition conditionOf(const json::object& pod) {
    PodCondition condition;
    const json::value value = pod;
    condition.phase = stringAt(value, "/status/phase");
    condition.reason = stringAt(value, "/status/reason");
    const json::value* status = pod.if_contains("status");
    const json::value* statuses =
        status && status->is_object() ? status->as_object().if_contains("containerStatuses") : nullptr;
    if (statuses && statuses->is_array() && condition.reason.empty()) {
        for (const json::value& container : statuses->as_array()) {
            std::string why = stringAt(container, "/state/waiting/reason");
            if (why.empty()) why = stringAt(container, "/state/terminated/reason");
            if (!why.empty()) {
                condition.reason = why;
                break;
            }
        }
    }
    static const std::set<std::string> kCannotStart = {"CrashLoopBackOff",           "ErrImagePull",
                                                       "ImagePullBackOff",           "InvalidImageName",
                                                       "CreateContainerConfigError", "CreateContainerError"};
    condition.failed = condition.phase == "Failed" || kCannotStart.count(condition.reason) > 0;
    return condition;
}

// The other devlet nodes that apply an object: field managers "devlet-<node>" that own
// fields of its spec (a manager that took its fields back owns none).
std::vector<std::string> otherAppliers(const json::object& object, const std::string& self) {
    std::vector<std::string> others;
    const json::value* metadata = object.if_contains("metadata");
    const json::value* entries =
        metadata && metadata->is_object() ? metadata->as_object().if_contains("managedFields") : nullptr;
    if (!entries || !entries->is_array()) return others;
    for (const json::value& entry : entries->as_array()) {
        const std::string manager = stringAt(entry, "/manager");
        if (manager == self || !manager.starts_with("devlet-") || stringAt(entry, "/operation") != "Apply")
            continue;
        const json::value* fields = entry.is_object() ? entry.as_object().if_contains("fieldsV1") : nullptr;
        if (fields && fields->is_object() && fields->as_object().contains("f:spec"))
            others.push_back(manager);
    }
    return others;
}

}  // namespace

std::string brokerPodName(const std::string& node, const std::string& instance, bool shared) {
    return normalized(shared ? node + "-" + instance + "-pod" : instance + "-pod");
}

std::string brokerJobName(const std::string& instance, const std::string& jobSpecJson) {
    // Akri numbers a Job with its Configuration's metadata.generation; a devlet
    // configuration is a file with no generation, so the spec's own FNV-1a hash stands in:
    // a changed job spec is a new Job, as a new generation is in Akri.
    std::uint32_t hash = 2166136261u;
    for (unsigned char c : jobSpecJson) hash = (hash ^ c) * 16777619u;
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", hash);
    return normalized(instance) + "-" + hex + "-job";
}

std::string instanceServiceName(const std::string& instance) {
    return normalized(instance) + "-svc";
}

std::string configurationServiceName(const std::string& configuration) {
    return normalized(configuration) + "-svc";
}

Brokers::Brokers(boost::asio::io_context& loop, ApiClient& client, const Inventory& inventory,
                 const SlotArbiter& arbiter, Options options)
    : loop_(loop),
      client_(client),
      inventory_(inventory),
      arbiter_(arbiter),
      options_(std::move(options)),
      retryTimer_(loop),
      recreateTimer_(loop) {}

Brokers::~Brokers() {
    stop();
}

void Brokers::start() {
    loopThread_.check();
    started_ = true;
    inventoryChanged();
}

void Brokers::startWatching() {
    watching_ = true;
    auto informer = [this](const std::string& groupVersion, const std::string& resource,
                           const std::string& selector) {
        Informer::Handlers handlers;
        handlers.deleted = [this, resource](const json::object& o) { objectGone(resource, o); };
        if (resource == "pods") {
            handlers.added = [this](const json::object& pod) {
                podSeen(pod);
                changed();
            };
            handlers.modified = [this](const json::object& pod) {
                podSeen(pod);
                changed();
            };
            handlers.synced = [this] { inventoryChanged(); };
        }
        Informer::Options options;
        options.labelSelector = selector;
        auto made = std::make_unique<Informer>(client_,
                                               collectionPath(groupVersion, options_.namespaceName, resource),
                                               std::move(handlers), options);
        made->start();
        return made;
    };
    const std::string ours = std::string(kManagedByLabel) + "=" + kManagedByValue;
    pods_ = informer("v1", "pods", ours + "," + kAkriTargetNodeLabel + "=" + options_.node);
    services_ = informer("v1", "services", ours);
    jobs_ = informer("batch/v1", "jobs", ours);
    readNode();
}

void Brokers::stop() {
    loopThread_.check();
    lifetime_.end();
    for (auto* informer : {&pods_, &services_, &jobs_}) {
        if (*informer) (*informer)->stop();
    }
    retryTimer_.cancel();
    recreateTimer_.cancel();
}

void Brokers::readNode() {
    client_.get("/api/v1/nodes/" + options_.node, [this, alive = lifetime_.token()](const ApiResult& result) {
        if (alive.expired()) return;
        if (result.code == 0) {
            // No answer: ask again rather than make Pods the garbage collector cannot find.
            log.debug() << "node " << options_.node << " cannot be read yet: " << result.describe();
            retryTimer_.expires_after(options_.retryInterval);
            retryTimer_.async_wait([this, alive = lifetime_.token()](boost::system::error_code ec) {
                if (!ec && !alive.expired()) readNode();
            });
            return;
        }
        nodeRead_ = true;
        if (result.ok()) {
            nodeUid_ = stringAt(result.body, "/metadata/uid");
        }
        if (nodeUid_.empty()) {
            state_.ownerProblem = "the Node " + options_.node + " cannot be read (" + result.describe() +
                                  "): broker Pods are made without an owner and outlive the node";
            log.warning() << state_.ownerProblem;
        }
        inventoryChanged();
    });
}

void Brokers::inventoryChanged() {
    loopThread_.check();
    if (reconcileScheduled_) return;
    reconcileScheduled_ = true;
    boost::asio::post(loop_, [this, alive = lifetime_.token()] {
        if (alive.expired()) return;
        reconcileScheduled_ = false;
        reconcile();
    });
}

namespace {

// Why a spec is not applied: the fields of `specJson` that its Kubernetes type lacks, which
// the API server would drop from an update and refuses in an apply. Empty when it is whole.
std::string lostFields(const std::string& specJson, std::string_view typeName, const std::string& where) {
    const kube_schema::Type* type = kube_schema::findType(typeName);
    if (specJson.empty() || !type) return {};
    boost::system::error_code ec;
    const json::value spec = json::parse(specJson, ec);
    if (ec) return {};
    std::string paths;
    for (const auto& unknown : kube_schema::unknownFields(spec, *type, ""))
        paths += (paths.empty() ? "" : ", ") + unknown.path;
    if (paths.empty()) return {};
    return where + " has fields the Kubernetes " + std::string(kube_schema::shortName(*type)) +
           " lacks, which the API server would drop or refuse: " + paths;
}

}  // namespace

std::map<std::string, Brokers::Wanted> Brokers::wanted(const std::vector<ConfigurationView>& views,
                                                       std::map<std::string, std::string>& withheld) const {
    std::map<std::string, Wanted> out;
    for (const ConfigurationView& view : views) {
        const Configuration& c = view.configuration;
        if (c.brokerPodSpec.empty() && c.brokerJobSpec.empty() && c.instanceServiceSpec.empty() &&
            c.configurationServiceSpec.empty())
            continue;
        // Checked per spec: a broken Service spec does not keep the broker from running.
        auto whole = [&](const std::string& spec, std::string_view type, const std::string& where,
                         const char* what) {
            std::string lost = lostFields(spec, type, where);
            if (lost.empty()) return true;
            withheld[c.name + " " + where] =
                "configuration " + c.name + ": " + lost + "; no " + what + " applied";
            return false;
        };
        const bool podWhole =
            whole(c.brokerPodSpec, "core.v1.PodSpec", "spec.brokerSpec.brokerPodSpec", "broker");
        const bool jobWhole =
            whole(c.brokerJobSpec, "batch.v1.JobSpec", "spec.brokerSpec.brokerJobSpec", "broker");
        const bool instanceServiceWhole =
            whole(c.instanceServiceSpec, "core.v1.ServiceSpec", "spec.instanceServiceSpec", "Service");
        const bool configurationServiceWhole = whole(c.configurationServiceSpec, "core.v1.ServiceSpec",
                                                     "spec.configurationServiceSpec", "Service");
        bool anyOffered = false;
        for (const InstanceView& i : view.instances) {
            if (!i.offered) continue;
            anyOffered = true;
            if (!c.brokerPodSpec.empty() && podWhole && couldHoldSlot(i)) addPod(out, c, i);
            if (!c.brokerJobSpec.empty() && jobWhole) addJob(out, c, i);
            if (!c.instanceServiceSpec.empty() && instanceServiceWhole) {
                addService(out, instanceServiceName(i.name), c.instanceServiceSpec,
                           {{kAkriConfigurationLabel, c.name}, {kAkriInstanceLabel, i.name}},
                           kAkriInstanceLabel, i.name);
            }
        }
        if (anyOffered && !c.configurationServiceSpec.empty() && configurationServiceWhole) {
            addService(out, configurationServiceName(c.name), c.configurationServiceSpec,
                       {{kAkriConfigurationLabel, c.name}}, kAkriConfigurationLabel, c.name);
        }
    }
    return out;
}

// A shared instance's broker goes only to a node that holds one of its slots or could take
// one: where other nodes hold them all, the kubelet can only refuse the Pod at admission,
// and Akri, which makes it anyway and makes it again when it fails, floods the node with
// failed Pods (akri#849). While the API cannot say who holds what, nothing is taken away.
bool Brokers::couldHoldSlot(const InstanceView& i) const {
    if (!i.device.shared || !arbiter_.clusterUnavailable().empty()) return true;
    return std::any_of(i.slots.begin(), i.slots.end(), [&](const Slot& slot) {
        return slot.held() || !i.heldElsewhere.count(slot.deviceId);
    });
}

void Brokers::addPod(std::map<std::string, Wanted>& out, const Configuration& c,
                     const InstanceView& i) const {
    const std::string name = brokerPodName(options_.node, i.name, i.device.shared);
    json::object spec = parsedObject(c.brokerPodSpec);
    replacePlaceholders(spec, inventory_.instanceResource(i.name));
    spec["nodeName"] = options_.node;
    json::object metadata;
    metadata["name"] = name;
    metadata["namespace"] = options_.namespaceName;
    metadata["labels"] = labelObject({{"app", name},
                                      {kAkriControllerLabel, kAkriControllerValue},
                                      {kAkriConfigurationLabel, c.name},
                                      {kAkriInstanceLabel, i.name},
                                      {kAkriTargetNodeLabel, options_.node},
                                      {kManagedByLabel, kManagedByValue}});
    if (!nodeUid_.empty()) {
        // The garbage collector removes the broker with its node.
        metadata["ownerReferences"] = json::array{
            json::object{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", options_.node}, {"uid", nodeUid_}}};
    }
    json::object pod{
        {"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", std::move(metadata)}, {"spec", std::move(spec)}};
    out["pods/" + name] = {collectionPath("v1", options_.namespaceName, "pods"), name, std::move(pod)};
}

void Brokers::addJob(std::map<std::string, Wanted>& out, const Configuration& c,
                     const InstanceView& i) const {
    const std::string name = brokerJobName(i.name, c.brokerJobSpec);
    json::object spec = parsedObject(c.brokerJobSpec);
    const std::map<std::string, std::string> labels = {{kAkriControllerLabel, kAkriControllerValue},
                                                       {kAkriConfigurationLabel, c.name},
                                                       {kAkriInstanceLabel, i.name}};
    json::value& templ = spec["template"];
    if (!templ.is_object()) templ = json::object{};
    json::value& podMetadata = templ.as_object()["metadata"];
    if (!podMetadata.is_object()) podMetadata = json::object{};
    json::value& podLabels = podMetadata.as_object()["labels"];
    if (!podLabels.is_object()) podLabels = json::object{};
    for (const auto& [key, value] : labels) podLabels.as_object()[key] = value;
    if (json::value* podSpec = templ.as_object().if_contains("spec"); podSpec && podSpec->is_object())
        replacePlaceholders(podSpec->as_object(), inventory_.instanceResource(i.name));
    json::object metadata;
    metadata["name"] = name;
    metadata["namespace"] = options_.namespaceName;
    json::object jobLabels = labelObject(labels);
    jobLabels[kManagedByLabel] = kManagedByValue;
    metadata["labels"] = std::move(jobLabels);
    json::object job{{"apiVersion", "batch/v1"},
                     {"kind", "Job"},
                     {"metadata", std::move(metadata)},
                     {"spec", std::move(spec)}};
    out["jobs/" + name] = {collectionPath("batch/v1", options_.namespaceName, "jobs"), name, std::move(job)};
}

void Brokers::addService(std::map<std::string, Wanted>& out, const std::string& name,
                         const std::string& specJson, const std::map<std::string, std::string>& labels,
                         const std::string& selectorKey, const std::string& selectorValue) const {
    json::object spec = parsedObject(specJson);
    // As Akri: the Service selects the brokers of its instance or configuration.
    spec["selector"] = json::object{{selectorKey, selectorValue}};
    json::object allLabels = labelObject(labels);
    allLabels["app"] = name;
    allLabels[kAkriControllerLabel] = kAkriControllerValue;
    allLabels[kManagedByLabel] = kManagedByValue;
    json::object metadata{
        {"name", name}, {"namespace", options_.namespaceName}, {"labels", std::move(allLabels)}};
    json::object service{{"apiVersion", "v1"},
                         {"kind", "Service"},
                         {"metadata", std::move(metadata)},
                         {"spec", std::move(spec)}};
    out["services/" + name] = {collectionPath("v1", options_.namespaceName, "services"), name,
                               std::move(service)};
}

void Brokers::reconcile() {
    if (!started_) return;
    const std::vector<ConfigurationView> views = inventory_.view();
    std::map<std::string, std::string> withheld;
    const std::map<std::string, Wanted> wanted = this->wanted(views, withheld);
    if (withheld != withheld_) {
        for (const auto& [key, why] : withheld) {
            auto before = withheld_.find(key);
            if (before == withheld_.end() || before->second != why) log.error() << why;
        }
        withheld_ = std::move(withheld);
        state_.lastError = standingError();
        changed();
    }
    if (!watching_) {
        // No configuration asks for a broker or service: nothing is asked of the API.
        if (!wanted.empty()) startWatching();
        return;
    }
    if (!nodeRead_) return;  // readNode() reconciles once it knows the owner
    const std::string manager = "devlet-" + options_.node;
    for (const auto& [key, object] : wanted) {
        const std::string body = json::serialize(object.body);
        auto applied = applied_.find(key);
        if (applied != applied_.end() && applied->second == body) continue;
        if (auto refused = refused_.find(key); refused != refused_.end() && refused->second.body == body)
            continue;
        if (inFlight_.count(key)) {
            recheck_ = true;  // looked at again once the call in flight has its answer
            continue;
        }
        inFlight_.insert(key);
        const std::string path = object.collection + "/" + object.name;
        paths_[key] = path;
        client_.apply(
            path, object.body, manager, true,
            [this, key = std::string(key), body, alive = lifetime_.token()](const ApiResult& result) {
                if (alive.expired()) return;
                inFlight_.erase(key);
                refused_.erase(key);
                if (result.ok()) {
                    if (!applied_.count(key)) log.info() << "applied " << key;
                    applied_[key] = body;
                    ++state_.applies;
                    state_.lastError = standingError();
                } else {
                    state_.lastError = "apply " + key + ": " + result.describe();
                    // The spec itself is refused (400, 422 Invalid): not sent again
                    // until it changes. Anything else (403 until the Role is fixed,
                    // an API that is away) is tried again.
                    const bool refused = result.code == 400 || result.code == 422;
                    if (refused) {
                        refused_[key] = {body, state_.lastError};
                        log.error() << state_.lastError << "; not applied again until it changes";
                    } else {
                        log.warning() << state_.lastError;
                        retryLater();
                    }
                }
                answered();
            });
    }
    std::set<std::string> doomed;
    for (const auto& [key, body] : applied_) {
        if (!wanted.count(key)) doomed.insert(key);
    }
    if (std::erase_if(refused_, [&](const auto& entry) { return !wanted.count(entry.first); }) > 0)
        state_.lastError = standingError();
    // Broker Pods of this node that nothing here applied (left from before a restart):
    // deleted once their configuration's probe has reported, so a restart does not
    // replace a running broker.
    if (pods_ && pods_->state().synced) {
        std::map<std::string, const ConfigurationView*> reported;
        for (const ConfigurationView& view : views) reported[view.configuration.name] = &view;
        for (const auto& [name, pod] : pods_->objects()) {
            const std::string key = "pods/" + name;
            if (wanted.count(key) || applied_.count(key)) continue;
            auto found = reported.find(labelOf(pod, kAkriConfigurationLabel));
            const bool probeSpoke = found == reported.end() ||
                                    found->second->configuration.brokerPodSpec.empty() ||
                                    found->second->discovery.scans > 0;
            if (!probeSpoke) continue;
            doomed.insert(key);
            paths_[key] = collectionPath("v1", options_.namespaceName, "pods") + "/" + name;
        }
    }
    for (const std::string& key : doomed) {
        if (inFlight_.count(key)) {
            recheck_ = true;
            continue;
        }
        inFlight_.insert(key);
        if (key.starts_with("services/") || key.starts_with("jobs/")) {
            withdrawShared(key);
            continue;
        }
        removeObject(key, {});
    }
    state_.applied = applied_.size();
    // A broker no longer wanted is forgotten, its recreations with it.
    std::erase_if(lives_, [&](const auto& entry) { return !wanted.count("pods/" + entry.first); });
    scheduleRecreations();
}

void Brokers::removeObject(const std::string& key, const DeletePreconditions& preconditions) {
    client_.remove(paths_[key], preconditions,
                   [this, key, alive = lifetime_.token()](const ApiResult& result) {
                       if (alive.expired()) return;
                       inFlight_.erase(key);
                       if (result.ok() || result.notFound()) {
                           log.info() << "deleted " << key;
                           applied_.erase(key);
                           ++state_.deletes;
                           state_.lastError = standingError();
                       } else if (result.conflict()) {
                           recheck_ = true;  // another node applied it meanwhile: looked at again
                       } else {
                           state_.lastError = "delete " + key + ": " + result.describe();
                           log.warning() << state_.lastError;
                           retryLater();
                       }
                       answered();
                   });
}

// Services and Jobs have no node in their names: every node that offers the instance (or
// the configuration) applies the same object. The last node to want it deletes it; one
// that stops wanting it while another node's devlet still applies it only takes its own
// fields back (an apply of nothing), so the object never goes away under a node that
// wants it. Who applies it comes from the watch's copy; both calls carry that copy's
// resourceVersion, so two nodes withdrawing at once cannot both leave it to the other,
// and a stale copy costs a retry, never a wrong delete.
void Brokers::withdrawShared(const std::string& key) {
    const bool job = key.starts_with("jobs/");
    const Informer* watch = job ? jobs_.get() : services_.get();
    if (!watch || !watch->state().synced) {
        inFlight_.erase(key);
        retryLater();
        return;
    }
    auto found = watch->objects().find(key.substr(key.find('/') + 1));
    if (found == watch->objects().end()) {  // already gone
        inFlight_.erase(key);
        applied_.erase(key);
        answered();
        return;
    }
    const json::value object = found->second;
    const std::string version = stringAt(object, "/metadata/resourceVersion");
    const std::string manager = "devlet-" + options_.node;
    const std::vector<std::string> others = otherAppliers(object.as_object(), manager);
    if (others.empty()) {
        removeObject(key, {version, ""});
        return;
    }
    // Named here: the items of a list carry no apiVersion or kind.
    json::object nothing{{"apiVersion", job ? "batch/v1" : "v1"},
                         {"kind", job ? "Job" : "Service"},
                         {"metadata",
                          {{"name", stringAt(object, "/metadata/name")},
                           {"namespace", options_.namespaceName},
                           {"resourceVersion", version}}}};
    client_.apply(paths_[key], nothing, manager, false,
                  [this, key, others, alive = lifetime_.token()](const ApiResult& result) {
                      if (alive.expired()) return;
                      inFlight_.erase(key);
                      if (result.ok()) {
                          log.info() << "left " << key << " to " << others.front()
                                     << (others.size() > 1 ? " and others" : "") << ", which still apply it";
                          applied_.erase(key);
                          ++state_.released;
                          state_.lastError = standingError();
                      } else if (result.conflict()) {
                          retryLater();  // changed since the watch showed it: looked at again
                      } else {
                          state_.lastError = "release " + key + ": " + result.describe();
                          log.warning() << state_.lastError;
                          retryLater();
                      }
                      answered();
                  });
}

std::string Brokers::standingError() const {
    if (!withheld_.empty()) return withheld_.begin()->second;
    return refused_.empty() ? std::string() : refused_.begin()->second.message;
}

void Brokers::answered() {
    changed();
    scheduleRecreations();
    // What is wanted moved while a call was in flight: reconciled once they all answered.
    if (recheck_ && inFlight_.empty()) {
        recheck_ = false;
        inventoryChanged();
    }
}

void Brokers::retryLater() {
    retryTimer_.expires_after(options_.retryInterval);
    retryTimer_.async_wait([this, alive = lifetime_.token()](boost::system::error_code ec) {
        if (!ec && !alive.expired()) reconcile();
    });
}

void Brokers::objectGone(const std::string& resource, const boost::json::object& object) {
    // Deleted by someone else (a user, another node withdrawing a shared Service): applied
    // again if still wanted.
    const std::string name = objectName(object);
    if (applied_.erase(resource + "/" + name)) inventoryChanged();
    if (resource == "pods") {
        if (auto life = lives_.find(name); life != lives_.end()) {
            life->second.uid.clear();
            life->second.phase.clear();
        }
    }
    changed();
}

std::vector<Brokers::Broker> Brokers::brokers() const {
    loopThread_.check();
    std::vector<Broker> out;
    if (!pods_) return out;
    for (const auto& [name, pod] : pods_->objects()) {
        Broker broker;
        broker.pod = name;
        broker.configuration = labelOf(pod, kAkriConfigurationLabel);
        broker.instance = labelOf(pod, kAkriInstanceLabel);
        const PodCondition condition = conditionOf(pod);
        broker.phase = condition.phase;
        broker.reason = condition.reason;
        broker.failed = condition.failed;
        if (auto life = lives_.find(name); life != lives_.end()) {
            broker.recreations = life->second.recreations;
            broker.recreatedBecause = life->second.recreatedBecause;
        }
        out.push_back(std::move(broker));
    }
    return out;
}

void Brokers::podSeen(const json::object& pod) {
    const std::string name = objectName(pod);
    const std::string uid = stringAt(json::value(pod), "/metadata/uid");
    const PodCondition condition = conditionOf(pod);
    Life& life = lives_[name];
    if (life.uid != uid) {
        life.uid = uid;
        life.phase.clear();
    }
    if (condition.phase == "Pending" && life.phase != "Pending") life.pendingSince = Clock::now();
    life.phase = condition.phase;
    life.reason = condition.reason;
    life.terminating = !stringAt(json::value(pod), "/metadata/deletionTimestamp").empty();
    scheduleRecreations();
}

std::optional<Brokers::Clock::time_point> Brokers::recreateAt(const std::string& name,
                                                              const Life& life) const {
    // Only a Pod this node applied and still wants: one left from before a restart is
    // applied (or deleted) first, and a Job's Pods are the Job's.
    const std::string key = "pods/" + name;
    if (life.uid.empty() || !applied_.count(key) || inFlight_.count(key)) return std::nullopt;
    // Already deleted: the API server removes it once its containers have stopped, and the
    // watch's DELETED event has it applied again.
    if (life.terminating) return std::nullopt;
    Clock::time_point at;
    if (life.phase == "Pending")
        at = life.pendingSince + options_.pendingGrace;
    else if (life.phase == "Failed" || life.phase == "Succeeded")
        at = Clock::time_point::min();  // a broker is meant to run: made again at once
    else
        return std::nullopt;
    if (life.streak > 0) {
        auto wait = options_.recreateBackoff;
        for (unsigned i = 1; i < life.streak && wait < options_.recreateBackoffLimit; ++i) wait *= 2;
        at = std::max(at, life.lastRecreated + std::min(wait, options_.recreateBackoffLimit));
    }
    return std::max(at, life.notBefore);
}

void Brokers::scheduleRecreations() {
    std::optional<Clock::time_point> first;
    for (const auto& [name, life] : lives_) {
        const auto at = recreateAt(name, life);
        if (at && (!first || *at < *first)) first = at;
    }
    if (!first) {
        recreateTimer_.cancel();
        return;
    }
    recreateTimer_.expires_at(*first);
    recreateTimer_.async_wait([this, alive = lifetime_.token()](boost::system::error_code ec) {
        if (!ec && !alive.expired()) recreateDue();
    });
}

void Brokers::recreateDue() {
    const auto now = Clock::now();
    for (auto& [name, life] : lives_) {
        const auto at = recreateAt(name, life);
        if (at && *at <= now) recreate(name, life);
    }
    scheduleRecreations();
}

void Brokers::recreate(const std::string& name, Life& life) {
    const std::string key = "pods/" + name;
    const auto grace = std::chrono::duration_cast<std::chrono::seconds>(options_.pendingGrace);
    std::string why = life.phase;
    if (life.phase == "Pending") why += " for more than " + std::to_string(grace.count()) + " s";
    if (!life.reason.empty()) why += " (" + life.reason + ")";
    inFlight_.insert(key);
    // Only this Pod: one made meanwhile (by this node after a watch event, or by hand) stays.
    DeletePreconditions preconditions;
    preconditions.uid = life.uid;
    const bool pending = life.phase == "Pending";
    auto done = [this, name, why, pending, alive = lifetime_.token()](const ApiResult& result) {
        if (!alive.expired()) recreateAnswered(name, why, pending, result);
    };
    client_.remove(collectionPath("v1", options_.namespaceName, "pods") + "/" + name, preconditions,
                   std::move(done));
}

void Brokers::recreateAnswered(const std::string& name, const std::string& why, bool pending,
                               const ApiResult& result) {
    const std::string key = "pods/" + name;
    inFlight_.erase(key);
    // Gone from lives_ when the broker stopped being wanted meanwhile.
    auto found = lives_.find(name);
    Life* life = found == lives_.end() ? nullptr : &found->second;
    const auto now = Clock::now();
    if (result.ok() || result.notFound()) {
        log.info() << "deleted " << key << " to make it again: " << why;
        ++state_.deletes;
        ++(pending ? state_.recreatedPending : state_.recreatedEnded);
        if (life) {
            ++life->recreations;
            life->recreatedBecause = why;
            const bool recent = life->streak > 0 && now - life->lastRecreated < options_.recreateBackoffReset;
            life->streak = recent ? life->streak + 1 : 1;
            life->lastRecreated = now;
        }
        // Applied again by the reconcile, which creates it anew.
        applied_.erase(key);
        inventoryChanged();
        state_.lastError = standingError();
    } else {
        // A conflict: the Pod was replaced meanwhile, and the watch event saying so is on its
        // way. Anything else is trouble worth saying. Either way, not tried again at once.
        if (!result.conflict()) {
            state_.lastError = "delete " + key + " to make it again: " + result.describe();
            log.warning() << state_.lastError;
        }
        if (life) life->notBefore = now + options_.retryInterval;
    }
    answered();
}

void Brokers::changed() {
    state_.applied = applied_.size();
    if (stateChanged_) stateChanged_();
}

}  // namespace devlet::kube
