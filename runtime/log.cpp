#include "runtime/log.h"

#include <atomic>
#include <cstdio>

namespace devlet {

namespace {
std::atomic<int> currentLevel{static_cast<int>(LogLevel::Info)};
}

bool parseLogLevel(std::string_view name, LogLevel& level) {
    if (name == "error")
        level = LogLevel::Error;
    else if (name == "warning" || name == "warn")
        level = LogLevel::Warning;
    else if (name == "info")
        level = LogLevel::Info;
    else if (name == "debug")
        level = LogLevel::Debug;
    else
        return false;
    return true;
}

void setLogLevel(LogLevel level) {
    currentLevel = static_cast<int>(level);
}

bool logEnabled(LogLevel level) {
    return static_cast<int>(level) <= currentLevel.load();
}

LogLine::LogLine(LogLevel level, std::string_view category) : enabled_(logEnabled(level)) {
    if (enabled_) stream_ << '<' << static_cast<int>(level) << '>' << category << ": ";
}

LogLine::~LogLine() {
    if (!enabled_) return;
    stream_ << '\n';
    const std::string line = stream_.str();
    // One write per line so lines from gRPC threads never interleave mid-line.
    std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace devlet
