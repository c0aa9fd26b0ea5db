#pragma once
// Times as Kubernetes and devlet's status write them: RFC 3339 in UTC, to the second
// ("2026-11-25T15:04:05Z", the API's Time), the millisecond (".123Z", devlet's status and
// events) or the microsecond (".123456Z", the API's MicroTime). The one formatter.

#include <chrono>
#include <string>

namespace devlet {

enum class TimePrecision { Seconds, Milliseconds, Microseconds };

std::string rfc3339(std::chrono::system_clock::time_point when, TimePrecision precision);

}  // namespace devlet
