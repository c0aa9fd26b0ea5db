#pragma once
// Strict reading of YAML mappings for devlet's own files and the handlers'
// discoveryDetails: every key known, none repeated, each problem with its line and,
// for a misspelled key, the key that was probably meant. Only .cpp files that parse
// YAML include this header. Stateless; any thread.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace devlet::yaml {

// The whole text of a file, or nullopt with errno in `error` (ENOENT lets a caller treat a
// missing default file as empty).
std::optional<std::string> readText(const std::string& path, int& error);

// YAML::Load and YAML::LoadAll, but a text yaml-cpp 0.7 cannot start a document in (a
// stray ',' at the top level) is a YAML::ParserException at that place: LoadAll would
// loop forever taking memory, and Load would take the text as an empty document.
YAML::Node load(const std::string& text);
std::vector<YAML::Node> loadAll(const std::string& text);

// The 1-based line of a node, or fallback where yaml-cpp has no mark.
int lineOf(const YAML::Node& node, int fallback);

// A scalar read as a T, or nullopt when the node is not a scalar or does not read as a T:
// yaml-cpp's as<T>() without its exception, for values that are checked, not trusted.
template <typename T>
std::optional<T> scalarAs(const YAML::Node& node) {
    T value{};
    if (node.IsScalar() && YAML::convert<T>::decode(node, value)) return value;
    return std::nullopt;
}

// One value of a mapping and the line of its key.
struct Entry {
    YAML::Node value;
    int line = 0;
    // yaml-cpp marks an empty value at the next token, possibly lines later: use the key's line.
    int valueLine() const { return value.IsNull() ? line : lineOf(value, line); }
};
using Mapping = std::map<std::string, Entry>;

const Entry* find(const Mapping& mapping, const std::string& key);

using Report = std::function<void(int line, std::string message)>;

// The entries of `node` (at `line`, called `where` in messages), each key once.
// Keys not in `allowed` (when given) and repeated keys are reported and left out:
// yaml-cpp keeps repeated keys, so they are caught here. An empty node is an empty
// mapping when `emptyAllowed` (a section whose entries are all commented out).
std::optional<Mapping> readMapping(const YAML::Node& node, int line, const std::string& where,
                                   const std::vector<std::string>* allowed, const Report& report,
                                   bool emptyAllowed = false);

// A handler's discoveryDetails (Akri keeps them as one YAML string) read as a strict
// mapping: invalid YAML, a non-mapping (whose message names `requiredKey`) and unknown or
// repeated keys are reported with lines relative to the text. Empty when unusable.
std::optional<Mapping> readDetails(const std::string& text, const std::string& handler,
                                   const std::vector<std::string>& keys, const std::string& requiredKey,
                                   const Report& report);

// "unknown key "x" in where; did you mean "y"?" or, with no near miss, the allowed keys.
std::string unknownKeyMessage(std::string_view key, std::string_view where,
                              const std::vector<std::string>& allowed);

// The candidate closest to a misspelled word (edit distance at most 2, less for short
// words, case ignored), or empty: the "did you mean" hint for keys and values.
std::string nearMiss(std::string_view word, const std::vector<std::string>& candidates);

std::string inQuotes(std::string_view text);
std::string joined(const std::vector<std::string>& names);

}  // namespace devlet::yaml
