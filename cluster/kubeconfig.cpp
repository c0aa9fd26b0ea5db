#include "cluster/kubeconfig.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <exception>

#include <boost/url/parse.hpp>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include "runtime/base64.h"
#include "runtime/strict_yaml.h"

namespace devlet::kube {

namespace {

using yaml::inQuotes;

// A field devlet cannot honour is refused rather than skipped: connecting without it
// would use other credentials or another server than the file says.
struct Unsupported {
    const char* key;
    const char* why;
};
constexpr std::array kUnsupportedCluster = {
    Unsupported{"proxy-url", "devlet connects to the server directly"},
    Unsupported{"tls-server-name", "devlet checks the certificate against the server's host name"},
};
constexpr std::array kUnsupportedUser = {
    Unsupported{"exec", "credential plugins are not run; use a token, a token file or a client certificate"},
    Unsupported{"auth-provider",
                "auth providers are not supported; use a token, a token file or a client "
                "certificate"},
    Unsupported{"username", "basic authentication is not supported; use a token or a client certificate"},
    Unsupported{"password", "basic authentication is not supported; use a token or a client certificate"},
    Unsupported{"as", "impersonation is not supported"},
};

class Reader {
public:
    Reader(const std::string& file, const std::string& baseDir) : file_(file), baseDir_(baseDir) {}

    KubeconfigLoad read(const YAML::Node& root) {
        Kubeconfig config;
        config.file = file_;
        if (!root.IsMap()) return fail("is not a kubeconfig (no mapping at the top)");
        const std::string current = scalar(root["current-context"]);
        if (current.empty()) return fail("has no current-context");
        config.context = current;
        auto context = named(root, "contexts", current, "context");
        if (!context) return failure_;
        const std::string clusterName = scalar((*context)["cluster"]);
        const std::string userName = scalar((*context)["user"]);
        if (clusterName.empty()) return fail("context " + inQuotes(current) + " names no cluster");
        auto cluster = named(root, "clusters", clusterName, "cluster");
        if (!cluster || !readCluster(*cluster, clusterName, config)) return failure_;
        if (userName.empty()) return fail("context " + inQuotes(current) + " names no user");
        auto user = named(root, "users", userName, "user");
        if (!user || !readUser(*user, userName, config)) return failure_;
        return {std::move(config), ""};
    }

    KubeconfigLoad fail(const std::string& message, int line = 0) {
        failure_ = {std::nullopt, file_ + (line > 0 ? ":" + std::to_string(line) : "") + " " + message};
        return failure_;
    }

private:
    static std::string scalar(const YAML::Node& node) {
        return node && node.IsScalar() ? node.Scalar() : std::string();
    }
    static int lineOf(const YAML::Node& node) { return yaml::lineOf(node, 0); }

    // The `field` mapping of the entry called `name` in the list `list`.
    std::optional<YAML::Node> named(const YAML::Node& root, const std::string& list, const std::string& name,
                                    const std::string& field) {
        YAML::Node entries = root[list];
        if (entries && !entries.IsSequence()) {
            fail(list + " must be a list", lineOf(entries));
            return std::nullopt;
        }
        if (entries) {
            for (const auto& entry : entries) {
                if (!entry.IsMap() || scalar(entry["name"]) != name) continue;
                YAML::Node value = entry[field];
                if (!value || !value.IsMap()) {
                    std::string why = list + " entry " + inQuotes(name);
                    why += " has no " + field + " mapping";
                    fail(why, lineOf(entry));
                    return std::nullopt;
                }
                return value;
            }
        }
        fail("has no entry " + inQuotes(name) + " in " + list);
        return std::nullopt;
    }

    bool refuseUnsupported(const YAML::Node& node, const std::string& where, const auto& table) {
        for (const auto& item : table) {
            if (node[item.key]) {
                fail(where + "." + item.key + ": " + item.why, lineOf(node[item.key]));
                return false;
            }
        }
        return true;
    }

    std::string resolve(const std::string& path) const {
        if (path.empty() || path.front() == '/') return path;
        return baseDir_ + "/" + path;
    }

    // PEM from a `-data` field (base64) or a file field; the data field wins as in kubectl.
    bool readPem(const YAML::Node& node, const std::string& where, const std::string& key, bool secret,
                 std::string& out) {
        const std::string dataKey = key + "-data";
        if (YAML::Node data = node[dataKey]) {
            auto decoded = base64Decode(scalar(data));
            if (!decoded || decoded->empty()) {
                fail(where + "." + dataKey + " is not base64", lineOf(data));
                return false;
            }
            out = std::move(*decoded);
            return true;
        }
        if (YAML::Node fileNode = node[key]) {
            const std::string path = resolve(scalar(fileNode));
            if (path.empty()) {
                fail(where + "." + key + " must name a file", lineOf(fileNode));
                return false;
            }
            if (secret) {
                if (std::string problem = secretFileProblem(path); !problem.empty()) {
                    fail(where + "." + key + ": " + problem, lineOf(fileNode));
                    return false;
                }
            }
            int error = 0;
            auto text = yaml::readText(path, error);
            if (!text) {
                fail(where + "." + key + ": cannot read " + path + ": " + std::strerror(error),
                     lineOf(fileNode));
                return false;
            }
            out = std::move(*text);
        }
        return true;
    }

