#pragma once
// HTTP Digest authentication (RFC 7616: MD5 and SHA-256, qop=auth; RFC 2069 cameras that
// offer no qop) of one gSOAP context's calls, through gSOAP's httpda plugin. Cameras that
// answer 401 with `WWW-Authenticate: Digest` want it instead of, or besides, a UsernameToken.
// The password is held by the plugin's store only while this object lives; neither it nor a
// header is logged. One object per context, on the thread that makes its calls.

#include <memory>
#include <string>

#include "probes/onvif/onvif_client.h"

struct soap;          // NOLINT(readability-identifier-naming): gSOAP's name
struct http_da_info;  // NOLINT(readability-identifier-naming): gSOAP's name

namespace devlet::onvif {

class HttpDigest {
public:
    // Registers the plugin (and a watch for challenges) on `soap`, which must outlive this.
    explicit HttpDigest(struct soap* soap);
    ~HttpDigest();
    HttpDigest(const HttpDigest&) = delete;
    HttpDigest& operator=(const HttpDigest&) = delete;

    // Before each call: a Digest challenge in its answer replaces the one kept.
    void expectChallenge();
    // The last answer asked for HTTP Digest (a 401 with a Digest challenge).
    bool challenged() const { return challenged_; }
    // Keeps the credential for the challenge's realm, so that calls carry an Authorization
    // header (while sending(true)). False, with `problem` set, when the challenge asks for
    // what devlet does not do (another algorithm, qop=auth-int only).
    bool answer(const Credential& credential, std::string& problem);
    bool answered() const { return answered_; }
    // Whether the next calls carry the Authorization header (after answer()).
    void sending(bool on);
    // The algorithm of the challenge answered ("MD5", "SHA-256"), for the status page.
    const std::string& algorithm() const { return algorithm_; }

    // Called by the challenge watch on each header of an answer.
    void sawHeader(const char* key, const char* value);

private:
    void forget();
    struct soap* soap_;
    std::unique_ptr<http_da_info> info_;  // the plugin's store: realm, user, password, nonce
    bool registered_ = false;
    bool challenged_ = false;
    bool firstChallenge_ = true;  // of the current answer
    bool answered_ = false;
    std::string algorithm_;
};

}  // namespace devlet::onvif
