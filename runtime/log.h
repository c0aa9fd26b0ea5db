#pragma once
// Per-component log lines on stderr with the <N> priority prefix journald reads
// (SyslogLevelPrefix); no timestamps, journald adds them. Never log secrets.

#include <sstream>
#include <string>
#include <string_view>

namespace devlet {

enum class LogLevel { Error = 3, Warning = 4, Info = 6, Debug = 7 };

// Returns false for an unknown name ("error", "warning", "info", "debug").
bool parseLogLevel(std::string_view name, LogLevel& level);
void setLogLevel(LogLevel level);
bool logEnabled(LogLevel level);

class LogLine {
public:
    LogLine(LogLevel level, std::string_view category);
    ~LogLine();
    LogLine(const LogLine&) = delete;
    LogLine& operator=(const LogLine&) = delete;
    template <typename T>
    LogLine& operator<<(const T& value) {
        if (enabled_) stream_ << value;
        return *this;
    }

private:
    bool enabled_;
    std::ostringstream stream_;
};

// One per component: `Log log{"inventory"}; log.info() << "…";`
class Log {
public:
    explicit constexpr Log(std::string_view category) : category_(category) {}
    LogLine error() const { return LogLine(LogLevel::Error, category_); }
    LogLine warning() const { return LogLine(LogLevel::Warning, category_); }
    LogLine info() const { return LogLine(LogLevel::Info, category_); }
    LogLine debug() const { return LogLine(LogLevel::Debug, category_); }

private:
    std::string_view category_;
};

}  // namespace devlet
