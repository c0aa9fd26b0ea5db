#include "kube_schema/kube_schema.h"

#include <algorithm>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

namespace devlet::kube_schema {

namespace {

std::span<const Type> types() {
    return {kTypes, kTypeCount};
}

// Where a value is: its path as devlet names it (list items by index) and as a
// server-side apply does (items of keyed lists by their keys).
struct Where {
    std::string path;
    std::string keyPath;

    Where field(std::string_view name) const {
        auto join = [&](const std::string& p) {
            return p.empty() ? std::string(name) : p + "." + std::string(name);
        };
        return {join(path), join(keyPath)};
    }
};

// `[containerPort=80,protocol="TCP"]`, as structured-merge-diff prints a key (JSON values,
// keys sorted); `[index]` when the item has none of its keys.
std::string itemKey(const boost::json::value& item, std::string_view keys, std::size_t index) {
    std::string out;
    if (item.is_object()) {
        while (!keys.empty()) {
            const std::size_t comma = keys.find(',');
            const std::string_view key = keys.substr(0, comma);
            keys = comma == std::string_view::npos ? std::string_view{} : keys.substr(comma + 1);
            if (const boost::json::value* v = item.as_object().if_contains(key))
                out += (out.empty() ? "" : ",") + std::string(key) + "=" + boost::json::serialize(*v);
        }
    }
    return "[" + (out.empty() ? std::to_string(index) : out) + "]";
}

void walk(const boost::json::value& value, const Type& type, const Where& where, Report report,
          std::vector<UnknownField>& out);

// The value of one known field.
void walkField(const boost::json::value& value, const Field& field, const Where& where, Report report,
               std::vector<UnknownField>& out) {
    const Type* type = typeAt(field.type);
    switch (field.kind) {
        case Kind::Object:
            if (type) walk(value, *type, where, report, out);
            break;
        case Kind::ObjectList:
            if (type && value.is_array()) {
                std::size_t index = 0;
                for (const auto& item : value.as_array()) {
                    const std::string byIndex = "[" + std::to_string(index) + "]";
                    const std::string byKey =
                        field.listKeys.empty() ? byIndex : itemKey(item, field.listKeys, index);
                    walk(item, *type, {where.path + byIndex, where.keyPath + byKey}, report, out);
                    ++index;
                }
            }
            break;
        case Kind::ObjectMap:
            if (type && value.is_object()) {
                for (const auto& item : value.as_object()) {
                    const std::string key = "[" + std::string(item.key()) + "]";
                    walk(item.value(), *type, {where.path + key, where.keyPath + key}, report, out);
                }
            }
            break;
        default:
            break;
    }
}

void walk(const boost::json::value& value, const Type& type, const Where& where, Report report,
          std::vector<UnknownField>& out) {
    if (!value.is_object() || type.preserveUnknownFields) return;
    for (const auto& item : value.as_object()) {
        const Where inner = where.field(item.key());
        if (const Field* field = findField(type, item.key())) {
            walkField(item.value(), *field, inner, report, out);
        } else {
            out.push_back({inner.path, inner.keyPath, &type});
            if (report == Report::AsApply) return;  // the rest of this object is not read
        }
    }
}

void drop(boost::json::value& value, const Type& type) {
    if (!value.is_object() || type.preserveUnknownFields) return;
    auto& object = value.as_object();
    for (auto it = object.begin(); it != object.end();) {
        const Field* field = findField(type, it->key());
        if (!field) {
            it = object.erase(it);
            continue;
        }
        if (const Type* inner = typeAt(field->type)) {
            boost::json::value& child = it->value();
            if (field->kind == Kind::Object) {
                drop(child, *inner);
            } else if (field->kind == Kind::ObjectList && child.is_array()) {
                for (auto& item : child.as_array()) drop(item, *inner);
            } else if (field->kind == Kind::ObjectMap && child.is_object()) {
                for (auto& item : child.as_object()) drop(item.value(), *inner);
            }
        }
        ++it;
    }
}

}  // namespace

const Type* findType(std::string_view name) {
    auto all = types();
    auto found = std::lower_bound(all.begin(), all.end(), name,
                                  [](const Type& type, std::string_view n) { return type.name < n; });
    if (found != all.end() && found->name == name) return &*found;
    for (const Type& type : all) {
        if (type.name.ends_with(name) && type.name[type.name.size() - name.size() - 1] == '.') return &type;
    }
    return nullptr;
}

const Type* typeAt(int index) {
    if (index < 0 || static_cast<std::size_t>(index) >= kTypeCount) return nullptr;
    return &kTypes[index];
}

const Field* findField(const Type& type, std::string_view name) {
    auto found = std::lower_bound(type.fields.begin(), type.fields.end(), name,
                                  [](const Field& field, std::string_view n) { return field.name < n; });
    return found != type.fields.end() && found->name == name ? &*found : nullptr;
}

std::vector<std::string> fieldNames(const Type& type) {
    std::vector<std::string> names;
    for (const Field& field : type.fields) names.emplace_back(field.name);
    return names;
}

std::string_view shortName(const Type& type) {
    std::size_t dot = type.name.rfind('.');
    return dot == std::string_view::npos ? type.name : type.name.substr(dot + 1);
}

std::vector<UnknownField> unknownFields(const boost::json::value& value, const Type& type,
                                        const std::string& prefix, Report report) {
    std::vector<UnknownField> out;
    walk(value, type, {prefix, prefix}, report, out);
    return out;
}

void dropUnknownFields(boost::json::value& value, const Type& type) {
    drop(value, type);
}

}  // namespace devlet::kube_schema
