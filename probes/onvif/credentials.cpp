#include "probes/onvif/credentials.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <utility>

#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include "probes/onvif/username_token.h"
#include "runtime/strict_yaml.h"

namespace devlet::onvif {

namespace {

std::string lower(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
    return text;
}

std::optional<Credential> readCredential(const YAML::Node& node, const std::string& where,
                                         std::string& error) {
    if (!node.IsMap()) {
        error = where + " must be a mapping with username and password";
        return std::nullopt;
    }
    Credential credential;
    for (const auto& entry : node) {
        const std::string key = entry.first.Scalar();
        if (!entry.second.IsScalar()) {
            error = where + ".";
            error += key + " must be a string";
            return std::nullopt;
        }
        if (key == "username") {
            credential.username = entry.second.Scalar();
        } else if (key == "password") {
            credential.password = entry.second.Scalar();
        } else {
            // The key, never the value: the value could be a password in the wrong place.
            error = yaml::unknownKeyMessage(key, where, {"username", "password"});
            return std::nullopt;
        }
    }
    if (credential.username.empty()) {
        error = where + " has no username";
        return std::nullopt;
    }
    return credential;
}

// "02:00:00:00:00:01" or "02-00-00-00-00-01", as GetNetworkInterfaces reports it after
// lower-casing (colons).
bool isMacAddress(const std::string& key) {
    if (key.size() != 17) return false;
    for (std::size_t i = 0; i < key.size(); ++i) {
        if (i % 3 == 2) {
            if (key[i] != ':' && key[i] != '-') return false;
        } else if (!std::isxdigit(static_cast<unsigned char>(key[i]))) {
            return false;
        }
    }
    return true;
}

std::string normalMac(std::string key) {
    std::replace(key.begin(), key.end(), '-', ':');
    return lower(std::move(key));
}

}  // namespace

std::optional<std::array<std::uint8_t, 16>> parseIpAddress(const std::string& text) {
    std::string address = text.substr(0, text.find('%'));
    if (address.starts_with("[") && address.ends_with("]")) address = address.substr(1, address.size() - 2);
    std::array<std::uint8_t, 16> bytes{};
    in_addr v4{};
    if (inet_pton(AF_INET, address.c_str(), &v4) == 1) {
        bytes[10] = bytes[11] = 0xff;
        std::memcpy(bytes.data() + 12, &v4, 4);
        return bytes;
    }
    if (inet_pton(AF_INET6, address.c_str(), bytes.data()) == 1) return bytes;
    return std::nullopt;
}

std::optional<IpNetwork> IpNetwork::parse(const std::string& text, std::string& error) {
    const auto slash = text.find('/');
    const std::string address = text.substr(0, slash);
    const bool v4 = address.find(':') == std::string::npos;
    auto bytes = address.find('%') == std::string::npos ? parseIpAddress(address) : std::nullopt;
    if (!bytes) {
        error = "\"" + text + "\" is not an IPv4 or IPv6 network (e.g. 192.0.2.0/24 or 2001:db8::/64)";
        return std::nullopt;
    }
    int prefix = v4 ? 32 : 128;
    if (slash != std::string::npos) {
        const std::string digits = text.substr(slash + 1);
        const bool numeric =
            !digits.empty() && digits.size() <= 3 &&
            std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); });
        prefix = numeric ? std::stoi(digits) : -1;
        if (prefix < 0 || prefix > (v4 ? 32 : 128)) {
            error = "\"" + text + "\": the prefix length must be 0 to " + (v4 ? "32" : "128");
            return std::nullopt;
        }
    }
    // IPv4 sits in the last 32 bits of the mapped form.
    const int bits = v4 ? 96 + prefix : prefix;
    IpNetwork network;
    network.text_ = text;
    for (int i = 0; i < 16; ++i) {
        const int kept = std::clamp(bits - 8 * i, 0, 8);
        const std::uint8_t mask = kept == 0 ? 0 : std::uint8_t(0xff << (8 - kept));
        network.first_[i] = (*bytes)[i] & mask;
        network.last_[i] = (*bytes)[i] | std::uint8_t(~mask);
    }
    return network;
}

IpNetwork IpNetwork::fromRange(const Ipv4Range& range) {
    IpNetwork network;
    network.text_ = range.text;
    network.first_[10] = network.first_[11] = network.last_[10] = network.last_[11] = 0xff;
    for (int i = 0; i < 4; ++i) {
        network.first_[12 + i] = std::uint8_t(range.first >> (24 - 8 * i));
        network.last_[12 + i] = std::uint8_t(range.last >> (24 - 8 * i));
    }
    return network;
}

bool IpNetwork::contains(const std::array<std::uint8_t, 16>& address) const {
    return first_ <= address && address <= last_;
}

