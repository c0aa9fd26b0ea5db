// devlet: discovers devices and offers them to the kubelet. The command line;
// the one place that names concrete probes.

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <malloc.h>
#include <sys/resource.h>

#include "daemon/daemon.h"
#include "daemon/gpu_probe_command.h"
#include "daemon/probe_command.h"
#include "daemon/status_command.h"
#include "probes/echo/echo_handler.h"
#include "probes/gpu/gpu_handler.h"
#include "probes/onvif/onvif_handler.h"
#include "probes/usb/udev_handler.h"
#include "runtime/configuration.h"
#include "runtime/discovery.h"
#include "runtime/log.h"
#include "runtime/settings.h"

namespace {

constexpr const char* kUsage = R"(usage:
  devlet run [--config FILE] [--node-name NAME] [--state-dir DIR] [--conf-dir DIR]
             [--device-plugin-dir DIR] [--pod-resources-socket PATH]
             [--listen ADDR:PORT] [--log-level LEVEL]
  devlet config check FILE...
  devlet config rbac FILE...
  devlet probe usb [--rule RULE]... [--configuration FILE]... [--conf-dir DIR | --config FILE]
                   [--all] [--json]
  devlet probe gpu [--details FILE] [--any-vendor]
  devlet probe onvif [--user USER --password-file FILE|-] [--target ADDRESS|CIDR]...
                     [--interface NAME]... [--ipv6] [--timeout SECONDS]
                     [--configuration FILE]... [--conf-dir DIR | --config FILE] [--json]
  devlet status [--json] [--listen ADDR:PORT] [--config FILE] [--token-file FILE]
  devlet instances [--json] [--listen ADDR:PORT] [--config FILE] [--token-file FILE]
  devlet version
)";

void registerHandlers(devlet::HandlerRegistry& handlers) {
    handlers.add(std::make_unique<devlet::echo::EchoHandler>());
    handlers.add(std::make_unique<devlet::usb::UdevHandler>());
    handlers.add(std::make_unique<devlet::gpu::GpuHandler>());
    handlers.add(std::make_unique<devlet::onvif::OnvifHandler>());
}

// A device plugin holds two descriptors (its socket and the kubelet's connection), so
// systemd's default soft limit of 1,024 would stop devlet at about 500 devices.
void raiseOpenFileLimit() {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0)
        devlet::Log{"daemon"}.warning() << "cannot raise the open-file limit: " << std::strerror(errno);
}

// The usage lines of one command ("probe usb", "config", "status"): each entry of kUsage
// whose words after "devlet" start with `words`, with its continuation lines; all of it when
// none does.
std::string usageOf(const std::vector<std::string>& words) {
    std::string prefix = "  devlet";
    for (const std::string& word : words) prefix += " " + word;
    std::istringstream lines(kUsage);
    std::string line, out;
    bool keep = false;
    while (std::getline(lines, line)) {
        if (line.rfind("  devlet ", 0) == 0)
            keep = line.rfind(prefix + " ", 0) == 0 || line == prefix;
        else if (line.rfind("   ", 0) != 0)
            keep = false;
        if (keep) out += line + "\n";
    }
    return out.empty() ? kUsage : "usage:\n" + out;
}

// `--help` or `-h` anywhere after a command asks for that command's usage, not its work.
bool asksForHelp(const std::vector<std::string>& args) {
    for (const std::string& arg : args)
        if (arg == "--help" || arg == "-h") return true;
    return false;
}

// The command words before the first option: {"probe", "usb"} of "probe usb --json -h".
std::vector<std::string> commandWords(const std::string& command, const std::vector<std::string>& args) {
    std::vector<std::string> words{command};
    for (const std::string& arg : args) {
        if (arg.empty() || arg[0] == '-' || words.size() == 2) break;
        words.push_back(arg);
    }
    return words;
}

int usageError(const std::string& message) {
    std::cerr << "devlet: " << message << "\n" << kUsage;
    return 2;
}

