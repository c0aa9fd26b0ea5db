// Every field of Akri's Configuration schema (its CRD, copied in tests/runtime/akri/ with
// its source named), set in a configuration devlet loads: either devlet implements it
// (accepted without a warning) or it loads with a warning that names the field, or the
// unimplemented field it lies in, at that field's line. Akri accepts all of them, so none
// is refused, and none is ignored without a word.

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "probes/echo/echo_handler.h"
#include "probes/usb/udev_handler.h"
#include "runtime/configuration.h"
#include "runtime/discovery.h"

#ifndef DEVLET_AKRI_CRD
#error "DEVLET_AKRI_CRD names the copy of Akri's Configuration CRD"
#endif

namespace devlet {
namespace {

// The schema fields devlet implements; every other field must be warned.
const std::set<std::string> kImplemented = {
    "spec",
    "spec.discoveryHandler",
    "spec.discoveryHandler.name",
    "spec.discoveryHandler.discoveryDetails",
    "spec.discoveryHandler.discoveryProperties",
    "spec.discoveryHandler.discoveryProperties[]",
    "spec.discoveryHandler.discoveryProperties[].name",
    "spec.discoveryHandler.discoveryProperties[].value",
    "spec.capacity",
    "spec.brokerProperties",
    "spec.brokerProperties.*",
};

struct Field {
    std::string path;  // spec.a.b, "[]" for a list's item, ".*" for a map's entry
    YAML::Node schema;
};

void walk(const YAML::Node& schema, const std::string& path, std::vector<Field>& out) {
    out.push_back({path, schema});
    if (const YAML::Node properties = schema["properties"]) {
        for (const auto& property : properties)
            walk(property.second, path + "." + property.first.Scalar(), out);
    }
    if (const YAML::Node items = schema["items"]) walk(items, path + "[]", out);
    if (const YAML::Node entries = schema["additionalProperties"]; entries && entries.IsMap())
        walk(entries, path + ".*", out);
}

YAML::Node specSchema() {
    YAML::Node crd = YAML::LoadFile(DEVLET_AKRI_CRD);
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
}

// A block-style YAML tree rendered with known lines. A node is a scalar, a mapping, or
// (list) a one-item list whose item is the mapping `children`.
struct Node {
    std::string key;     // its key in the parent mapping
    std::string scalar;  // non-empty: a scalar
    bool list = false;
    std::vector<Node> children;

    Node& child(const std::string& name) {
        for (Node& node : children) {
            if (node.key == name) return node;
        }
        Node& added = children.emplace_back();
        added.key = name;
        return added;
    }
    bool has(const std::string& name) const {
        return std::any_of(children.begin(), children.end(),
                           [&](const Node& node) { return node.key == name; });
    }
};

std::vector<std::string> split(const std::string& path) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (true) {
        std::size_t dot = path.find('.', start);
        parts.push_back(path.substr(start, dot - start));
        if (dot == std::string::npos) return parts;
        start = dot + 1;
    }
}

// A value the schema allows and devlet can use, by field.
std::string sample(const std::string& path, const YAML::Node& schema) {
    static const std::map<std::string, std::string> kValues = {
        {"spec.discoveryHandler.name", "udev"},
        {"spec.discoveryHandler.discoveryDetails", R"('udevRules: [''SUBSYSTEM=="video4linux"'']')"},
        {"spec.discoveryHandler.discoveryProperties[].name", "devicePluginResourceName"},
        {"spec.discoveryHandler.discoveryProperties[].value", "example.com/camera"},
    };
    if (auto it = kValues.find(path); it != kValues.end()) return it->second;
    const std::string type = schema["type"] ? schema["type"].Scalar() : "";
    if (type == "integer") return "2";
    if (type == "boolean") return "true";
    if (type == "string") return "sample";
    return "";  // an object: a mapping
}

// Schema and document side by side: the schema node of each path, to find samples and
// required fields.
class Document {
public:
    explicit Document(const std::vector<Field>& fields) {
        for (const Field& field : fields) schemas_[field.path] = field.schema;
        set("spec.discoveryHandler.name");
        set("spec.discoveryHandler.discoveryDetails");
    }

