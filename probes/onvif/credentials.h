#pragma once
// Camera credentials: a default and per-camera entries (by endpoint uuid, IP address or MAC
// address), read from a root-only YAML file or a systemd credential. The passwords stay in
// this object and in the worker calls that use them: never logged, never in an instance.
// Immutable after loading; shared read-only between the loop and the workers.
//
// A credential is sent only inside a scope the user wrote. Anyone on a segment can answer
// WS-Discovery with a real camera's uuid (or claim its MAC address) and an address of its
// own, so an entry keyed by IP address goes only to that address, and the entries by uuid or
// MAC address and the default go only to addresses inside the file's `networks`.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "probes/onvif/onvif_client.h"
#include "probes/onvif/onvif_details.h"
#include "runtime/outcome.h"

namespace devlet::onvif {

// An IP address as 16 bytes (IPv4 as its IPv4-mapped IPv6 form), so that both families
// compare alike. nullopt for anything that is not an address literal; a zone ("%eth0")
// is dropped.
std::optional<std::array<std::uint8_t, 16>> parseIpAddress(const std::string& text);

// An IPv4 or IPv6 network ("192.0.2.0/24", "2001:db8::/64"; an address alone is one host).
class IpNetwork {
public:
    static std::optional<IpNetwork> parse(const std::string& text, std::string& error);
    static IpNetwork fromRange(const Ipv4Range& range);
    bool contains(const std::array<std::uint8_t, 16>& address) const;
    const std::string& text() const { return text_; }

private:
    std::array<std::uint8_t, 16> first_{};
    std::array<std::uint8_t, 16> last_{};
    std::string text_;
};

// What find() chose for one contacted address: the credential, or why there is none although
// the store has an entry that would have matched outside its scope.
struct CredentialChoice {
    std::optional<Credential> credential;
    std::string withheld;  // for the status page; empty when a credential is chosen or none exists
};

class CredentialStore {
public:
    // Reads `path`; refuses a file that others than its owner can read, or that belongs to
    // another user than root or devlet's own.
    static Outcome load(const std::string& path, CredentialStore& store);
    // A systemd credential: $CREDENTIALS_DIRECTORY/<name>, same format.
    static Outcome loadSystemdCredential(const std::string& name, CredentialStore& store);
    // Parses the YAML text (the file's permissions are checked by load).
    static Outcome parse(const std::string& text, const std::string& where, CredentialStore& store);

    // A store with one default entry and no per-camera ones (`devlet probe onvif --user`),
    // sent only inside `networks`; `scope` names them for the status ("the --target ranges
    // and the directly attached subnets").
    static CredentialStore withDefault(Credential credential, std::vector<IpNetwork> networks,
                                       std::string scope);

    // Akri's credential properties (its ONVIF discovery handler's, read from Secrets by
    // `valueFrom` in cluster mode): device_credential_list, then device_credential_ref_list,
    // then username_<uuid>/password_<uuid> (uuid with '_' for '-'), each replacing an
    // earlier one for the same camera, and username_default/password_default. Sent only
    // inside `networks` (`scope` names them for the status), as the file's entries by uuid
    // and its default. `notes` gets, by property name only (never a value), what is not
    // used: properties that are no credential, lists that are not JSON, passwords that are
    // not base64 where the entry says they are.
    static CredentialStore fromAkriProperties(const std::map<std::string, std::string>& properties,
                                              std::vector<IpNetwork> networks, std::string scope,
                                              std::vector<std::string>& notes);

    // For a camera contacted at `host` (the host of the URL called): the entry keyed by that
    // IP address; else, when `host` is an address inside the networks, the entry for the
    // uuid, then the MAC address, then the default.
    CredentialChoice find(const std::string& uuid, const std::string& host, const std::string& mac) const;
    bool empty() const { return !default_ && cameras_.empty() && byAddress_.empty(); }
    std::size_t size() const { return cameras_.size() + byAddress_.size() + (default_ ? 1 : 0); }
    const std::vector<IpNetwork>& networks() const { return networks_; }

private:
    std::optional<Credential> default_;
    std::map<std::string, Credential> cameras_;                     // by uuid or MAC, lower case
    std::map<std::array<std::uint8_t, 16>, Credential> byAddress_;  // by IP address
    std::vector<IpNetwork> networks_;
    std::string scope_ = "the credentials file's networks";
};

}  // namespace devlet::onvif
