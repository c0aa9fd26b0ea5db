#pragma once
// Camera credentials: a default and per-camera entries (by endpoint uuid, IP address or MAC
// address), read from a root-only YAML file or a systemd credential. The passwords stay in
// this object and in the worker calls that use them: never logged, never in an instance.
// Immutable after loading; shared read-only between the loop and the workers.

#include <map>
#include <optional>
#include <string>

#include "probes/onvif/onvif_client.h"
#include "runtime/outcome.h"

namespace devlet::onvif {

class CredentialStore {
public:
    // Reads `path`; refuses a file that others than its owner can read, or that belongs to
    // another user than root or devlet's own.
    static Outcome load(const std::string& path, CredentialStore& store);
    // A systemd credential: $CREDENTIALS_DIRECTORY/<name>, same format.
    static Outcome loadSystemdCredential(const std::string& name, CredentialStore& store);
    // Parses the YAML text (the file's permissions are checked by load).
    static Outcome parse(const std::string& text, const std::string& where, CredentialStore& store);

    // A store with one default entry and no per-camera ones (`devlet probe onvif --user`).
    static CredentialStore withDefault(Credential credential);

    // The entry for the uuid, the IP address or the MAC address (first that has one), else
    // the default.
    std::optional<Credential> find(const std::string& uuid, const std::string& ip,
                                   const std::string& mac) const;
    bool empty() const { return !default_ && cameras_.empty(); }
    std::size_t size() const { return cameras_.size() + (default_ ? 1 : 0); }

private:
    std::optional<Credential> default_;
    std::map<std::string, Credential> cameras_;  // keys lower case
};

}  // namespace devlet::onvif
