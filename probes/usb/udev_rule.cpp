#include "probes/usb/udev_rule.h"

#include <algorithm>
#include <array>
#include <utility>

#include "runtime/strict_yaml.h"

namespace devlet::usb {

namespace {

// ---- patterns ----

bool isBlank(char c) {
    return c == ' ' || c == '\t';
}

// udev strips " \t\n\r" from the end of sysfs values before matching ATTR and ATTRS.
std::string_view withoutTrailingWhitespace(std::string_view value) {
    std::size_t end = value.find_last_not_of(" \t\n\r");
    return end == std::string_view::npos ? std::string_view() : value.substr(0, end + 1);
}

// POSIX bracket classes, ASCII only: fnmatch(3) in the C locale, whatever locale the
// daemon runs in.
bool inNamedClass(std::string_view name, unsigned char c, bool& known) {
    known = true;
    const bool upper = c >= 'A' && c <= 'Z';
    const bool lower = c >= 'a' && c <= 'z';
    const bool digit = c >= '0' && c <= '9';
    const bool space = c == ' ' || (c >= '\t' && c <= '\r');
    const bool print = c >= 0x20 && c < 0x7f;
    if (name == "alpha") return upper || lower;
    if (name == "upper") return upper;
    if (name == "lower") return lower;
    if (name == "digit") return digit;
    if (name == "alnum") return upper || lower || digit;
    if (name == "xdigit") return digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (name == "space") return space;
    if (name == "blank") return c == ' ' || c == '\t';
    if (name == "cntrl") return c < 0x20 || c == 0x7f;
    if (name == "print") return print;
    if (name == "graph") return print && c != ' ';
    if (name == "punct") return print && c != ' ' && !upper && !lower && !digit;
    known = false;
    return false;
}

}  // namespace

std::optional<UdevPattern::Alternative> UdevPattern::compile(std::string_view text, std::size_t base,
                                                             SyntaxError& error) {
    Alternative pattern;
    auto fail = [&](std::size_t at, std::string reason) -> std::optional<Alternative> {
        error = {base + at, std::move(reason)};
        return std::nullopt;
    };
    for (std::size_t i = 0; i < text.size(); ++i) {
        Element element;
        const char c = text[i];
        if (c == '*') {
            element.kind = Element::Kind::AnyRun;
        } else if (c == '?') {
            element.kind = Element::Kind::AnyOne;
        } else if (c == '\\') {
            if (i + 1 == text.size()) return fail(i, "a '\\' at the end of a pattern escapes nothing");
            element.literal = text[++i];
        } else if (c == '[') {
            const std::size_t open = i;
            element.kind = Element::Kind::Set;
            std::size_t j = i + 1;
            const bool negate = j < text.size() && (text[j] == '!' || text[j] == '^');
            if (negate) ++j;
            bool first = true;
            bool closed = false;
            while (j < text.size()) {
                char low = text[j];
                if (low == ']' && !first) {
                    closed = true;
                    break;
                }
                first = false;
                if (low == '[' && j + 1 < text.size() && (text[j + 1] == '.' || text[j + 1] == '=')) {
                    return fail(j,
                                "collating elements [. .] and equivalence classes [= =] are not supported");
                }
                if (low == '[' && j + 1 < text.size() && text[j + 1] == ':') {
                    const std::size_t end = text.find(":]", j + 2);
                    if (end == std::string_view::npos)
                        return fail(j, "'[:' opens a character class with no ':]'");
                    const std::string_view name = text.substr(j + 2, end - j - 2);
                    bool known = false;
                    inNamedClass(name, 0, known);
                    if (!known) {
                        return fail(j, "unknown character class [:" + std::string(name) +
                                           ":] (known: alnum, alpha, blank, cntrl, digit, graph, lower, "
                                           "print, punct, space, upper, xdigit)");
                    }
                    for (int b = 0; b < 256; ++b) {
                        if (inNamedClass(name, static_cast<unsigned char>(b), known)) element.set.set(b);
                    }
                    j = end + 2;
                    continue;
                }
                const std::size_t lowAt = j;
                if (low == '\\') {
                    if (j + 1 == text.size()) break;
                    low = text[++j];
                }
                ++j;
                char high = low;
                if (j + 1 < text.size() && text[j] == '-' && text[j + 1] != ']') {
                    j += 1;
                    high = text[j];
                    if (high == '\\') {
                        if (j + 1 == text.size()) break;
                        high = text[++j];
                    }
                    ++j;
                    if (static_cast<unsigned char>(high) < static_cast<unsigned char>(low)) {
                        return fail(lowAt, std::string("the range ") + low + "-" + high + " is reversed");
                    }
                }
                for (int b = static_cast<unsigned char>(low); b <= static_cast<unsigned char>(high); ++b) {
                    element.set.set(b);
                }
            }
            if (!closed) return fail(open, "'[' opens a character class with no closing ']'");
            if (negate) element.set.flip();
            i = j;
        } else {
            element.literal = c;
        }
        pattern.push_back(element);  // trivially copyable
    }
    return pattern;
}

std::optional<UdevPattern> UdevPattern::parse(std::string_view text, SyntaxError& error) {
    UdevPattern pattern;
    pattern.text_ = std::string(text);
    // udev decides once per value: any glob character makes every alternative a glob.
    pattern.glob_ = text.find_first_of("*?[") != std::string_view::npos;
    std::size_t start = 0;
    while (true) {
        // udev splits at every '|', inside [...] too.
        const std::size_t bar = text.find('|', start);
        const std::string_view alternative =
            text.substr(start, bar == std::string_view::npos ? std::string_view::npos : bar - start);
        if (pattern.glob_) {
            std::optional<Alternative> compiled = compile(alternative, start, error);
            if (!compiled) {
                if (bar != std::string_view::npos && alternative.find('[') != std::string_view::npos &&
                    error.reason.find("no closing ']'") != std::string::npos) {
                    error.reason += " ('|' separates alternatives, even inside [...])";
                }
                return std::nullopt;
            }
            pattern.globs_.push_back(std::move(*compiled));
        } else {
            pattern.exact_.emplace_back(alternative);
        }
        if (bar == std::string_view::npos) break;
        start = bar + 1;
    }
    return pattern;
}

bool UdevPattern::matchesAlternative(const Alternative& pattern, std::string_view value) {
    // Every element but '*' consumes exactly one character, so backtracking to the last
    // '*' alone is enough.
    std::size_t p = 0;
    std::size_t v = 0;
    std::optional<std::size_t> starP;
    std::size_t starV = 0;
    while (v < value.size()) {
        if (p < pattern.size()) {
            const Element& e = pattern[p];
            const auto c = static_cast<unsigned char>(value[v]);
            if (e.kind == Element::Kind::AnyRun) {
                starP = p++;
                starV = v;
                continue;
            }
            const bool one = e.kind == Element::Kind::AnyOne ||
                             (e.kind == Element::Kind::Set && e.set.test(c)) ||
                             (e.kind == Element::Kind::Literal && e.literal == value[v]);
            if (one) {
                ++p;
                ++v;
                continue;
            }
        }
        if (!starP) return false;
        p = *starP + 1;
        v = ++starV;
    }
    while (p < pattern.size() && pattern[p].kind == Element::Kind::AnyRun) ++p;
    return p == pattern.size();
}

bool UdevPattern::matches(std::string_view value) const {
    if (!glob_) return std::find(exact_.begin(), exact_.end(), value) != exact_.end();
    return std::any_of(globs_.begin(), globs_.end(),
                       [&](const Alternative& a) { return matchesAlternative(a, value); });
}

bool UdevPattern::endsWithWhitespace() const {
    return !text_.empty() && std::string_view(" \t\n\r").find(text_.back()) != std::string_view::npos;
}

// ---- filters ----

namespace {

struct KeyInfo {
    std::string_view name;
    UdevKey key;
    bool takesName;
};

constexpr std::array<KeyInfo, 12> kKeys{{
    {"ATTR", UdevKey::Attr, true},
    {"ATTRS", UdevKey::Attrs, true},
    {"DEVPATH", UdevKey::Devpath, false},
    {"DRIVER", UdevKey::Driver, false},
    {"DRIVERS", UdevKey::Drivers, false},
    {"ENV", UdevKey::Env, true},
    {"KERNEL", UdevKey::Kernel, false},
    {"KERNELS", UdevKey::Kernels, false},
    {"SUBSYSTEM", UdevKey::Subsystem, false},
    {"SUBSYSTEMS", UdevKey::Subsystems, false},
    {"TAG", UdevKey::Tag, false},
    {"TAGS", UdevKey::Tags, false},
}};

// udev match keys devlet leaves out, and why.
constexpr std::array<std::pair<std::string_view, std::string_view>, 8> kUnsupportedMatchKeys{{
    {"ACTION", "devlet matches devices, not events"},
    {"NAME", "use KERNEL, or ENV{DEVNAME} for the device node"},
    {"SYMLINK", "use ENV{DEVLINKS}, as in ENV{DEVLINKS}==\"*/by-id/*\""},
    {"PROGRAM", "devlet runs no programs while matching"},
    {"RESULT", "devlet runs no programs while matching"},
    {"TEST", "devlet tests no files while matching; use ATTR{name} for sysfs attributes"},
    {"CONST", "devlet does not evaluate CONST{arch} or CONST{virt}"},
    {"SYSCTL", "devlet does not read kernel parameters"},
}};

// udev keys that only assign (WAIT_FOR is gone from udev but still in old rules).
constexpr std::array<std::string_view, 10> kAssignmentKeys{
    "OWNER", "GROUP", "MODE", "SECLABEL", "RUN", "LABEL", "GOTO", "IMPORT", "OPTIONS", "WAIT_FOR",
};

// The operator at the start of `text`, assigning ones included; empty: none.
std::string_view operatorAt(std::string_view text) {
    for (std::string_view op : {"==", "!=", "+=", "-=", ":=", "="}) {
        if (text.starts_with(op)) return op;
    }
    return {};
}

const KeyInfo& infoOf(UdevKey key) {
    return *std::find_if(kKeys.begin(), kKeys.end(), [key](const KeyInfo& k) { return k.key == key; });
}

std::vector<std::string> supportedKeyNames() {
    std::vector<std::string> names;
    names.reserve(std::size(kKeys));
    for (const KeyInfo& k : kKeys) names.emplace_back(k.name);
    return names;
}

std::string quoted(std::string_view text) {
    return "\"" + std::string(text) + "\"";
}

std::string listed(const std::set<std::string>& values) {
    std::string text;
    for (const std::string& v : values) text += (text.empty() ? "" : ", ") + quoted(v);
    return text;
}

// Whether a filter holds on one device, and what the device had there.
struct Reading {
    bool holds = false;
    std::string seen;  // for explanations
};

Reading check(const UdevFilter& filter, const UdevDevice& device,
              const std::map<std::string, std::string>& properties) {
    auto compare = [&](std::string_view value, std::string what) {
        const bool hit = filter.pattern.matches(value);
        return Reading{hit != filter.negated, std::move(what) + " is " + quoted(value)};
    };
    switch (filter.key) {
        case UdevKey::Attr:
        case UdevKey::Attrs: {
            auto it = device.attributes.find(filter.name);
            // udev fails ATTR and ATTRS on a missing attribute for == and != alike.
            if (it == device.attributes.end()) return {false, "there is no attribute " + filter.name};
            std::string_view value = it->second;
            if (!filter.pattern.endsWithWhitespace()) value = withoutTrailingWhitespace(value);
            return compare(value, "ATTR{" + filter.name + "}");
        }
        case UdevKey::Env: {
            auto it = properties.find(filter.name);
            if (it == properties.end()) {
                // udev compares a property that is not set as the empty string.
                return {filter.pattern.matches("") != filter.negated, "ENV{" + filter.name + "} is not set"};
            }
            return compare(it->second, "ENV{" + filter.name + "}");
        }
        case UdevKey::Devpath:
            return compare(device.devpath, "DEVPATH");
        case UdevKey::Driver:
        case UdevKey::Drivers:
            return compare(device.driver, "DRIVER");
        case UdevKey::Kernel:
        case UdevKey::Kernels:
            return compare(device.kernel, "KERNEL");
        case UdevKey::Subsystem:
        case UdevKey::Subsystems:
            return compare(device.subsystem, "SUBSYSTEM");
        case UdevKey::Tag:
        case UdevKey::Tags: {
            const bool any = std::any_of(device.tags.begin(), device.tags.end(),
                                         [&](const std::string& tag) { return filter.pattern.matches(tag); });
            return {any != filter.negated,
                    device.tags.empty() ? "there are no tags" : "tags are " + listed(device.tags)};
        }
    }
    return {};
}

const std::map<std::string, std::string> kNoProperties;

}  // namespace

bool UdevFilter::searchesParents() const {
    return key == UdevKey::Attrs || key == UdevKey::Drivers || key == UdevKey::Kernels ||
           key == UdevKey::Subsystems || key == UdevKey::Tags;
}

std::string UdevFilter::text() const {
    std::string result(infoOf(key).name);
    if (!name.empty()) result += "{" + name + "}";
    return result + (negated ? "!=" : "==") + quoted(pattern.text());
}

// ---- rules ----

namespace {

std::string ruleError(std::size_t index, std::string_view text, std::size_t offset,
                      const std::string& reason) {
    return "udevRules[" + std::to_string(index) + "] '" + std::string(text) + "': position " +
           std::to_string(offset + 1) + ": " + reason;
}

}  // namespace

std::optional<UdevRule> UdevRule::parse(std::string_view text, std::size_t index, std::string& error) {
    UdevRule rule;
    rule.text_ = std::string(text);
    std::size_t pos = 0;
    auto fail = [&](std::size_t at, const std::string& reason) -> std::optional<UdevRule> {
        error = ruleError(index, text, at, reason);
        return std::nullopt;
    };
    auto skipBlanks = [&] {
        while (pos < text.size() && isBlank(text[pos])) ++pos;
    };
    auto isKeyChar = [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    };

    skipBlanks();
    if (pos == text.size()) return fail(0, "the rule is empty");
    while (true) {
        // Key, with its {name}.
        const std::size_t keyAt = pos;
        while (pos < text.size() && isKeyChar(text[pos])) ++pos;
        const std::string key(text.substr(keyAt, pos - keyAt));
        if (key.empty()) {
            if (text[pos] == ',') return fail(pos, "empty filter between commas");
            return fail(pos, "expected a key such as KERNEL or ATTR{name}, found '" +
                                 std::string(1, text[pos]) + "'");
        }
        std::optional<std::string> name;
        if (pos < text.size() && text[pos] == '{') {
            const std::size_t close = text.find('}', pos);
            if (close == std::string_view::npos) return fail(pos, "'{' has no closing '}'");
            name = std::string(text.substr(pos + 1, close - pos - 1));
            pos = close + 1;
        }
        const auto known =
            std::find_if(kKeys.begin(), kKeys.end(), [&](const KeyInfo& k) { return k.name == key; });
        if (known == kKeys.end()) {
            const auto unsupported = std::find_if(kUnsupportedMatchKeys.begin(), kUnsupportedMatchKeys.end(),
                                                  [&](const auto& k) { return k.first == key; });
            std::size_t opAt = pos;
            while (opAt < text.size() && isBlank(text[opAt])) ++opAt;
            const std::string_view op = operatorAt(text.substr(opAt));
            if (unsupported != kUnsupportedMatchKeys.end() && (op == "==" || op == "!=")) {
                return fail(keyAt, key + " is a udev match key that devlet does not support: " +
                                       std::string(unsupported->second));
            }
            if (unsupported != kUnsupportedMatchKeys.end() && !op.empty()) {
                return fail(keyAt, key + std::string(op) +
                                       " assigns in udev rules: a discovery rule only selects devices and "
                                       "changes nothing");
            }
            if (std::find(kAssignmentKeys.begin(), kAssignmentKeys.end(), key) != kAssignmentKeys.end()) {
                return fail(keyAt, key +
                                       " is a udev assignment key: a discovery rule only selects devices and "
                                       "changes nothing");
            }
            const std::vector<std::string> names = supportedKeyNames();
            std::string reason = "unknown key " + quoted(key);
            if (std::string hint = yaml::nearMiss(key, names); !hint.empty()) {
                reason += "; did you mean " + quoted(hint) + "?";
            } else {
                reason += " (match keys: " + yaml::joined(names) + ")";
            }
            return fail(keyAt, reason);
        }
        UdevFilter filter;
        filter.key = known->key;
        if (known->takesName) {
            if (!name || name->empty()) {
                return fail(keyAt, std::string(key)
                                       .append(" needs a name in braces, as in ")
                                       .append(key)
                                       .append(filter.key == UdevKey::Env ? "{ID_SERIAL}" : "{idVendor}"));
            }
            if (filter.key != UdevKey::Env && name->front() == '[') {
                return fail(keyAt, "the " + key + "{[subsystem/sysname]attribute} form is not supported");
            }
            filter.name = *name;
        } else if (name) {
            return fail(keyAt, key + " takes no {...} name");
        }

        // Operator.
        skipBlanks();
        const std::size_t opAt = pos;
        const std::string op(operatorAt(text.substr(pos)));
        if (op == "==" || op == "!=") {
            filter.negated = op == "!=";
            pos += 2;
        } else if (!op.empty()) {
            const char* does = op == "+=" ? "adds to" : op == "-=" ? "removes from" : "assigns";
            return fail(opAt,
                        quoted(op) + " " + does +
                            " a value in udev rules; a discovery rule only matches: use \"==\" or \"!=\"");
        } else {
            return fail(opAt, "expected \"==\" or \"!=\" after " + key);
        }

        // Value: double-quoted; \" stands for a quote, as in udev.
        skipBlanks();
        if (pos == text.size() || text[pos] != '"') {
            if (pos + 1 < text.size() && (text[pos] == 'e' || text[pos] == 'i') && text[pos + 1] == '"') {
                return fail(pos, std::string(1, text[pos]) +
                                     "\"...\" values are not supported; write a plain "
                                     "\"...\" value");
            }
            return fail(pos, std::string("expected a value in double quotes after ").append(key).append(op));
        }
        const std::size_t openAt = pos++;
        std::string value;
        std::vector<std::size_t> offsets;  // of each value character in the rule text
        bool closed = false;
        while (pos < text.size()) {
            if (text[pos] == '"') {
                closed = true;
                ++pos;
                break;
            }
            if (text[pos] == '\\' && pos + 1 < text.size() && text[pos + 1] == '"') ++pos;
            offsets.push_back(pos);
            value += text[pos++];
        }
        if (!closed) return fail(openAt, "the value opened here has no closing '\"'");
        SyntaxError patternError;
        std::optional<UdevPattern> pattern = UdevPattern::parse(value, patternError);
        if (!pattern) {
            const std::size_t at =
                patternError.offset < offsets.size() ? offsets[patternError.offset] : openAt;
            return fail(at, patternError.reason);
        }
        filter.pattern = std::move(*pattern);
        rule.filters_.push_back(std::move(filter));

        // Separator: a comma; udev also allows one at the end.
        skipBlanks();
        if (pos == text.size()) break;
        if (text[pos] != ',') return fail(pos, "expected ',' between filters");
        ++pos;
        skipBlanks();
        if (pos == text.size()) break;
    }
    return rule;
}

std::optional<std::size_t> UdevRule::parentFilterDevice(const UdevObservation& observation,
                                                        std::size_t count) const {
    // As udev: every ...S filter of the rule must hold on one and the same device, the
    // device itself or one of its parents, nearest first.
    for (std::size_t level = 0; level <= observation.parents.size(); ++level) {
        const UdevDevice& device = level == 0 ? observation.device : observation.parents[level - 1];
        const auto end = filters_.begin() + static_cast<std::ptrdiff_t>(std::min(count, filters_.size()));
        const bool all = std::all_of(filters_.begin(), end, [&](const UdevFilter& f) {
            return !f.searchesParents() || check(f, device, kNoProperties).holds;
        });
        if (all) return level;
    }
    return std::nullopt;
}

UdevRule::Verdict UdevRule::evaluate(const UdevObservation& observation, std::size_t count) const {
    Verdict verdict;
    bool parentsDone = false;
    count = std::min(count, filters_.size());
    for (std::size_t i = 0; i < count; ++i) {
        const UdevFilter& filter = filters_[i];
        if (filter.searchesParents()) {
            if (parentsDone) continue;
            parentsDone = true;
            verdict.ancestor = parentFilterDevice(observation, count);
            if (!verdict.ancestor) {
                verdict.failed = i;
                return verdict;
            }
        } else if (!check(filter, observation.device, observation.properties).holds) {
            verdict.failed = i;
            return verdict;
        }
    }
    return verdict;
}

bool UdevRule::matches(const UdevObservation& observation) const {
    return !evaluate(observation, filters_.size()).failed;
}

bool UdevRule::prefixMatches(const UdevObservation& observation, std::size_t count) const {
    return !evaluate(observation, count).failed;
}

UdevMatch UdevRule::explain(const UdevObservation& observation) const {
    const Verdict verdict = evaluate(observation, filters_.size());
    auto nameOf = [&](std::size_t level) {
        const UdevDevice& d = level == 0 ? observation.device : observation.parents[level - 1];
        return quoted(d.devpath);
    };
    if (!verdict.failed) {
        std::string text = "matches";
        if (verdict.ancestor) {
            text += "; the parent filters hold on " +
                    (*verdict.ancestor == 0 ? "the device itself" : nameOf(*verdict.ancestor));
        }
        return {true, text};
    }
    const UdevFilter& failed = filters_[*verdict.failed];
    if (!failed.searchesParents()) {
        return {false, failed.text() + " does not hold: " +
                           check(failed, observation.device, observation.properties).seen};
    }
    std::string parentFilters;
    for (const UdevFilter& f : filters_) {
        if (f.searchesParents()) parentFilters += (parentFilters.empty() ? "" : ", ") + f.text();
    }
    std::string text =
        "no device from " + nameOf(0) + " up to the root satisfies all of " + parentFilters + " (";
    for (std::size_t level = 0; level <= observation.parents.size(); ++level) {
        const UdevDevice& device = level == 0 ? observation.device : observation.parents[level - 1];
        for (const UdevFilter& f : filters_) {
            if (!f.searchesParents()) continue;
            const Reading reading = check(f, device, kNoProperties);
            if (reading.holds) continue;
            text += (level == 0 ? "" : "; ") + nameOf(level) + ": " + f.text() + " fails, " + reading.seen;
            break;
        }
    }
    return {false, text + ")"};
}

std::vector<UdevRule> parseUdevRules(const std::vector<std::string>& texts,
                                     std::vector<std::string>& problems) {
    std::vector<UdevRule> rules;
    for (std::size_t i = 0; i < texts.size(); ++i) {
        std::string error;
        if (std::optional<UdevRule> rule = UdevRule::parse(texts[i], i, error)) {
            rules.push_back(std::move(*rule));
        } else {
            problems.push_back(std::move(error));
        }
    }
    return rules;
}

std::optional<std::set<std::string>> ruleSubsystems(const std::vector<UdevRule>& rules) {
    std::set<std::string> subsystems;
    for (const UdevRule& rule : rules) {
        // A rule with several SUBSYSTEM filters needs all of them: any one bounds it.
        bool bounded = false;
        for (const UdevFilter& filter : rule.filters()) {
            if (filter.key != UdevKey::Subsystem || filter.negated) continue;
            const std::string& text = filter.pattern.text();
            if (text.find_first_of("*?[") != std::string::npos) continue;
            for (std::size_t start = 0;;) {
                const std::size_t bar = text.find('|', start);
                subsystems.insert(
                    text.substr(start, bar == std::string::npos ? std::string::npos : bar - start));
                if (bar == std::string::npos) break;
                start = bar + 1;
            }
            bounded = true;
            break;
        }
        if (!bounded) return std::nullopt;
    }
    // SUBSYSTEM=="" matches devices without one, which no monitor filter lets through.
    if (subsystems.empty() || subsystems.contains("")) return std::nullopt;
    return subsystems;
}

std::optional<std::size_t> firstMatchingRule(const std::vector<UdevRule>& rules,
                                             const UdevObservation& observation) {
    for (std::size_t i = 0; i < rules.size(); ++i) {
        if (rules[i].matches(observation)) return i;
    }
    return std::nullopt;
}

}  // namespace devlet::usb
