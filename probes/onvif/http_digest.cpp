#include "probes/onvif/http_digest.h"

#include <cstring>

#include <strings.h>

#include "httpda.h"

namespace devlet::onvif {

namespace {

// Two hooks around gSOAP's plugin. Below it (outgoing headers): an Authorization header the
// plugin did not turn into a Digest one would be gSOAP's Basic one, the password in clear
// text, so it is never sent. Above it (incoming headers): the first Digest challenge of each
// answer is the plugin's to take, also when it names the realm already kept (a stale nonce).
const char kWatchId[] = "DEVLET-HTTP-DIGEST-WATCH/1.0";

struct Watch {
    HttpDigest* owner = nullptr;
    int (*sendHeader)(struct soap*, const char*, const char*) = nullptr;
    int (*parseHeader)(struct soap*, const char*, const char*) = nullptr;
    int (*initSend)(struct soap*) = nullptr;
};

Watch* watchOf(struct soap* soap) {
    return static_cast<Watch*>(soap_lookup_plugin(soap, kWatchId));
}

int guardedSendHeader(struct soap* soap, const char* key, const char* value) {
    Watch* watch = watchOf(soap);
    if (!watch) return SOAP_PLUGIN_ERROR;
    if (key && value && (!strcasecmp(key, "Authorization") || !strcasecmp(key, "Proxy-Authorization")) &&
        !strncasecmp(value, "Basic", 5))
        return SOAP_OK;
    return watch->sendHeader(soap, key, value);
}

int watchedParseHeader(struct soap* soap, const char* key, const char* value) {
    Watch* watch = watchOf(soap);
    if (!watch) return SOAP_PLUGIN_ERROR;
    if (watch->owner && key && value) watch->owner->sawHeader(key, value);
    return watch->parseHeader(soap, key, value);
}

// httpda.c starts an MD5 of the body (for qop=auth-int) at the start of every send with a
// user id set, the counting pass of a message included, and ends it only when it writes
// an auth-int header or is deleted: the digest of the earlier pass would leak. devlet
// answers only qop=auth, so a digest left over is dropped before the next one starts.
int cleanInitSend(struct soap* soap) {
    Watch* watch = watchOf(soap);
    if (!watch) return SOAP_PLUGIN_ERROR;
    if (auto* data = static_cast<http_da_data*>(soap_lookup_plugin(soap, http_da_id));
        data && data->smd_data.ctx)
        soap_smd_cleanup(soap, &data->smd_data);
    return watch->initSend ? watch->initSend(soap) : SOAP_OK;
}

void deleteWatch(struct soap*, struct soap_plugin* plugin) {
    delete static_cast<Watch*>(plugin->data);
}

int registerWatch(struct soap* soap, struct soap_plugin* plugin, void* owner) {
    auto* watch = new Watch;
    watch->owner = static_cast<HttpDigest*>(owner);
    watch->sendHeader = soap->fposthdr;
    soap->fposthdr = guardedSendHeader;
    plugin->id = kWatchId;
    plugin->data = watch;
    plugin->fcopy = nullptr;
    plugin->fdelete = deleteWatch;
    return SOAP_OK;
}

bool equalsIgnoringCase(const char* a, const char* b) {
    return a && b && strcasecmp(a, b) == 0;
}

// For messages: what a camera sent, short and printable.
std::string shown(const char* value) {
    std::string text = value ? value : "";
    if (text.size() > 32) text.resize(32);
    for (char& c : text) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
    }
    return text;
}

// Whether a qop list ("auth,auth-int") offers plain "auth".
bool offersAuth(const char* qop) {
    std::string list = qop;
    std::size_t start = 0;
    while (start <= list.size()) {
        std::size_t end = list.find(',', start);
        if (end == std::string::npos) end = list.size();
        std::string token = list.substr(start, end - start);
        token.erase(0, token.find_first_not_of(" \t"));
        token.erase(token.find_last_not_of(" \t") + 1);
        if (equalsIgnoringCase(token.c_str(), "auth")) return true;
        start = end + 1;
    }
    return false;
}

}  // namespace

