#pragma once
// The fields of the Kubernetes types a broker or service spec holds (PodSpec, JobSpec,
// ServiceSpec, ObjectMeta and what they reach), generated from the Kubernetes OpenAPI
// documents (kube_fields.cpp, scripts/gen-kube-fields), so that a misspelled field is found
// before the API server drops or refuses it. Constant tables; any thread.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/fwd.hpp>

namespace devlet::kube_schema {

// What a field holds, as far as finding unknown fields needs.
enum class Kind {
    Scalar,       // string, number, boolean, Quantity, Time
    IntOrString,  // a port or a percentage
    Object,       // an object of `type`
    ObjectList,   // a list of objects of `type`
    ScalarList,   // a list of scalars
    Map,          // free keys (labels, nodeSelector, resources.limits), scalar values
    ObjectMap,    // free keys, values objects of `type`
    Free,         // anything (x-kubernetes-preserve-unknown-fields, FieldsV1)
};

struct Field {
    std::string_view name;
    Kind kind;
    int type;  // index in kTypes for Object, ObjectList and ObjectMap; -1 otherwise
    // An ObjectList whose items are keyed (x-kubernetes-list-map-keys): the keys' names,
    // sorted, comma-separated ("name"; "containerPort,protocol"); "" otherwise.
    std::string_view listKeys;
};

struct Type {
    std::string_view name;          // "io.k8s.api.core.v1.PodSpec"
    std::span<const Field> fields;  // sorted by name
    bool preserveUnknownFields;
};

extern const char kSourceVersion[];  // the k8s.io/kubernetes version the table comes from
extern const Type kTypes[];          // sorted by name
extern const std::size_t kTypeCount;

// The type by its full OpenAPI name, or by the end of it ("PodSpec", "batch.v1.JobSpec").
const Type* findType(std::string_view name);
const Type* typeAt(int index);
const Field* findField(const Type& type, std::string_view name);
std::vector<std::string> fieldNames(const Type& type);
// "PodSpec" for "io.k8s.api.core.v1.PodSpec".
std::string_view shortName(const Type& type);

// A field of a JSON object that its type does not have: what the API server drops (an
// update) or refuses (an apply, or fieldValidation=Strict).
struct UnknownField {
    std::string path;  // "spec.containers[0].imagePullPolicyy", after `prefix`
    // As a server-side apply names it, items of keyed lists by their keys:
    // "spec.containers[name=\"c\"].imagePullPolicyy" (by index where an item lacks its keys).
    std::string keyPath;
    const Type* in = nullptr;
};

// Which unknown fields are reported: all of them (devlet's warnings), or those a server-side
// apply names: structured-merge-diff stops reading an object at its first unknown field,
// so it names the fields up to there (in the order of the object's keys; the API server's
// order varies from one request to the next).
enum class Report { All, AsApply };

// The unknown fields of `value`, read as a `type`; paths start with `prefix` ("spec").
// Values of the wrong JSON type are not looked into (the API server refuses them anyway).
std::vector<UnknownField> unknownFields(const boost::json::value& value, const Type& type,
                                        const std::string& prefix, Report report = Report::All);

// Removes every unknown field of `value`, as the API server prunes an update it does not
// validate strictly.
void dropUnknownFields(boost::json::value& value, const Type& type);

}  // namespace devlet::kube_schema
