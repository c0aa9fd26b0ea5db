#include "probes/echo/echo_handler.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <sys/inotify.h>
#include <yaml-cpp/yaml.h>

#include "runtime/configuration.h"
#include "runtime/file_watch.h"
#include "runtime/log.h"
#include "runtime/strict_yaml.h"

namespace devlet::echo {

namespace {
constexpr Log log{"echo"};

bool availabilityOffline(const std::string& path) {
    if (path.empty()) return false;
    std::ifstream in(path);
    if (!in) return false;  // no file = available, as in Akri
    std::stringstream text;
    text << in.rdbuf();
    return text.str().find("OFFLINE") != std::string::npos;
}

class EchoProbe : public Probe {
public:
    EchoProbe(std::string configuration, EchoDetails details, boost::asio::io_context& loop, ProbeSink& sink)
        : configuration_(std::move(configuration)), details_(std::move(details)), loop_(loop), sink_(sink) {}

    void start() override {
        if (!details_.availabilityFile.empty()) {
            const std::filesystem::path file(details_.availabilityFile);
            const std::string name = file.filename().string();
            watch_ = std::make_unique<FileWatch>(loop_);
            // Watch the directory, not the file: editors and `echo >` replace or
            // truncate it, and it may not exist yet.
            watch_->watchDirectory(
                file.parent_path().string(),
                IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE | IN_MODIFY,
                [this, name](const std::string& changed, std::uint32_t) {
                    if (changed.empty() || changed == name) report();
                });
        }
        report();
    }

    void stop() override { watch_.reset(); }

private:
    void report() {
        const auto started = std::chrono::steady_clock::now();
        const bool offline = availabilityOffline(details_.availabilityFile);
        if (offline == lastOffline_) return;
        lastOffline_ = offline;
        if (offline) log.info() << configuration_ << ": " << details_.availabilityFile << " says OFFLINE";
        sink_.reportSnapshot(configuration_, echoInstances(details_, offline));
        ScanReport scan;
        scan.duration = std::chrono::steady_clock::now() - started;
        if (offline) {
            for (const std::string& description : details_.descriptions)
                scan.excluded.push_back({description, details_.availabilityFile + " says OFFLINE", 1});
        }
        sink_.reportScan(configuration_, std::move(scan));
    }

    std::string configuration_;
    EchoDetails details_;
    boost::asio::io_context& loop_;
    ProbeSink& sink_;
    std::unique_ptr<FileWatch> watch_;
    std::optional<bool> lastOffline_;
};
}  // namespace

EchoDetails parseEchoDetails(const std::string& text, std::vector<DetailsProblem>& problems) {
    EchoDetails details;
    static const std::vector<std::string> kKeys = {"descriptions", "shared", "availabilityFile"};
    auto mapping =
        yaml::readDetails(text, "debugEcho", kKeys, "descriptions", [&](int line, std::string message) {
            problems.push_back({line, std::move(message)});
        });
    if (!mapping) return details;
    int descriptionsLine = 0;
    for (const auto& [key, entry] : *mapping) {
        const YAML::Node& value = entry.value;
        const int line = entry.valueLine();
        try {
            if (key == "descriptions") {
                descriptionsLine = entry.line;
                if (!value.IsSequence()) {
                    problems.push_back({line, "descriptions must be a list of strings"});
                    continue;
                }
                std::set<std::string> seen;
                for (const auto& item : value) {
                    if (!item.IsScalar() || item.Scalar().empty()) {
                        problems.push_back(
                            {yaml::lineOf(item, line), "each description must be a non-empty string"});
                        continue;
                    }
                    if (!seen.insert(item.Scalar()).second) {
                        problems.push_back(
                            {yaml::lineOf(item, line),
                             "description \"" + item.Scalar() + "\" is listed twice; it is the device id"});
                        continue;
                    }
                    details.descriptions.push_back(item.Scalar());
                }
            } else if (key == "shared") {
                details.shared = value.as<bool>();
            } else if (key == "availabilityFile") {
                details.availabilityFile = value.as<std::string>();
                if (details.availabilityFile.empty() || details.availabilityFile[0] != '/') {
                    problems.push_back({line, "availabilityFile must be an absolute path"});
                }
            }
        } catch (const YAML::Exception&) {
            problems.push_back({line, "\"" + key + "\" has the wrong type"});
        }
    }
    // Akri accepts an empty list (its Helm chart renders `descriptions: []` when none are
    // set) and discovers nothing; so does devlet, but says so.
    if (descriptionsLine == 0 && problems.empty()) {
        problems.push_back({1, "debugEcho needs \"descriptions\", a list of device descriptions"});
    } else if (details.descriptions.empty() && problems.empty()) {
        problems.push_back({descriptionsLine, "\"descriptions\" is empty: this configuration has no devices",
                            /*warning=*/true});
    }
    return details;
}

std::vector<Instance> echoInstances(const EchoDetails& details, bool offline) {
    std::vector<Instance> instances;
    if (offline) return instances;
    for (const std::string& description : details.descriptions) {
        Instance instance;
        instance.id = description;
        instance.shared = details.shared;
        instance.properties["DEBUG_ECHO_DESCRIPTION"] = description;
        instances.push_back(std::move(instance));
    }
    return instances;
}

std::vector<DetailsProblem> EchoHandler::check(const Configuration& configuration) const {
    std::vector<DetailsProblem> problems;
    parseEchoDetails(configuration.discoveryDetails, problems);
    return problems;
}

std::unique_ptr<Probe> EchoHandler::createProbe(const Configuration& configuration,
                                                boost::asio::io_context& loop, ProbeSink& sink) {
    std::vector<DetailsProblem> problems;
    EchoDetails details = parseEchoDetails(configuration.discoveryDetails, problems);
    return std::make_unique<EchoProbe>(configuration.name, std::move(details), loop, sink);
}

}  // namespace devlet::echo
