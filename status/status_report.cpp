#include "status/status_report.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <map>

#include <boost/json.hpp>

#include "runtime/rfc3339.h"

namespace devlet::status {

namespace json = boost::json;

namespace {

std::string upper(std::string_view text) {
    std::string result(text);
    for (char& c : result) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return result;
}

// What people call a configuration's devices, by handler (singular, plural).
std::pair<std::string, std::string> deviceNoun(const std::string& handler) {
    if (handler == "onvif") return {"camera", "cameras"};
    if (handler == "gpu") return {"GPU", "GPUs"};
    if (handler == "udev") return {"USB device", "USB devices"};
    if (handler == "debugEcho") return {"echo device", "echo devices"};
    return {handler + " device", handler + " devices"};
}

std::string counted(std::size_t n, const std::string& singular, const std::string& plural) {
    return std::to_string(n) + " " + (n == 1 ? singular : plural);
}

json::value timeOrNull(std::int64_t ms, const json::storage_ptr& sp) {
    if (ms == 0) return nullptr;
    return json::value(isoTime(ms), sp);
}

json::value stringOrNull(const std::string& text, const json::storage_ptr& sp) {
    if (text.empty()) return nullptr;
    return json::value(text, sp);
}

std::string slotState(const InstanceStatus& instance, const Slot& slot) {
    if (!slot.holderResource.empty()) return "held";
    if (!instance.present || !instance.offered || slot.index >= instance.capacity) return "unavailable";
    if (instance.heldElsewhere.count(slot.deviceId)) return "elsewhere";
    return "free";
}

json::object slotJson(const InstanceStatus& instance, const Slot& slot, const json::storage_ptr& sp) {
    json::object o(sp);
    o["id"] = slot.deviceId;
    o["index"] = slot.index;
    o["state"] = slotState(instance, slot);
    if (auto elsewhere = instance.heldElsewhere.find(slot.deviceId);
        elsewhere != instance.heldElsewhere.end())
        o["elsewhere"] = json::value(elsewhere->second, sp);
    if (auto why = instance.unconfirmed.find(slot.deviceId); why != instance.unconfirmed.end())
        o["unconfirmed"] = json::value(why->second, sp);
    if (slot.holderResource.empty()) {
        o["holder"] = nullptr;
    } else {
        json::object holder(sp);
        holder["resource"] = slot.holderResource;
        holder["pod"] = stringOrNull(slot.pod, sp);
        holder["namespace"] = stringOrNull(slot.podNamespace, sp);
        holder["since"] = timeOrNull(slot.sinceMs, sp);
        if (auto live = instance.liveFiles.find(slot.deviceId); live != instance.liveFiles.end()) {
            json::object file(sp);
            file["path"] = live->second.path;
            file["generation"] = live->second.generation;
            file["stale"] = stringOrNull(live->second.staleReason, sp);
            holder["liveFile"] = std::move(file);
        } else {
            holder["liveFile"] = nullptr;
        }
        o["holder"] = std::move(holder);
    }
    return o;
}

json::object instanceJson(const StatusSnapshot& snapshot, const ConfigurationStatus& c,
                          const InstanceStatus& i, const json::storage_ptr& sp) {
    json::object o(sp);
    o.reserve(20);
    o["name"] = i.name;
    o["id"] = withoutUserInfo(i.device.id);
    o["configuration"] = i.configuration;
    o["resource"] = i.resource;
    o["shared"] = i.device.shared;
    o["health"] = instanceHealth(i);
    o["present"] = i.present;
    o["offered"] = i.offered;
    o["registered"] = i.registered;
    o["reason"] = stringOrNull(instanceReason(snapshot, c, i), sp);
    json::object properties(sp);
    std::size_t redacted = 0;
    for (const auto& [key, value] : i.device.properties) {
        if (looksLikeSecret(key)) {
            ++redacted;
            continue;
        }
        properties[key] = withoutUserInfo(value);
    }
    o["properties"] = std::move(properties);
    o["propertiesRedacted"] = redacted;
    json::array nodes(sp);
    for (const DeviceNode& node : i.device.nodes) {
        nodes.push_back(
            json::object({{"hostPath", node.hostPath},
                          {"containerPath", node.containerPath.empty() ? node.hostPath : node.containerPath},
                          {"permissions", node.permissions}},
                         sp));
    }
    o["deviceNodes"] = std::move(nodes);
    o["numaNode"] = i.device.numaNode ? json::value(*i.device.numaNode) : json::value(nullptr);
    o["firstSeen"] = timeOrNull(i.firstSeenMs, sp);
    o["lastSeen"] = timeOrNull(i.lastSeenMs, sp);
    o["deviceState"] = stringOrNull(i.deviceState, sp);
    json::array notes(sp);
    for (const std::string& note : i.deviceNotes) notes.push_back(json::string(note, sp));
    o["deviceNotes"] = std::move(notes);
    std::size_t held = 0;
    json::array slots(sp);
    for (const Slot& slot : i.slots) {
        held += slot.holderResource.empty() ? 0 : 1;
        slots.push_back(slotJson(i, slot, sp));
    }
    o["slotsInUse"] = held;
    o["slots"] = std::move(slots);
    return o;
}

json::object excludedJson(const ConfigurationStatus& c, const ExcludedDevice& e,
                          const json::storage_ptr& sp) {
    json::object o(sp);
    o["id"] = stringOrNull(withoutUserInfo(e.id), sp);
    o["reason"] = e.reason;
    o["count"] = e.count;
    o["text"] = excludedText(c.handler, e);
    return o;
}

json::array excludedArray(const ConfigurationStatus& c, const json::storage_ptr& sp) {
    json::array a(sp);
    for (const ExcludedDevice& e : c.discovery.excluded) a.push_back(excludedJson(c, e, sp));
    return a;
}

std::size_t excludedCount(const ConfigurationStatus& c) {
    std::size_t n = 0;
    for (const ExcludedDevice& e : c.discovery.excluded) n += e.count;
    return n;
}

json::value secondsOrNull(const DiscoveryStatus& d) {
    if (d.lastScanMs == 0) return nullptr;
    return std::chrono::duration<double>(d.lastScanDuration).count();
}

// The probe's state for /api/v1/probes and the configuration's "probe".
json::object probeJson(const ConfigurationStatus& c, const json::storage_ptr& sp) {
    const DiscoveryStatus& d = c.discovery;
    json::object o(sp);
    o["state"] = c.probeError.empty() ? "ok" : "error";
    o["error"] = stringOrNull(c.probeError, sp);
    o["lastScan"] = timeOrNull(d.lastScanMs, sp);
    o["lastScanDurationSeconds"] = secondsOrNull(d);
    o["scans"] = d.scans;
    o["errors"] = d.errors;
    o["lastError"] = stringOrNull(d.lastError, sp);
    o["lastErrorAt"] = timeOrNull(d.lastErrorMs, sp);
    return o;
}

struct Counts {
    std::size_t instances = 0, healthy = 0, unhealthy = 0, withdrawn = 0;
    std::size_t slots = 0, slotsInUse = 0;
};

Counts count(const ConfigurationStatus& c) {
    Counts n;
    for (const InstanceStatus& i : c.instances) {
        ++n.instances;
        const std::string health = instanceHealth(i);
        if (health == "healthy") {
            ++n.healthy;
        } else if (health == "unhealthy") {
            ++n.unhealthy;
        } else {
            ++n.withdrawn;
        }
        for (const Slot& s : i.slots) {
            if (i.offered && s.index < i.capacity) ++n.slots;
            if (!s.holderResource.empty()) ++n.slotsInUse;
        }
    }
    return n;
}

json::object configurationJson(const StatusSnapshot& snapshot, const ConfigurationStatus& c,
                               bool withInstances, const json::storage_ptr& sp) {
    json::object o(sp);
    o["name"] = c.name;
    o["handler"] = c.handler;
    o["resource"] = c.resource;
    o["capacity"] = c.capacity;
    if (c.sourceFile.empty()) {
        o["source"] = nullptr;
    } else {
        o["source"] = c.sourceFile + ":" + std::to_string(c.sourceLine);
    }
    o["registered"] = c.registered;
    o["probe"] = probeJson(c, sp);
    const Counts n = count(c);
    o["counts"] = json::object({{"instances", n.instances},
                                {"healthy", n.healthy},
                                {"unhealthy", n.unhealthy},
                                {"withdrawn", n.withdrawn},
                                {"slots", n.slots},
                                {"slotsInUse", n.slotsInUse},
                                {"excluded", excludedCount(c)}},
                               sp);
    o["excluded"] = excludedArray(c, sp);
    json::array problems(sp);
    for (const std::string& p : configurationProblems(snapshot, c)) problems.emplace_back(p);
    o["problems"] = std::move(problems);
    if (withInstances) {
        json::array instances(sp);
        for (const InstanceStatus& i : c.instances) instances.push_back(instanceJson(snapshot, c, i, sp));
        o["instances"] = std::move(instances);
    }
    return o;
}

// nowMs: when the answer is given (a kept snapshot is older than that).
json::object daemonJson(const StatusSnapshot& s, std::int64_t nowMs, const json::storage_ptr& sp) {
    json::object o(sp);
    o["version"] = s.daemon.version;
    o["node"] = s.daemon.nodeName;
    o["resourceDomain"] = s.daemon.resourceDomain;
    o["confDir"] = s.daemon.confDir;
    o["stateDir"] = s.daemon.stateDir;
    o["startedAt"] = timeOrNull(s.daemon.startedAtMs, sp);
    o["now"] = timeOrNull(nowMs, sp);
    o["uptimeSeconds"] = std::max<std::int64_t>(0, nowMs - s.daemon.startedAtMs) / 1000;
    o["firstPassDone"] = s.daemon.firstPassDone;
    json::array errors(sp);
    for (const std::string& e : s.daemon.configurationErrors) errors.emplace_back(e);
    o["configurationErrors"] = std::move(errors);
    return o;
}

json::object clusterJson(const StatusSnapshot& s, const json::storage_ptr& sp) {
    json::object o(sp);
    const ClusterStatus& c = s.cluster;
    o["enabled"] = c.enabled;
    o["server"] = stringOrNull(c.server, sp);
    o["namespace"] = stringOrNull(c.namespaceName, sp);
    o["reachable"] = c.enabled ? json::value(c.reachable, sp) : json::value(nullptr, sp);
    o["watchCurrent"] = c.enabled ? json::value(c.watchCurrent, sp) : json::value(nullptr, sp);
    o["lastError"] = stringOrNull(c.lastError, sp);
    if (c.enabled) {
        o["leasesHeld"] = c.leasesHeld;
        o["leasesSeen"] = c.leasesSeen;
        o["slotsHeldElsewhere"] = c.slotsElsewhere;
        o["leasesTaken"] = c.leasesTaken;
        o["allocationsRefused"] = c.allocationsRefused;
        o["nodeLeaseConfirmed"] = c.nodeLeaseConfirmed;
        o["nodeLeaseConfirmedAt"] = timeOrNull(c.nodeLeaseConfirmedMs, sp);
        o["holdsUnconfirmed"] = c.holdsUnconfirmed;
        o["watchRelists"] = c.watchRelists;
        json::object token(sp);
        token["kind"] = stringOrNull(c.token.kind, sp);
        token["serviceAccount"] = stringOrNull(c.token.serviceAccount, sp);
        token["expiresAt"] = timeOrNull(c.token.expiresAtMs, sp);
        token["nextRenewal"] = timeOrNull(c.token.nextRenewalMs, sp);
        token["lastRenewal"] = timeOrNull(c.token.lastRenewalMs, sp);
        token["renewals"] = c.token.renewals;
        token["renewalFailures"] = c.token.renewalFailures;
        token["lastError"] = stringOrNull(c.token.lastError, sp);
        o["token"] = std::move(token);
        json::array brokers(sp);
        for (const BrokerStatus& b : c.brokers) {
            json::object broker(sp);
            broker["pod"] = b.pod;
            broker["configuration"] = b.configuration;
            broker["instance"] = b.instance;
            broker["phase"] = stringOrNull(b.phase, sp);
            broker["reason"] = stringOrNull(b.reason, sp);
            broker["failed"] = b.failed;
            broker["recreations"] = b.recreations;
            broker["recreatedBecause"] = stringOrNull(b.recreatedBecause, sp);
            brokers.push_back(std::move(broker));
        }
        o["brokers"] = std::move(brokers);
        o["brokersError"] = stringOrNull(c.brokersError, sp);
        json::array secrets(sp);
        for (const SecretStatus& secret : c.secrets) {
            json::object entry(sp);
            entry["namespace"] = secret.namespaceName;
            entry["name"] = secret.name;
            entry["read"] = secret.read;
            entry["exists"] = secret.exists;
            entry["error"] = stringOrNull(secret.error, sp);
            json::array keys(sp);
            for (const std::string& key : secret.keys) keys.emplace_back(key);
            entry["keys"] = std::move(keys);
            secrets.push_back(std::move(entry));
        }
        o["secrets"] = std::move(secrets);
        json::array problems(sp);
        for (const std::string& problem : c.secretProblems) problems.emplace_back(problem);
        o["secretProblems"] = std::move(problems);
        o["brokersRecreated"] =
            json::object({{"pending", c.brokersRecreatedPending}, {"ended", c.brokersRecreatedEnded}}, sp);
    }
    return o;
}

json::object kubeletJson(const StatusSnapshot& s, const json::storage_ptr& sp) {
    json::object o(sp);
    o["state"] = kubeletStateName(s.kubelet.state);
    o["kubeletSocket"] = s.kubelet.kubeletSocket;
    o["distribution"] = s.kubelet.distribution;
    o["layout"] = s.kubelet.layout;
    o["devicePluginDir"] = s.kubelet.devicePluginDir;
    o["podResourcesSocket"] = s.kubelet.podResourcesSocket;
    o["podResourcesError"] = stringOrNull(s.kubelet.podResourcesError, sp);
    o["pluginsOffered"] = s.kubelet.pluginsOffered;
    o["pluginsRegistered"] = s.kubelet.pluginsRegistered;
    return o;
}

json::object summaryJson(const StatusSnapshot& s, const json::storage_ptr& sp) {
    Counts total;
    for (const ConfigurationStatus& c : s.configurations) {
        const Counts n = count(c);
        total.instances += n.instances;
        total.healthy += n.healthy;
        total.unhealthy += n.unhealthy;
        total.withdrawn += n.withdrawn;
        total.slots += n.slots;
        total.slotsInUse += n.slotsInUse;
    }
    const Readiness ready = readiness(s);
    json::array reasons(sp);
    for (const std::string& r : ready.reasons) reasons.emplace_back(r);
    return json::object({{"text", summaryLine(s)},
                         {"configurations", s.configurations.size()},
                         {"instances", total.instances},
                         {"healthy", total.healthy},
                         {"unhealthy", total.unhealthy},
                         {"withdrawn", total.withdrawn},
                         {"slots", total.slots},
                         {"slotsInUse", total.slotsInUse},
                         {"configurationErrors", s.daemon.configurationErrors.size()},
                         {"ready", ready.ready},
                         {"notReadyReasons", std::move(reasons)}},
                        sp);
}

json::array eventsJson(const std::vector<StatusEvent>& events, const json::storage_ptr& sp) {
    json::array a(sp);
    for (const StatusEvent& e : events) {
        a.push_back(json::object({{"time", timeOrNull(e.timeMs, sp)},
                                  {"level", e.level},
                                  {"subject", e.subject},
                                  {"message", e.message}},
                                 sp));
    }
    return a;
}

}  // namespace

bool looksLikeSecret(std::string_view name) {
    const std::string n = upper(name);
    static constexpr std::array<std::string_view, 9> kAnywhere = {
        "PASSWORD", "PASSWD", "SECRET", "TOKEN", "CREDENTIAL", "APIKEY", "API_KEY", "PRIVATE", "COOKIE"};
    for (std::string_view word : kAnywhere) {
        if (n.find(word) != std::string::npos) return true;
    }
    // Short words only as a whole part of the name: USB_KEYBOARD is not a key.
    static constexpr std::array<std::string_view, 6> kParts = {"PASS", "PWD", "KEY", "AUTH", "PSK", "BEARER"};
    std::size_t start = 0;
    while (start <= n.size()) {
        std::size_t end = n.find_first_of("_-.", start);
        if (end == std::string::npos) end = n.size();
        const std::string_view part = std::string_view(n).substr(start, end - start);
        for (std::string_view word : kParts) {
            if (part == word) return true;
        }
        start = end + 1;
    }
    return false;
}

std::string withoutUserInfo(std::string_view value) {
    // scheme://user:password@host/... -> scheme://host/...
    // Split by hand, not with a URL parser: a password with an unencoded '@' or a space makes
    // the text no valid URL, and it must be hidden all the same.
    const std::size_t scheme = value.find("://");
    if (scheme == std::string_view::npos) return std::string(value);
    const std::size_t authorityStart = scheme + 3;
    const std::size_t authorityEnd = value.find_first_of("/?#", authorityStart);
    const std::string_view authority =
        value.substr(authorityStart, authorityEnd == std::string_view::npos ? std::string_view::npos
                                                                            : authorityEnd - authorityStart);
    const std::size_t at = authority.rfind('@');
    if (at == std::string_view::npos) return std::string(value);
    return std::string(value.substr(0, authorityStart)) + std::string(value.substr(authorityStart + at + 1));
}

std::string instanceHealth(const InstanceStatus& instance) {
    if (instance.present && instance.offered) return "healthy";
    if (instance.offered) return "unhealthy";
    return "withdrawn";
}

std::string instanceReason(const StatusSnapshot& snapshot, const ConfigurationStatus& configuration,
                           const InstanceStatus& instance) {
    std::size_t held = 0;
    for (const Slot& s : instance.slots) held += s.holderResource.empty() ? 0 : 1;
    if (!instance.present && instance.offered) {
        return "device gone (last seen " + isoTime(instance.lastSeenMs) +
               "); its slots are Unhealthy until it comes back or its grace period ends";
    }
    if (!instance.present) {
        return "device gone; withdrawn from the kubelet, kept while " +
               counted(held, "slot is", "slots are") + " still held by pods";
    }
    if (snapshot.kubelet.state == KubeletStatus::State::Waiting) {
        return "not offered: waiting for kubelet at " + snapshot.kubelet.kubeletSocket;
    }
    if (!instance.registered) return "registering with the kubelet";
    if (!configuration.probeError.empty()) return "discovery failing; this is what it saw last";
    return {};
}

std::string excludedText(const std::string& handler, const ExcludedDevice& excluded) {
    if (excluded.count == 1 && !excluded.id.empty())
        return deviceNoun(handler).first + " " + withoutUserInfo(excluded.id) +
               " is not offered: " + excluded.reason;
    // A counted entry stands for devices of any kind the handler looked at (udev: all of sysfs).
    return counted(excluded.count, "device", "devices") + (excluded.count == 1 ? " is" : " are") +
           " not offered: " + excluded.reason;
}

std::vector<std::string> configurationProblems(const StatusSnapshot& snapshot,
                                               const ConfigurationStatus& configuration) {
    std::vector<std::string> problems;
    if (!configuration.probeError.empty())
        problems.push_back("discovery failing: " + configuration.probeError);
    for (const std::string& list : configuration.listProblems)
        problems.push_back("device list not sent: " + list);
    bool anyPresent = false;
    for (const InstanceStatus& i : configuration.instances) anyPresent = anyPresent || i.present;
    std::size_t excluded = 0;  // devices the probe names: a counted entry is everything else it saw
    for (const ExcludedDevice& e : configuration.discovery.excluded) excluded += e.id.empty() ? 0 : e.count;
    if (!anyPresent && configuration.probeError.empty() && excluded > 0) {
        const auto [singular, plural] = deviceNoun(configuration.handler);
        problems.push_back("no " + plural + " offered: " + counted(excluded, singular, plural) + " seen, " +
                           (excluded == 1 ? "and it is" : "and each is") + " excluded (see why below)");
    } else if (!anyPresent && configuration.probeError.empty()) {
        problems.push_back("no " + deviceNoun(configuration.handler).second +
                           " found: none is connected, or none matches the configuration's filters");
    }
    if (snapshot.kubelet.state == KubeletStatus::State::Waiting) {
        problems.push_back("not offered: waiting for kubelet at " + snapshot.kubelet.kubeletSocket);
    } else if (!configuration.registered) {
        problems.push_back(configuration.resource + " is not registered with the kubelet yet");
    }
    return problems;
}

std::string kubeletStateName(KubeletStatus::State state) {
    switch (state) {
        case KubeletStatus::State::Waiting:
            return "waiting";
        case KubeletStatus::State::Registering:
            return "registering";
        case KubeletStatus::State::Connected:
            return "connected";
    }
    return "waiting";
}

std::string summaryLine(const StatusSnapshot& snapshot) {
    // Healthy devices by what people call them, in a stable order.
    std::map<std::string, std::pair<std::size_t, std::string>> byHandler;
    std::size_t slots = 0, inUse = 0;
    for (const ConfigurationStatus& c : snapshot.configurations) {
        auto& entry = byHandler[c.handler];
        entry.second = c.handler;
        const Counts n = count(c);
        entry.first += n.healthy;
        slots += n.slots;
        inUse += n.slotsInUse;
    }
    std::string devices;
    for (const auto& [handler, entry] : byHandler) {
        const auto [singular, plural] = deviceNoun(handler);
        devices += (devices.empty() ? "" : ", ") + counted(entry.first, singular, plural);
    }
    if (devices.empty()) devices = "no configurations";
    std::string line =
        devices + "; " + std::to_string(inUse) + " of " + counted(slots, "slot", "slots") + " in use; ";
    switch (snapshot.kubelet.state) {
        case KubeletStatus::State::Waiting:
            line += "waiting for kubelet at " + snapshot.kubelet.kubeletSocket;
            break;
        case KubeletStatus::State::Registering:
            line += "registering with kubelet (" + std::to_string(snapshot.kubelet.pluginsRegistered) +
                    " of " + std::to_string(snapshot.kubelet.pluginsOffered) + " plugins)";
            break;
        case KubeletStatus::State::Connected:
            line += "kubelet connected";
            break;
    }
    if (!snapshot.daemon.configurationErrors.empty())
        line += "; " + counted(snapshot.daemon.configurationErrors.size(), "configuration error",
                               "configuration errors");
    return line;
}

Readiness readiness(const StatusSnapshot& s) {
    Readiness r;
    if (!s.daemon.firstPassDone) r.reasons.push_back("the first discovery pass is not done");
    switch (s.kubelet.state) {
        case KubeletStatus::State::Waiting: {
            // Nothing can be offered; ready means everything else is as it should be.
            for (const ConfigurationStatus& c : s.configurations) {
                if (!c.probeError.empty())
                    r.reasons.push_back(c.name + ": discovery failing: " + c.probeError);
            }
            if (!s.daemon.configurationErrors.empty()) {
                r.reasons.push_back(counted(s.daemon.configurationErrors.size(), "configuration error",
                                            "configuration errors"));
            }
            break;
        }
        case KubeletStatus::State::Registering:
        case KubeletStatus::State::Connected:
            if (s.kubelet.pluginsRegistered < s.kubelet.pluginsOffered) {
                r.reasons.push_back(std::to_string(s.kubelet.pluginsRegistered) + " of " +
                                    std::to_string(s.kubelet.pluginsOffered) +
                                    " plugins registered with the kubelet");
            }
            break;
    }
    r.ready = r.reasons.empty();
    return r;
}

std::string isoTime(std::int64_t ms) {
    if (ms == 0) return {};
    return rfc3339(std::chrono::system_clock::time_point(std::chrono::milliseconds(ms)),
                   TimePrecision::Milliseconds);
}

std::string apiJson(std::string_view what, const StatusSnapshot& snapshot,
                    const std::vector<StatusEvent>& events) {
    // Every node of the document comes from one arena, freed at once: a document of a
    // thousand instances is tens of thousands of small allocations otherwise.
    json::monotonic_resource arena(64 * 1024);
    const json::storage_ptr sp(&arena);
    json::value document(sp);
    if (what == "status") {
        json::array configurations(sp);
        for (const ConfigurationStatus& c : snapshot.configurations)
            configurations.push_back(configurationJson(snapshot, c, true, sp));
        document = json::object({{"apiVersion", "v1"},
                                 {"summary", summaryJson(snapshot, sp)},
                                 {"daemon", daemonJson(snapshot, snapshot.daemon.nowMs, sp)},
                                 {"kubelet", kubeletJson(snapshot, sp)},
                                 {"cluster", clusterJson(snapshot, sp)},
                                 {"configurations", std::move(configurations)},
                                 {"events", eventsJson(events, sp)}},
                                sp);
    } else if (what == "daemon") {
        json::object o = daemonJson(snapshot, snapshot.daemon.nowMs, sp);
        o["kubelet"] = kubeletJson(snapshot, sp);
        o["cluster"] = clusterJson(snapshot, sp);
        o["summary"] = summaryJson(snapshot, sp);
        document = std::move(o);
    } else if (what == "configurations") {
        json::array a(sp);
        for (const ConfigurationStatus& c : snapshot.configurations)
            a.push_back(configurationJson(snapshot, c, false, sp));
        document = json::object({{"configurations", std::move(a)}}, sp);
    } else if (what == "instances") {
        json::array a(sp);
        json::array excluded(sp);
        for (const ConfigurationStatus& c : snapshot.configurations) {
            for (const InstanceStatus& i : c.instances) a.push_back(instanceJson(snapshot, c, i, sp));
            for (const ExcludedDevice& e : c.discovery.excluded) {
                json::object o = excludedJson(c, e, sp);
                o["configuration"] = c.name;
                excluded.push_back(std::move(o));
            }
        }
        document = json::object({{"instances", std::move(a)}, {"excluded", std::move(excluded)}}, sp);
    } else if (what == "slots") {
        json::array a(sp);
        for (const ConfigurationStatus& c : snapshot.configurations) {
            for (const InstanceStatus& i : c.instances) {
                for (const Slot& s : i.slots) {
                    json::object o = slotJson(i, s, sp);
                    o["instance"] = i.name;
                    o["configuration"] = c.name;
                    a.push_back(std::move(o));
                }
            }
        }
        document = json::object({{"slots", std::move(a)}}, sp);
    } else if (what == "probes") {
        json::array a(sp);
        for (const ConfigurationStatus& c : snapshot.configurations) {
            std::size_t present = 0;
            for (const InstanceStatus& i : c.instances) present += i.present ? 1 : 0;
            json::object o(sp);
            o["configuration"] = c.name;
            o["handler"] = c.handler;
            for (auto& [key, value] : probeJson(c, sp)) o[key] = std::move(value);
            o["devicesSeen"] = present;
            o["devicesExcluded"] = excludedCount(c);
            o["excluded"] = excludedArray(c, sp);
            a.push_back(std::move(o));
        }
        document = json::object({{"probes", std::move(a)}}, sp);
    } else if (what == "events") {
        document = json::object({{"events", eventsJson(events, sp)}}, sp);
    } else {
        return {};
    }
    return json::serialize(document);
}

}  // namespace devlet::status