    bool readCluster(const YAML::Node& cluster, const std::string& name, Kubeconfig& config) {
        const std::string where = "cluster " + inQuotes(name);
        if (YAML::Node skip = cluster["insecure-skip-tls-verify"]) {
            if (scalar(skip) == "true") {
                fail(where +
                         ".insecure-skip-tls-verify: refused; devlet always verifies the API server (give "
                         "certificate-authority or certificate-authority-data)",
                     lineOf(skip));
                return false;
            }
        }
        if (!refuseUnsupported(cluster, where, kUnsupportedCluster)) return false;
        config.server = scalar(cluster["server"]);
        if (!parseServer(config)) {
            fail(where + ".server " + inQuotes(config.server) + " must be https://HOST[:PORT]",
                 lineOf(cluster["server"]));
            return false;
        }
        return readPem(cluster, where, "certificate-authority", false, config.caPem);
    }

    // https://HOST[:PORT][/PREFIX]. A user name or password in the URL is refused (the
    // kubeconfig's user holds the credentials), and so are a query or a fragment, which would
    // end up inside every request's path.
    static bool parseServer(Kubeconfig& config) {
        const auto url = boost::urls::parse_uri(config.server);
        if (!url || url->scheme() != "https" || !url->has_authority() || url->has_userinfo() ||
            url->has_query() || url->has_fragment())
            return false;
        if (url->host_type() == boost::urls::host_type::ipvfuture) return false;
        config.host = url->encoded_host_address();  // an IPv6 address without its brackets
        if (config.host.empty()) return false;
        config.pathPrefix = url->encoded_path();
        while (!config.pathPrefix.empty() && config.pathPrefix.back() == '/') config.pathPrefix.pop_back();
        const std::string_view port = url->port();
        if (port.empty()) {
            config.port = "443";
        } else {
            if (port.size() > 5) return false;
            const int number = std::stoi(std::string(port));
            if (number < 1 || number > 65535) return false;
            config.port = std::string(port);
        }
        return true;
    }

    bool readUser(const YAML::Node& user, const std::string& name, Kubeconfig& config) {
        const std::string where = "user " + inQuotes(name);
        if (!refuseUnsupported(user, where, kUnsupportedUser)) return false;
        config.token = scalar(user["token"]);
        if (YAML::Node tokenFile = user["tokenFile"]) {
            config.tokenFile = resolve(scalar(tokenFile));
            if (config.tokenFile.empty()) {
                fail(where + ".tokenFile must name a file", lineOf(tokenFile));
                return false;
            }
            if (std::string problem = secretFileProblem(config.tokenFile); !problem.empty()) {
                fail(where + ".tokenFile: " + problem, lineOf(tokenFile));
                return false;
            }
        }
        if (!readPem(user, where, "client-certificate", false, config.clientCertificatePem)) return false;
        if (!readPem(user, where, "client-key", true, config.clientKeyPem)) return false;
        if (config.clientCertificatePem.empty() != config.clientKeyPem.empty()) {
            fail(where + " needs both client-certificate(-data) and client-key(-data)");
            return false;
        }
        if (config.token.empty() && config.tokenFile.empty() && config.clientCertificatePem.empty()) {
            fail(where + " has no credentials: give token, tokenFile or client-certificate and client-key");
            return false;
        }
        return true;
    }

    std::string file_;
    std::string baseDir_;
    KubeconfigLoad failure_;
};

std::string directoryOf(const std::string& path) {
    const auto slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

std::string trimmed(const std::string& text) {
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return "";
    const auto last = text.find_last_not_of(" \t\r\n");
    return text.substr(first, last - first + 1);
}

}  // namespace

std::string secretFileProblem(const std::string& path) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) return "cannot read " + path + ": " + std::strerror(errno);
    if (info.st_mode & (S_IRWXG | S_IRWXO)) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
        return path + " is open to group or others (mode " + mode + "); it holds credentials: chmod 600 it";
    }
    return "";
}

KubeconfigLoad parseKubeconfig(const std::string& text, const std::string& fileName,
                               const std::string& baseDir) {
    Reader reader(fileName, baseDir);
    try {
        return reader.read(yaml::load(text));
    } catch (const YAML::Exception& e) {
        return reader.fail("YAML syntax error: " + e.msg, e.mark.line >= 0 ? e.mark.line + 1 : 0);
    } catch (const std::exception& e) {
        return reader.fail(e.what());
    }
}

KubeconfigLoad loadKubeconfig(const std::string& path) {
    if (std::string problem = secretFileProblem(path); !problem.empty())
        return {std::nullopt, "kubeconfig: " + problem};
    int error = 0;
    auto text = yaml::readText(path, error);
    if (!text) return {std::nullopt, "kubeconfig: cannot read " + path + ": " + std::strerror(error)};
    return parseKubeconfig(*text, path, directoryOf(path));
}

BearerToken::BearerToken(const Kubeconfig& config) : inline_(config.token), file_(config.tokenFile) {}

std::optional<std::string> BearerToken::current(std::string& error) {
    // kubectl prefers the file when both are given.
    if (file_.empty()) return inline_;
    struct stat info {};
    if (::stat(file_.c_str(), &info) != 0) {
        error = "token file " + file_ + ": " + std::strerror(errno);
        stamp_ = {};
        return std::nullopt;
    }
    const Stamp now{static_cast<std::uint64_t>(info.st_dev), static_cast<std::uint64_t>(info.st_ino),
                    static_cast<std::uint64_t>(info.st_size),
                    static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec};
    if (now == stamp_ && !token_.empty()) return token_;
    int readError = 0;
    auto text = yaml::readText(file_, readError);
    if (!text) {
        error = "token file " + file_ + ": " + std::strerror(readError);
        stamp_ = {};
        return std::nullopt;
    }
    std::string token = trimmed(*text);
    if (token.empty()) {
        error = "token file " + file_ + " is empty";
        stamp_ = {};
        return std::nullopt;
    }
    token_ = std::move(token);
    stamp_ = now;
    return token_;
}

}  // namespace devlet::kube
