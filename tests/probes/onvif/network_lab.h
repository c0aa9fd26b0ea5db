#pragma once
// Network namespaces for the onvif tests: a client namespace with a bridge (192.0.2.1/24 and
// 2001:db8::1/64, multicast snooping off), one namespace per simulated camera behind a veth
// on that bridge (192.0.2.<host>, 2001:db8::<host>),
// and a router namespace in front of a second subnet (198.51.100.0/24) that multicast does
// not reach. Everything is removed on destruction, also after a failed test. Needs root.

#include <string>
#include <vector>

#include <sys/types.h>

namespace devlet::onvif::test {

class NetworkLab {
public:
    NetworkLab();
    ~NetworkLab();
    NetworkLab(const NetworkLab&) = delete;
    NetworkLab& operator=(const NetworkLab&) = delete;

    // Empty when the lab is up; else why not (no root, no `ip`, namespaces refused).
    const std::string& unavailable() const { return unavailable_; }
    // Empty when the namespaces exist and were set up as described; else what failed.
    const std::string& broken() const { return broken_; }

    // A namespace on the segment with addresses 192.0.2.<host> and 2001:db8::<host>; returns
    // its name.
    std::string addCameraHost(int host);
    // A camera host's new DHCP lease: its IPv4 address 192.0.2.<from> becomes 192.0.2.<to>
    // (its IPv6 address stays). The camera learns of it by SIGUSR2.
    bool readdressCameraHost(const std::string& ns, int from, int to);
    // A namespace behind the router with address 198.51.100.<host>.
    std::string addRemoteHost(int host);

    // Starts `argv` inside namespace `ns`; returns its pid.
    pid_t start(const std::string& ns, const std::vector<std::string>& argv);
    void terminate(pid_t pid);  // SIGTERM, then waits
    void kill(pid_t pid);       // SIGKILL, then waits

    // Moves the calling thread into the client namespace until leave(); threads it
    // creates meanwhile live there too.
    bool enter();
    void leave();

    // Runs a shell command line inside the client namespace; returns its output.
    std::string output(const std::string& commandLine);

    static constexpr const char* kBridge = "br0";

private:
    bool run(const std::string& command);
    std::string prefix_;
    std::string client_;
    std::string router_;
    std::vector<std::string> namespaces_;
    std::vector<pid_t> processes_;
    std::string unavailable_;
    std::string broken_;
    int savedNamespace_ = -1;
    int next_ = 0;
};

}  // namespace devlet::onvif::test
