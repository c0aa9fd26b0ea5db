#include "daemon/status_command.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <boost/json.hpp>

#include "runtime/settings.h"
#include "status/status_client.h"
#include "status/status_server.h"

namespace devlet {

namespace json = boost::json;
using status::HttpAnswer;

namespace {

constexpr const char* kUsage =
    "usage: devlet status [--json] [--listen ADDR:PORT] [--config FILE] [--token-file FILE]\n"
    "       devlet instances [--json] [--listen ADDR:PORT] [--config FILE] [--token-file FILE]\n";

std::string text(const json::value* v) {
    if (!v || v->is_null()) return "";
    if (v->is_string()) return std::string(v->as_string());
    if (v->is_bool()) return v->as_bool() ? "yes" : "no";
    return json::serialize(*v);
}

std::string field(const json::object& o, std::string_view key) {
    return text(o.if_contains(key));
}

const json::array& arrayAt(const json::object& o, std::string_view key) {
    static const json::array kEmpty;
    const json::value* v = o.if_contains(key);
    return v && v->is_array() ? v->as_array() : kEmpty;
}

const json::object& objectAt(const json::object& o, std::string_view key) {
    static const json::object kEmpty;
    const json::value* v = o.if_contains(key);
    return v && v->is_object() ? v->as_object() : kEmpty;
}

// Columns padded to their widest cell; the last column is not padded.
void printTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
    std::vector<std::size_t> widths;
    for (const auto& row : rows) {
        widths.resize(std::max(widths.size(), row.size()));
        for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
    }
    for (const auto& row : rows) {
        std::string line;
        for (std::size_t i = 0; i < row.size(); ++i) {
            line += row[i];
            if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out << line << "\n";
    }
}

std::string duration(std::int64_t seconds) {
    if (seconds < 120) return std::to_string(seconds) + "s";
    if (seconds < 7200) return std::to_string(seconds / 60) + "m";
    if (seconds < 172800) return std::to_string(seconds / 3600) + "h";
    return std::to_string(seconds / 86400) + "d";
}

void printStatus(const json::object& doc) {
    const json::object& daemon = objectAt(doc, "daemon");
    const json::object& kubelet = objectAt(doc, "kubelet");
    const json::object& summary = objectAt(doc, "summary");
    const json::value* uptime = daemon.if_contains("uptimeSeconds");
    std::cout << "devlet " << field(daemon, "version") << " on node " << field(daemon, "node") << ", up "
              << duration(uptime && uptime->is_int64() ? uptime->as_int64() : 0) << "\n";
    std::cout << field(summary, "text") << "\n";
    std::cout << "kubelet: " << field(kubelet, "state") << " (" << field(kubelet, "kubeletSocket") << "), "
              << field(kubelet, "pluginsRegistered") << " of " << field(kubelet, "pluginsOffered")
              << " plugins registered";
    if (!field(kubelet, "podResourcesError").empty())
        std::cout << "; PodResources: " << field(kubelet, "podResourcesError");
    std::cout << "\n";
    std::cout << "kubelet paths: " << field(kubelet, "layout")
              << "\n  device plugins: " << field(kubelet, "devicePluginDir")
              << "\n  PodResources:   " << field(kubelet, "podResourcesSocket") << "\n";
    const bool ready =
        summary.if_contains("ready") && summary.at("ready").is_bool() && summary.at("ready").as_bool();
    std::cout << "ready: " << (ready ? "yes" : "no");
    for (const json::value& reason : arrayAt(summary, "notReadyReasons")) std::cout << "; " << text(&reason);
    std::cout << "\n";
    const json::object& cluster = objectAt(doc, "cluster");
    if (const json::value* on = cluster.if_contains("enabled"); on && on->is_bool() && on->as_bool()) {
        const json::value* reachable = cluster.if_contains("reachable");
        std::cout << "cluster: API server " << field(cluster, "server") << " "
                  << (reachable && reachable->is_bool() && reachable->as_bool() ? "reachable" : "unreachable")
                  << ", namespace " << field(cluster, "namespace") << "; Leases held here "
                  << field(cluster, "leasesHeld") << " of " << field(cluster, "leasesSeen")
                  << ", shared slots held on other nodes " << field(cluster, "slotsHeldElsewhere");
        // Reachable, yet the watch is being opened again (unreachable says more already).
        const json::value* watching = cluster.if_contains("watchCurrent");
        if (reachable && reachable->is_bool() && reachable->as_bool() &&
            !(watching && watching->is_bool() && watching->as_bool()))
            std::cout << "; Lease watch not open";
        if (!field(cluster, "lastError").empty())
            std::cout << "; last error: " << field(cluster, "lastError");
        std::cout << "\n";
        // The kubeconfig's credentials: when the token expires and when devlet renews it.
        const json::object& token = objectAt(cluster, "token");
        const std::string kind = field(token, "kind");
        if (kind == "expiring") {
            std::cout << "cluster: token of ServiceAccount " << field(token, "serviceAccount") << " expires "
                      << field(token, "expiresAt");
            if (!field(token, "nextRenewal").empty())
                std::cout << ", renewed from " << field(token, "nextRenewal");
            if (!field(token, "lastRenewal").empty())
                std::cout << "; last renewed " << field(token, "lastRenewal") << " ("
                          << field(token, "renewals") << " since start)";
            if (!field(token, "lastError").empty())
                std::cout << "; last error: " << field(token, "lastError");
            std::cout << "\n";
        } else if (kind == "doesNotExpire") {
            std::cout << "cluster: token does not expire\n";
        } else if (kind == "tokenFile") {
            std::cout << "cluster: token from a token file, renewed by whoever writes it\n";
        } else if (kind == "clientCertificate") {
            std::cout << "cluster: a client certificate, not a token\n";
        }
        // Containers here hold shared slots the API cannot vouch for: say it per slot.
        for (const json::value& c : arrayAt(doc, "configurations")) {
            if (!c.is_object()) continue;
            for (const json::value& i : arrayAt(c.as_object(), "instances")) {
                if (!i.is_object()) continue;
                for (const json::value& s : arrayAt(i.as_object(), "slots")) {
                    if (!s.is_object() || field(s.as_object(), "unconfirmed").empty()) continue;
                    std::cout << "cluster: slot " << field(s.as_object(), "id")
                              << " held here, not confirmed: " << field(s.as_object(), "unconfirmed") << "\n";
                }
            }
        }
        for (const json::value& problem : arrayAt(cluster, "secretProblems"))
            std::cout << "cluster: " << text(&problem) << "\n";
        // One line per broker Pod of this node: what the API says of it.
        for (const json::value& v : arrayAt(cluster, "brokers")) {
            if (!v.is_object()) continue;
            const json::object& b = v.as_object();
            const json::value* failed = b.if_contains("failed");
            std::cout << "broker " << field(b, "pod") << " (" << field(b, "configuration")
                      << "): " << (field(b, "phase").empty() ? "not seen yet" : field(b, "phase"));
            if (!field(b, "reason").empty()) std::cout << ", " << field(b, "reason");
            if (failed && failed->is_bool() && failed->as_bool()) std::cout << ", failed";
            if (const json::value* n = b.if_contains("recreations");
                n && n->is_number() && n->to_number<int>() > 0)
                std::cout << "; made again " << text(n) << " time(s), last: " << field(b, "recreatedBecause");
            std::cout << "\n";
        }
        if (!field(cluster, "brokersError").empty())
            std::cout << "brokers: " << field(cluster, "brokersError") << "\n";
    }
    for (const json::value& error : arrayAt(daemon, "configurationErrors"))
        std::cout << "configuration error: " << text(&error) << "\n";

    std::vector<std::vector<std::string>> rows = {
        {"CONFIGURATION", "HANDLER", "RESOURCE", "INSTANCES", "HEALTHY", "SLOTS IN USE", "PROBLEMS"}};
    for (const json::value& v : arrayAt(doc, "configurations")) {
        if (!v.is_object()) continue;
        const json::object& c = v.as_object();
        const json::object& n = objectAt(c, "counts");
        std::string problems;
        for (const json::value& p : arrayAt(c, "problems"))
            problems += (problems.empty() ? "" : "; ") + text(&p);
        rows.push_back({field(c, "name"), field(c, "handler"), field(c, "resource"), field(n, "instances"),
                        field(n, "healthy"), field(n, "slotsInUse") + "/" + field(n, "slots"),
                        problems.empty() ? "-" : problems});
    }
    std::cout << "\n";
    printTable(std::cout, rows);

    // What each probe saw but does not offer, and when it last looked.
    for (const json::value& v : arrayAt(doc, "configurations")) {
        if (!v.is_object()) continue;
        const json::object& c = v.as_object();
        const json::object& probe = objectAt(c, "probe");
        const json::array& excluded = arrayAt(c, "excluded");
        const std::string lastScan = field(probe, "lastScan");
        if (excluded.empty() && lastScan.empty() && field(probe, "lastError").empty()) continue;
        std::cout << "\n" << field(c, "name") << ":";
        if (!lastScan.empty()) {
            const json::value* seconds = probe.if_contains("lastScanDurationSeconds");
            std::cout << " last scan " << lastScan;
            if (seconds && seconds->is_number()) {
                char took[32];
                std::snprintf(took, sizeof took, " (%.3f s)", seconds->to_number<double>());
                std::cout << took;
            }
        }
        if (!field(probe, "lastError").empty())
            std::cout << (lastScan.empty() ? "" : ";") << " last error " << field(probe, "lastErrorAt")
                      << ": " << field(probe, "lastError");
        std::cout << "\n";
        for (const json::value& e : excluded) {
            if (e.is_object()) std::cout << "  " << field(e.as_object(), "text") << "\n";
        }
    }
}

void printInstances(const json::object& doc) {
    std::vector<std::vector<std::string>> rows = {
        {"INSTANCE", "CONFIGURATION", "HEALTH", "SLOTS", "HELD BY", "ID", "WHY NOT OFFERED"}};
    for (const json::value& v : arrayAt(doc, "instances")) {
        if (!v.is_object()) continue;
        const json::object& i = v.as_object();
        std::string holders;
        std::size_t held = 0;
        const json::array& slots = arrayAt(i, "slots");
        for (const json::value& s : slots) {
            if (!s.is_object()) continue;
            const json::object& holder = objectAt(s.as_object(), "holder");
            if (holder.empty()) continue;
            ++held;
            const std::string pod = field(holder, "pod");
            const std::string ns = field(holder, "namespace");
            if (!holders.empty()) holders += ", ";
            if (pod.empty()) {
                holders += "?";
            } else {
                if (!ns.empty()) holders.append(ns).append("/");
                holders += pod;
            }
        }
        const std::string state = field(i, "deviceState");
        rows.push_back({field(i, "name"), field(i, "configuration"),
                        field(i, "health") + (state.empty() ? "" : " (" + state + ")"),
                        std::to_string(held) + "/" + std::to_string(slots.size()),
                        holders.empty() ? "-" : holders, field(i, "id"),
                        field(i, "reason").empty() ? "-" : field(i, "reason")});
    }
    printTable(std::cout, rows);
    std::vector<std::string> notes;
    for (const json::value& v : arrayAt(doc, "instances")) {
        if (!v.is_object()) continue;
        for (const json::value& note : arrayAt(v.as_object(), "deviceNotes"))
            if (note.is_string())
                notes.push_back(field(v.as_object(), "name") + ": " + std::string(note.as_string()));
    }
    if (!notes.empty()) std::cout << "\nnotes:\n";
    for (const std::string& note : notes) std::cout << "  " << note << "\n";
    const json::array& excluded = arrayAt(doc, "excluded");
    if (!excluded.empty()) std::cout << "\nseen but not offered:\n";
    for (const json::value& e : excluded) {
        if (!e.is_object()) continue;
        std::cout << "  " << field(e.as_object(), "configuration") << ": " << field(e.as_object(), "text")
                  << "\n";
    }
}

std::string readToken(const std::string& file, bool required, std::string& error) {
    std::ifstream in(file);
    if (!in) {
        if (required) error = "cannot read the token file " + file;
        return {};
    }
    std::stringstream s;
    s << in.rdbuf();
    std::string token = s.str();
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' '))
        token.pop_back();
    return token;
}

}  // namespace

