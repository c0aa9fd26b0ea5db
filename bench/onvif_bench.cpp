// The onvif handler under the real daemon: simulated cameras, each in its own network
// namespace on a bridge (or behind a router), the real `devlet run` in the client namespace,
// and the kubelet simulator over real unix-socket gRPC. Prints:
//  - a camera's Hello -> its instance offered at the kubelet (every query of the enrichment
//    included), and its Bye -> withdrawn, over repeated cycles with a fresh camera each time;
//  - the same arrival the way Akri finds cameras (no Hello, a Probe every 10 s), for the ratio;
//  - N cameras on the segment (50, then 200): devlet's first Probe -> all N offered, fully
//    enriched; and N cameras behind a router found by a unicast sweep of a /24;
//  - devlet's memory with N cameras against none: the growth per camera.
// Figures only: it never fails because one misses its target. Needs root (namespaces).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/arrival_tracker.h"
#include "bench/command_line.h"
#include "probes/onvif/soap_wire.h"
#include "runtime/naming.h"
#include "tests/probes/onvif/network_lab.h"
#include "tests/support/daemon_process.h"
#include "tests/support/kubelet_simulator.h"
#include "tests/support/temp_dir.h"

namespace devlet::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr const char* kConfiguration = "onvif-cams";
constexpr const char* kCl = "akri.sh/onvif-cams";

struct Options {
    int cycles = 30;         // Hello/Bye cycles
    int baselineCycles = 5;  // arrivals found by the 10 s rescan alone
    std::vector<int> fleets = {50, 200};
    int unicastCameras = 50;  // behind the router, in a swept /24; 0 = skip
};

double ms(Clock::duration d) {
    return std::chrono::duration<double, std::milli>(d).count();
}

double percentile(std::vector<double> samples, double p) {
    if (samples.empty()) return NAN;
    std::sort(samples.begin(), samples.end());
    const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(samples.size())));
    return samples[std::clamp<std::size_t>(rank, 1, samples.size()) - 1];
}

double statusKiB(pid_t pid, const std::string& key) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(status, line);) {
        if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1));
    }
    return NAN;
}

double cpuMs(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (stat.empty()) return NAN;
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string field;
    double ticks = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
        if (i >= 14) ticks += std::stod(field);
    }
    return ticks * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::string loadAverage() {
    std::ifstream in("/proc/loadavg");
    std::string a, b, c;
    in >> a >> b >> c;
    return a + " " + b + " " + c;
}

std::string uuidFor(int n) {
    char text[40];
    std::snprintf(text, sizeof text, "%08x-0000-4000-8000-%012x", 0x0bec0000 + n, n);
    return text;
}

std::string serviceUrl(const std::string& address) {
    return "http://" + address + ":8080/onvif/device_service";
}

std::string instanceResource(const std::string& address, const std::string& uuid) {
    return std::string("akri.sh/") +
           instanceName(kConfiguration, instanceHash(serviceUrl(address) + "-" + uuid, "", true));
}

// "hello <ns>" and "bye <ns>" lines of a camera's ready file, as Clock time points.
std::optional<Clock::time_point> stamp(const std::string& file, const std::string& what) {
    std::ifstream in(file);
    std::string word;
    long long ns = 0;
    while (in >> word >> ns) {
        if (word == what && ns > 0) return Clock::time_point(std::chrono::nanoseconds(ns));
    }
    return std::nullopt;
}

bool waitForFile(const std::string& path, std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (!std::filesystem::exists(path)) {
        if (Clock::now() > deadline) return false;
        std::this_thread::sleep_for(5ms);
    }
    return true;
}

