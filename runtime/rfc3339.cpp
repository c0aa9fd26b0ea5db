#include "runtime/rfc3339.h"

#include <cstdio>
#include <ctime>

namespace devlet {

std::string rfc3339(std::chrono::system_clock::time_point when, TimePrecision precision) {
    using namespace std::chrono;
    const auto micros = duration_cast<microseconds>(when.time_since_epoch()).count();
    // Floor division: a time before 1970 still names the second it falls in.
    long long seconds = micros / 1000000;
    long long fraction = micros % 1000000;
    if (fraction < 0) {
        fraction += 1000000;
        --seconds;
    }
    const std::time_t t = static_cast<std::time_t>(seconds);
    std::tm utc{};
    ::gmtime_r(&t, &utc);
    char text[64];
    int n = std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d", utc.tm_year + 1900, utc.tm_mon + 1,
                          utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec);
    if (precision == TimePrecision::Milliseconds)
        n += std::snprintf(text + n, sizeof text - n, ".%03lld", fraction / 1000);
    else if (precision == TimePrecision::Microseconds)
        n += std::snprintf(text + n, sizeof text - n, ".%06lld", fraction);
    return std::string(text, static_cast<std::size_t>(n)) + "Z";
}

}  // namespace devlet
