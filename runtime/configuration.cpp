#include "runtime/configuration.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "runtime/configuration_parser.h"
#include "runtime/settings.h"
#include "runtime/strict_yaml.h"

namespace devlet {

namespace {

using yaml::lineOf;

bool endsWith(std::string_view text, std::string_view suffix) {
    return text.ends_with(suffix);
}

// Names that editors, package managers and half-finished copies leave behind.
bool isConfigurationFileName(std::string_view name) {
    if (!(endsWith(name, ".yaml") || endsWith(name, ".yml"))) return false;
    if (name.starts_with('.') || name.starts_with('#')) return false;  // hidden, emacs autosave
    for (std::string_view marker : {".dpkg-", ".ucf-", ".swp", ".swx", ".tmp", "~"}) {
        if (name.find(marker) != std::string_view::npos) return false;
    }
    return true;
}

}  // namespace

std::string ConfigProblem::str() const {
    if (line > 0) return file + ":" + std::to_string(line) + ": " + message;
    return file + ": " + message;
}

ParsedConfigurations parseConfigurations(const std::string& text, const std::string& fileName,
                                         const HandlerRegistry& handlers, const std::string& resourceDomain) {
    ParsedConfigurations out;
    std::vector<YAML::Node> documents;
    try {
        documents = yaml::loadAll(text);
    } catch (const YAML::Exception& e) {
        out.problems.push_back(
            {fileName, e.mark.line >= 0 ? e.mark.line + 1 : 0, "YAML syntax error: " + e.msg});
        return out;
    } catch (const std::exception& e) {
        out.problems.push_back({fileName, 0, std::string("cannot parse YAML: ") + e.what()});
        return out;
    }
    ConfigurationFileParser parser(text, fileName, handlers, resourceDomain, out);
    for (const auto& document : documents) {
        if (document.IsNull()) continue;  // empty document (a stray "---", only comments)
        try {
            parser.document(document);
        } catch (const YAML::Exception& e) {
            parser.error(e.mark.line >= 0 ? e.mark.line + 1 : lineOf(document, 0), e.msg);
        } catch (const std::exception& e) {
            parser.error(lineOf(document, 0), e.what());
        }
    }
    auto byLine = [](const ConfigProblem& a, const ConfigProblem& b) { return a.line < b.line; };
    std::stable_sort(out.problems.begin(), out.problems.end(), byLine);
    std::stable_sort(out.warnings.begin(), out.warnings.end(), byLine);
    // The file is rejected as a whole: a half-applied file is harder to reason about.
    if (!out.problems.empty()) out.configurations.clear();
    return out;
}

ParsedConfigurations loadConfigurationFile(const std::string& path, const HandlerRegistry& handlers,
                                           const std::string& resourceDomain) {
    int error = 0;
    auto text = yaml::readText(path, error);
    if (!text) {
        ParsedConfigurations out;
        out.problems.push_back({path, 0, std::string("cannot read: ") + std::strerror(error)});
        return out;
    }
    ParsedConfigurations parsed = parseConfigurations(*text, path, handlers, resourceDomain);
    if (!parsed.problems.empty() && looksLikeSettings(*text))
        parsed.problems = {
            {path, 0,
             "this looks like devlet's settings (devlet.yaml), not an Akri Configuration: give it "
             "with --config " +
                 path}};
    return parsed;
}

std::vector<std::string> configurationFiles(const std::string& dir) {
    std::vector<std::string> files;
    std::error_code ec;
    std::filesystem::directory_iterator it(dir, ec);
    if (ec) return files;
    for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
        if (ec) break;
        std::string name = it->path().filename().string();
        if (!isConfigurationFileName(name)) continue;
        std::error_code statError;
        if (!it->is_regular_file(statError)) continue;  // follows symlinks, as conf.d users expect
        files.push_back(it->path().string());
    }
    std::sort(files.begin(), files.end());
    return files;
}

}  // namespace devlet