namespace devlet::status {

SnapshotDocuments::SnapshotDocuments(std::shared_ptr<const StatusSnapshot> snapshot, Events events)
    : snapshot_(std::move(snapshot)), events_(std::move(events)) {}

const std::shared_ptr<const std::string>& SnapshotDocuments::kept(const std::string& key,
                                                                  const std::function<std::string()>& make) {
    auto it = kept_.find(key);
    if (it == kept_.end()) it = kept_.emplace(key, std::make_shared<const std::string>(make())).first;
    return it->second;
}

namespace {
// One part of a document, serialized from its own arena.
template <typename Build>
std::string serialized(Build build) {
    json::monotonic_resource arena(64 * 1024);
    const json::storage_ptr sp(&arena);
    return json::serialize(build(sp));
}
}  // namespace

DocumentParts SnapshotDocuments::api(std::string_view what, std::int64_t nowMs) {
    const StatusSnapshot& s = *snapshot_;
    if (what == "status" || what == "daemon") {
        // Everything but the daemon's clock is kept; the document is put together around it.
        auto summary = [&] { return serialized([&](auto& sp) { return summaryJson(s, sp); }); };
        auto kubelet = [&] { return serialized([&](auto& sp) { return kubeletJson(s, sp); }); };
        auto cluster = [&] { return serialized([&](auto& sp) { return clusterJson(s, sp); }); };
        std::string daemon = serialized([&](auto& sp) { return daemonJson(s, nowMs, sp); });
        if (what == "daemon") {
            daemon.pop_back();  // the closing brace: kubelet and summary go inside
            daemon.append(",\"kubelet\":").append(*kept("kubelet", kubelet));
            daemon.append(",\"cluster\":").append(*kept("cluster", cluster));
            daemon.append(",\"summary\":").append(*kept("summary", summary)).append("}");
            return {std::make_shared<const std::string>(std::move(daemon))};
        }
        const auto& head = kept("status.head", [&] {
            return "{\"apiVersion\":\"v1\",\"summary\":" + *kept("summary", summary) + ",\"daemon\":";
        });
        const auto& tail = kept("status.tail", [&] {
            const std::string configurations = serialized([&](auto& sp) {
                json::array a(sp);
                for (const ConfigurationStatus& c : s.configurations)
                    a.push_back(configurationJson(s, c, true, sp));
                return a;
            });
            const std::string events =
                serialized([&](auto& sp) { return eventsJson(events_(kEventsInStatus), sp); });
            std::string text;
            text.reserve(configurations.size() + events.size() + 1024);
            text.append(",\"kubelet\":").append(*kept("kubelet", kubelet));
            text.append(",\"cluster\":").append(*kept("cluster", cluster));
            text.append(",\"configurations\":").append(configurations);
            text.append(",\"events\":").append(events).append("}");
            return text;
        });
        return {head, std::make_shared<const std::string>(std::move(daemon)), tail};
    }
    if (what == "events") return {kept("events", [&] { return apiJson(what, s, events_(kEventsInEvents)); })};
    if (what != "configurations" && what != "instances" && what != "slots" && what != "probes") return {};
    return {kept(std::string(what), [&] { return apiJson(what, s, {}); })};
}

std::string joined(const DocumentParts& parts) {
    std::string text;
    for (const auto& part : parts) text.append(*part);
    return text;
}

}  // namespace devlet::status
