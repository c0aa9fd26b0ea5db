#include "tests/cluster/kube_api_double/store.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>
#include <random>
#include <regex>
#include <set>

// Boost.JSON's implementation, compiled once for the double.
#include <boost/json/src.hpp>

#include "kube_schema/kube_schema.h"

namespace devlet::kubedouble {

namespace {

std::mt19937_64& randomSource() {
    static std::mt19937_64 engine{std::random_device{}()};
    return engine;
}

std::string nowRfc3339() {
    const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    gmtime_r(&t, &tm);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return text;
}

std::string newUid() {
    std::uniform_int_distribution<int> hex(0, 15);
    std::string uid = "xxxxxxxx-xxxx-4xxx-8xxx-xxxxxxxxxxxx";
    for (char& c : uid)
        if (c == 'x') c = "0123456789abcdef"[hex(randomSource())];
    return uid;
}

std::string randomSuffix() {
    std::uniform_int_distribution<int> pick(0, 35);
    std::string s;
    for (int i = 0; i < 5; ++i) s += "bcdfghjklmnpqrstvwxz2456789"[pick(randomSource()) % 27];
    return s;
}

std::string base64(const std::string& in) {
    static const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    std::size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        const unsigned v =
            (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8 | (unsigned char)in[i + 2];
        out += table[v >> 18 & 63], out += table[v >> 12 & 63], out += table[v >> 6 & 63],
            out += table[v & 63];
    }
    if (i + 1 == in.size()) {
        const unsigned v = (unsigned char)in[i] << 16;
        out += table[v >> 18 & 63], out += table[v >> 12 & 63], out += "==";
    } else if (i + 2 == in.size()) {
        const unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8;
        out += table[v >> 18 & 63], out += table[v >> 12 & 63], out += table[v >> 6 & 63], out += '=';
    }
    return out;
}

json::object& child(json::object& o, const char* key) {
    json::value& v = o[key];
    if (!v.is_object()) v = json::object{};
    return v.as_object();
}

const json::value* at(const json::object& o, std::initializer_list<const char*> path) {
    const json::object* cur = &o;
    const json::value* v = nullptr;
    for (const char* key : path) {
        if (!cur) return nullptr;
        auto it = cur->find(key);
        if (it == cur->end()) return nullptr;
        v = &it->value();
        cur = v->if_object();
    }
    return v;
}

std::string str(const json::object& o, std::initializer_list<const char*> path) {
    const json::value* v = at(o, path);
    if (v && v->is_string()) return std::string(v->as_string());
    return "";
}

bool hasStatusSubresource(const ResourceType& t) {
    return t.resource == "pods" || t.resource == "services" || t.resource == "jobs" ||
           t.resource == "nodes" || t.resource == "namespaces";
}

// RFC 7386.
json::value mergePatch(const json::value& target, const json::value& patch) {
    if (!patch.is_object()) return patch;
    json::object result = target.is_object() ? target.as_object() : json::object{};
    for (const auto& [k, v] : patch.as_object()) {
        if (v.is_null()) {
            result.erase(k);
        } else {
            auto it = result.find(k);
            result[k] = mergePatch(it == result.end() ? json::value{} : it->value(), v);
        }
    }
    return result;
}

// The key strategic merge patch merges list elements by (Kubernetes' patchMergeKey for the
// lists devlet's objects have: containers, env, volumes, ports, volumeMounts).
std::string mergeKeyOf(const json::array& a, const json::array& b) {
    for (const char* key : {"name", "containerPort", "port", "mountPath", "devicePath", "type"}) {
        auto all = [&](const json::array& arr) {
            return std::all_of(arr.begin(), arr.end(), [&](const json::value& e) {
                return e.is_object() && e.as_object().contains(key);
            });
        };
        if (all(a) && all(b)) return key;
    }
    return "";
}

json::value stripDirectives(const json::value& v) {
    if (v.is_object()) {
        json::object out;
        for (const auto& [k, e] : v.as_object())
            if (!k.starts_with("$")) out[k] = stripDirectives(e);
        return out;
    }
    if (v.is_array()) {
        json::array out;
        for (const auto& e : v.as_array()) out.push_back(stripDirectives(e));
        return out;
    }
    return v;
}

json::value strategicMerge(const json::value& target, const json::value& patch);

json::array mergeList(const json::array& target, const json::array& patch, const std::string& key) {
    json::array result = target;
    for (const auto& p : patch) {
        const json::object& po = p.as_object();
        auto same = [&](const json::value& e) { return e.as_object().at(key) == po.at(key); };
        auto it = std::find_if(result.begin(), result.end(), same);
        const json::value* directive = po.if_contains("$patch");
        if (directive && directive->is_string() && directive->as_string() == "delete") {
            if (it != result.end()) result.erase(it);
        } else if (it != result.end()) {
            *it = strategicMerge(*it, p);
        } else {
            result.push_back(stripDirectives(p));
        }
    }
    return result;
}

json::value strategicMerge(const json::value& target, const json::value& patch) {
    if (!patch.is_object() || !target.is_object()) return stripDirectives(patch);
    const json::object& po = patch.as_object();
    if (const json::value* d = po.if_contains("$patch"); d && d->is_string() && d->as_string() == "replace")
        return stripDirectives(patch);
    json::object result = target.as_object();
    for (const auto& [k, v] : po) {
        if (k.starts_with("$deleteFromPrimitiveList/")) {
            const std::string field(k.substr(std::string_view("$deleteFromPrimitiveList/").size()));
            if (json::value* list = result.if_contains(field); list && list->is_array() && v.is_array()) {
                json::array kept;
                for (const auto& e : list->as_array())
                    if (std::find(v.as_array().begin(), v.as_array().end(), e) == v.as_array().end())
                        kept.push_back(e);
                *list = kept;
            }
            continue;
        }
        if (k.starts_with("$")) continue;  // $setElementOrder, $retainKeys: ordering only
        auto it = result.find(k);
        if (v.is_null()) {
            result.erase(k);
        } else if (it != result.end() && it->value().is_object() && v.is_object()) {
            it->value() = strategicMerge(it->value(), v);
        } else if (it != result.end() && it->value().is_array() && v.is_array()) {
            const std::string key = mergeKeyOf(it->value().as_array(), v.as_array());
            it->value() = key.empty() ? stripDirectives(v)
                                      : json::value(mergeList(it->value().as_array(), v.as_array(), key));
        } else {
            result[k] = stripDirectives(v);
        }
    }
    return result;
}

// Server-side apply's merge: maps merge, lists and scalars are replaced (atomic).
json::value applyMerge(const json::value& live, const json::value& config) {
    if (!config.is_object() || !live.is_object()) return config;
    json::object result = live.as_object();
    for (const auto& [k, v] : config.as_object()) {
        auto it = result.find(k);
        if (it != result.end() && it->value().is_object() && v.is_object())
            it->value() = applyMerge(it->value(), v);
        else
            result[k] = v;
    }
    return result;
}

using Path = std::vector<std::string>;

// The leaf fields of an applied configuration: the unit of ownership in this model (lists
// are atomic). Identity fields are no one's.
void leaves(const json::value& v, Path& prefix, std::map<Path, json::value>& out) {
    if (v.is_object() && !v.as_object().empty()) {
        for (const auto& [k, e] : v.as_object()) {
            if (prefix.empty() && (k == "apiVersion" || k == "kind")) continue;
            if (prefix.size() == 1 && prefix[0] == "metadata" &&
                (k == "name" || k == "namespace" || k == "resourceVersion" || k == "uid" ||
                 k == "managedFields" || k == "creationTimestamp" || k == "generation"))
                continue;
            prefix.emplace_back(k);
            leaves(e, prefix, out);
            prefix.pop_back();
        }
        return;
    }
    out[prefix] = v;
}

std::map<Path, json::value> leaves(const json::object& o) {
    std::map<Path, json::value> out;
    Path p;
    leaves(o, p, out);
    return out;
}

std::string dotted(const Path& p) {
    std::string s;
    for (const auto& e : p) s += "." + e;
    return s;
}

void removePath(json::object& o, const Path& p, std::size_t i = 0) {
    auto it = o.find(p[i]);
    if (it == o.end()) return;
    if (i + 1 == p.size()) {
        o.erase(it);
        return;
    }
    if (it->value().is_object()) {
        removePath(it->value().as_object(), p, i + 1);
        if (it->value().as_object().empty()) o.erase(it);
    }
}

// FieldsV1 of what a manager wrote ("f:spec": {"f:holderIdentity": {}}); lists are atomic.
json::object fieldsV1(const json::value& v, bool top = true) {
    json::object out;
    if (!v.is_object()) return out;
    for (const auto& [k, e] : v.as_object()) {
        if (top && (k == "apiVersion" || k == "kind")) continue;
        if (top && k == "metadata") {
            json::object m;
            if (e.is_object())
                for (const char* f : {"labels", "annotations", "ownerReferences", "finalizers"})
                    if (const json::value* x = e.as_object().if_contains(f))
                        m[std::string("f:") + f] = fieldsV1(*x, false);
            if (!m.empty()) out["f:metadata"] = m;
            continue;
        }
        out["f:" + std::string(k)] = fieldsV1(e, false);
    }
    return out;
}

bool validLabelValue(const std::string& v) {
    static const std::regex re("(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?");
    return v.size() <= 63 && std::regex_match(v, re);
}

bool validLabelKey(const std::string& k) {
    static const std::regex re(
        "([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
        "[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?");
    const auto slash = k.find('/');
    const std::string name = slash == std::string::npos ? k : k.substr(slash + 1);
    return name.size() <= 63 && k.size() <= 253 + 64 && std::regex_match(k, re);
}

// Field validation (422): names, labels, and the few spec fields whose absence would make the
// object meaningless. Kubernetes validates far more (see README).
std::vector<std::pair<std::string, std::string>> validate(const ResourceType& t, const json::object& o) {
    std::vector<std::pair<std::string, std::string>> causes;
    const std::string name = str(o, {"metadata", "name"});
    static const std::regex subdomain("[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");
    static const std::regex label("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
    const bool dnsLabel = t.resource == "services" || t.resource == "namespaces";
    if (name.empty())
        causes.emplace_back("metadata.name", "Required value: name or generateName is required");
    else if (dnsLabel ? (name.size() > 63 || !std::regex_match(name, label))
                      : (name.size() > 253 || !std::regex_match(name, subdomain)))
        causes.emplace_back("metadata.name", "Invalid value: \"" + name + "\": a lowercase RFC 1123 " +
                                                 (dnsLabel ? "label" : "subdomain") +
                                                 " must consist of lower "
                                                 "case alphanumeric characters, '-' or '.'");
    if (const json::value* labels = at(o, {"metadata", "labels"})) {
        if (!labels->is_object()) {
            causes.emplace_back("metadata.labels", "Invalid value: must be a map of strings");
        } else {
            for (const auto& [k, v] : labels->as_object()) {
                if (!validLabelKey(k))
                    causes.emplace_back("metadata.labels",
                                        "Invalid value: \"" + std::string(k) + "\": name part must be valid");
                if (!v.is_string() || !validLabelValue(std::string(v.as_string())))
                    causes.emplace_back("metadata.labels",
                                        "Invalid value: a valid label must be an empty string "
                                        "or consist of alphanumeric characters, '-', '_' or "
                                        "'.', at most 63 characters");
            }
        }
    }
    if (t.resource == "pods") {
        const json::value* c = at(o, {"spec", "containers"});
        if (!c || !c->is_array() || c->as_array().empty()) {
            causes.emplace_back("spec.containers", "Required value");
        } else {
            for (const auto& e : c->as_array()) {
                if (!e.is_object() || str(e.as_object(), {"name"}).empty())
                    causes.emplace_back("spec.containers[].name", "Required value");
                else if (str(e.as_object(), {"image"}).empty())
                    causes.emplace_back("spec.containers[].image", "Required value");
            }
        }
    } else if (t.resource == "leases") {
        if (const json::value* d = at(o, {"spec", "leaseDurationSeconds"})) {
            if (!d->is_int64() && !d->is_uint64())
                causes.emplace_back("spec.leaseDurationSeconds", "Invalid value: must be an integer");
            else if (d->to_number<std::int64_t>() <= 0)
                causes.emplace_back("spec.leaseDurationSeconds",
                                    "Invalid value: " + json::serialize(*d) + ": must be greater than 0");
        }
    } else if (t.resource == "services") {
        if (const json::value* ports = at(o, {"spec", "ports"}); ports && ports->is_array()) {
            for (const auto& p : ports->as_array()) {
                const json::value* port = p.is_object() ? p.as_object().if_contains("port") : nullptr;
                if (!port || !port->is_number() || port->to_number<double>() < 1 ||
                    port->to_number<double>() > 65535)
                    causes.emplace_back("spec.ports[].port",
                                        "Invalid value: must be between 1 and 65535, inclusive");
            }
        }
    } else if (t.resource == "jobs") {
        if (!at(o, {"spec", "template"})) causes.emplace_back("spec.template", "Required value");
    }
    return causes;
}

Outcome invalid(const ResourceType& t, const std::string& name,
                const std::vector<std::pair<std::string, std::string>>& causes) {
    std::string message = t.kind + (t.group.empty() ? "" : "." + t.group) + " \"" + name + "\" is invalid: ";
    json::array list;
    for (std::size_t i = 0; i < causes.size(); ++i) {
        message += (i ? ", " : "") + causes[i].first + ": " + causes[i].second;
        list.push_back(
            {{"reason", "FieldValueInvalid"}, {"message", causes[i].second}, {"field", causes[i].first}});
    }
    return failure(422, "Invalid", message,
                   {{"name", name}, {"group", t.group}, {"kind", t.kind}, {"causes", std::move(list)}});
}

Outcome notFound(const ResourceType& t, const std::string& name) {
    return failure(404, "NotFound", t.qualified() + " \"" + name + "\" not found",
                   {{"name", name}, {"group", t.group}, {"kind", t.resource}});
}

Outcome conflict(const ResourceType& t, const std::string& name, const std::string& why) {
    return failure(409, "Conflict",
                   "Operation cannot be fulfilled on " + t.qualified() + " \"" + name + "\": " + why,
                   {{"name", name}, {"group", t.group}, {"kind", t.resource}});
}

std::optional<std::uint64_t> parseVersion(const std::string& s) {
    if (s.empty() || s.size() > 19 || !std::all_of(s.begin(), s.end(), ::isdigit)) return std::nullopt;
    return std::stoull(s);
}

// Everything but what only the server writes, to tell a no-op write from a change. Who
// manages which fields counts (a second manager applying the same values is a write, as
// upstream); when they last wrote does not.
json::object comparable(json::object o) {
    json::object& m = child(o, "metadata");
    m.erase("resourceVersion");
    m.erase("generation");
    if (json::value* managed = m.if_contains("managedFields"); managed && managed->is_array()) {
        for (json::value& entry : managed->as_array()) {
            if (entry.is_object()) entry.as_object().erase("time");
        }
    }
    return o;
}

// What bumps metadata.generation: anything outside metadata and status.
json::object specOf(json::object o) {
    o.erase("metadata");
    o.erase("status");
    return o;
}

void applyDefaults(const ResourceType& t, json::object& o, std::uint32_t& nextClusterIp) {
    if (t.resource == "pods") {
        json::object& spec = child(o, "spec");
        if (!spec.contains("restartPolicy")) spec["restartPolicy"] = "Always";
        if (!spec.contains("dnsPolicy")) spec["dnsPolicy"] = "ClusterFirst";
        json::object& status = child(o, "status");
        if (!status.contains("phase")) status["phase"] = "Pending";
    } else if (t.resource == "services") {
        json::object& spec = child(o, "spec");
        if (!spec.contains("type")) spec["type"] = "ClusterIP";
        if (!spec.contains("sessionAffinity")) spec["sessionAffinity"] = "None";
        if (!spec.contains("clusterIP") && spec["type"] != "ExternalName") {
            const std::uint32_t n = nextClusterIp++;
            spec["clusterIP"] = "10.96." + std::to_string(n / 250 % 250) + "." + std::to_string(n % 250 + 1);
        }
        if (const json::value* ip = spec.if_contains("clusterIP"); ip && !spec.contains("clusterIPs"))
            spec["clusterIPs"] = json::array{*ip};
        if (json::value* ports = spec.if_contains("ports"); ports && ports->is_array())
            for (auto& p : ports->as_array()) {
                if (!p.is_object()) continue;
                json::object& po = p.as_object();
                if (!po.contains("protocol")) po["protocol"] = "TCP";
                if (!po.contains("targetPort") && po.contains("port")) po["targetPort"] = po["port"];
            }
        child(o, "status")["loadBalancer"] = json::object{};
    } else if (t.resource == "jobs") {
        json::object& spec = child(o, "spec");
        if (!spec.contains("backoffLimit")) spec["backoffLimit"] = 6;
        if (!spec.contains("completions")) spec["completions"] = 1;
        if (!spec.contains("parallelism")) spec["parallelism"] = 1;
        child(o, "status");
    } else if (t.resource == "secrets") {
        if (!o.contains("type")) o["type"] = "Opaque";
        if (const json::value* found = o.if_contains("stringData"); found && found->is_object()) {
            const json::object stringData = found->as_object();
            json::object& data = child(o, "data");
            for (const auto& [k, v] : stringData)
                if (v.is_string()) data[k] = base64(std::string(v.as_string()));
            o.erase("stringData");
        }
    } else if (t.resource == "namespaces") {
        child(child(o, "metadata"), "labels")["kubernetes.io/metadata.name"] = str(o, {"metadata", "name"});
        child(o, "spec")["finalizers"] = json::array{"kubernetes"};
        child(o, "status")["phase"] = "Active";
    }
}

}  // namespace

const std::vector<ResourceType>& resourceTypes() {
    static const std::vector<ResourceType> types = {
        {"", "v1", "namespaces", "Namespace", "namespace", false, {"ns"}},
        {"", "v1", "nodes", "Node", "node", false, {"no"}},
        {"", "v1", "pods", "Pod", "pod", true, {"po"}},
        {"", "v1", "services", "Service", "service", true, {"svc"}},
        {"", "v1", "secrets", "Secret", "secret", true, {}},
        {"", "v1", "serviceaccounts", "ServiceAccount", "serviceaccount", true, {"sa"}},
        {"coordination.k8s.io", "v1", "leases", "Lease", "lease", true, {}},
        {"batch", "v1", "jobs", "Job", "job", true, {}},
    };
    return types;
}

namespace {

const kube_schema::Type* specType(const ResourceType& type) {
    if (type.resource == "pods") return kube_schema::findType("io.k8s.api.core.v1.PodSpec");
    if (type.resource == "services") return kube_schema::findType("io.k8s.api.core.v1.ServiceSpec");
    if (type.resource == "jobs") return kube_schema::findType("io.k8s.api.batch.v1.JobSpec");
    return nullptr;
}

const kube_schema::Type* partType(const ResourceType& type, std::string_view key) {
    if (key == "metadata") return kube_schema::findType("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
    if (key == "spec") return specType(type);
    return nullptr;
}

bool topLevelField(std::string_view key) {
    return key == "apiVersion" || key == "kind" || key == "metadata" || key == "spec" || key == "status";
}

}  // namespace

std::vector<UnknownFieldPath> unknownFields(const ResourceType& type, const json::object& object,
                                            kube_schema::Report report) {
    std::vector<UnknownFieldPath> out;
    if (!specType(type)) return out;
    for (const auto& item : object) {
        if (!topLevelField(item.key())) {
            out.push_back({std::string(item.key()), std::string(item.key())});
            if (report == kube_schema::Report::AsApply) break;
        } else if (const kube_schema::Type* part = partType(type, item.key())) {
            for (auto& unknown :
                 kube_schema::unknownFields(item.value(), *part, std::string(item.key()), report))
                out.push_back({std::move(unknown.path), std::move(unknown.keyPath)});
        }
    }
    return out;
}

void dropUnknownFields(const ResourceType& type, json::object& object) {
    if (!specType(type)) return;
    for (auto it = object.begin(); it != object.end();) {
        if (!topLevelField(it->key())) {
            it = object.erase(it);
            continue;
        }
        if (const kube_schema::Type* part = partType(type, it->key()))
            kube_schema::dropUnknownFields(it->value(), *part);
        ++it;
    }
}

const ResourceType* findResource(const std::string& group, const std::string& version,
                                 const std::string& resource) {
    for (const auto& t : resourceTypes())
        if (t.group == group && t.version == version && t.resource == resource) return &t;
    return nullptr;
}

json::object statusObject(int code, const std::string& reason, const std::string& message,
                          const json::object& details) {
    json::object s{{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object{}},
                   {"status", "Failure"}, {"message", message}, {"reason", reason}};
    if (!details.empty()) s["details"] = details;
    s["code"] = code;
    return s;
}

Outcome failure(int code, const std::string& reason, const std::string& message,
                const json::object& details) {
    return {code, statusObject(code, reason, message, details)};
}

// ---- selectors ----

namespace {

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(' ');
    const auto e = s.find_last_not_of(' ');
    return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> splitTerms(const std::string& s) {
    std::vector<std::string> out;
    std::string cur;
    int depth = 0;
    for (char c : s) {
        if (c == '(') ++depth;
        if (c == ')') --depth;
        if (c == ',' && depth == 0) {
            out.push_back(trim(cur));
            cur.clear();
        } else {
            cur += c;
        }
    }
    if (!trim(cur).empty() || !out.empty()) out.push_back(trim(cur));
    return out;
}

std::optional<std::string> fieldValue(const json::object& o, const std::string& path) {
    std::vector<std::string> parts;
    for (std::size_t b = 0, e; b <= path.size(); b = e + 1) {
        e = path.find('.', b);
        if (e == std::string::npos) e = path.size();
        parts.push_back(path.substr(b, e - b));
    }
    const json::object* cur = &o;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        const json::value* v = cur->if_contains(parts[i]);
        if (!v) return std::string();
        if (i + 1 == parts.size()) {
            if (v->is_string()) return std::string(v->as_string());
            if (v->is_bool()) return v->as_bool() ? "true" : "false";
            return json::serialize(*v);
        }
        cur = v->if_object();
        if (!cur) return std::string();
    }
    return std::string();
}

bool fieldSupported(const ResourceType& t, const std::string& f) {
    if (f == "metadata.name" || f == "metadata.namespace") return true;
    static const std::map<std::string, std::set<std::string>> extra = {
        {"pods",
         {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
          "status.phase", "status.podIP", "status.nominatedNodeName"}},
        {"secrets", {"type"}},
        {"nodes", {"spec.unschedulable"}},
        {"namespaces", {"status.phase"}},
        {"jobs", {"status.successful"}},
    };
    auto it = extra.find(t.resource);
    return it != extra.end() && it->second.contains(f);
}

}  // namespace

std::optional<Selector> Selector::parse(const std::string& labels, const std::string& fields,
                                        const ResourceType& type, std::string& error) {
    Selector sel;
    for (const std::string& term : splitTerms(labels)) {
        if (term.empty()) {
            error = "unable to parse requirement: empty term in label selector \"" + labels + "\"";
            return std::nullopt;
        }
        Requirement r;
        static const std::regex setRe("([^ !=()]+) +(in|notin) +\\(([^)]*)\\)");
        std::smatch m;
        if (std::regex_match(term, m, setRe)) {
            r.key = m[1];
            r.op = m[2] == "in" ? Requirement::Op::In : Requirement::Op::NotIn;
            for (const auto& v : splitTerms(m[3])) r.values.push_back(v);
        } else if (term[0] == '!') {
            r.key = trim(term.substr(1));
            r.op = Requirement::Op::NotExists;
        } else if (auto p = term.find("!="); p != std::string::npos) {
            r.key = trim(term.substr(0, p));
            r.op = Requirement::Op::NotEqual;
            r.values = {trim(term.substr(p + 2))};
        } else if (auto q = term.find('='); q != std::string::npos) {
            r.key = trim(term.substr(0, q));
            r.op = Requirement::Op::Equal;
            const std::size_t skip = term.compare(q, 2, "==") == 0 ? 2 : 1;
            r.values = {trim(term.substr(q + skip))};
        } else {
            r.key = term;
            r.op = Requirement::Op::Exists;
        }
        if (r.key.empty() || !validLabelKey(r.key) ||
            std::any_of(r.values.begin(), r.values.end(),
                        [](const auto& v) { return !validLabelValue(v); })) {
            error = "unable to parse requirement: invalid label selector term \"" + term + "\"";
            return std::nullopt;
        }
        sel.labels_.push_back(std::move(r));
    }
    for (const std::string& term : splitTerms(fields)) {
        Requirement r;
        if (auto p = term.find("!="); p != std::string::npos) {
            r.key = trim(term.substr(0, p));
            r.op = Requirement::Op::NotEqual;
            r.values = {trim(term.substr(p + 2))};
        } else if (auto q = term.find('='); q != std::string::npos) {
            r.key = trim(term.substr(0, q));
            r.op = Requirement::Op::Equal;
            const std::size_t skip = term.compare(q, 2, "==") == 0 ? 2 : 1;
            r.values = {trim(term.substr(q + skip))};
        } else {
            error = "invalid selector: '" + fields + "'; can't understand '";
            error += term + "'";
            return std::nullopt;
        }
        if (!fieldSupported(type, r.key)) {
            error = "field label not supported: " + r.key;
            return std::nullopt;
        }
        sel.fields_.push_back(std::move(r));
    }
    return sel;
}

bool Selector::test(const Requirement& r, const std::optional<std::string>& value) {
    const bool in = value && std::find(r.values.begin(), r.values.end(), *value) != r.values.end();
    switch (r.op) {
        case Requirement::Op::Equal:
        case Requirement::Op::In:
            return in;
        case Requirement::Op::NotEqual:
        case Requirement::Op::NotIn:
            return !in;
        case Requirement::Op::Exists:
            return value.has_value();
        case Requirement::Op::NotExists:
            return !value.has_value();
    }
    return false;
}

bool Selector::matches(const json::object& o) const {
    const json::value* labels = at(o, {"metadata", "labels"});
    for (const auto& r : labels_) {
        std::optional<std::string> v;
        if (labels && labels->is_object())
            if (const json::value* x = labels->as_object().if_contains(r.key); x && x->is_string())
                v = std::string(x->as_string());
        if (!test(r, v)) return false;
    }
    for (const auto& r : fields_)
        if (!test(r, fieldValue(o, r.key))) return false;
    return true;
}

// ---- the store ----

Store::Store() {
    for (const char* ns : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
        WriteOptions o{"kube-api-double"};
        create(*findResource("", "v1", "namespaces"), "", json::object{{"metadata", {{"name", ns}}}}, o);
    }
}

std::optional<Outcome> Store::checkNamespace(const ResourceType& type, const std::string& ns) const {
    if (!type.namespaced) return std::nullopt;
    if (objects_.contains({"namespaces", "", ns})) return std::nullopt;
    return failure(404, "NotFound", "namespaces \"" + ns + "\" not found",
                   {{"name", ns}, {"kind", "namespaces"}});
}

void Store::recordManager(json::object& object, const std::string& manager, const std::string& operation,
                          const json::value& fieldsFrom) const {
    if (manager.empty()) return;
    json::object& meta = child(object, "metadata");
    json::value& mf = meta["managedFields"];
    if (!mf.is_array()) mf = json::array{};
    json::object fields = fieldsV1(fieldsFrom);
    json::array& entries = mf.as_array();
    auto same = std::find_if(entries.begin(), entries.end(), [&](const json::value& e) {
        return e.is_object() && str(e.as_object(), {"manager"}) == manager &&
               str(e.as_object(), {"operation"}) == operation;
    });
    // As upstream: a manager that owns no field any more has no entry.
    if (fields.empty()) {
        if (same != entries.end()) entries.erase(same);
        if (entries.empty()) meta.erase("managedFields");
        return;
    }
    // An unchanged entry keeps its time, so that a no-op write stays one.
    if (same != entries.end() && same->as_object()["fieldsV1"] == json::value(fields)) return;
    json::object entry{
        {"manager", manager},   {"operation", operation},   {"apiVersion", str(object, {"apiVersion"})},
        {"time", nowRfc3339()}, {"fieldsType", "FieldsV1"}, {"fieldsV1", std::move(fields)}};
    if (same != entries.end()) {
        *same = std::move(entry);
    } else {
        entries.push_back(std::move(entry));
    }
}

void Store::commit(const ResourceType& type, const std::string& ns, const std::string& kind,
                   json::object& object, std::shared_ptr<const json::object> previous) {
    ++resourceVersion_;
    child(object, "metadata")["resourceVersion"] = std::to_string(resourceVersion_);
    Event e{resourceVersion_,   &type, ns, kind, std::make_shared<const json::object>(object),
            std::move(previous)};
    history_.push_back(e);
    // A bounded history, as etcd's compaction bounds it.
    constexpr std::size_t kHistory = 200000;
    while (history_.size() > kHistory) {
        compactedThrough_ = history_.front().resourceVersion;
        history_.pop_front();
    }
    if (onEvent) onEvent(e);
}

void Store::compact() {
    history_.clear();
    compactedThrough_ = resourceVersion_;
}

Outcome Store::create(const ResourceType& type, const std::string& ns, json::value body,
                      const WriteOptions& o) {
    if (!body.is_object()) return failure(400, "BadRequest", "the body of the request is not a JSON object");
    json::object obj = std::move(body.as_object());
    const std::string kind = str(obj, {"kind"});
    const std::string apiVersion = str(obj, {"apiVersion"});
    if ((!kind.empty() && kind != type.kind) || (!apiVersion.empty() && apiVersion != type.apiVersion()))
        return failure(400, "BadRequest",
                       "the API version in the data (" + apiVersion + ") and kind (" + kind +
                           ") do not match the request's " + type.apiVersion() + " " + type.kind);
    obj["kind"] = type.kind;
    obj["apiVersion"] = type.apiVersion();
    json::object& earlyMeta = child(obj, "metadata");
    const std::string bodyNs = str(obj, {"metadata", "namespace"});
    if (type.namespaced && !bodyNs.empty() && bodyNs != ns)
        return failure(
            400, "BadRequest",
            "the namespace of the provided object does not match the namespace sent on the request");
    if (str(obj, {"metadata", "name"}).empty() && !str(obj, {"metadata", "generateName"}).empty())
        earlyMeta["name"] = str(obj, {"metadata", "generateName"}) + randomSuffix();
    const std::string name = str(obj, {"metadata", "name"});
    if (auto err = checkNamespace(type, ns)) return *err;
    if (type.namespaced)
        earlyMeta["namespace"] = ns;
    else
        earlyMeta.erase("namespace");
    if (!str(obj, {"metadata", "resourceVersion"}).empty())
        return failure(422, "Invalid", "resourceVersion should not be set on objects to be created",
                       {{"name", name}, {"kind", type.kind}});
    // The manager owns what it sent, not the defaults the server fills in.
    const json::object sent = obj;
    applyDefaults(type, obj, nextClusterIp_);
    if (auto causes = validate(type, obj); !causes.empty()) return invalid(type, name, causes);
    const Key key{type.resource, type.namespaced ? ns : "", name};
    if (objects_.contains(key))
        return failure(409, "AlreadyExists", type.qualified() + " \"" + name + "\" already exists",
                       {{"name", name}, {"group", type.group}, {"kind", type.resource}});
    json::object& meta = child(obj, "metadata");  // defaults may have moved it
    meta["uid"] = newUid();
    meta["creationTimestamp"] = nowRfc3339();
    meta.erase("managedFields");
    meta.erase("deletionTimestamp");
    if (type.resource != "secrets" && type.resource != "namespaces") meta["generation"] = 1;
    recordManager(obj, o.fieldManager, o.operation, sent);
    if (o.dryRun) return {201, obj};
    commit(type, type.namespaced ? ns : "", "ADDED", obj, nullptr);
    objects_[key].object = obj;
    return {201, obj};
}

Outcome Store::get(const ResourceType& type, const std::string& ns, const std::string& name) const {
    auto it = objects_.find({type.resource, type.namespaced ? ns : "", name});
    if (it == objects_.end()) return notFound(type, name);
    return {200, it->second.object};
}

Outcome Store::list(const ResourceType& type, const std::string& ns, const Selector& selector,
                    std::size_t limit, const std::string& continueToken, const std::string& resourceVersion,
                    const std::string& resourceVersionMatch) const {
    if (!resourceVersion.empty() && !parseVersion(resourceVersion))
        return failure(400, "BadRequest", "invalid resource version \"" + resourceVersion + "\"");
    if (resourceVersionMatch == "Exact") {
        const auto v = parseVersion(resourceVersion);
        if (!v || *v < compactedThrough_ || *v > resourceVersion_)
            return failure(410, "Expired",
                           "too old resource version: " + resourceVersion + " (" +
                               std::to_string(resourceVersion_) + ")");
        if (*v != resourceVersion_)
            return failure(
                410, "Expired",
                "the double serves only the newest state; resourceVersion " + resourceVersion + " is not it");
    }
    std::string after;  // "namespace/name" the previous page ended with
    if (!continueToken.empty()) {
        const auto colon = continueToken.find(':');
        const auto v = parseVersion(continueToken.substr(0, colon));
        if (colon == std::string::npos || !v)
            return failure(400, "BadRequest", "continue key is not valid: invalid continue token");
        if (*v < compactedThrough_)
            return failure(410, "Expired",
                           "The provided continue parameter is too old to display a consistent list result. "
                           "You can start a new list without the continue parameter.");
        after = continueToken.substr(colon + 1);
    }
    json::array items;
    std::string last;
    bool more = false;
    for (auto it = objects_.lower_bound({type.resource, "", ""});
         it != objects_.end() && std::get<0>(it->first) == type.resource; ++it) {
        const auto& [res, objNs, objName] = it->first;
        if (type.namespaced && !ns.empty() && objNs != ns) continue;
        const std::string position = (objNs + "/").append(objName);
        if (!after.empty() && position <= after) continue;
        if (!selector.matches(it->second.object)) continue;
        if (limit > 0 && items.size() == limit) {
            more = true;
            break;
        }
        json::object item = it->second.object;
        item.erase("kind");
        item.erase("apiVersion");
        items.push_back(std::move(item));
        last = position;
    }
    json::object meta{{"resourceVersion", std::to_string(resourceVersion_)}};
    if (more) meta["continue"] = std::to_string(resourceVersion_) + ":" + last;
    return {200, json::object{{"kind", type.kind + "List"},
                              {"apiVersion", type.apiVersion()},
                              {"metadata", std::move(meta)},
                              {"items", std::move(items)}}};
}

Outcome Store::commitUpdate(const ResourceType& type, const Key& key, json::object updated,
                            const WriteOptions& o, const std::string& operation,
                            const json::value& fieldsFrom) {
    Stored& stored = objects_.at(key);
    const json::object& old = stored.object;
    const std::string name = std::get<2>(key);
    updated["kind"] = type.kind;
    updated["apiVersion"] = type.apiVersion();
    json::object& meta = child(updated, "metadata");
    const json::object& oldMeta = old.at("metadata").as_object();
    meta["name"] = name;
    if (type.namespaced) meta["namespace"] = std::get<1>(key);
    for (const char* f : {"uid", "creationTimestamp", "generation", "managedFields", "resourceVersion"}) {
        if (const json::value* v = oldMeta.if_contains(f))
            meta[f] = *v;
        else
            meta.erase(f);
    }
    if (type.resource == "secrets" || type.resource == "services" || type.resource == "pods" ||
        type.resource == "jobs" || type.resource == "namespaces")
        applyDefaults(type, updated, nextClusterIp_);
    if (auto causes = validate(type, updated); !causes.empty()) return invalid(type, name, causes);
    recordManager(updated, o.fieldManager, operation, fieldsFrom);
    if (comparable(updated) == comparable(old)) return {200, old};  // a no-op write keeps the version
    if (json::object& m = child(updated, "metadata");
        m.contains("generation") && specOf(updated) != specOf(old))
        m["generation"] = m["generation"].to_number<std::int64_t>() + 1;
    if (o.dryRun) return {200, updated};
    auto previous = std::make_shared<const json::object>(old);
    commit(type, std::get<1>(key), "MODIFIED", updated, previous);
    stored.object = updated;
    return {200, std::move(updated)};
}

Outcome Store::replace(const ResourceType& type, const std::string& ns, const std::string& name,
                       json::value body, const WriteOptions& o) {
    if (!body.is_object()) return failure(400, "BadRequest", "the body of the request is not a JSON object");
    json::object obj = std::move(body.as_object());
    const Key key{type.resource, type.namespaced ? ns : "", name};
    // Upstream's lease strategy: AllowCreateOnUpdate true, AllowUnconditionalUpdate false.
    const bool lease = type.resource == "leases";
    auto it = objects_.find(key);
    if (it == objects_.end() && lease && str(obj, {"metadata", "name"}) == name) {
        child(obj, "metadata").erase("resourceVersion");
        return create(type, ns, std::move(obj), o);
    }
    if (it == objects_.end()) return notFound(type, name);
    const std::string bodyName = str(obj, {"metadata", "name"});
    if (bodyName != name)
        return failure(
            400, "BadRequest",
            "the name of the object (" + bodyName + ") does not match the name on the URL (" + name + ")");
    const std::string bodyNs = str(obj, {"metadata", "namespace"});
    if (type.namespaced && !bodyNs.empty() && bodyNs != ns)
        return failure(
            400, "BadRequest",
            "the namespace of the provided object does not match the namespace sent on the request");
    const std::string rv = str(obj, {"metadata", "resourceVersion"});
    const json::object& old = it->second.object;
    if (rv.empty() && lease)
        return invalid(type, name,
                       {{"metadata.resourceVersion", "Invalid value: 0x0: must be specified for an update"}});
    if (!rv.empty() && rv != str(old, {"metadata", "resourceVersion"}))
        return conflict(type, name,
                        "the object has been modified; please apply your changes to the latest version "
                        "and try again");
    const std::string uid = str(obj, {"metadata", "uid"});
    if (!uid.empty() && uid != str(old, {"metadata", "uid"}))
        return conflict(type, name,
                        "Precondition failed: UID in precondition: " + uid +
                            ", UID in object meta: " + str(old, {"metadata", "uid"}));
    const json::value fields = obj;
    if (o.statusOnly) {
        json::object updated = old;
        if (const json::value* st = obj.if_contains("status")) updated["status"] = *st;
        child(updated, "metadata")["resourceVersion"] = str(old, {"metadata", "resourceVersion"});
        return commitUpdate(type, key, std::move(updated), o, "Update", fields);
    }
    if (hasStatusSubresource(type)) {
        if (const json::value* s = old.if_contains("status"))
            obj["status"] = *s;
        else
            obj.erase("status");
    }
    return commitUpdate(type, key, std::move(obj), o, "Update", fields);
}

Outcome Store::patch(const ResourceType& type, const std::string& ns, const std::string& name,
                     const std::string& contentType, const std::string& body, const WriteOptions& o) {
    boost::system::error_code ec;
    json::value p = json::parse(body, ec);
    if (ec) {
        if (contentType.starts_with("application/apply-patch+yaml"))
            return failure(415, "UnsupportedMediaType",
                           "the double reads apply bodies as JSON (a subset of YAML); send JSON");
        return failure(400, "BadRequest", "error decoding patch: " + ec.message());
    }
    if (contentType.starts_with("application/apply-patch+yaml")) {
        if (!p.is_object()) return failure(400, "BadRequest", "an apply patch must be an object");
        return apply(type, ns, name, std::move(p.as_object()), o);
    }
    if (contentType.starts_with("application/json-patch+json"))
        return failure(415, "UnsupportedMediaType", "the double does not model JSON patch (RFC 6902)");
    const bool strategic = contentType.starts_with("application/strategic-merge-patch+json");
    if (!strategic && !contentType.starts_with("application/merge-patch+json"))
        return failure(415, "UnsupportedMediaType",
                       "the body of the request was in an unknown format - accepted "
                       "media types include: application/json-patch+json, "
                       "application/merge-patch+json, application/apply-patch+yaml, "
                       "application/strategic-merge-patch+json");
    if (!p.is_object()) return failure(400, "BadRequest", "a merge patch must be a JSON object");
    const Key key{type.resource, type.namespaced ? ns : "", name};
    auto it = objects_.find(key);
    if (it == objects_.end()) return notFound(type, name);
    const json::object& old = it->second.object;
    const std::string rv = str(p.as_object(), {"metadata", "resourceVersion"});
    if (!rv.empty() && rv != str(old, {"metadata", "resourceVersion"}))
        return conflict(type, name,
                        "the object has been modified; please apply your changes to the latest version "
                        "and try again");
    json::value merged = strategic ? strategicMerge(old, p) : mergePatch(old, p);
    if (!merged.is_object()) return failure(422, "Invalid", "the patch does not leave an object");
    if (o.statusOnly) {
        json::object updated = old;
        if (const json::value* st = merged.as_object().if_contains("status")) updated["status"] = *st;
        merged = std::move(updated);
    } else if (hasStatusSubresource(type)) {
        if (const json::value* st = old.if_contains("status")) merged.as_object()["status"] = *st;
    }
    return commitUpdate(type, key, std::move(merged.as_object()), o, "Update", p);
}

Outcome Store::apply(const ResourceType& type, const std::string& ns, const std::string& name,
                     json::object config, const WriteOptions& o) {
    if (o.fieldManager.empty())
        return failure(
            422, "Invalid",
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for "
            "apply patch");
    if (str(config, {"kind"}) != type.kind || str(config, {"apiVersion"}) != type.apiVersion())
        return failure(
            400, "BadRequest",
            "an apply configuration must name apiVersion " + type.apiVersion() + " and kind " + type.kind);
    const std::string configName = str(config, {"metadata", "name"});
    if (!configName.empty() && configName != name)
        return failure(
            400, "BadRequest",
            "the name of the object (" + configName + ") does not match the name on the URL (" + name + ")");
    json::object& configMeta = child(config, "metadata");
    const std::string rv = str(config, {"metadata", "resourceVersion"});
    configMeta.erase("resourceVersion");
    configMeta.erase("managedFields");
    configMeta["name"] = name;
    const Key key{type.resource, type.namespaced ? ns : "", name};
    auto it = objects_.find(key);
    if (it == objects_.end()) {
        if (!rv.empty()) return notFound(type, name);
        WriteOptions creating = o;
        creating.operation = "Apply";
        Outcome out = create(type, ns, config, creating);
        if (out.code == 201 && !o.dryRun) objects_.at(key).applied[o.fieldManager] = config;
        return out;
    }
    Stored& stored = it->second;
    if (!rv.empty() && rv != str(stored.object, {"metadata", "resourceVersion"}))
        return conflict(type, name,
                        "the object has been modified; please apply your changes to the latest version "
                        "and try again");
    const auto mine = leaves(config);
    json::array causes;
    std::string conflicts;
    std::vector<std::pair<std::string, Path>> taken;
    for (const auto& [manager, theirs] : stored.applied) {
        if (manager == o.fieldManager) continue;
        for (const auto& [path, value] : leaves(theirs)) {
            auto m = mine.find(path);
            if (m == mine.end() || m->second == value) continue;
            taken.emplace_back(manager, path);
            conflicts += "\n- conflict with \"" + manager + "\": " + dotted(path);
            causes.push_back({{"reason", "FieldManagerConflict"},
                              {"message", "conflict with \"" + manager + "\""},
                              {"field", dotted(path)}});
        }
    }
    if (!taken.empty() && !o.force)
        return failure(409, "Conflict",
                       "Apply failed with " + std::to_string(taken.size()) + " conflict" +
                           (taken.size() == 1 ? "" : "s") + ":" + conflicts,
                       {{"name", name}, {"group", type.group}, {"kind", type.resource}, {"causes", causes}});
    json::object live = stored.object;
    // Fields this manager applied before and dropped now are removed, unless another
    // manager applied them too.
    if (auto prev = stored.applied.find(o.fieldManager); prev != stored.applied.end()) {
        for (const auto& [path, value] : leaves(prev->second)) {
            if (mine.contains(path)) continue;
            bool shared = false;
            for (const auto& [manager, theirs] : stored.applied)
                if (manager != o.fieldManager && leaves(theirs).contains(path)) shared = true;
            if (!shared) removePath(live, path);
        }
    }
    json::value merged = applyMerge(live, config);
    if (hasStatusSubresource(type)) {
        if (const json::value* s = stored.object.if_contains("status")) merged.as_object()["status"] = *s;
    }
    if (o.dryRun) return commitUpdate(type, key, std::move(merged.as_object()), o, "Apply", config);
    for (const auto& [manager, path] : taken) removePath(stored.applied[manager], path);
    stored.applied[o.fieldManager] = config;
    return commitUpdate(type, key, std::move(merged.as_object()), o, "Apply", config);
}

Outcome Store::remove(const ResourceType& type, const std::string& ns, const std::string& name,
                      const std::string& body) {
    const Key key{type.resource, type.namespaced ? ns : "", name};
    auto it = objects_.find(key);
    if (it == objects_.end()) return notFound(type, name);
    bool orphan = type.resource == "jobs";  // batch/v1 jobs orphan by default, as upstream does
    if (!body.empty()) {
        boost::system::error_code ec;
        json::value options = json::parse(body, ec);
        if (ec || !options.is_object())
            return failure(400, "BadRequest", "the DeleteOptions body is not JSON");
        const json::object& opt = options.as_object();
        const std::string wantUid = str(opt, {"preconditions", "uid"});
        const std::string wantRv = str(opt, {"preconditions", "resourceVersion"});
        const json::object& obj = it->second.object;
        if (!wantUid.empty() && wantUid != str(obj, {"metadata", "uid"}))
            return conflict(type, name,
                            "Precondition failed: UID in precondition: " + wantUid +
                                ", UID in object meta: " + str(obj, {"metadata", "uid"}));
        if (!wantRv.empty() && wantRv != str(obj, {"metadata", "resourceVersion"}))
            return conflict(type, name,
                            "Precondition failed: ResourceVersion in precondition: " + wantRv +
                                ", ResourceVersion in meta: " + str(obj, {"metadata", "resourceVersion"}));
        const std::string policy = str(opt, {"propagationPolicy"});
        if (!policy.empty()) orphan = policy == "Orphan";
        if (const json::value* o = opt.if_contains("orphanDependents"); o && o->is_bool())
            orphan = o->as_bool();
        if (const json::value* d = opt.if_contains("dryRun"); d && d->is_array() && !d->as_array().empty())
            return {200, it->second.object};
    }
    json::object last = it->second.object;
    erase(type, key, !orphan);
    return {200, last};
}

void Store::erase(const ResourceType& type, const Key& key, bool collectDependents) {
    auto it = objects_.find(key);
    if (it == objects_.end()) return;
    json::object obj = std::move(it->second.object);
    objects_.erase(it);
    const std::string uid = str(obj, {"metadata", "uid"});
    commit(type, std::get<1>(key), "DELETED", obj, nullptr);
    if (type.resource == "namespaces") {
        std::vector<std::pair<const ResourceType*, Key>> inside;
        for (const auto& [k, s] : objects_)
            if (std::get<1>(k) == std::get<2>(key))
                for (const auto& t : resourceTypes())
                    if (t.resource == std::get<0>(k)) inside.emplace_back(&t, k);
        for (const auto& [t, k] : inside) erase(*t, k, true);
    }
    if (!collectDependents) return;
    // The garbage collector: objects all of whose owners are gone go too (background).
    std::set<std::string> uids;
    for (const auto& [k, s] : objects_) uids.insert(str(s.object, {"metadata", "uid"}));
    std::vector<std::pair<const ResourceType*, Key>> orphans;
    for (const auto& [k, s] : objects_) {
        const json::value* refs = at(s.object, {"metadata", "ownerReferences"});
        if (!refs || !refs->is_array() || refs->as_array().empty()) continue;
        bool ownedByDeleted = false, ownerLeft = false;
        for (const auto& r : refs->as_array()) {
            if (!r.is_object()) continue;
            const std::string ref = str(r.as_object(), {"uid"});
            if (ref == uid)
                ownedByDeleted = true;
            else if (uids.contains(ref))
                ownerLeft = true;
        }
        if (ownedByDeleted && !ownerLeft)
            for (const auto& t : resourceTypes())
                if (t.resource == std::get<0>(k)) orphans.emplace_back(&t, k);
    }
    for (const auto& [t, k] : orphans) erase(*t, k, true);
}

Outcome Store::removeCollection(const ResourceType& type, const std::string& ns, const Selector& selector) {
    json::array items;
    std::vector<Key> keys;
    for (const auto& [k, s] : objects_)
        if (std::get<0>(k) == type.resource && (!type.namespaced || ns.empty() || std::get<1>(k) == ns) &&
            selector.matches(s.object))
            keys.push_back(k);
    for (const auto& k : keys) {
        items.push_back(objects_.at(k).object);
        erase(type, k, type.resource != "jobs");
    }
    return {200, json::object{{"kind", type.kind + "List"},
                              {"apiVersion", type.apiVersion()},
                              {"metadata", {{"resourceVersion", std::to_string(resourceVersion_)}}},
                              {"items", std::move(items)}}};
}

std::optional<Outcome> Store::replay(const ResourceType& type, const std::string& ns,
                                     const std::string& resourceVersion, std::vector<Event>& events) const {
    auto inScope = [&](const std::string& objNs) { return !type.namespaced || ns.empty() || objNs == ns; };
    if (resourceVersion.empty() || resourceVersion == "0") {
        for (const auto& [k, s] : objects_)
            if (std::get<0>(k) == type.resource && inScope(std::get<1>(k)))
                events.push_back({resourceVersion_, &type, std::get<1>(k), "ADDED",
                                  std::make_shared<const json::object>(s.object), nullptr});
        return std::nullopt;
    }
    const auto from = parseVersion(resourceVersion);
    if (!from) return failure(400, "BadRequest", "invalid resource version \"" + resourceVersion + "\"");
    if (*from < compactedThrough_)
        return failure(
            410, "Expired",
            "too old resource version: " + resourceVersion + " (" + std::to_string(compactedThrough_) + ")");
    for (const Event& e : history_)
        if (e.resourceVersion > *from && e.type == &type && inScope(e.ns)) events.push_back(e);
    return std::nullopt;
}

}  // namespace devlet::kubedouble
