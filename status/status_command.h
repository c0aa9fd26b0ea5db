#pragma once
// `devlet status` and `devlet instances`: read the running daemon's status server
// (the same /api/v1 the page uses) and print a table, or the JSON with --json.

#include <string>
#include <vector>

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

// command: "status" or "instances"; args after it. Returns the exit code
// (0 done, 1 the daemon cannot be read, 2 usage).
int statusCommand(const std::string& command, const std::vector<std::string>& args);

}  // namespace devlet::status
