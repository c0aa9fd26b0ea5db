#pragma once
// What the benchmarks' command lines share: "--name N" options, the devlet binary of the
// same build, and the check that umockdev-wrapper runs a benchmark that needs a testbed.

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace devlet::bench {

// The whole of `text` as a decimal int; nullopt when it is not one (empty, other characters
// after the digits, out of range), where atoi would answer 0 or the digits before.
std::optional<int> parseInt(std::string_view text);

// Reads "--name N" pairs into `flags`. Returns the argument that is not such a pair (an
// unknown name, a name without its number, or a number that is not one), empty when all are.
std::string parseNumberFlags(int argc, char** argv, const std::map<std::string, int*>& flags);

// Runs the devlet of this build directory (DEVLET_BENCH_BINARY, which meson gives each
// benchmark that compiles this file) unless DEVLET_BINARY names another.
void useThisBuildsDevlet();

// Whether umockdev-wrapper runs this process: a umockdev testbed needs its preload library.
bool underUmockdevWrapper();

}  // namespace devlet::bench
