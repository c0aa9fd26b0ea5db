#include "runtime/strict_yaml.h"

#include <algorithm>
#include <cerrno>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

namespace devlet::yaml {

namespace {

// Optimal string alignment distance (a transposition counts as one edit), ignoring case.
std::size_t editDistance(std::string_view a, std::string_view b) {
    auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        for (std::size_t j = 1; j <= b.size(); ++j) {
            std::size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1])) {
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
            }
        }
    }
    return d[a.size()][b.size()];
}

// Where each document starts, and nothing else of it.
class DocumentStarts : public YAML::EventHandler {
public:
    void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                         YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                    YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}

    YAML::Mark start = YAML::Mark::null_mark();
};

// yaml-cpp 0.7 (Debian 12's) takes a token that cannot start a node (',' at the top
// level) as an empty document without consuming it, so the next document starts at the
// same place, forever (jbeder/yaml-cpp#1040, fixed after 0.8.0). A dry run over the
// events finds that and reports it where it is.
void requireProgress(const std::string& text) {
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentStarts documents;
    std::optional<int> previous;
    while (parser.HandleNextDocument(documents)) {
        if (previous && *previous == documents.start.pos)
            throw YAML::ParserException(documents.start,
                                        "unexpected ',' or other character where a value should start");
        previous = documents.start.pos;
    }
}

}  // namespace

YAML::Node load(const std::string& text) {
    requireProgress(text);
    return YAML::Load(text);
}

std::vector<YAML::Node> loadAll(const std::string& text) {
    requireProgress(text);
    return YAML::LoadAll(text);
}

std::optional<std::string> readText(const std::string& path, int& error) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        error = errno;
        return std::nullopt;
    }
    std::string content;
    char buffer[16384];
    while (true) {
        ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            error = errno;
            ::close(fd);
            return std::nullopt;
        }
        if (n == 0) break;
        content.append(buffer, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return content;
}

int lineOf(const YAML::Node& node, int fallback) {
    YAML::Mark mark = node.Mark();
    return mark.line >= 0 ? mark.line + 1 : fallback;
}

const Entry* find(const Mapping& mapping, const std::string& key) {
    auto it = mapping.find(key);
    return it == mapping.end() ? nullptr : &it->second;
}

std::optional<Mapping> readMapping(const YAML::Node& node, int line, const std::string& where,
                                   const std::vector<std::string>* allowed, const Report& report,
                                   bool emptyAllowed) {
    if (emptyAllowed && node.IsNull()) return Mapping{};
    if (!node.IsMap()) {
        report(line, where + " must be a mapping" + (node.IsNull() ? " (it is empty)" : ""));
        return std::nullopt;
    }
    Mapping result;
    for (auto it = node.begin(); it != node.end(); ++it) {
        int keyLine = lineOf(it->first, line);
        if (!it->first.IsScalar()) {
            report(keyLine, "keys in " + where + " must be strings");
            continue;
        }
        const std::string& key = it->first.Scalar();
        if (allowed && std::find(allowed->begin(), allowed->end(), key) == allowed->end()) {
            report(keyLine, unknownKeyMessage(key, where, *allowed));
            continue;
        }
        auto [existing, inserted] = result.try_emplace(key, Entry{it->second, keyLine});
        if (!inserted) {
            report(keyLine, "duplicate key " + inQuotes(key) + " in " + where + " (first at line " +
                                std::to_string(existing->second.line) + ")");
        }
    }
    return result;
}

std::optional<Mapping> readDetails(const std::string& text, const std::string& handler,
                                   const std::vector<std::string>& keys, const std::string& requiredKey,
                                   const Report& report) {
    YAML::Node root;
    try {
        root = load(text);
    } catch (const YAML::Exception& e) {
        report(e.mark.line >= 0 ? e.mark.line + 1 : 0, "discoveryDetails is not valid YAML: " + e.msg);
        return std::nullopt;
    }
    if (!root.IsMap()) {
        report(1, "discoveryDetails must be a mapping with " + inQuotes(requiredKey));
        return std::nullopt;
    }
    return readMapping(root, 1, handler + " discoveryDetails", &keys, report);
}

std::string unknownKeyMessage(std::string_view key, std::string_view where,
                              const std::vector<std::string>& allowed) {
    std::string message = "unknown key " + inQuotes(key) + " in " + std::string(where);
    if (std::string hint = nearMiss(key, allowed); !hint.empty())
        return message + "; did you mean " + inQuotes(hint) + "?";
    return message + " (allowed: " + joined(allowed) + ")";
}

std::string nearMiss(std::string_view word, const std::vector<std::string>& candidates) {
    // Short words would "match" almost anything within two edits.
    std::size_t limit = word.size() <= 2 ? 0 : word.size() <= 4 ? 1 : 2;
    std::string best;
    std::size_t bestDistance = limit + 1;
    for (const auto& candidate : candidates) {
        std::size_t distance = editDistance(word, candidate);
        if (distance < bestDistance) {
            bestDistance = distance;
            best = candidate;
        }
    }
    return best;
}

std::string inQuotes(std::string_view text) {
    return "\"" + std::string(text) + "\"";
}

std::string joined(const std::vector<std::string>& names) {
    std::string result;
    for (const auto& name : names) {
        if (!result.empty()) result += ", ";
        result += name;
    }
    return result;
}

}  // namespace devlet::yaml
