#include "bench/command_line.h"

#include <cstdlib>
#include <cstring>

namespace devlet::bench {

std::string parseNumberFlags(int argc, char** argv, const std::map<std::string, int*>& flags) {
    for (int i = 1; i < argc; ++i) {
        auto flag = flags.find(argv[i]);
        if (flag == flags.end() || i + 1 >= argc) return argv[i];
        *flag->second = std::atoi(argv[++i]);
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