    // Sets `path` (and the mappings and lists above it) to a sample value.
    void set(const std::string& path) {
        Node* node = &spec_;
        std::string at = "spec";
        const std::vector<std::string> parts = split(path);
        for (std::size_t i = 1; i < parts.size(); ++i) {
            std::string key = parts[i];
            const bool item = key.ends_with("[]");
            if (item) key.resize(key.size() - 2);
            at += "." + parts[i];
            node = &node->child(key == "*" ? "SAMPLE_KEY" : key);
            if (item) node->list = true;
        }
        if (parts.back().ends_with("[]")) return;  // the item: a mapping
        const YAML::Node schema = schemas_.at(at);
        if (schema["type"] && schema["type"].Scalar() == "array") {
            node->list = true;  // one item, completed with what an item requires
            return;
        }
        node->scalar = sample(at, schema);
    }

    // Adds what the schema requires beside what was set (required, oneOf), as Akri would.
    void complete() { complete(spec_, "spec"); }

    // The text, and the line of each path's key.
    std::string render(std::map<std::string, int>& lines) const {
        std::vector<std::string> out = {"apiVersion: akri.sh/v0", "kind: Configuration",
                                        "metadata:", "  name: walk", "spec:"};
        lines["spec"] = 5;
        renderMapping(spec_, "spec", "  ", out, lines);
        std::string text;
        for (const std::string& line : out) text += line + "\n";
        return text;
    }

private:
    void complete(Node& node, const std::string& path) {
        if (!node.scalar.empty()) return;
        const YAML::Node schema = schemas_.at(path);
        auto setKey = [&](const std::string& key) {
            if (node.has(key)) return;
            Node& added = node.child(key);
            added.scalar = sample(path + "." + key, schemas_.at(path + "." + key));
        };
        if (const YAML::Node required = schema["required"]) {
            for (const auto& key : required) setKey(key.Scalar());
        }
        if (const YAML::Node oneOf = schema["oneOf"]) {
            bool any = false;
            for (const auto& alternative : oneOf) any = any || node.has(alternative["required"][0].Scalar());
            if (!any) setKey(oneOf[0]["required"][0].Scalar());
        }
        for (auto& child : node.children) {
            const std::string& key = child.key;
            std::string childPath = path + "." + (key == "SAMPLE_KEY" ? "*" : key) + (child.list ? "[]" : "");
            complete(child, childPath);
        }
    }

    static void renderMapping(const Node& node, const std::string& path, const std::string& indent,
                              std::vector<std::string>& out, std::map<std::string, int>& lines) {
        for (const auto& child : node.children) {
            const std::string& key = child.key;
            const std::string childPath = path + "." + (key == "SAMPLE_KEY" ? "*" : key);
            lines[childPath] = static_cast<int>(out.size()) + 1;
            if (!child.scalar.empty()) {
                out.push_back(indent + key + ": " + child.scalar);
            } else if (child.list) {
                out.push_back(indent + key + ":");
                lines[childPath + "[]"] = static_cast<int>(out.size()) + 1;
                const std::size_t first = out.size();
                renderMapping(child, childPath + "[]", indent + "    ", out, lines);
                if (out.size() == first)
                    out.push_back(indent + "  - {}");
                else
                    out[first].replace(indent.size(), 4, "  - ");
            } else if (child.children.empty()) {
                out.push_back(indent + key + ": {}");
            } else {
                out.push_back(indent + key + ":");
                renderMapping(child, childPath, indent + "  ", out, lines);
            }
        }
    }

    std::map<std::string, YAML::Node> schemas_;
    Node spec_;
};

// How a warning names a field: list items by index.
std::string named(std::string path) {
    for (std::size_t at = path.find("[]"); at != std::string::npos; at = path.find("[]", at))
        path.replace(at, 2, "[0]");
    return path;
}

class AkriSchemaTest : public ::testing::Test {
protected:
    AkriSchemaTest() {
        handlers_.add(std::make_unique<usb::UdevHandler>());
        handlers_.add(std::make_unique<echo::EchoHandler>());
        walk(specSchema(), "spec", fields_);
    }