HttpDigest::HttpDigest(struct soap* soap) : soap_(soap), info_(std::make_unique<http_da_info>()) {
    registered_ = soap_register_plugin_arg(soap_, registerWatch, this) == SOAP_OK &&
                  soap_register_plugin(soap_, http_da) == SOAP_OK;
    if (Watch* watch = watchOf(soap_); registered_ && watch) {
        watch->parseHeader = soap_->fparsehdr;
        soap_->fparsehdr = watchedParseHeader;
        watch->initSend = soap_->fprepareinitsend;
        soap_->fprepareinitsend = cleanInitSend;
    } else {
        registered_ = false;
    }
}

HttpDigest::~HttpDigest() {
    forget();
    if (Watch* watch = watchOf(soap_)) watch->owner = nullptr;
}

void HttpDigest::forget() {
    if (answered_) http_da_release(soap_, info_.get());
    answered_ = false;
    soap_->userid = nullptr;
    soap_->passwd = nullptr;
}

void HttpDigest::expectChallenge() {
    challenged_ = false;
    firstChallenge_ = true;
}

void HttpDigest::sawHeader(const char* key, const char* value) {
    if (strcasecmp(key, "WWW-Authenticate") != 0 || strncasecmp(value, "Digest", 6) != 0) return;
    challenged_ = true;
    if (firstChallenge_) soap_->authrealm = nullptr;
    firstChallenge_ = false;
}

bool HttpDigest::answer(const Credential& credential, std::string& problem) {
    auto* data = static_cast<http_da_data*>(soap_lookup_plugin(soap_, http_da_id));
    if (!registered_ || !data) {
        problem = "HTTP Digest is not available (gSOAP's plugin did not register)";
        return false;
    }
    if (!challenged_ || !soap_->authrealm || !data->nonce) {
        problem =
            "the camera's HTTP Digest challenge has no realm or nonce, or an algorithm devlet does not "
            "support";
        return false;
    }
    const char* algorithm = data->alg ? data->alg : "MD5";
    if (!equalsIgnoringCase(algorithm, "MD5") && !equalsIgnoringCase(algorithm, "MD5-sess") &&
        !equalsIgnoringCase(algorithm, "SHA-256") && !equalsIgnoringCase(algorithm, "SHA-256-sess")) {
        problem = "the camera asks for HTTP Digest with algorithm " + shown(algorithm) +
                  ", which devlet does not support (MD5 and SHA-256)";
        return false;
    }
    if (data->qop) {
        // The plugin would pick auth-int where it is offered; its body digest is MD5 only.
        if (!offersAuth(data->qop)) {
            problem = "the camera asks for HTTP Digest with qop=" + shown(data->qop) +
                      ", which devlet does not support (qop=auth)";
            return false;
        }
        data->qop = soap_strdup(soap_, "auth");
    }
    algorithm_ = shown(algorithm);
    // Releasing the previous store clears the plugin's copy of the challenge: kept aside.
    const std::string realm = soap_->authrealm;
    const char* nonce = data->nonce;
    const char* opaque = data->opaque;
    const char* qop = data->qop;
    const char* alg = data->alg;
    forget();
    data->nonce = const_cast<char*>(nonce);
    data->opaque = const_cast<char*>(opaque);
    data->qop = const_cast<char*>(qop);
    data->alg = const_cast<char*>(alg);
    http_da_save(soap_, info_.get(), realm.c_str(), credential.username.c_str(), credential.password.c_str());
    answered_ = true;
    return true;
}

void HttpDigest::sending(bool on) {
    if (on && answered_) {
        http_da_restore(soap_, info_.get());
    } else {
        soap_->userid = nullptr;
        soap_->passwd = nullptr;
    }
}

}  // namespace devlet::onvif
