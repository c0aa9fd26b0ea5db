#pragma once
// The status server's client side: one GET to a running daemon, for `devlet status`
// and `devlet instances` (daemon/) and for tests. Beast stays behind this header.

#include <string>

namespace devlet::status {

struct HttpAnswer {
    int status = 0;  // 0: no answer (see error)
    std::string body;
    std::string error;
};

// One GET over HTTP/1.1 to ADDRESS:PORT (a listen address; 0.0.0.0 and :: mean this
// host's loopback), with an optional bearer token; gives up after timeoutMs.
HttpAnswer httpGet(const std::string& listen, const std::string& target, const std::string& token,
                   int timeoutMs = 5000);

}  // namespace devlet::status