Outcome CredentialStore::parse(const std::string& text, const std::string& where, CredentialStore& store) {
    store = CredentialStore();
    YAML::Node root;
    try {
        root = yaml::load(text);
    } catch (const YAML::Exception& e) {
        // The position only: yaml-cpp's message can quote the text, which holds passwords.
        return Outcome::failure(where + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML");
    }
    if (root.IsNull()) return Outcome::ok();
    if (!root.IsMap()) return Outcome::failure(where + ": must be a mapping with default and cameras");
    bool networksGiven = false;
    try {
        for (const auto& entry : root) {
            const std::string key = entry.first.Scalar();
            std::string error;
            if (key == "default") {
                store.default_ = readCredential(entry.second, "default", error);
            } else if (key == "cameras") {
                if (!entry.second.IsMap()) return Outcome::failure(where + ": cameras must be a mapping");
                for (const auto& camera : entry.second) {
                    const std::string id = camera.first.Scalar();
                    auto credential = readCredential(camera.second, "cameras." + id, error);
                    if (!credential) break;
                    if (auto address = parseIpAddress(id)) {
                        store.byAddress_[*address] = *credential;
                    } else {
                        store.cameras_[isMacAddress(id) ? normalMac(id) : lower(id)] = *credential;
                    }
                }
            } else if (key == "networks") {
                networksGiven = true;
                if (!entry.second.IsSequence())
                    return Outcome::failure(where +
                                            ": networks must be a list of networks (e.g. [192.0.2.0/24])");
                for (const auto& item : entry.second) {
                    if (!item.IsScalar())
                        return Outcome::failure(where + ": networks must be a list of strings");
                    auto network = IpNetwork::parse(item.Scalar(), error);
                    if (!network) {
                        error.insert(0, "networks: ");
                        break;
                    }
                    store.networks_.push_back(*network);
                }
            } else {
                error = yaml::unknownKeyMessage(key, "the credentials", {"default", "cameras", "networks"});
            }
            if (!error.empty()) return Outcome::failure((where + ": ").append(error));
        }
    } catch (const YAML::Exception&) {
        return Outcome::failure(where + ": unexpected structure");
    }
    if (!networksGiven && (store.default_ || !store.cameras_.empty()))
        return Outcome::failure(
            where +
            ": the default and the entries by uuid or MAC address are sent only to cameras inside the "
            "networks the file lists, and it has no networks key (add e.g. networks: [192.0.2.0/24]); "
            "the file is not used");
    return Outcome::ok();
}

Outcome CredentialStore::load(const std::string& path, CredentialStore& store) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0)
        return Outcome::failure("cannot read credentials file " + path + ": " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) return Outcome::failure("credentials file " + path + " is not a regular file");
    if ((st.st_mode & 077) != 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
        return Outcome::failure("credentials file " + path + " can be read by others (mode " + mode +
                                "): make it chmod 600 and owned by root; it is not used");
    }
    if (st.st_uid != 0 && st.st_uid != geteuid())
        return Outcome::failure("credentials file " + path + " belongs to another user; it is not used");
    int error = 0;
    std::optional<std::string> text = yaml::readText(path, error);
    if (!text) return Outcome::failure("cannot read credentials file " + path + ": " + std::strerror(error));
    return parse(*text, path, store);
}

Outcome CredentialStore::loadSystemdCredential(const std::string& name, CredentialStore& store) {
    const char* dir = std::getenv("CREDENTIALS_DIRECTORY");
    if (!dir || !*dir)
        return Outcome::failure(
            "credential " + name +
            " needs systemd credentials (LoadCredential=), and $CREDENTIALS_DIRECTORY is not set");
    return load(std::string(dir) + "/" + name, store);
}

CredentialStore CredentialStore::withDefault(Credential credential, std::vector<IpNetwork> networks,
                                             std::string scope) {
    CredentialStore store;
    store.default_ = std::move(credential);
    store.networks_ = std::move(networks);
    store.scope_ = std::move(scope);
    return store;
}

namespace {

// A JSON (or YAML) text Akri's lists are written in; a null node when it is not one. The
// parser's message is not kept: it can quote the text, which holds passwords.
YAML::Node loadQuietly(const std::string& text) {
    try {
        return yaml::load(text);
    } catch (const YAML::Exception&) {
        return YAML::Node();
    }
}

std::string scalarAt(const YAML::Node& map, const char* key) {
    const YAML::Node value = map[key];
    return value && value.IsScalar() ? value.Scalar() : std::string();
}

}  // namespace

