#include "bench/command_line.h"

#include <charconv>
#include <cstdlib>
#include <cstring>

namespace devlet::bench {

std::optional<int> parseInt(std::string_view text) {
    int value = 0;
    const auto [stop, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || stop != text.data() + text.size()) return std::nullopt;
    return value;
}

std::string parseNumberFlags(int argc, char** argv, const std::map<std::string, int*>& flags) {
    for (int i = 1; i < argc; ++i) {
        auto flag = flags.find(argv[i]);
        if (flag == flags.end() || i + 1 >= argc) return argv[i];
        const std::optional<int> value = parseInt(argv[++i]);
        if (!value) return argv[i];
        *flag->second = *value;
    }
    return {};
}

void useThisBuildsDevlet() {
#ifdef DEVLET_BENCH_BINARY
    setenv("DEVLET_BINARY", DEVLET_BENCH_BINARY, 0);
#endif
}

bool underUmockdevWrapper() {
    const char* preload = std::getenv("LD_PRELOAD");
    return preload && std::strstr(preload, "libumockdev-preload");
}

}  // namespace devlet::bench
