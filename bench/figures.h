#pragma once
// What every benchmark here computes from its samples and reads about a process: times in
// milliseconds, nearest-rank percentiles and CPU time from /proc. Benchmark thread only.

#include <chrono>
#include <vector>

#include <sys/types.h>

namespace devlet::bench {

double ms(std::chrono::steady_clock::duration duration);

// Nearest-rank percentile (p in 0..100) of samples; NaN when there are none.
double percentile(std::vector<double> samples, double p);

// CPU time (user + system) of every thread of a process so far; NaN when it is gone.
double cpuMs(pid_t pid);

}  // namespace devlet::bench
