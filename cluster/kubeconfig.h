#pragma once
// The kubeconfig a node talks to the API server with: the current context's server, the
// CA that server's certificate must chain to, and the credentials (a bearer token, a
// token file, or a client certificate). Plain values; reading is stateless, any thread.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace devlet::kube {

struct Kubeconfig {
    std::string file;        // where it was read from, for messages
    std::string context;     // the current context's name
    std::string server;      // as written: https://HOST[:PORT][/PREFIX]
    std::string host;        // HOST without brackets (also the name the certificate must carry)
    std::string port;        // "443" when the URL names none
    std::string pathPrefix;  // a prefix before /api (a proxy's), usually empty
    std::string caPem;       // empty: the system's trusted CAs
    std::string token;       // inline token; never logged
    std::string tokenFile;   // absolute; re-read when it changes (tokens rotate)
    std::string clientCertificatePem;
    std::string clientKeyPem;  // never logged
};

struct KubeconfigLoad {
    std::optional<Kubeconfig> config;  // empty when unusable
    std::string error;                 // why, naming the file and the field
};

// Refuses a file readable or writable by group or others: it holds credentials.
KubeconfigLoad loadKubeconfig(const std::string& path);
// `baseDir` resolves relative file names as kubectl does (the kubeconfig's directory).
KubeconfigLoad parseKubeconfig(const std::string& text, const std::string& fileName,
                               const std::string& baseDir);

// Why a file of secrets is too open (mode bits for group or others), or empty.
std::string secretFileProblem(const std::string& path);

// A bearer token from the kubeconfig or its token file. The file is re-read when its
// identity, size or modification time changes, so a rotated token is used from the next
// request on. Used on the loop thread.
class BearerToken {
public:
    explicit BearerToken(const Kubeconfig& config);
    // The current token (empty when the kubeconfig uses a client certificate), or nullopt
    // with `error` set when the token file cannot be read.
    std::optional<std::string> current(std::string& error);
    // Forget what was read: the next call reads the file again (after a 401).
    void invalidate() { stamp_ = {}; }
    // A renewed token in place of the inline one (TokenRenewal); from the next request on.
    void replace(std::string token) { inline_ = std::move(token); }

private:
    struct Stamp {
        std::uint64_t device = 0, inode = 0, size = 0;
        std::int64_t modifiedNs = 0;
        bool operator==(const Stamp&) const = default;
    };
    std::string inline_;
    std::string file_;
    std::string token_;
    Stamp stamp_;
};


}  // namespace devlet::kube