CredentialStore CredentialStore::fromAkriProperties(const std::map<std::string, std::string>& properties,
                                                    std::vector<IpNetwork> networks, std::string scope,
                                                    std::vector<std::string>& notes) {
    CredentialStore store;
    store.networks_ = std::move(networks);
    store.scope_ = std::move(scope);
    std::set<std::string> used;
    auto property = [&](const std::string& name) -> const std::string* {
        auto it = properties.find(name);
        if (it == properties.end()) return nullptr;
        used.insert(name);
        return &it->second;
    };
    // The property names a list property holds (["a", "b"]).
    auto listed = [&](const char* list) {
        std::vector<std::string> names;
        const std::string* text = property(list);
        if (!text) return names;
        const YAML::Node node = loadQuietly(*text);
        if (!node.IsSequence()) {
            notes.push_back(std::string(list) + " is not a JSON list of property names; not used");
            return names;
        }
        for (const auto& item : node) {
            if (item.IsScalar()) names.push_back(item.Scalar());
        }
        return names;
    };
    auto camera = [](const std::string& uuid, const std::string& name) {
        return "camera " + uuid + " in " + name;
    };
    // Each named property: {"<uuid>": {...}}.
    auto entries = [&](const std::string& name, const char* list) {
        std::vector<std::pair<std::string, YAML::Node>> found;
        const std::string* text = property(name);
        if (!text) {
            notes.push_back(name + " (named by " + list + ") is not given; not used");
            return found;
        }
        const YAML::Node node = loadQuietly(*text);
        if (!node.IsMap()) {
            notes.push_back(name + " (named by " + list + ") is not a JSON object of cameras; not used");
            return found;
        }
        for (const auto& camera : node) {
            if (camera.first.IsScalar() && camera.second.IsMap())
                found.emplace_back(lower(camera.first.Scalar()), camera.second);
        }
        return found;
    };

    for (const std::string& name : listed("device_credential_list")) {
        for (const auto& [uuid, entry] : entries(name, "device_credential_list")) {
            Credential credential{scalarAt(entry, "username"), scalarAt(entry, "password")};
            if (credential.username.empty()) continue;
            const YAML::Node encoded = entry["base64encoded"];
            if (encoded && encoded.IsScalar() && encoded.Scalar() == "true") {
                const std::optional<std::string> decoded = base64Decode(credential.password);
                if (!decoded) notes.push_back("the password for " + camera(uuid, name) + " is not base64");
                credential.password = decoded.value_or("");
            }
            store.cameras_[uuid] = std::move(credential);
        }
    }
    for (const std::string& name : listed("device_credential_ref_list")) {
        for (const auto& [uuid, entry] : entries(name, "device_credential_ref_list")) {
            const std::string usernameRef = scalarAt(entry, "username_ref");
            const std::string* username = usernameRef.empty() ? nullptr : property(usernameRef);
            if (!username || username->empty()) {
                notes.push_back("the username for " + camera(uuid, name) + " (" +
                                (usernameRef.empty() ? "username_ref" : usernameRef) +
                                ") is not given; not used");
                continue;
            }
            const std::string passwordRef = scalarAt(entry, "password_ref");
            const std::string* password = passwordRef.empty() ? nullptr : property(passwordRef);
            store.cameras_[uuid] = Credential{*username, password ? *password : std::string()};
        }
    }
    for (const auto& [name, value] : properties) {
        if (!name.starts_with("username_") || name == "username_default") continue;
        std::string uuid = lower(name.substr(9));
        if (uuid.empty()) continue;
        used.insert(name);
        const std::string* password = property("password_" + name.substr(9));
        std::replace(uuid.begin(), uuid.end(), '_', '-');
        store.cameras_[uuid] = Credential{value, password ? *password : std::string()};
    }
    if (const std::string* username = property("username_default")) {
        const std::string* password = property("password_default");
        store.default_ = Credential{*username, password ? *password : std::string()};
    }
    for (const auto& [name, value] : properties) {
        if (!used.count(name)) notes.push_back(name + " is no credential the onvif handler reads; not used");
    }
    return store;
}

CredentialChoice CredentialStore::find(const std::string& uuid, const std::string& host,
                                       const std::string& mac) const {
    const auto address = parseIpAddress(host);
    if (address) {
        if (auto it = byAddress_.find(*address); it != byAddress_.end()) return {it->second, ""};
    }
    std::optional<Credential> candidate;
    for (const std::string& key : {lower(uuid), mac.empty() ? std::string() : normalMac(mac)}) {
        if (key.empty()) continue;
        if (auto it = cameras_.find(key); it != cameras_.end()) {
            candidate = it->second;
            break;
        }
    }
    if (!candidate) candidate = default_;
    if (!candidate) return {};
    const bool inside = address && std::any_of(networks_.begin(), networks_.end(),
                                               [&](const IpNetwork& n) { return n.contains(*address); });
    if (inside) return {candidate, ""};
    return {std::nullopt, "no credential for this address: outside " + scope_};
}

}  // namespace devlet::onvif