int runCommand(const std::vector<std::string>& args) {
    devlet::SettingsOverrides overrides;
    const std::vector<std::pair<std::string, std::optional<std::string>*>> flags = {
        {"--config", &overrides.configFile},
        {"--node-name", &overrides.nodeName},
        {"--state-dir", &overrides.stateDir},
        {"--conf-dir", &overrides.confDir},
        {"--device-plugin-dir", &overrides.devicePluginDir},
        {"--pod-resources-socket", &overrides.podResourcesSocket},
        {"--listen", &overrides.listen},
        {"--log-level", &overrides.logLevel},
    };
    for (std::size_t i = 0; i < args.size(); ++i) {
        std::string arg = args[i];
        std::optional<std::string> inlineValue;
        if (auto eq = arg.find('='); eq != std::string::npos && arg.rfind("--", 0) == 0) {
            inlineValue = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
        }
        auto flag = std::find_if(flags.begin(), flags.end(), [&](const auto& f) { return f.first == arg; });
        if (flag == flags.end()) return usageError("unknown option for run: " + args[i]);
        if (inlineValue) {
            *flag->second = *inlineValue;
        } else if (i + 1 < args.size()) {
            *flag->second = args[++i];
        } else {
            return usageError(arg + " needs a value");
        }
    }
    // Paths on the command line are relative to where devlet was started.
    for (auto* path : {&overrides.configFile, &overrides.stateDir, &overrides.confDir,
                       &overrides.devicePluginDir, &overrides.podResourcesSocket}) {
        if (*path && !path->value().empty())
            *path = std::filesystem::absolute(path->value()).lexically_normal().string();
    }
    devlet::LoadedSettings loaded = devlet::loadSettings(overrides);
    if (!loaded.problems.empty()) {
        for (const auto& problem : loaded.problems) std::cerr << "devlet: " << problem.str() << "\n";
        return 2;
    }
    devlet::LogLevel level = devlet::LogLevel::Info;
    devlet::parseLogLevel(loaded.settings.logLevel, level);
    devlet::setLogLevel(level);
    raiseOpenFileLimit();
    // Worker threads (ONVIF queries, libusb reads) would each get a glibc malloc arena of
    // their own, keeping pages of memory for little gain: the core is one thread.
    mallopt(M_ARENA_MAX, 1);
    devlet::HandlerRegistry handlers;
    registerHandlers(handlers);
    devlet::Daemon daemon(std::move(loaded.settings), handlers);
    return daemon.run();
}

// What the `config` commands read files with: the daemon's handlers, and the settings
// (the resource domain shapes valid names, the cluster namespace the RBAC).
struct ConfigReading {
    devlet::HandlerRegistry handlers;
    devlet::LoadedSettings settings = devlet::loadSettings({});
    std::string domain() const {
        return settings.problems.empty() ? settings.settings.resourceDomain : "akri.sh";
    }
    ConfigReading() { registerHandlers(handlers); }
};

int configCheck(const std::vector<std::string>& files) {
    if (files.empty()) return usageError("config check needs at least one file");
    ConfigReading reading;
    const devlet::HandlerRegistry& handlers = reading.handlers;
    const devlet::LoadedSettings& settings = reading.settings;
    const std::string domain = reading.domain();
    if (!settings.problems.empty()) {
        std::cerr << "devlet: the settings do not load (" << settings.problems.front().str()
                  << "); checking resource names against the default domain akri.sh\n";
    }
    bool valid = true;
    for (const std::string& file : files) {
        devlet::ParsedConfigurations parsed = devlet::loadConfigurationFile(file, handlers, domain);
        for (const auto& warning : parsed.warnings) {
            if (!warning.clusterOnly || !settings.settings.cluster.enabled())
                std::cerr << warning.str() << " (warning)\n";
        }
        if (!parsed.problems.empty()) {
            valid = false;
            for (const auto& problem : parsed.problems) std::cerr << problem.str() << "\n";
            continue;
        }
        std::cout << file << ": ok, " << parsed.configurations.size() << " configuration(s)";
        for (const auto& c : parsed.configurations)
            std::cout << (&c == &parsed.configurations[0] ? ": " : ", ") << c.name;
        std::cout << "\n";
    }
    return valid ? 0 : 2;
}

