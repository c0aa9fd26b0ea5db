// `devlet probe onvif`: options, the password file, the configurations, and the printing of
// one discovery pass of the onvif handler (probes/onvif runs the pass itself).

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <boost/json.hpp>
#include <sys/stat.h>

#include "daemon/probe_command.h"
#include "probes/onvif/camera_status.h"
#include "probes/onvif/onvif_details.h"
#include "probes/onvif/onvif_handler.h"
#include "runtime/configuration.h"
#include "runtime/log.h"
#include "runtime/naming.h"
#include "runtime/settings.h"

namespace devlet {
namespace {

using onvif::CameraStatus;
using onvif::OnvifPassRequest;
using onvif::OnvifPassResult;

constexpr std::chrono::milliseconds kCommandLineWindow{2000};  // EdgeX's probe timeout
constexpr std::size_t kMaxPasswordBytes = 4096;

struct OnvifOptions {
    std::optional<std::string> user;
    std::optional<std::string> passwordFile;
    std::vector<onvif::Ipv4Range> targets;
    std::vector<std::string> interfaces;
    std::optional<std::chrono::milliseconds> timeout;
    SettingsOverrides overrides;
    std::vector<std::string> configurations;  // --configuration FILE...: instead of the conf dir
    bool configured = false;  // --conf-dir, --config or --configuration: the configurations' filters apply
    bool json = false;
    bool ipv6 = false;  // also WS-Discovery on [FF02::C]
};

// One configuration (or the command line's) and what its pass found.
struct PassEntry {
    std::string name;    // empty for the command line
    std::string source;  // file:line
    OnvifPassRequest request;
    OnvifPassResult result;
};

int usageError(const std::string& message, const std::string& usage) {
    std::cerr << "devlet: " << message << "\n" << usage;
    return 2;
}

// Returns an error message, empty when the arguments parse.
std::string parseOptions(const std::vector<std::string>& args, OnvifOptions& options) {
    std::uint64_t targetAddresses = 0;
    for (std::size_t i = 0; i < args.size(); ++i) {
        std::string arg = args[i];
        if (arg == "--json") {
            options.json = true;
            continue;
        }
        if (arg == "--ipv6") {
            options.ipv6 = true;
            continue;
        }
        std::optional<std::string> value;
        if (auto eq = arg.find('='); eq != std::string::npos && arg.rfind("--", 0) == 0) {
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
        }
        if (arg == "--password" || arg == "-p")
            return "passwords are not taken on the command line (other users can read it): "
                   "use --password-file FILE, or - for standard input";
        static const std::vector<std::string> valued = {"--user",      "--password-file", "--target",
                                                        "--interface", "--timeout",       "--conf-dir",
                                                        "--config",    "--configuration"};
        if (std::find(valued.begin(), valued.end(), arg) == valued.end())
            return "unknown option for probe onvif: " + args[i];
        if (!value) {
            if (i + 1 >= args.size()) return arg + " needs a value";
            value = args[++i];
        }
        if (arg == "--user") {
            if (value->empty()) return "--user needs a user name";
            options.user = *value;
        } else if (arg == "--password-file") {
            options.passwordFile = *value;
        } else if (arg == "--target") {
            std::string error;
            auto range = onvif::parseIpv4Range(*value, error);
            if (!range) return "--target: " + error;
            targetAddresses += range->size();
            options.targets.push_back(*range);
        } else if (arg == "--interface") {
            options.interfaces.push_back(*value);
        } else if (arg == "--configuration") {
            options.configurations.push_back(std::filesystem::absolute(*value).lexically_normal().string());
            options.configured = true;
        } else if (arg == "--timeout") {
            char* end = nullptr;
            const double seconds = std::strtod(value->c_str(), &end);
            if (value->empty() || *end != '\0' || !std::isfinite(seconds) || seconds < 0.1 || seconds > 60)
                return "--timeout must be a number of seconds from 0.1 to 60; got " + *value;
            options.timeout = std::chrono::milliseconds(std::lround(seconds * 1000));
        } else {
            // Paths on the command line are relative to where devlet was started.
            std::string path = std::filesystem::absolute(*value).lexically_normal().string();
            (arg == "--conf-dir" ? options.overrides.confDir : options.overrides.configFile) =
                std::move(path);
            options.configured = true;
        }
    }
    if (targetAddresses > onvif::kMaxUnicastTargets)
        return "--target names " + std::to_string(targetAddresses) + " addresses; at most " +
               std::to_string(onvif::kMaxUnicastTargets) + " (a /16) are probed";
    if (options.user && !options.passwordFile) return "--user needs --password-file";
    if (options.passwordFile && !options.user) return "--password-file needs --user";
    return {};
}

// The password: the file's first line. Returns an error message, empty when read.
std::string readPassword(const std::string& path, std::string& password) {
    std::string text;
    if (path == "-") {
        std::ostringstream in;
        in << std::cin.rdbuf();
        text = in.str();
    } else {
        struct stat st {};
        if (stat(path.c_str(), &st) != 0) return "cannot read " + path + ": " + std::strerror(errno);
        if (!S_ISREG(st.st_mode)) return path + " is not a regular file";
        if ((st.st_mode & 077) != 0)
            std::cerr
                << "devlet: warning: " << path
                << " can be read by other users; keep passwords in a file only you can read (chmod 600)\n";
        std::ifstream in(path, std::ios::binary);
        if (!in) return "cannot read " + path + ": " + std::strerror(errno);
        std::ostringstream content;
        content << in.rdbuf();
        text = content.str();
    }
    if (text.size() > kMaxPasswordBytes) return "the password file holds more than one short line";
    text = text.substr(0, text.find_first_of("\r\n"));
    if (text.empty()) return "the password file is empty";
    password = std::move(text);
    return {};
}

// The configured onvif configurations, each with the command line's additions.
bool configuredRequests(const OnvifOptions& options, const HandlerRegistry& handlers,
                        std::vector<PassEntry>& entries) {
    std::vector<Configuration> configurations;
    if (!configurationsOf("onvif", options.overrides, options.configurations, handlers, configurations,
                          "leave out --conf-dir and --config to list every camera"))
        return false;
    bool valid = true;
    for (const Configuration& configuration : configurations) {
        std::vector<DetailsProblem> problems;
        PassEntry entry;
        entry.name = configuration.name;
        entry.source = configuration.sourceFile + ":" + std::to_string(configuration.sourceLine);
        entry.request.configuration = configuration.name;
        entry.request.details = onvif::parseOnvifDetails(configuration.discoveryDetails, problems);
        for (const DetailsProblem& problem : problems) {
            std::cerr << configuration.sourceFile << ":" << configuration.detailsLine + problem.line << ": "
                      << problem.message << "\n";
            valid = false;
        }
        entries.push_back(std::move(entry));
    }
    return valid;
}

std::string resolution(const onvif::StreamProfile& profile) {
    if (profile.width <= 0 || profile.height <= 0) return "";
    return std::to_string(profile.width) + "x" + std::to_string(profile.height);
}

// The name the instance has (or would have) under a configuration.
std::string instanceNameOf(const PassEntry& entry, const CameraStatus& camera) {
    if (entry.name.empty()) return "";
    return instanceName(entry.name, instanceHash(camera.instanceId, "", true));
}

std::size_t offeredCount(const OnvifPassResult& result) {
    return std::size_t(std::count_if(result.cameras.begin(), result.cameras.end(),
                                     [](const CameraStatus& c) { return c.offered; }));
}

void printText(const std::vector<PassEntry>& entries) {
    bool first = true;
    for (const PassEntry& entry : entries) {
        if (!first) std::cout << "\n";
        first = false;
        const OnvifPassResult& result = entry.result;
        const onvif::OnvifDetails& details = entry.request.details;
        if (entry.name.empty()) {
            std::cout << "cameras that answer a Probe (no configuration, so no filters)\n";
        } else {
            std::cout << "configuration " << entry.name << " (" << entry.source << ")\n";
        }
        std::cout << "  probed:    " << (details.ipv6 ? "IPv4 and IPv6 " : "") << "multicast on "
                  << (details.interfaces.empty() ? std::string("the default interface")
                                                 : "interfaces " + [&] {
                                                       std::string list;
                                                       for (const auto& i : details.interfaces)
                                                           list += (list.empty() ? "" : ", ") + i;
                                                       return list;
                                                   }());
        if (result.unicastProbes > 0) std::cout << "; unicast to " << result.unicastProbes << " addresses";
        std::cout << "; answers awaited " << double(details.discoveryTimeout.count()) / 1000 << " s\n";
        for (const CameraStatus& camera : result.cameras) {
            std::cout << "  camera " << camera.uuid << "\n";
            std::cout << "    service:   " << camera.serviceUrl << "\n";
            std::cout << "    state:     " << onvif::describe(camera.status) << "\n";
            if (!camera.manufacturer.empty() || !camera.model.empty()) {
                std::cout << "    device:    " << camera.manufacturer << " " << camera.model;
                if (!camera.firmware.empty()) std::cout << ", firmware " << camera.firmware;
                if (!camera.serial.empty()) std::cout << ", serial " << camera.serial;
                std::cout << "\n";
            }
            if (!camera.ipAddress.empty() || !camera.macAddress.empty()) {
                std::cout << "    network:   ";
                if (!camera.ipAddress.empty()) std::cout << "IP " << camera.ipAddress;
                if (!camera.ipAddress.empty() && !camera.macAddress.empty()) std::cout << ", ";
                if (!camera.macAddress.empty()) std::cout << "MAC " << camera.macAddress;
                std::cout << "\n";
            }
            for (const std::string& scope : camera.scopes) std::cout << "    scope:     " << scope << "\n";
            if (camera.media2) std::cout << "    media:     Media2 at " << camera.mediaUrl << "\n";
            for (const std::string& note : onvif::addressNotes(camera))
                std::cout << "    address:   " << note << "\n";
            for (const onvif::StreamProfile& stream : camera.streams) {
                std::cout << "    stream:    " << stream.token;
                if (std::string r = resolution(stream); !r.empty()) std::cout << " " << r;
                if (!stream.encoding.empty()) std::cout << " " << stream.encoding;
                std::cout << " " << stream.uri << "\n";
            }
            const bool authenticated = camera.status == onvif::DeviceStatus::UpWithAuth;
            if (!camera.error.empty() && !authenticated && camera.error != onvif::describe(camera.status))
                std::cout << "    error:     " << camera.error << "\n";
            if (camera.offered) {
                const std::string name = instanceNameOf(entry, camera);
                std::cout << "    offered:   yes, "
                          << (name.empty() ? "instance id " + camera.instanceId : "as " + name)
                          << (!authenticated && camera.streams.empty() && camera.model.empty()
                                  ? ", without the details that need credentials"
                                  : "")
                          << "\n";
            } else {
                std::cout << "    offered:   no, " << camera.reason << "\n";
            }
        }
        for (const onvif::IgnoredAnswer& answer : result.ignored) {
            std::cout << "  ignored:   " << onvif::ignoredAnswerName(answer);
            if (answer.count > 1) std::cout << ", " << answer.count << " times";
            std::cout << ": " << answer.reason << "\n";
            if (!answer.xaddrs.empty()) {
                std::cout << "    announced:";
                for (const std::string& url : answer.xaddrs) std::cout << " " << url;
                std::cout << "\n";
            }
        }
        if (result.ignoredUnlisted > 0)
            std::cout << "  ignored:   " << result.ignoredUnlisted << " more answers (not listed)\n";
        for (const std::string& problem : result.problems) std::cout << "  problem:   " << problem << "\n";
        std::cout << "  " << result.cameras.size() << " camera" << (result.cameras.size() == 1 ? "" : "s")
                  << ", " << offeredCount(result) << " offered\n";
    }
}

boost::json::object cameraJson(const PassEntry& entry, const CameraStatus& camera) {
    boost::json::array streams;
    for (const onvif::StreamProfile& stream : camera.streams) {
        boost::json::object s{{"profile", stream.token}, {"name", stream.name}, {"uri", stream.uri}};
        if (std::string r = resolution(stream); !r.empty()) {
            s["resolution"] = r;
            s["width"] = stream.width;
            s["height"] = stream.height;
        }
        if (!stream.encoding.empty()) s["encoding"] = stream.encoding;
        streams.push_back(std::move(s));
    }
    boost::json::array scopes;
    for (const std::string& scope : camera.scopes) scopes.push_back(boost::json::string(scope));
    boost::json::object c{{"uuid", camera.uuid},
                          {"serviceUrl", camera.serviceUrl},
                          {"state", onvif::statusKey(camera.status)},
                          {"stateText", onvif::describe(camera.status)},
                          {"offered", camera.offered},
                          {"instanceId", camera.instanceId},
                          {"scopes", std::move(scopes)},
                          {"streams", std::move(streams)}};
    if (!camera.mediaUrl.empty()) {
        c["mediaUrl"] = camera.mediaUrl;
        c["mediaService"] = camera.media2 ? "media2" : "media";
    }
    boost::json::array rewritten;
    for (const std::string& rewrite : camera.rewrittenServices)
        rewritten.push_back(boost::json::string(rewrite));
    c["rewrittenServices"] = std::move(rewritten);
    boost::json::array elsewhere;
    for (const std::string& host : camera.streamHostsElsewhere)
        elsewhere.push_back(boost::json::string(host));
    c["streamHostsElsewhere"] = std::move(elsewhere);
    if (std::string name = instanceNameOf(entry, camera); !name.empty()) c["instance"] = name;
    if (!camera.reason.empty()) c["reason"] = camera.reason;
    for (const auto& [key, value] : {std::pair{"manufacturer", &camera.manufacturer},
                                     {"model", &camera.model},
                                     {"firmware", &camera.firmware},
                                     {"serial", &camera.serial},
                                     {"ipAddress", &camera.ipAddress},
                                     {"macAddress", &camera.macAddress},
                                     {"error", &camera.error}}) {
        if (!value->empty()) c[key] = *value;
    }
    return c;
}

void printJson(const std::vector<PassEntry>& entries) {
    boost::json::array list;
    for (const PassEntry& entry : entries) {
        boost::json::array cameras;
        for (const CameraStatus& camera : entry.result.cameras) cameras.push_back(cameraJson(entry, camera));
        boost::json::array notCameras;
        for (const std::string& address : entry.result.notCameras)
            notCameras.push_back(boost::json::string(address));
        boost::json::array problems;
        for (const std::string& problem : entry.result.problems)
            problems.push_back(boost::json::string(problem));
        boost::json::array ignored;
        for (const onvif::IgnoredAnswer& answer : entry.result.ignored) {
            boost::json::array xaddrs;
            for (const std::string& url : answer.xaddrs) xaddrs.push_back(boost::json::string(url));
            boost::json::object a{{"sender", answer.sender},
                                  {"reason", answer.reason},
                                  {"count", answer.count},
                                  {"xaddrs", std::move(xaddrs)}};
            if (!answer.message.empty()) a["message"] = answer.message;
            if (!answer.uuid.empty()) a["uuid"] = answer.uuid;
            ignored.push_back(std::move(a));
        }
        boost::json::object e{
            {"cameras", std::move(cameras)},        {"notCameras", std::move(notCameras)},
            {"ignored", std::move(ignored)},        {"ignoredUnlisted", entry.result.ignoredUnlisted},
            {"problems", std::move(problems)},      {"unicastProbes", entry.result.unicastProbes},
            {"offered", offeredCount(entry.result)}};
        if (entry.name.empty()) {
            e["source"] = "command line";
        } else {
            e["configuration"] = entry.name;
            e["source"] = entry.source;
        }
        list.push_back(std::move(e));
    }
    std::cout << boost::json::serialize(boost::json::object{{"configurations", std::move(list)}}) << "\n";
}

}  // namespace

int probeOnvifCommand(const std::vector<std::string>& args, const HandlerRegistry& handlers,
                      const std::string& usage) {
    OnvifOptions options;
    if (std::string error = parseOptions(args, options); !error.empty()) return usageError(error, usage);
    std::optional<onvif::Credential> credential;
    if (options.user) {
        std::string password;
        if (std::string error = readPassword(*options.passwordFile, password); !error.empty()) {
            std::cerr << "devlet: --password-file: " << error << "\n";
            return 2;
        }
        credential = onvif::Credential{*options.user, std::move(password)};
    }

    std::vector<PassEntry> entries;
    if (options.configured) {
        if (!configuredRequests(options, handlers, entries)) return 2;
    } else {
        PassEntry entry;
        entry.request.configuration = "command line";
        entry.request.details.discoveryTimeout = kCommandLineWindow;
        entries.push_back(std::move(entry));
    }
    std::vector<OnvifPassRequest> requests;
    for (PassEntry& entry : entries) {
        onvif::OnvifDetails& details = entry.request.details;
        details.unicastTargets.insert(details.unicastTargets.end(), options.targets.begin(),
                                      options.targets.end());
        if (!options.interfaces.empty()) details.interfaces = options.interfaces;
        if (options.ipv6) details.ipv6 = true;
        if (options.timeout) details.discoveryTimeout = *options.timeout;
        entry.request.credential = credential;
        requests.push_back(entry.request);
    }

    // What a pass has to say goes into its result; the log would repeat it on stderr.
    setLogLevel(LogLevel::Error);
    std::vector<OnvifPassResult> results = onvif::runOnvifPass(requests);
    bool usable = true;
    for (std::size_t i = 0; i < entries.size(); ++i) {
        entries[i].result = std::move(results[i]);
        usable = usable && !entries[i].result.networkUnusable;
    }
    if (options.json) {
        printJson(entries);
    } else {
        printText(entries);
    }
    return usable ? 0 : 1;
}

}  // namespace devlet