// Hears devlet's multicast Probes from inside the client namespace: the moment discovery
// starts, without trusting the daemon's own clock.
class ProbeListener {
public:
    explicit ProbeListener(onvif::test::NetworkLab& lab) {
        if (!lab.enter()) throw std::runtime_error("cannot enter the client namespace");
        fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        const int one = 1;
        setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in any{};
        any.sin_family = AF_INET;
        any.sin_port = htons(3702);
        ip_mreq join{};
        inet_pton(AF_INET, "239.255.255.250", &join.imr_multiaddr);
        inet_pton(AF_INET, "192.0.2.1", &join.imr_interface);
        const bool ok = bind(fd_, reinterpret_cast<sockaddr*>(&any), sizeof any) == 0 &&
                        setsockopt(fd_, IPPROTO_IP, IP_ADD_MEMBERSHIP, &join, sizeof join) == 0;
        lab.leave();
        if (!ok) throw std::runtime_error("cannot listen for devlet's Probes");
        thread_ = std::thread([this] { listen(); });
    }
    ~ProbeListener() {
        stop_ = true;
        thread_.join();
        close(fd_);
    }
    std::optional<Clock::time_point> firstProbe() const {
        const auto at = firstProbe_.load();
        if (at == Clock::time_point{}) return std::nullopt;
        return at;
    }

private:
    void listen() {
        std::vector<char> buffer(65536);
        while (!stop_) {
            pollfd p{fd_, POLLIN, 0};
            if (poll(&p, 1, 50) <= 0) continue;
            const ssize_t n = recv(fd_, buffer.data(), buffer.size(), 0);
            const auto at = Clock::now();
            if (n <= 0) continue;
            std::string error;
            auto message = onvif::decodeDiscovery(std::string_view(buffer.data(), std::size_t(n)), error);
            if (message && message->kind == onvif::DiscoveryKind::Probe &&
                firstProbe_.load() == Clock::time_point{})
                firstProbe_ = at;
        }
    }
    int fd_ = -1;
    std::atomic<bool> stop_{false};
    std::atomic<Clock::time_point> firstProbe_{Clock::time_point{}};
    std::thread thread_;
};

// One devlet over one kubelet simulator in a fresh temp tree, in the lab's client namespace.
class Devlet {
public:
    Devlet(onvif::test::NetworkLab& lab, const std::string& details)
        : daemon_(dir_.path()), kubelet_(daemon_.devicePluginDir(), daemon_.podResourcesSocket()) {
        kubelet_.onListAndWatch(
            [this](const std::string& resource, const v1beta1::ListAndWatchResponse& response,
                   Clock::time_point receivedAt) { tracker.observe(resource, response, receivedAt); });
        const std::string credentials = (dir_.path() / "credentials.yaml").string();
        test::writeFile(
            credentials,
            "networks: [192.0.2.0/24, 198.51.100.0/24]\ndefault: {username: admin, password: secret}\n");
        chmod(credentials.c_str(), 0600);
        std::string indented;
        std::istringstream lines(details + "credentialsFile: " + credentials + "\n");
        for (std::string line; std::getline(lines, line);) indented += "      " + line + "\n";
        test::writeFile(daemon_.confDir() / "onvif.yaml",
                        std::string("apiVersion: akri.sh/v0\n"
                                    "kind: Configuration\n"
                                    "metadata:\n"
                                    "  name: ") +
                            kConfiguration +
                            "\n"
                            "spec:\n"
                            "  discoveryHandler:\n"
                            "    name: onvif\n"
                            "    discoveryDetails: |\n" +
                            indented +
                            "  capacity: 1\n"
                            "  devlet:\n"
                            // A camera that says Bye is withdrawn at once: each cycle starts empty.
                            "    removalGracePeriodSeconds: 0\n");
        if (!kubelet_.start()) throw std::runtime_error("the kubelet simulator cannot listen");
        if (!lab.enter()) throw std::runtime_error("cannot enter the client namespace");
        startedAt = Clock::now();
        daemon_.start({"--log-level", "info"});
        lab.leave();
    }
    ~Devlet() {
        daemon_.stop();
        kubelet_.stop();
    }
    pid_t pid() const { return daemon_.pid(); }
    std::string log() const { return daemon_.log(); }

    ArrivalTracker tracker;
    Clock::time_point startedAt;

private:
    test::TempDir dir_;
    test::DaemonProcess daemon_;
    test::KubeletSimulator kubelet_;
};

