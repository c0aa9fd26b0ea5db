#pragma once
// `devlet status` and `devlet instances`: read the running daemon's status server
// (the same /api/v1 the page uses) and print a table, or the JSON with --json.

#include <string>
#include <vector>

namespace devlet {

// command: "status" or "instances"; args after it. Returns the exit code
// (0 done, 1 the daemon cannot be read, 2 usage).
int statusCommand(const std::string& command, const std::vector<std::string>& args);

}  // namespace devlet
