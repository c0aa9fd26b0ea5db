#include "tests/support/daemon_process.h"

#include <cstdlib>
#include <thread>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace devlet::test {

DaemonProcess::DaemonProcess(std::filesystem::path root) : root_(std::move(root)) {
    std::filesystem::create_directories(devicePluginDir());
    std::filesystem::create_directories(podResourcesSocket().parent_path());
    std::filesystem::create_directories(confDir());
    if (!std::filesystem::exists(settingsFile())) writeFile(settingsFile(), "{}\n");
}

DaemonProcess::~DaemonProcess() {
    if (running()) kill9();
}

std::string DaemonProcess::binary() {
    const char* path = std::getenv("DEVLET_BINARY");
    return path ? path : "devlet";
}

namespace {

// The process's environment plus `extra` ("NAME=value"; a name given again replaces it).
std::vector<std::string> environmentWith(const std::vector<std::string>& extra) {
    std::vector<std::string> all;
    for (char** e = environ; *e; ++e) {
        const std::string entry = *e;
        const std::string name = entry.substr(0, entry.find('=') + 1);
        bool replaced = false;
        for (const auto& x : extra) replaced = replaced || x.rfind(name, 0) == 0;
        if (!replaced) all.push_back(entry);
    }
    all.insert(all.end(), extra.begin(), extra.end());
    return all;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
    std::vector<char*> out;
    for (auto& s : strings) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

}  // namespace

void DaemonProcess::start(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {binary(), "run", "--config", settingsFile().string(), "--node-name",
                                     "test-node", "--state-dir", stateDir().string(), "--conf-dir",
                                     confDir().string(), "--log-level", "debug",
                                     // Tests run side by side: a free port each, unless a test
                                     // names one (the last --listen wins).
                                     "--listen", "127.0.0.1:0"};
    std::vector<std::string> environment;
    if (hostRoot_.empty()) {
        args.insert(args.end(), {"--device-plugin-dir", devicePluginDir().string(), "--pod-resources-socket",
                                 podResourcesSocket().string()});
    } else {
        environment.push_back("DEVLET_HOST_ROOT=" + hostRoot_.string());
    }
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<std::string> env = environmentWith(environment);
    std::vector<char*> argv = pointers(args);
    std::vector<char*> envp = pointers(env);
    const int logFd = ::open(logFile().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    const pid_t parent = ::getpid();
    pid_ = fork();
    if (pid_ == 0) {
        // A test that crashes takes its daemon with it: no devlet is left running. (The
        // signal follows the thread that forked; tests start daemons from their main thread.)
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) _exit(127);  // gone before the line above
        dup2(logFd, 2);
        dup2(logFd, 1);
        execve(argv[0], argv.data(), envp.data());
        _exit(127);
    }
    ::close(logFd);
}

int DaemonProcess::stop(int signal) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, signal);
    return wait();
}

int DaemonProcess::wait() {
    if (pid_ <= 0) return -1;
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool DaemonProcess::waitForLog(const std::string& text, std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (log().find(text) != std::string::npos) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
}

CommandResult runDevlet(const std::vector<std::string>& args) {
    std::vector<std::string> all = {DaemonProcess::binary()};
    all.insert(all.end(), args.begin(), args.end());
    return runProgram(all);
}

CommandResult runProgram(const std::vector<std::string>& command,
                         const std::vector<std::string>& environment) {
    // Close-on-exec: a program another thread starts meanwhile must not hold this pipe
    // open, or the read below would wait for that program to end too.
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return {};
    std::vector<std::string> args = command;
    std::vector<std::string> env = environmentWith(environment);
    std::vector<char*> argv = pointers(args);
    std::vector<char*> envp = pointers(env);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        ::close(fds[0]);
        execve(argv[0], argv.data(), envp.data());
        _exit(127);
    }
    ::close(fds[1]);
    CommandResult result;
    char buffer[4096];
    for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) result.output.append(buffer, n);
    ::close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    result.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return result;
}

}  // namespace devlet::test