    ParsedConfigurations parse(const std::string& text) {
        return parseConfigurations(text, "walk.yaml", handlers_, "akri.sh");
    }

    HandlerRegistry handlers_;
    std::vector<Field> fields_;
};

std::string all(const ParsedConfigurations& parsed) {
    std::string text;
    for (const auto& problem : parsed.problems) text += problem.str() + " (error)\n";
    for (const auto& warning : parsed.warnings) text += warning.str() + " (warning)\n";
    return text;
}

TEST_F(AkriSchemaTest, TheSchemaCopyHoldsEveryFieldTheTableNames) {
    std::set<std::string> paths;
    for (const Field& field : fields_) paths.insert(field.path);
    for (const std::string& implemented : kImplemented)
        EXPECT_TRUE(paths.contains(implemented)) << implemented;
    // spec; discoveryHandler with name, discoveryDetails and discoveryProperties (15 with
    // its item, valueFrom and both references); capacity; brokerSpec (3); two service specs;
    // brokerProperties (2).
    EXPECT_EQ(fields_.size(), 27u);
}

TEST_F(AkriSchemaTest, EveryFieldIsImplementedOrWarnedAtItsLineNeverRefused) {
    for (const Field& field : fields_) {
        Document document(fields_);
        document.set(field.path);
        document.complete();
        std::map<std::string, int> lines;
        const std::string text = document.render(lines);
        const ParsedConfigurations parsed = parse(text);
        SCOPED_TRACE(field.path + "\n" + text + all(parsed));

        EXPECT_TRUE(parsed.problems.empty()) << "refused";
        EXPECT_EQ(parsed.configurations.size(), 1u);
        if (kImplemented.contains(field.path)) {
            EXPECT_TRUE(parsed.warnings.empty()) << "an implemented field is warned";
            continue;
        }
        // The field itself, or the unimplemented field it lies in, is named at its line.
        bool warned = false;
        for (std::string at = field.path; !warned && at != "spec"; at = at.substr(0, at.rfind('.'))) {
            if (kImplemented.contains(at)) break;
            for (const ConfigProblem& warning : parsed.warnings) {
                if (warning.line == lines.at(at) && warning.message.find(named(at)) != std::string::npos)
                    warned = true;
            }
        }
        EXPECT_TRUE(warned) << "accepted silently";
    }
}

TEST_F(AkriSchemaTest, ObjectMetadataBeyondTheNameIsWarnedAtItsLine) {
    const ParsedConfigurations parsed = parse(
        "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: cams\n  namespace: edge\n"
        "  labels:\n    app: cams\nspec:\n  discoveryHandler:\n    name: debugEcho\n"
        "    discoveryDetails: 'descriptions: [foo0]'\n");
    ASSERT_TRUE(parsed.problems.empty()) << all(parsed);
    ASSERT_EQ(parsed.warnings.size(), 2u) << all(parsed);
    EXPECT_EQ(parsed.warnings[0].line, 5);
    EXPECT_NE(parsed.warnings[0].message.find("metadata.namespace"), std::string::npos);
    EXPECT_EQ(parsed.warnings[1].line, 6);
    EXPECT_NE(parsed.warnings[1].message.find("metadata.labels"), std::string::npos);
}

TEST_F(AkriSchemaTest, DiscoveryPropertiesAHandlerDoesNotReadAreWarnedAtTheirLine) {
    const ParsedConfigurations parsed = parse(
        "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n  name: echo\nspec:\n"
        "  discoveryHandler:\n    name: debugEcho\n    discoveryDetails: 'descriptions: [foo0]'\n"
        "    discoveryProperties:\n    - name: devicePluginResourceName\n      value: a.b/c\n");
    ASSERT_TRUE(parsed.problems.empty()) << all(parsed);
    ASSERT_EQ(parsed.warnings.size(), 1u) << all(parsed);
    EXPECT_EQ(parsed.warnings[0].line, 10);
    EXPECT_NE(parsed.warnings[0].message.find("debugEcho handler does not read it"), std::string::npos)
        << all(parsed);
}

}  // namespace
}  // namespace devlet