std::string details(int rescanSeconds, bool unicast = false) {
    return "discoveryTimeoutSeconds: 1\n"
           "interfaces: [br0]\n"
           "rescanIntervalSeconds: " +
           std::to_string(rescanSeconds) + "\n" + (unicast ? "unicastTargets: [198.51.100.0/24]\n" : "");
}

struct Cycles {
    std::vector<double> arrive;  // ms: Hello (or camera start) -> offered
    std::vector<double> leave;   // ms: Bye -> withdrawn
};

// Cameras at 192.0.2.11, a fresh uuid each cycle: its Hello -> both of its resources list it
// Healthy; its Bye -> the configuration resource lists nothing. With `hello` false the
// camera says only Bye, and devlet finds it at its next Probe (every 10 s, Akri's pace).
Cycles helloCycles(onvif::test::NetworkLab& lab, const std::string& ns, int cycles, bool hello,
                   const std::filesystem::path& scratch) {
    Cycles result;
    Devlet devlet(lab, details(hello ? 3600 : 10));
    std::this_thread::sleep_for(2s);  // past the first window: the first snapshot is out
    const std::string address = "192.0.2.11";
    for (int i = 0; i < cycles; ++i) {
        const std::string uuid = uuidFor((hello ? 1000 : 2000) + i);
        const std::string ready = (scratch / ("cycle-" + uuid)).string();
        const std::string il = instanceResource(address, uuid);
        const auto since = Clock::now();
        devlet.tracker.expect({{il, {1, 1}}, {kCl, {1, 1}}}, since);
        const pid_t pid =
            lab.start(ns, {ONVIF_CAMERA, "--address", address, "--uuid", uuid, "--user", "admin",
                           "--password", "secret", "--ready-file", ready, hello ? "--hello" : "--bye"});
        if (!waitForFile(ready, 20s)) throw std::runtime_error("a camera did not start");
        const auto arrived = devlet.tracker.wait(hello ? 10s : 30s);
        if (!arrived)
            throw std::runtime_error("cycle " + std::to_string(i) + ": never offered\n" + devlet.log());
        const auto from = hello ? stamp(ready, "hello") : std::optional<Clock::time_point>(since);
        if (!from) throw std::runtime_error("the camera wrote no Hello time");
        result.arrive.push_back(ms(*arrived - *from));

        devlet.tracker.expect({{kCl, {0, 0}}}, Clock::now());
        lab.terminate(pid);  // its Bye
        const auto gone = devlet.tracker.wait(10s);
        const auto bye = stamp(ready, "bye");
        if (!gone || !bye) throw std::runtime_error("cycle " + std::to_string(i) + ": the Bye was not seen");
        result.leave.push_back(ms(*gone - *bye));
    }
    return result;
}

struct FleetResult {
    int cameras = 0;
    bool unicast = false;
    double probeToAll = NAN;  // ms: devlet's first Probe -> all offered
    double startToAll = NAN;  // ms: devlet started -> all offered
    double cpu = NAN;         // ms of devlet CPU time until then
    double rssKiB = NAN;      // VmRSS with all offered, settled
    double hwmKiB = NAN;
    int offered = 0;
};

