#pragma once
// The `onvif` handler's discoveryDetails: Akri's keys (ipAddresses, macAddresses, scopes,
// uuids as Include/Exclude lists, discoveryTimeoutSeconds) with Akri's meaning, plus
// devlet's optional additions (retransmission, interfaces, unicast targets, liveness,
// credentials). Pure: text in, values and problems out; any thread.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/discovery.h"

namespace devlet::onvif {

enum class FilterAction { Include, Exclude };

// Akri's FilterList: `action` defaults to Include when omitted.
struct FilterList {
    FilterAction action = FilterAction::Include;
    std::vector<std::string> items;
    bool operator==(const FilterList&) const = default;
};

// An IPv4 network probed with unicast WS-Discovery (a single address is a /32).
struct Ipv4Range {
    std::uint32_t first = 0;  // host byte order
    std::uint32_t last = 0;
    std::string text;  // as written
    std::uint64_t size() const { return std::uint64_t(last) - first + 1; }
    bool operator==(const Ipv4Range&) const = default;
};

struct OnvifDetails {
    std::optional<FilterList> ipAddresses;
    std::optional<FilterList> macAddresses;
    std::optional<FilterList> scopes;
    std::optional<FilterList> uuids;
    std::chrono::milliseconds discoveryTimeout{1000};  // Akri: discoveryTimeoutSeconds, default 1
    // devlet's additions
    int probeRetransmissions = 1;           // extra copies of each Probe (UDP loses datagrams)
    std::vector<std::string> interfaces;    // network interfaces to probe on; empty = the default route's
    bool ipv6 = false;                      // also WS-Discovery on [FF02::C]:3702
    std::vector<Ipv4Range> unicastTargets;  // cameras on other subnets
    int unicastConcurrency = 256;           // unicast probes sent per burst
    std::chrono::seconds rescanInterval{60};
    std::chrono::seconds livenessInterval{10};
    int missedChecks = 2;              // failed liveness checks before a camera is gone
    std::string credentialsFile;       // root-only YAML file with usernames and passwords
    std::string credential;            // a systemd credential name ($CREDENTIALS_DIRECTORY)
    bool offerUnauthenticated = true;  // offer cameras whose credentials are refused
};

inline constexpr std::uint64_t kMaxUnicastTargets = 65536;

// Parses discoveryDetails; problems carry lines relative to the text. Empty text is all
// defaults (Akri's handler needs no key either).
OnvifDetails parseOnvifDetails(const std::string& text, std::vector<DetailsProblem>& problems);

// A warning for every discoveryProperties entry, none of which the handler reads. Akri's
// credential forms (username_default and password_default, username_<uuid> and
// password_<uuid>, device_credential_list, device_credential_ref_list and the properties they
// name) are refused with where the credential goes instead: a configuration's text is often
// readable by others and may be shown, so devlet takes passwords only from a root-only
// credentials file. No warning quotes a value.
// `fromSecrets`: the properties given by valueFrom.secretKeyRef (read in cluster mode): a
// list given inline that names only those is used with them, and not warned about.
std::vector<PropertyWarning> onvifPropertyWarnings(const std::map<std::string, std::string>& properties,
                                                   const std::set<std::string>& fromSecrets = {});
// The properties Akri's credential store reads, for a probe in cluster mode: those read from
// Secrets, and the lists of property names given inline (names, not passwords).
std::map<std::string, std::string> akriCredentialProperties(
    const std::map<std::string, std::string>& inline_, const std::map<std::string, std::string>& fromSecrets);

// "192.0.2.7" or "192.0.2.0/24" (the network and broadcast addresses of a range larger
// than /31 are not probed). nullopt with `error` set when it is neither.
std::optional<Ipv4Range> parseIpv4Range(const std::string& text, std::string& error);

}  // namespace devlet::onvif
