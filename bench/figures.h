#pragma once
// What every benchmark here computes from its samples and reads about a process: times in
// milliseconds, nearest-rank percentiles and CPU time from /proc. Benchmark thread only.

#include <chrono>
#include <string>
#include <vector>

#include <sys/types.h>

namespace devlet::bench {

double ms(std::chrono::steady_clock::duration duration);

// Nearest-rank percentile (p in 0..100) of samples; NaN when there are none.
double percentile(std::vector<double> samples, double p);

// CPU time (user + system) of every thread of a process so far; NaN when it is gone.
double cpuMs(pid_t pid);

// A memory figure of /proc/PID/status ("VmHWM:   12345 kB") in MiB; NaN if absent.
double statusMiB(pid_t pid, const std::string& key);

}  // namespace devlet::bench
