#include "probes/onvif/credentials.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

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
            error = where + "." + key + " must be a string";
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

}  // namespace

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
                    store.cameras_[lower(id)] = *credential;
                }
            } else {
                error = yaml::unknownKeyMessage(key, "the credentials", {"default", "cameras"});
            }
            if (!error.empty()) return Outcome::failure(where + ": " + error);
        }
    } catch (const YAML::Exception&) {
        return Outcome::failure(where + ": unexpected structure");
    }
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

CredentialStore CredentialStore::withDefault(Credential credential) {
    CredentialStore store;
    store.default_ = std::move(credential);
    return store;
}

std::optional<Credential> CredentialStore::find(const std::string& uuid, const std::string& ip,
                                                const std::string& mac) const {
    for (const std::string* key : {&uuid, &ip, &mac}) {
        if (key->empty()) continue;
        auto it = cameras_.find(lower(*key));
        if (it != cameras_.end()) return it->second;
    }
    return default_;
}

}  // namespace devlet::onvif
