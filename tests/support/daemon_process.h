#pragma once
// The real devlet binary as a child process for integration tests: its own temp
// tree (device-plugin dir, PodResources socket, state dir, conf dir), its stderr
// in a log file the test can read. Owns the child; kills it on destruction.

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <sys/types.h>

#include "tests/support/temp_dir.h"

namespace devlet::test {

class DaemonProcess {
public:
    // root holds dp/ (device plugins), pr/kubelet.sock, state/, conf.d/, devlet.yaml.
    explicit DaemonProcess(std::filesystem::path root);
    ~DaemonProcess();

    // The devlet binary under test (from DEVLET_BINARY, set by meson).
    static std::string binary();

    std::filesystem::path devicePluginDir() const { return root_ / "dp"; }
    std::filesystem::path podResourcesSocket() const { return root_ / "pr" / "kubelet.sock"; }
    std::filesystem::path stateDir() const { return root_ / "state"; }
    std::filesystem::path confDir() const { return root_ / "conf.d"; }
    std::filesystem::path settingsFile() const { return root_ / "devlet.yaml"; }
    std::filesystem::path logFile() const { return root_ / "devlet.log"; }

    // Starts `devlet run` with every path pointing into root (extra args appended).
    void start(const std::vector<std::string>& extra = {});
    // From now on, start() leaves the kubelet paths to devlet's detection below hostRoot
    // (DEVLET_HOST_ROOT) instead of pointing them into root.
    void detectKubeletPathsBelow(std::filesystem::path hostRoot) { hostRoot_ = std::move(hostRoot); }
    // Sends a signal and waits for the exit; returns the exit status (or 128 + signal).
    int stop(int signal = 15);
    void kill9() { stop(9); }
    // Waits for the daemon to exit by itself; returns the exit status.
    int wait();
    bool running() const { return pid_ > 0; }
    pid_t pid() const { return pid_; }
    std::string log() const { return readFile(logFile()); }
    // Waits until the log contains text (re-reading it; the daemon writes as it goes).
    bool waitForLog(const std::string& text, std::chrono::milliseconds timeout) const;

private:
    std::filesystem::path root_;
    std::filesystem::path hostRoot_;  // empty: kubelet paths given on the command line
    pid_t pid_ = -1;
};

// Runs the devlet binary with args to completion; returns its exit code and output.
struct CommandResult {
    int exitCode = -1;
    std::string output;  // stdout and stderr together
};
CommandResult runDevlet(const std::vector<std::string>& args);
// Runs argv[0] (a path) to completion with the test's environment plus `environment`
// ("NAME=value" each); returns its exit code and output.
CommandResult runProgram(const std::vector<std::string>& argv,
                         const std::vector<std::string>& environment = {});

}  // namespace devlet::test