// N cameras already running; a fresh devlet finds them all.
FleetResult fleet(onvif::test::NetworkLab& lab,
                  const std::vector<std::pair<std::string, std::string>>& cameras, bool unicast) {
    FleetResult result;
    result.cameras = int(cameras.size());
    result.unicast = unicast;
    ProbeListener listener(lab);
    Devlet devlet(lab, details(3600, unicast));
    std::map<std::string, WantedState> wanted = {{kCl, {cameras.size(), cameras.size()}}};
    for (const auto& [address, uuid] : cameras) wanted[instanceResource(address, uuid)] = {1, 1};
    devlet.tracker.expect(wanted, devlet.startedAt);
    const auto all = devlet.tracker.wait(60s);
    result.cpu = cpuMs(devlet.pid());
    if (all) {
        result.startToAll = ms(*all - devlet.startedAt);
        if (auto probe = listener.firstProbe()) result.probeToAll = ms(*all - *probe);
        result.offered = int(cameras.size());
    } else {
        result.offered = int(cameras.size() + 1 - devlet.tracker.missing());
        std::fprintf(stderr, "  only %d of %zu resources arrived\n", result.offered, cameras.size() + 1);
    }
    std::this_thread::sleep_for(3s);  // settled: liveness checks and the store written
    result.rssKiB = statusKiB(devlet.pid(), "VmRSS");
    result.hwmKiB = statusKiB(devlet.pid(), "VmHWM");
    return result;
}

// Starts N cameras in namespaces of their own; returns (address, uuid) of each.
std::vector<std::pair<std::string, std::string>> startCameras(onvif::test::NetworkLab& lab, int count,
                                                              bool remote, int firstUuid,
                                                              const std::filesystem::path& scratch) {
    std::vector<std::pair<std::string, std::string>> cameras;
    std::vector<std::string> readyFiles;
    for (int i = 0; i < count; ++i) {
        const int host = remote ? 2 + i * 252 / std::max(count, 1) : 20 + i;
        const std::string address = (remote ? "198.51.100." : "192.0.2.") + std::to_string(host);
        const std::string ns = remote ? lab.addRemoteHost(host) : lab.addCameraHost(host);
        if (ns.empty()) throw std::runtime_error("cannot add a namespace for camera " + address);
        const std::string uuid = uuidFor(firstUuid + i);
        const std::string ready = (scratch / ("fleet-" + uuid)).string();
        lab.start(ns, {ONVIF_CAMERA, "--address", address, "--uuid", uuid, "--user", "admin", "--password",
                       "secret", "--ready-file", ready});
        cameras.emplace_back(address, uuid);
        readyFiles.push_back(ready);
    }
    for (const std::string& ready : readyFiles) {
        if (!waitForFile(ready, 60s)) throw std::runtime_error("a camera did not start");
    }
    return cameras;
}

void print(const char* name, double value, const char* unit) {
    std::printf("  %-58s %10.1f %s\n", name, value, unit);
}

int parse(int argc, char** argv, Options& options) {
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (i + 1 >= argc) return 2;
        const std::string value = argv[++i];
        const std::optional<int> number = parseInt(value);
        if (arg == "--cycles" && number) {
            options.cycles = *number;
        } else if (arg == "--baseline-cycles" && number) {
            options.baselineCycles = *number;
        } else if (arg == "--unicast-cameras" && number) {
            options.unicastCameras = *number;
        } else if (arg == "--cameras") {
            options.fleets.clear();
            std::istringstream list(value);
            for (std::string n; std::getline(list, n, ',');) {
                const std::optional<int> cameras = parseInt(n);
                if (!cameras) return 2;
                if (*cameras > 0) options.fleets.push_back(std::min(*cameras, 230));
            }
        } else {
            return 2;
        }
    }
    return 0;
}

}  // namespace
}  // namespace devlet::bench

