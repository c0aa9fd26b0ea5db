#include "cluster/lease.h"

#include <boost/json.hpp>

#include "runtime/rfc3339.h"

namespace devlet::kube {

namespace json = boost::json;

namespace {

std::string stringAt(const json::object& object, const char* key) {
    const json::value* value = object.if_contains(key);
    return value && value->is_string() ? std::string(value->get_string()) : std::string();
}

int intAt(const json::object& object, const char* key) {
    const json::value* value = object.if_contains(key);
    if (!value) return 0;
    if (value->is_int64()) return static_cast<int>(value->get_int64());
    if (value->is_uint64()) return static_cast<int>(value->get_uint64());
    return 0;
}

}  // namespace

std::optional<Lease> parseLease(const std::string& text, std::string& error) {
    boost::system::error_code ec;
    const json::value value = json::parse(text, ec);
    if (ec) {
        error = "a Lease that is not JSON: " + ec.message();
        return std::nullopt;
    }
    if (!value.is_object()) {
        error = "a Lease that is not a JSON object";
        return std::nullopt;
    }
    return parseLease(value.get_object(), error);
}

std::optional<Lease> parseLease(const json::object& root, std::string& error) {
    const json::object* object = &root;
    const json::value* metadata = object->if_contains("metadata");
    if (!metadata || !metadata->is_object()) {
        error = "a Lease without metadata";
        return std::nullopt;
    }
    Lease lease;
    const json::object& meta = metadata->get_object();
    lease.name = stringAt(meta, "name");
    lease.uid = stringAt(meta, "uid");
    lease.resourceVersion = stringAt(meta, "resourceVersion");
    if (lease.name.empty()) {
        error = "a Lease without metadata.name";
        return std::nullopt;
    }
    if (const json::value* labels = meta.if_contains("labels"); labels && labels->is_object()) {
        lease.instance = stringAt(labels->get_object(), kInstanceLabel);
        lease.node = stringAt(labels->get_object(), kNodeLeaseLabel) == "true";
    }
    if (const json::value* spec = object->if_contains("spec"); spec && spec->is_object()) {
        const json::object& s = spec->get_object();
        lease.holder = stringAt(s, "holderIdentity");
        lease.durationSeconds = intAt(s, "leaseDurationSeconds");
        lease.acquireTime = stringAt(s, "acquireTime");
        lease.renewTime = stringAt(s, "renewTime");
        lease.transitions = intAt(s, "leaseTransitions");
    }
    return lease;
}

json::object leaseObject(const Lease& lease, const std::string& ns) {
    json::object metadata{{"name", lease.name}, {"namespace", ns}};
    json::object labels{{kManagedByLabel, kManagedByValue}};
    if (!lease.instance.empty()) labels[kInstanceLabel] = lease.instance;
    if (lease.node) labels[kNodeLeaseLabel] = "true";
    metadata["labels"] = std::move(labels);
    if (!lease.resourceVersion.empty()) metadata["resourceVersion"] = lease.resourceVersion;
    json::object spec{{"holderIdentity", lease.holder},
                      {"leaseDurationSeconds", lease.durationSeconds},
                      {"leaseTransitions", lease.transitions}};
    if (!lease.acquireTime.empty()) spec["acquireTime"] = lease.acquireTime;
    if (!lease.renewTime.empty()) spec["renewTime"] = lease.renewTime;
    return json::object{{"apiVersion", "coordination.k8s.io/v1"},
                        {"kind", "Lease"},
                        {"metadata", std::move(metadata)},
                        {"spec", std::move(spec)}};
}

std::string nodeLeaseName(const std::string& node) {
    return "node." + node;
}

std::string microTime(std::chrono::system_clock::time_point when) {
    return rfc3339(when, TimePrecision::Microseconds);
}

}  // namespace devlet::kube
