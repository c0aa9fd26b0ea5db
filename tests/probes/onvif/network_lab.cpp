#include "tests/probes/onvif/network_lab.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace devlet::onvif::test {

NetworkLab::NetworkLab() {
    if (geteuid() != 0) {
        unavailable_ = "network namespaces need root";
        return;
    }
    prefix_ = "dvo" + std::to_string(getpid() % 100000);
    client_ = prefix_ + "c";
    if (!run("ip netns add " + client_)) {
        unavailable_ = "cannot create a network namespace (ip netns add failed)";
        return;
    }
    namespaces_.push_back(client_);
    const std::string c = "ip -n " + client_ + " ";
    bool ok = run(c + "link set lo up") && run(c + "link add br0 type bridge mcast_snooping 0") &&
              run(c + "addr add 192.0.2.1/24 dev br0") && run(c + "addr add 2001:db8::1/64 dev br0 nodad") &&
              run(c + "link set br0 up") && run(c + "route add 224.0.0.0/4 dev br0");
    // The router: one leg on the bridge, one towards the remote subnet.
    router_ = prefix_ + "r";
    ok = ok && run("ip netns add " + router_);
    if (ok) namespaces_.push_back(router_);
    const std::string r = "ip -n " + router_ + " ";
    ok = ok && run(c + "link add vr type veth peer name leg0 netns " + router_) &&
         run(c + "link set vr master br0 up") && run(r + "addr add 192.0.2.254/24 dev leg0") &&
         run(r + "link set leg0 up") && run(r + "link set lo up") &&
         run(r + "link add br1 type bridge mcast_snooping 0") &&
         run(r + "addr add 198.51.100.1/24 dev br1") && run(r + "link set br1 up") &&
         run("ip netns exec " + router_ + " sysctl -q -w net.ipv4.ip_forward=1") &&
         run(c + "route add 198.51.100.0/24 via 192.0.2.254");
    if (!ok) broken_ = "cannot set up the bridge and router in the test namespaces";
}

NetworkLab::~NetworkLab() {
    leave();
    for (pid_t pid : processes_) {
        ::kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
    }
    for (auto it = namespaces_.rbegin(); it != namespaces_.rend(); ++it) run("ip netns del " + *it);
}

bool NetworkLab::run(const std::string& command) {
    const int status = std::system((command + " >/dev/null 2>&1").c_str());
    if (status != 0) std::cerr << "network lab: `" << command << "` failed\n";
    return status == 0;
}

std::string NetworkLab::addCameraHost(int host) {
    const std::string ns = prefix_ + "k" + std::to_string(next_++);
    const std::string veth = "vk" + std::to_string(host);
    const std::string n = "ip -n " + ns + " ";
    const std::string c = "ip -n " + client_ + " ";
    if (!run("ip netns add " + ns)) return "";
    namespaces_.push_back(ns);
    const bool ok = run(c + "link add " + veth + " type veth peer name eth0 netns " + ns) &&
                    run(c + "link set " + veth + " master br0 up") &&
                    run(n + "addr add 192.0.2." + std::to_string(host) + "/24 dev eth0") &&
                    run(n + "addr add 2001:db8::" + std::to_string(host) + "/64 dev eth0 nodad") &&
                    run(n + "link set eth0 up") && run(n + "link set lo up") &&
                    run(n + "route add 224.0.0.0/4 dev eth0");
    return ok ? ns : "";
}

bool NetworkLab::readdressCameraHost(const std::string& ns, int from, int to) {
    const std::string n = "ip -n " + ns + " ";
    return run(n + "addr del 192.0.2." + std::to_string(from) + "/24 dev eth0") &&
           run(n + "addr add 192.0.2." + std::to_string(to) + "/24 dev eth0") &&
           run(n + "route replace 224.0.0.0/4 dev eth0");
}

std::string NetworkLab::addRemoteHost(int host) {
    const std::string ns = prefix_ + "k" + std::to_string(next_++);
    const std::string veth = "vk" + std::to_string(host);
    const std::string n = "ip -n " + ns + " ";
    const std::string r = "ip -n " + router_ + " ";
    if (!run("ip netns add " + ns)) return "";
    namespaces_.push_back(ns);
    const bool ok = run(r + "link add " + veth + " type veth peer name eth0 netns " + ns) &&
                    run(r + "link set " + veth + " master br1 up") &&
                    run(n + "addr add 198.51.100." + std::to_string(host) + "/24 dev eth0") &&
                    run(n + "link set eth0 up") && run(n + "link set lo up") &&
                    run(n + "route add default via 198.51.100.1") &&
                    run(n + "route add 224.0.0.0/4 dev eth0");
    return ok ? ns : "";
}

pid_t NetworkLab::start(const std::string& ns, const std::vector<std::string>& argv) {
    std::vector<std::string> full = {"ip", "netns", "exec", ns};
    full.insert(full.end(), argv.begin(), argv.end());
    const pid_t pid = fork();
    if (pid == 0) {
        std::vector<char*> args;
        for (std::string& a : full) args.push_back(a.data());
        args.push_back(nullptr);
        execvp(args[0], args.data());
        _exit(127);
    }
    if (pid > 0) processes_.push_back(pid);
    return pid;
}

void NetworkLab::terminate(pid_t pid) {
    ::kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
    std::erase(processes_, pid);
}

void NetworkLab::kill(pid_t pid) {
    ::kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    std::erase(processes_, pid);
}

std::string NetworkLab::output(const std::string& commandLine) {
    FILE* pipe = popen(("ip netns exec " + client_ + " sh -c '" + commandLine + "' 2>&1").c_str(), "r");
    if (!pipe) return "";
    std::string text;
    char buffer[4096];
    while (std::size_t n = fread(buffer, 1, sizeof buffer, pipe)) text.append(buffer, n);
    pclose(pipe);
    return text;
}

bool NetworkLab::enter() {
    if (savedNamespace_ >= 0) return true;
    savedNamespace_ = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    const int target = open(("/var/run/netns/" + client_).c_str(), O_RDONLY | O_CLOEXEC);
    const bool ok = target >= 0 && setns(target, CLONE_NEWNET) == 0;
    if (target >= 0) close(target);
    if (!ok) {
        close(savedNamespace_);
        savedNamespace_ = -1;
    }
    return ok;
}

void NetworkLab::leave() {
    if (savedNamespace_ < 0) return;
    setns(savedNamespace_, CLONE_NEWNET);
    close(savedNamespace_);
    savedNamespace_ = -1;
}

}  // namespace devlet::onvif::test