// The Roles and RoleBindings that let the nodes' ServiceAccount read exactly the Secrets
// the files' configurations name in valueFrom.secretKeyRef (docs/cluster.md, "Camera
// credentials from Secrets"): list and watch (all devlet asks), by resourceNames, per namespace.
int configRbac(const std::vector<std::string>& files) {
    if (files.empty()) return usageError("config rbac needs at least one file");
    ConfigReading reading;
    const std::string domain = reading.domain();
    const std::string home =
        reading.settings.problems.empty() ? reading.settings.settings.cluster.namespaceName : "devlet";
    std::map<std::string, std::set<std::string>> secrets;  // namespace -> names
    bool valid = true;
    for (const std::string& file : files) {
        devlet::ParsedConfigurations parsed = devlet::loadConfigurationFile(file, reading.handlers, domain);
        for (const auto& problem : parsed.problems) std::cerr << problem.str() << "\n";
        valid = valid && parsed.problems.empty();
        for (const auto& configuration : parsed.configurations) {
            for (const auto& reference : configuration.propertyReferences) {
                if (reference.secret) secrets[reference.namespaceName].insert(reference.name);
            }
        }
    }
    if (!valid) return 2;
    if (secrets.empty()) std::cerr << "devlet: no configuration in these files reads a Secret\n";
    const std::string labels = "  labels:\n    app.kubernetes.io/name: devlet\n";
    for (const auto& [ns, names] : secrets) {
        std::string list;
        for (const std::string& name : names) list += (list.empty() ? "\"" : ", \"") + name + "\"";
        std::cout << (&ns == &secrets.begin()->first ? "" : "---\n")
                  << "# Secrets devlet's nodes read in namespace " << ns << ", and no other.\n"
                  << "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n"
                  << "  name: devlet-node-secrets\n  namespace: " << ns << "\n"
                  << labels << "rules:\n- apiGroups: [\"\"]\n  resources: [\"secrets\"]\n"
                  << "  resourceNames: [" << list << "]\n  verbs: [\"list\", \"watch\"]\n---\n"
                  << "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n"
                  << "  name: devlet-node-secrets\n  namespace: " << ns << "\n"
                  << labels << "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n"
                  << "  name: devlet-node-secrets\nsubjects:\n- kind: ServiceAccount\n"
                  << "  name: devlet-node\n  namespace: " << home << "\n";
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || (args[0] == "help" && args.size() == 1)) {
        std::cout << kUsage;
        return args.empty() ? 2 : 0;
    }
    // "devlet help probe usb" is "devlet probe usb --help".
    if (args[0] == "help") {
        args.erase(args.begin());
        args.push_back("--help");
    }
    const std::string command = args[0];
    args.erase(args.begin());
    if (asksForHelp(args)) {
        std::cout << usageOf(commandWords(command, args));
        return 0;
    }
    try {
        if (command == "run") return runCommand(args);
        if (command == "version" || command == "--version") {
            std::cout << "devlet " << DEVLET_VERSION << "\n";
            return 0;
        }
        if (command == "status" || command == "instances") return devlet::statusCommand(command, args);
        if (command == "config") {
            if (args.empty() || (args[0] != "check" && args[0] != "rbac"))
                return usageError("unknown config command");
            const std::string what = args[0];
            args.erase(args.begin());
            return what == "check" ? configCheck(args) : configRbac(args);
        }
        if (command == "probe") {
            if (!args.empty() && args[0] == "gpu") {
                args.erase(args.begin());
                return devlet::gpu::probeGpuCommand(args, std::cout, std::cerr);
            }
            if (!args.empty() && args[0] == "onvif") {
                args.erase(args.begin());
                devlet::HandlerRegistry handlers;
                registerHandlers(handlers);
                return devlet::probeOnvifCommand(args, handlers, kUsage);
            }
            // `udev` names the handler, `usb` what users look for; both are the same pass.
            if (args.empty() || (args[0] != "usb" && args[0] != "udev")) {
                return usageError("unknown probe: " + (args.empty() ? std::string("(none)") : args[0]));
            }
            args.erase(args.begin());
            devlet::HandlerRegistry handlers;
            registerHandlers(handlers);
            return devlet::probeUsbCommand(args, handlers, kUsage);
        }
    } catch (const std::exception& e) {
        // Components catch their own errors; this is the last line before a crash.
        std::cerr << "devlet: fatal: " << e.what() << "\n";
        return 1;
    }
    return usageError("unknown command: " + command);
}