int statusCommand(const std::string& command, const std::vector<std::string>& args) {
    bool asJson = false;
    std::optional<std::string> listen;
    std::optional<std::string> tokenFile;
    SettingsOverrides overrides;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        auto value = [&](std::optional<std::string>& target) {
            if (i + 1 >= args.size()) return false;
            target = args[++i];
            return true;
        };
        if (arg == "--json") {
            asJson = true;
        } else if (arg == "--listen") {
            if (!value(listen)) return std::cerr << "devlet: --listen needs a value\n" << kUsage, 2;
        } else if (arg == "--config") {
            if (!value(overrides.configFile))
                return std::cerr << "devlet: --config needs a value\n" << kUsage, 2;
        } else if (arg == "--token-file") {
            if (!value(tokenFile)) return std::cerr << "devlet: --token-file needs a value\n" << kUsage, 2;
        } else {
            std::cerr << "devlet: unknown option for " << command << ": " << arg << "\n" << kUsage;
            return 2;
        }
    }
    if (!listen) {
        // The address the daemon listens on comes from the same settings file.
        LoadedSettings settings = loadSettings(overrides);
        if (!settings.problems.empty()) {
            std::cerr << "devlet: " << settings.problems.front().str() << "\n";
            return 2;
        }
        listen = settings.settings.listen;
    }
    std::string error;
    const std::string token =
        readToken(tokenFile.value_or(status::defaultTokenFile()), tokenFile.has_value(), error);
    if (!error.empty()) {
        std::cerr << "devlet: " << error << "\n";
        return 1;
    }
    const std::string target = command == "instances" ? "/api/v1/instances" : "/api/v1/status";
    const HttpAnswer answer = status::httpGet(*listen, target, token);
    if (answer.status == 0) {
        std::cerr << "devlet: cannot read the status server at http://" << *listen << target << ": "
                  << answer.error << "; is devlet running (systemctl status devlet)?\n";
        return 1;
    }
    if (answer.status != 200) {
        std::cerr << "devlet: http://" << *listen << target << " answered " << answer.status << ": "
                  << answer.body;
        if (answer.status == 401) std::cerr << "(give the token with --token-file)\n";
        return 1;
    }
    if (asJson) {
        std::cout << answer.body << "\n";
        return 0;
    }
    boost::system::error_code ec;
    json::value doc = json::parse(answer.body, ec);
    if (ec || !doc.is_object()) {
        std::cerr << "devlet: the status server answered something that is not a JSON object\n";
        return 1;
    }
    if (command == "instances") {
        printInstances(doc.as_object());
    } else {
        printStatus(doc.as_object());
    }
    return 0;
}

}  // namespace devlet