int main(int argc, char** argv) {
    using namespace devlet::bench;
    Options options;
    if (parse(argc, argv, options) != 0) {
        std::fprintf(stderr,
                     "usage: onvif_bench [--cycles N] [--baseline-cycles N] [--cameras N,N] "
                     "[--unicast-cameras N]\n");
        return 2;
    }
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    try {
        devlet::test::TempDir scratch;
        std::printf("onvif benchmark: devlet %s, %ld CPU(s), load average %s\n",
                    devlet::test::DaemonProcess::binary().c_str(), sysconf(_SC_NPROCESSORS_ONLN),
                    loadAverage().c_str());
        {
            devlet::onvif::test::NetworkLab lab;
            if (!lab.unavailable().empty()) {
                std::printf("skipped: %s\n", lab.unavailable().c_str());
                return 77;
            }
            if (!lab.broken().empty()) throw std::runtime_error(lab.broken());
            const std::string ns = lab.addCameraHost(11);
            if (ns.empty()) throw std::runtime_error("cannot add the camera namespace");

            const Cycles hello = helloCycles(lab, ns, options.cycles, true, scratch.path());
            std::printf(
                "\nHello -> offered, %d cycles (a new camera each; discovery, enrichment, registration):\n",
                options.cycles);
            print("Hello -> instance and configuration resource Healthy, p50", percentile(hello.arrive, 50),
                  "ms");
            print("Hello -> offered, p99", percentile(hello.arrive, 99), "ms");
            print("Hello -> offered, max", percentile(hello.arrive, 100), "ms");
            print("Bye -> withdrawn from the configuration resource, p50", percentile(hello.leave, 50), "ms");
            print("Bye -> withdrawn, p99", percentile(hello.leave, 99), "ms");
            std::printf("  load average %s\n", loadAverage().c_str());

            if (options.baselineCycles > 0) {
                const Cycles akri = helloCycles(lab, ns, options.baselineCycles, false, scratch.path());
                std::printf("\nAkri's pace: no Hello, a Probe every 10 s, %d cycles:\n",
                            options.baselineCycles);
                print("camera started -> offered, p50", percentile(akri.arrive, 50), "ms");
                print("camera started -> offered, max", percentile(akri.arrive, 100), "ms");
                print("ratio of the p50s (Akri's pace / Hello)",
                      percentile(akri.arrive, 50) / percentile(hello.arrive, 50), "x");
            }
        }

        double baseRss = NAN;
        {
            devlet::onvif::test::NetworkLab lab;
            const FleetResult none = fleet(lab, {}, false);
            baseRss = none.rssKiB;
            std::printf("\nno camera: devlet VmRSS %.0f KiB, VmHWM %.0f KiB\n", none.rssKiB, none.hwmKiB);
        }
        int uuidBase = 10000;
        int lastCount = 0;
        double lastRss = baseRss;
        for (int count : options.fleets) {
            devlet::onvif::test::NetworkLab lab;
            const auto setup = Clock::now();
            const auto cameras = startCameras(lab, count, false, uuidBase, scratch.path());
            uuidBase += count;
            std::printf("\n%d cameras on the segment (namespaces and cameras set up in %.1f s):\n", count,
                        ms(Clock::now() - setup) / 1000);
            const FleetResult r = fleet(lab, cameras, false);
            std::printf("  offered: %d of %d\n", r.offered, count);
            print("first Probe -> all offered and enriched", r.probeToAll, "ms");
            print("devlet started -> all offered", r.startToAll, "ms");
            print("devlet CPU time until then", r.cpu, "ms");
            print("devlet VmRSS, settled", r.rssKiB / 1024, "MiB");
            print("devlet VmHWM", r.hwmKiB / 1024, "MiB");
            print("RSS growth per camera over none (with its device plugin)", (r.rssKiB - baseRss) / count,
                  "KiB");
            if (lastCount > 0)
                print("RSS growth per camera over the previous fleet",
                      (r.rssKiB - lastRss) / (count - lastCount), "KiB");
            lastCount = count;
            lastRss = r.rssKiB;
            std::printf("  load average %s\n", loadAverage().c_str());
        }
        if (options.unicastCameras > 0) {
            devlet::onvif::test::NetworkLab lab;
            const auto cameras = startCameras(lab, options.unicastCameras, true, uuidBase, scratch.path());
            const FleetResult r = fleet(lab, cameras, true);
            std::printf("\n%d cameras behind a router, unicastTargets 198.51.100.0/24 (254 addresses):\n",
                        options.unicastCameras);
            std::printf("  offered: %d of %d\n", r.offered, options.unicastCameras);
            print("first Probe -> all offered and enriched", r.probeToAll, "ms");
            print("devlet started -> all offered", r.startToAll, "ms");
            std::printf("  load average %s\n", loadAverage().c_str());
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "onvif_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
