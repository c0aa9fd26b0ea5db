#include "probes/onvif/onvif_handler.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

#include <arpa/inet.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/multicast.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include "probes/onvif/credentials.h"
#include "probes/onvif/onvif_classifier.h"
#include "probes/onvif/onvif_client.h"
#include "probes/onvif/onvif_details.h"
#include "probes/onvif/sender_rate_limit.h"
#include "probes/onvif/soap_wire.h"
#include "runtime/configuration.h"
#include "runtime/lifetime.h"
#include "runtime/log.h"

namespace devlet::onvif {

namespace asio = boost::asio;
using udp = asio::ip::udp;

namespace {
constexpr Log log{"onvif"};
constexpr unsigned short kDiscoveryPort = 3702;
const asio::ip::address_v4 kDiscoveryGroup = asio::ip::make_address_v4("239.255.255.250");
constexpr std::size_t kMaxCameras = 1024;
constexpr std::size_t kRememberedMessages = 2048;
constexpr int kForgetAfterMisses = 60;  // an unreachable camera no probe finds is dropped
// Distinct ignored answers kept for people (by sender, uuid and reason); more are counted.
constexpr std::size_t kMaxIgnoredAnswers = 256;
// Resolves sent and not yet answered: the oldest is forgotten past this.
constexpr std::size_t kMaxPendingResolves = 256;
// Senders over their share that are asked again with a unicast Probe, at most this many at
// a time, once a second.
constexpr std::size_t kMaxProbedAgain = 256;
// A camera that has not answered a Resolve is asked again on its next announcement after this.
constexpr std::chrono::seconds kResolveAgainAfter{10};
// A host that claims a known camera's uuid while the camera still answers at its address is
// not listened to again for this long: each claim costs a call to the camera.
constexpr std::chrono::seconds kClaimCheckedAgainAfter{10};
// Hosts claiming one camera's uuid at once, and hosts refused, remembered per camera.
constexpr std::size_t kMaxClaims = 8;
constexpr const char* kDuplicate = "duplicate (a retransmission: same sender and MessageID)";

// The IPv4 address of a network interface, or nullopt.
std::optional<asio::ip::address_v4> interfaceAddress(const std::string& name) {
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return std::nullopt;
    std::optional<asio::ip::address_v4> found;
    for (ifaddrs* i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || name != i->ifa_name) continue;
        const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
        found = asio::ip::address_v4(ntohl(in->sin_addr.s_addr));
        break;
    }
    freeifaddrs(list);
    return found;
}

// WS-Discovery's IPv6 group, link-local: a Probe goes out on each interface separately.
const asio::ip::address_v6 kDiscoveryGroup6 = asio::ip::make_address_v6("ff02::c");

// Interfaces for IPv6 discovery, by index: the configured ones (a name that does not exist
// goes to `missing`), else every interface that is up, not loopback, can multicast and has
// an IPv6 address.
std::vector<unsigned> ipv6Interfaces(const std::vector<std::string>& names,
                                     std::vector<std::string>& missing) {
    std::vector<unsigned> indexes;
    if (!names.empty()) {
        for (const std::string& name : names) {
            if (const unsigned index = if_nametoindex(name.c_str())) {
                indexes.push_back(index);
            } else {
                missing.push_back(name);
            }
        }
        return indexes;
    }
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return indexes;
    for (ifaddrs* i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET6) continue;
        if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0 ||
            (i->ifa_flags & IFF_MULTICAST) == 0)
            continue;
        const unsigned index = if_nametoindex(i->ifa_name);
        if (index && std::find(indexes.begin(), indexes.end(), index) == indexes.end())
            indexes.push_back(index);
    }
    freeifaddrs(list);
    return indexes;
}

// The networks of the interfaces discovery uses (the configured ones, else every one that
// is up and not loopback), IPv4 and IPv6: the directly attached subnets.
std::vector<IpNetwork> attachedNetworks(const std::vector<std::string>& names) {
    std::vector<IpNetwork> networks;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return networks;
    for (ifaddrs* i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr || !i->ifa_netmask || (i->ifa_flags & IFF_UP) == 0 ||
            (i->ifa_flags & IFF_LOOPBACK) != 0)
            continue;
        if (!names.empty() && std::find(names.begin(), names.end(), i->ifa_name) == names.end()) continue;
        char text[INET6_ADDRSTRLEN] = {};
        int prefix = 0;
        if (i->ifa_addr->sa_family == AF_INET) {
            const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
            const auto* mask = reinterpret_cast<const sockaddr_in*>(i->ifa_netmask);
            inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
            prefix = __builtin_popcount(mask->sin_addr.s_addr);
        } else if (i->ifa_addr->sa_family == AF_INET6) {
            const auto* in = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
            const auto* mask = reinterpret_cast<const sockaddr_in6*>(i->ifa_netmask);
            inet_ntop(AF_INET6, &in->sin6_addr, text, sizeof text);
            for (unsigned char byte : mask->sin6_addr.s6_addr) prefix += __builtin_popcount(byte);
        } else {
            continue;
        }
        std::string error;
        if (auto network = IpNetwork::parse(std::string(text) + "/" + std::to_string(prefix), error))
            networks.push_back(*network);
    }
    freeifaddrs(list);
    return networks;
}

std::string interfaceName(unsigned index) {
    char name[IF_NAMESIZE] = {};
    return if_indextoname(index, name) ? std::string(name) : std::to_string(index);
}

// Remembers the last N message ids: WS-Discovery repeats every message over UDP.
class RecentIds {
public:
    explicit RecentIds(std::size_t capacity) : capacity_(capacity) {}
    // False when the id was seen already.
    bool insert(const std::string& id) {
        if (id.empty()) return true;
        if (!set_.insert(id).second) return false;
        order_.push_back(id);
        if (order_.size() > capacity_) {
            set_.erase(order_.front());
            order_.pop_front();
        }
        return true;
    }
    bool contains(const std::string& id) const { return set_.count(id) != 0; }

private:
    std::size_t capacity_;
    std::set<std::string> set_;
    std::deque<std::string> order_;
};

// The address a datagram came from, as text; an IPv4-mapped IPv6 address as IPv4.
std::string senderAddress(const udp::endpoint& sender) {
    asio::ip::address address = sender.address();
    if (address.is_v6() && address.to_v6().is_v4_mapped())
        address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
    return address.to_string();
}

// Whether the URL's host is an IPv4 address inside one of the ranges.
bool urlHostInRanges(const std::string& url, const std::vector<Ipv4Range>& ranges) {
    boost::system::error_code error;
    const asio::ip::address_v4 host = asio::ip::make_address_v4(urlHost(url), error);
    if (error) return false;
    const std::uint32_t value = host.to_uint();
    return std::any_of(ranges.begin(), ranges.end(),
                       [&](const Ipv4Range& r) { return value >= r.first && value <= r.last; });
}

}  // namespace

// Threads for the blocking SOAP calls. Work reaches the loop only through a Channel the
// probe closes when it stops, so no worker posts to a loop that is gone.
class WorkerPool {
public:
    explicit WorkerPool(std::size_t threads) : pool_(threads) {}
    ~WorkerPool() {
        cancelled_ = true;
        pool_.join();
    }
    template <typename F>
    void submit(F work) {
        asio::post(pool_, std::move(work));
    }
    const std::atomic<bool>* cancelled() const { return &cancelled_; }

private:
    std::atomic<bool> cancelled_{false};
    asio::thread_pool pool_;
};

namespace {

// Posts results to a probe's loop while the probe runs. Guarded by `mutex`: workers read
// `loop`, the probe clears it on stop.
struct Channel {
    std::mutex mutex;
    asio::io_context* loop = nullptr;
    std::atomic<bool> closed{false};
    template <typename F>
    void post(F f) {
        std::lock_guard lock(mutex);
        if (loop) asio::post(*loop, std::move(f));
    }
};

// A socket that WS-Discovery datagrams arrive on, with the buffer and sender its receive fills.
struct DiscoverySocket {
    explicit DiscoverySocket(asio::io_context& loop) : socket(loop) {}
    udp::socket socket;
    std::array<char, kMaxDatagram> buffer{};
    udp::endpoint sender;
};

// Another host's announcement of a known camera's uuid, held while the camera is asked at
// the address it was found at: the camera has moved there only if it no longer answers.
struct MoveClaim {
    std::string how;     // "Hello", "ProbeMatches", …
    std::string sender;  // the claiming datagram's source address
    std::string url;     // its XAddr at that address
    std::vector<std::string> xaddrs;
    std::vector<std::string> scopes;
    unsigned metadataVersion = 0;
};

struct Camera {
    CameraObservation observation;
    std::string sender;  // the address whose datagram made it known
    // Claims being checked (or to be, once the call in flight returns), one per sender.
    std::vector<MoveClaim> claims;
    // Senders whose claim was refused because the camera still answered, and when.
    std::map<std::string, std::chrono::steady_clock::time_point> refusedClaims;
    unsigned metadataVersion = 0;
    bool queried = false;                                // a full query has found the camera up
    bool answered = false;                               // a full query has returned, whatever it found
    bool busy = false;                                   // a call is in flight
    int missed = 0;                                      // liveness checks failed in a row
    bool left = false;                                   // said Bye
    CameraState lastCheck = CameraState::UpWithoutAuth;  // of the latest failed check
    std::string lastCheckError;
};

// What a probe is for: the daemon's long-running discovery, or one pass of
// `devlet probe onvif`, which probes once, listens for no Hello and checks no liveness.
struct ProbeMode {
    bool pass = false;
    std::optional<Credential> credential;  // replaces the configuration's credentials
};

class OnvifProbe : public Probe {
public:
    OnvifProbe(std::string configuration, OnvifDetails details, asio::io_context& loop, ProbeSink& sink,
               std::shared_ptr<WorkerPool> pool, ProbeMode mode = {})
        : configuration_(std::move(configuration)),
          details_(std::move(details)),
          mode_(std::move(mode)),
          loop_(loop),
          sink_(sink),
          pool_(std::move(pool)),
          channel_(std::make_shared<Channel>()),
          probeSocket_(loop),
          listenSocket_(loop),
          cycleTimer_(loop),
          windowTimer_(loop),
          livenessTimer_(loop),
          unicastTimer_(loop),
          probeAgainTimer_(loop) {}

    ~OnvifProbe() override { stop(); }

    // Akri's credential properties, read from Secrets (cluster mode); before start().
    void setAkriCredentials(std::map<std::string, std::string> properties) {
        akriCredentials_ = std::move(properties);
    }

    void start() override {
        running_ = true;
        lifetime_.renew();
        {
            std::lock_guard lock(channel_->mutex);
            channel_->loop = &loop_;
        }
        loadCredentials();
        openSockets();
        cycle();
        if (!mode_.pass) scheduleLiveness();
    }

    // The pass is over: the window after the last Probe has passed and no query is out.
    bool passDone() const {
        if (socketProblem_.empty() && (!firstWindowDone_ || sweeping_)) return false;
        return std::none_of(cameras_.begin(), cameras_.end(), [](const auto& c) { return c.second.busy; });
    }

    // Every camera heard of, as of now: queried ones, and those a discovery filter excluded.
    std::vector<CameraStatus> statuses() const {
        std::vector<CameraStatus> all;
        all.reserve(cameras_.size() + excluded_.size());
        for (const auto& [key, camera] : cameras_) all.push_back(statusOf(camera));
        for (const auto& [key, status] : excluded_) all.push_back(status);
        sortStatuses(all);
        return all;
    }

    OnvifPassResult passResult() const {
        OnvifPassResult result;
        result.configuration = configuration_;
        result.cameras = statuses();
        result.problems = notes_;
        if (!credentialsProblem_.empty()) result.problems.push_back(credentialsProblem_);
        if (!socketProblem_.empty()) result.problems.push_back(socketProblem_);
        result.networkUnusable = !socketProblem_.empty();
        if (capIgnored_ > 0) result.problems.push_back(capProblem());
        result.notCameras = notCameras_;
        result.ignored = ignoredAnswers_;
        result.ignoredUnlisted = ignoredOverflow_;
        result.unicastProbes = unicastSent_;
        return result;
    }

    void stop() override {
        if (!running_) return;
        running_ = false;
        lifetime_.end();
        {
            std::lock_guard lock(channel_->mutex);
            channel_->loop = nullptr;
            channel_->closed = true;
        }
        boost::system::error_code ignored;
        cycleTimer_.cancel();
        windowTimer_.cancel();
        livenessTimer_.cancel();
        unicastTimer_.cancel();
        probeAgainTimer_.cancel();
        probeAgainArmed_ = false;
        probedAgain_.clear();
        probeSocket_.close(ignored);
        listenSocket_.close(ignored);
        if (probe6_) probe6_->socket.close(ignored);
        if (listen6_) listen6_->socket.close(ignored);
    }

private:
    // The daemon logs trouble; a pass hands it to the command that prints it.
    void warn(const std::string& message) {
        if (mode_.pass) {
            if (std::find(notes_.begin(), notes_.end(), message) == notes_.end() && notes_.size() < 16)
                notes_.push_back(message);
        } else {
            log.warning() << configuration_ << ": " << message;
        }
    }

    void loadCredentials() {
        Outcome loaded = Outcome::ok();
        if (mode_.credential) {
            // `--user`: the addresses the command was pointed at (--target) and the subnets it
            // probes by multicast; an answer naming any other address gets no credential.
            std::vector<IpNetwork> networks = attachedNetworks(details_.interfaces);
            for (const Ipv4Range& range : details_.unicastTargets)
                networks.push_back(IpNetwork::fromRange(range));
            credentials_ =
                CredentialStore::withDefault(*mode_.credential, std::move(networks),
                                             "the --target ranges and the directly attached subnets");
        } else if (!details_.credentialsFile.empty()) {
            loaded = CredentialStore::load(details_.credentialsFile, credentials_);
        } else if (!details_.credential.empty()) {
            loaded = CredentialStore::loadSystemdCredential(details_.credential, credentials_);
        } else if (!akriCredentials_.empty()) {
            // As `--user`: Akri sends them to whatever answers; devlet only inside the subnets
            // it probes by multicast and the unicastTargets.
            std::vector<IpNetwork> networks = attachedNetworks(details_.interfaces);
            for (const Ipv4Range& range : details_.unicastTargets)
                networks.push_back(IpNetwork::fromRange(range));
            std::vector<std::string> notes;
            credentials_ = CredentialStore::fromAkriProperties(
                akriCredentials_, std::move(networks), "the directly attached subnets and unicastTargets",
                notes);
            for (const std::string& note : notes) warn("discoveryProperties from Secrets: " + note);
        }
        if ((!details_.credentialsFile.empty() || !details_.credential.empty()) && !akriCredentials_.empty())
            warn("discoveryProperties from Secrets are not used: discoveryDetails name a credentials file");
        if (!loaded) {
            credentialsProblem_ = loaded.error();
            if (!mode_.pass) log.error() << configuration_ << ": " << loaded.error();
        } else if (!credentials_.empty()) {
            log.debug() << configuration_ << ": " << credentials_.size() << " credential entries loaded";
        }
    }

    void openSockets() {
        boost::system::error_code error;
        probeSocket_.open(udp::v4(), error);
        if (!error) probeSocket_.bind(udp::endpoint(asio::ip::address_v4::any(), 0), error);
        if (!error) probeSocket_.set_option(asio::ip::multicast::hops(4), error);
        if (!error) probeSocket_.non_blocking(true, error);
        if (error) {
            fail("cannot open the WS-Discovery socket: " + error.message());
            return;
        }
        // Every camera on a segment answers a multicast Probe at once (most wait no random
        // delay); the kernel caps this at net.core.rmem_max.
        boost::system::error_code ignored;
        probeSocket_.set_option(asio::socket_base::receive_buffer_size(1 << 20), ignored);
        receiveProbeMatches();
        if (details_.ipv6) openIpv6Sockets();
        if (mode_.pass) return;

        // The passive listener: a camera that starts says Hello here.
        listenSocket_.open(udp::v4(), error);
        if (!error) listenSocket_.set_option(udp::socket::reuse_address(true), error);
        if (!error) listenSocket_.bind(udp::endpoint(asio::ip::address_v4::any(), kDiscoveryPort), error);
        if (!error) {
            if (details_.interfaces.empty()) {
                listenSocket_.set_option(asio::ip::multicast::join_group(kDiscoveryGroup), error);
            } else {
                for (const std::string& name : details_.interfaces) {
                    boost::system::error_code joinError;
                    if (auto address = interfaceAddress(name)) {
                        listenSocket_.set_option(asio::ip::multicast::join_group(kDiscoveryGroup, *address),
                                                 joinError);
                    } else {
                        warn("interface " + name + " has no IPv4 address");
                        continue;
                    }
                    if (joinError) warn("cannot listen for Hello on " + name + ": " + joinError.message());
                }
            }
        }
        if (error) {
            log.warning() << configuration_ << ": no Hello/Bye listener on port 3702 (" << error.message()
                          << "); cameras are found by probing only";
            listenSocket_.close(error);
            return;
        }
        receiveAnnouncements();
    }

    // IPv6 is an addition: where it cannot be used, IPv4 discovery goes on, and the reason is
    // logged (or, in a pass, printed).
    void openIpv6Sockets() {
        std::vector<std::string> missing;
        ipv6Interfaces_ = ipv6Interfaces(details_.interfaces, missing);
        for (const std::string& name : missing) warn("interface " + name + " does not exist (IPv6)");
        if (ipv6Interfaces_.empty()) {
            warn("no interface for IPv6 WS-Discovery");
            return;
        }
        boost::system::error_code error;
        probe6_ = std::make_unique<DiscoverySocket>(loop_);
        udp::socket& probe = probe6_->socket;
        probe.open(udp::v6(), error);
        if (!error) probe.set_option(asio::ip::v6_only(true), error);
        if (!error) probe.bind(udp::endpoint(asio::ip::address_v6::any(), 0), error);
        if (!error) probe.non_blocking(true, error);
        if (error) {
            warn("cannot open the IPv6 WS-Discovery socket: " + error.message());
            probe6_.reset();
            return;
        }
        boost::system::error_code ignored;
        probe.set_option(asio::socket_base::receive_buffer_size(1 << 20), ignored);
        receive(*probe6_, true);
        if (mode_.pass) return;

        listen6_ = std::make_unique<DiscoverySocket>(loop_);
        udp::socket& listen = listen6_->socket;
        listen.open(udp::v6(), error);
        if (!error) listen.set_option(asio::ip::v6_only(true), error);
        if (!error) listen.set_option(udp::socket::reuse_address(true), error);
        if (!error) listen.bind(udp::endpoint(asio::ip::address_v6::any(), kDiscoveryPort), error);
        if (error) {
            warn("no IPv6 Hello/Bye listener on port 3702 (" + error.message() + ")");
            listen6_.reset();
            return;
        }
        for (unsigned index : ipv6Interfaces_) {
            listen.set_option(asio::ip::multicast::join_group(kDiscoveryGroup6, index), error);
            if (error)
                warn("cannot listen for IPv6 Hello on " + interfaceName(index) + ": " + error.message());
        }
        receive(*listen6_, false);
    }

    // One discovery cycle: the Probe to the group (and its copies), the unicast sweep, and
    // the window in which answers count for the first snapshot.
    void cycle() {
        if (!running_) return;
        ++cycles_;
        if (!mode_.pass) forgetOldIgnoredAnswers();
        cycleStart_ = std::chrono::steady_clock::now();
        multicastId_ = newMessageId();
        sentIds_.insert(multicastId_);
        const std::string probe = encodeProbe(multicastId_);
        if (probe.empty()) {
            fail("cannot encode the WS-Discovery Probe");
        } else {
            sendMulticast(probe);
            for (int i = 1; i <= details_.probeRetransmissions; ++i) {
                // SOAP-over-UDP: the same message again after a short random-free delay.
                auto timer = std::make_shared<asio::steady_timer>(loop_, std::chrono::milliseconds(100 * i));
                timer->async_wait(
                    [this, timer, probe, alive = lifetime_.token()](const boost::system::error_code& e) {
                        if (!e && !alive.expired()) sendMulticast(probe);
                    });
            }
        }
        // A sweep longer than the rescan interval (a /16 every 5 s) finishes first.
        if (!sweeping_) startUnicastSweep();
        startWindow();
        if (mode_.pass) return;
        cycleTimer_.expires_after(details_.rescanInterval);
        cycleTimer_.async_wait([this, alive = lifetime_.token()](const boost::system::error_code& e) {
            if (!e && !alive.expired()) cycle();
        });
    }

    // Answers to the last Probe sent count for the first snapshot: the window ends
    // discoveryTimeout after the multicast Probe, or after the last unicast Probe of a sweep
    // that takes longer (a /16 goes out in bursts over about 5 s).
    void startWindow() {
        windowTimer_.expires_after(details_.discoveryTimeout);
        windowTimer_.async_wait([this, alive = lifetime_.token()](const boost::system::error_code& e) {
            if (e || alive.expired() || sweeping_) return;
            firstWindowDone_ = true;
            report(true);
        });
    }

    void sendMulticast(const std::string& probe) {
        if (!probeSocket_.is_open()) return;
        const udp::endpoint group(kDiscoveryGroup, kDiscoveryPort);
        auto sendOn = [&](const std::string& label) {
            boost::system::error_code error;
            probeSocket_.send_to(asio::buffer(probe), group, 0, error);
            if (error && error != asio::error::would_block)
                warn("multicast Probe on " + label + " failed: " + error.message());
        };
        if (probe6_) {
            for (unsigned index : ipv6Interfaces_) {
                asio::ip::address_v6 group = kDiscoveryGroup6;
                group.scope_id(index);
                boost::system::error_code error;
                probe6_->socket.send_to(asio::buffer(probe), udp::endpoint(group, kDiscoveryPort), 0, error);
                if (error && error != asio::error::would_block)
                    warn("IPv6 multicast Probe on " + interfaceName(index) + " failed: " + error.message());
            }
        }
        if (details_.interfaces.empty()) {
            sendOn("the default interface");
            return;
        }
        for (const std::string& name : details_.interfaces) {
            boost::system::error_code error;
            if (auto address = interfaceAddress(name)) {
                probeSocket_.set_option(asio::ip::multicast::outbound_interface(*address), error);
                if (!error) sendOn(name);
            } else {
                warn("interface " + name + " has no IPv4 address");
            }
        }
    }

    // Cameras on other subnets: the same Probe, unicast to every address of unicastTargets.
    // All of them share one socket and one MessageID, so nothing waits for an answer: the
    // sweep sends unicastConcurrency Probes per burst, a burst every 20 ms, and answers
    // arrive while it goes on. A /24 is one burst; a /16 takes 256 bursts.
    void startUnicastSweep() {
        if (details_.unicastTargets.empty() || !probeSocket_.is_open()) return;
        unicastId_ = newMessageId();
        sentIds_.insert(unicastId_);
        unicastProbe_ = encodeProbe(unicastId_);
        unicastRange_ = 0;
        unicastNext_ = details_.unicastTargets.front().first;
        sweepSent_ = 0;
        sweepFailures_ = 0;
        sweepFailure_.clear();
        sweeping_ = true;
        sendUnicastBurst();
    }

    void sendUnicastBurst() {
        if (!running_ || unicastProbe_.empty()) return;
        int sent = 0;
        bool full = false;
        while (unicastRange_ < details_.unicastTargets.size() && sent < details_.unicastConcurrency) {
            const Ipv4Range& range = details_.unicastTargets[unicastRange_];
            boost::system::error_code error;
            probeSocket_.send_to(asio::buffer(unicastProbe_),
                                 udp::endpoint(asio::ip::address_v4(unicastNext_), kDiscoveryPort), 0, error);
            if (error == asio::error::would_block || error == asio::error::no_buffer_space) {
                // The socket's buffer is full: this address goes first in the next burst.
                full = true;
                break;
            }
            ++sent;
            ++sweepSent_;
            ++unicastSent_;
            if (error) {
                // No route, or a broadcast address inside the range: that address only.
                if (sweepFailures_++ == 0)
                    sweepFailure_ = asio::ip::address_v4(unicastNext_).to_string() + ": " + error.message();
            }
            if (unicastNext_ >= range.last) {
                if (++unicastRange_ < details_.unicastTargets.size())
                    unicastNext_ = details_.unicastTargets[unicastRange_].first;
            } else {
                ++unicastNext_;
            }
        }
        if (unicastRange_ >= details_.unicastTargets.size()) {
            sweepDone();
            return;
        }
        unicastTimer_.expires_after(std::chrono::milliseconds(full ? 5 : 20));
        unicastTimer_.async_wait([this, alive = lifetime_.token()](const boost::system::error_code& e) {
            if (!e && !alive.expired()) sendUnicastBurst();
        });
    }

    void sweepDone() {
        sweeping_ = false;
        if (sweepFailures_ > 0)
            warn("unicast Probes to " + std::to_string(sweepFailures_) + " address" +
                 (sweepFailures_ == 1 ? "" : "es") + " of unicastTargets could not be sent (" +
                 sweepFailure_ + ")");
        log.debug() << configuration_ << ": unicast sweep sent " << sweepSent_ << " Probes";
        // The first snapshot waits for answers to the last of them.
        if (!firstWindowDone_) startWindow();
    }

    void receiveProbeMatches() {
        probeSocket_.async_receive_from(
            asio::buffer(probeBuffer_), probeSender_,
            [this, alive = lifetime_.token()](const boost::system::error_code& error, std::size_t size) {
                if (alive.expired() || error == asio::error::operation_aborted) return;
                if (!error) handleDatagram(std::string_view(probeBuffer_.data(), size), probeSender_, true);
                receiveProbeMatches();
            });
    }

    void receiveAnnouncements() {
        listenSocket_.async_receive_from(
            asio::buffer(listenBuffer_), listenSender_,
            [this, alive = lifetime_.token()](const boost::system::error_code& error, std::size_t size) {
                if (alive.expired() || error == asio::error::operation_aborted) return;
                if (!error)
                    handleDatagram(std::string_view(listenBuffer_.data(), size), listenSender_, false);
                receiveAnnouncements();
            });
    }

    // The IPv6 sockets: `answers` for the Probe socket (ProbeMatches), else Hello and Bye.
    void receive(DiscoverySocket& from, bool answers) {
        from.socket.async_receive_from(asio::buffer(from.buffer), from.sender,
                                       [this, &from, answers, alive = lifetime_.token()](
                                           const boost::system::error_code& error, std::size_t size) {
                                           if (alive.expired() || error == asio::error::operation_aborted)
                                               return;
                                           if (!error)
                                               handleDatagram(std::string_view(from.buffer.data(), size),
                                                              from.sender, answers);
                                           receive(from, answers);
                                       });
    }

    void handleDatagram(std::string_view datagram, const udp::endpoint& sender, bool answers) {
        const std::string from = senderAddress(sender);
        if (!rateLimit_.admit(from, std::chrono::steady_clock::now())) {
            ignore({from,
                    "",
                    "",
                    {},
                    "rate-limited (more than " + std::to_string(int(rateLimit_.burst())) +
                        " datagrams at once, " + std::to_string(int(rateLimit_.perSecond())) + " a second)"});
            probeAgain(sender);
            return;
        }
        std::string error;
        std::optional<DiscoveryMessage> message = decodeDiscovery(datagram, error);
        if (!message) {
            ignore({from, "", "", {}, error});
            return;
        }
        const std::string kind = describe(message->kind);
        // A retransmission repeats the MessageID from the same sender. Two cameras of one
        // firmware can send the same MessageID: it identifies a message only with its sender.
        if (!message->messageId.empty() && !seenIds_.insert(from + " " + message->messageId)) {
            ignore({from, kind, uuidOf(*message), {}, kDuplicate});
            return;
        }
        if (message->droppedEndpoints > 0)
            ignore({from,
                    kind,
                    "",
                    {},
                    std::to_string(message->droppedEndpoints) + " of its matches unread (past " +
                        std::to_string(kMaxEndpointsPerMessage) + ", or without an address)"});
        if (answers) {
            if (message->kind == DiscoveryKind::ProbeMatches) {
                if (!sentIds_.contains(message->relatesTo)) {
                    ignore({from, kind, uuidOf(*message), {}, "answers no Probe of ours"});
                    return;
                }
                for (const DiscoveredEndpoint& endpoint : message->endpoints)
                    found(endpoint, kind, from, sender);
            } else if (message->kind == DiscoveryKind::ResolveMatches) {
                resolved(*message, from, sender);
            } else if (message->kind != DiscoveryKind::Probe && message->kind != DiscoveryKind::Resolve) {
                ignore({from, kind, uuidOf(*message), {}, "not an answer to a Probe or Resolve"});
            }
        } else if (message->kind == DiscoveryKind::Hello) {
            for (const DiscoveredEndpoint& endpoint : message->endpoints) found(endpoint, kind, from, sender);
        } else if (message->kind == DiscoveryKind::Bye) {
            for (const DiscoveredEndpoint& endpoint : message->endpoints) bye(endpoint, from);
        }
        // Probes and Resolves of other clients on the group are normal traffic: not reported.
    }

    static std::string uuidOf(const DiscoveryMessage& message) {
        return message.endpoints.empty() ? "" : endpointUuid(message.endpoints.front().address);
    }

    // Remembers an answer that was not used, for `devlet probe onvif` and the status page;
    // true when it is a new entry. The daemon keeps what was seen in this cycle and the last
    // (a spoofer that left drops off the status page) and only counts retransmissions, which
    // every camera sends and the status page does not show.
    bool ignore(IgnoredAnswer answer) {
        for (std::size_t i = 0; i < ignoredAnswers_.size(); ++i) {
            IgnoredAnswer& known = ignoredAnswers_[i];
            if (known.sender == answer.sender && known.uuid == answer.uuid && known.reason == answer.reason) {
                ++known.count;
                ignoredCycle_[i] = cycles_;
                return false;
            }
        }
        if (!mode_.pass && answer.reason == kDuplicate) return false;
        if (ignoredAnswers_.size() >= kMaxIgnoredAnswers) {
            ++ignoredOverflow_;
            return false;
        }
        log.debug() << configuration_ << ": ignored " << ignoredAnswerName(answer) << ": " << answer.reason;
        ignoredAnswers_.push_back(std::move(answer));
        ignoredCycle_.push_back(cycles_);
        if (firstWindowDone_) reportScan(false);
        return true;
    }

    // At the start of a cycle: ignored answers not seen in the last two are forgotten.
    void forgetOldIgnoredAnswers() {
        std::size_t kept = 0;
        for (std::size_t i = 0; i < ignoredAnswers_.size(); ++i) {
            if (ignoredCycle_[i] + 1 < cycles_) continue;
            ignoredAnswers_[kept] = std::move(ignoredAnswers_[i]);
            ignoredCycle_[kept] = ignoredCycle_[i];
            ++kept;
        }
        ignoredAnswers_.resize(kept);
        ignoredCycle_.resize(kept);
    }

    // A ProbeMatch, ResolveMatch or Hello from `from`: a camera to query, or an answer to
    // report. A camera is queried only at the address that sent the datagram (or inside
    // unicastTargets): anyone on the segment can answer a Probe or say Hello, and a device
    // service URL elsewhere would make devlet call, and send credentials to, a host the
    // announcer chose.
    void found(const DiscoveredEndpoint& endpoint, const std::string& how, const std::string& from,
               const udp::endpoint& sender) {
        const std::string uuid = endpointUuid(endpoint.address);
        IgnoredAnswer answer{from, how, uuid, endpoint.xaddrs, ""};
        if (uuid.empty()) {
            answer.reason = "no endpoint uuid";
            ignore(std::move(answer));
            return;
        }
        if (!isCamera(endpoint.types)) {
            if (std::find(notCameras_.begin(), notCameras_.end(), endpoint.address) == notCameras_.end() &&
                notCameras_.size() < 64)
                notCameras_.push_back(endpoint.address);
            answer.reason = "not a camera (Types: " + joined(endpoint.types) + ")";
            ignore(std::move(answer));
            return;
        }
        if (auto why = discoveryFilterOut(details_, uuid, endpoint.scopes)) {
            // Remembered for the status page; never queried: a filtered camera gets no credentials.
            for (const std::string& url : endpoint.xaddrs) {
                const std::string key = url + "-" + uuid;
                if (excluded_.size() >= kMaxCameras && !excluded_.count(key)) break;
                excluded_[key] = excludedCameraStatus(uuid, url, endpoint.scopes, *why);
            }
            answer.reason = "filtered: " + *why;
            ignore(std::move(answer));
            return;
        }
        if (endpoint.xaddrs.empty()) {
            // WS-Discovery's answer to an announcement without service URLs: ask the sender.
            sendResolve(endpoint, from, sender);
            return;
        }
        std::string url;
        for (const std::string& candidate : endpoint.xaddrs) {
            if (urlHostIs(candidate, from)) {
                url = candidate;
                break;
            }
        }
        if (url.empty()) {
            for (const std::string& candidate : endpoint.xaddrs) {
                if (urlHostInRanges(candidate, details_.unicastTargets)) {
                    url = candidate;
                    break;
                }
            }
        }
        if (url.empty() && knownAt(uuid, endpoint.xaddrs)) {
            // A camera found already, answering from its other address (a dual-stack camera
            // answers the IPv6 Probe from its link-local address and names its IPv4 URL):
            // nothing new, and nothing is done with it.
            return;
        }
        if (url.empty()) {
            answer.reason = "XAddrs not at the sender's address";
            const std::string urls = joined(endpoint.xaddrs);
            if (ignore(std::move(answer)) && !mode_.pass)
                log.warning() << configuration_ << ": " << how << " from " << from << " names camera " << uuid
                              << " at " << urls << ", not at its own address: not queried";
            return;
        }
        const std::string key = url + "-" + uuid;
        // One endpoint uuid is one camera: the same uuid from another address of the same
        // family is the camera at a new address, or a second host claiming it. The daemon
        // asks the camera where it was found (claim()); a pass keeps the first.
        if (!cameras_.count(key)) {
            for (auto& [knownKey, camera] : cameras_) {
                if (camera.observation.uuid != uuid || camera.sender == from) continue;
                if (isIpv6(camera.sender) != isIpv6(from)) continue;
                if (mode_.pass) {
                    if (camera.left || camera.missed >= details_.missedChecks) continue;
                    answer.reason = "uuid already announced by " + camera.sender;
                    ignore(std::move(answer));
                    return;
                }
                claim(knownKey,
                      MoveClaim{how, from, url, endpoint.xaddrs, endpoint.scopes, endpoint.metadataVersion});
                return;
            }
        }
        auto it = cameras_.find(key);
        if (it == cameras_.end()) {
            if (cameras_.size() >= kMaxCameras) {
                if (capIgnored_++ == 0)
                    log.warning() << configuration_ << ": camera cap of " << kMaxCameras
                                  << " reached; further cameras are ignored";
                answer.reason = "camera cap of " + std::to_string(kMaxCameras) + " reached";
                ignore(std::move(answer));
                reportProblem(refusedCameras());
                return;
            }
            Camera camera;
            camera.observation.uuid = uuid;
            camera.observation.serviceUrl = url;
            camera.observation.scopes = endpoint.scopes;
            camera.sender = from;
            camera.metadataVersion = endpoint.metadataVersion;
            it = cameras_.emplace(key, std::move(camera)).first;
            log.debug() << configuration_ << ": " << how << " from camera " << uuid << " at " << url;
            query(key);
            return;
        }
        Camera& camera = it->second;
        camera.observation.scopes = endpoint.scopes;
        camera.sender = from;
        const bool wasGone = camera.left || camera.missed >= details_.missedChecks;
        // A new MetadataVersion says the camera's description changed (profiles, addresses).
        const bool changed = endpoint.metadataVersion != camera.metadataVersion;
        if (changed && !wasGone)
            log.info() << configuration_ << ": camera " << uuid << " announced metadata version "
                       << endpoint.metadataVersion << " (was " << camera.metadataVersion
                       << "); queried again";
        camera.metadataVersion = endpoint.metadataVersion;
        camera.left = false;
        if ((wasGone || changed) && !camera.busy) {
            camera.missed = 0;
            query(key);
        }
    }

    // A sender claims the uuid of the camera at `key`. A camera whose address changed (a new
    // DHCP lease) says Hello from its new one, and no longer answers at the old: then it is
    // the same camera, and keeps its instance. While it still answers where it was found,
    // the claimant is a second host using its uuid and is not listened to.
    void claim(const std::string& key, MoveClaim claim) {
        Camera& camera = cameras_.at(key);
        const auto now = std::chrono::steady_clock::now();
        std::erase_if(camera.refusedClaims,
                      [&](const auto& refused) { return now - refused.second >= kClaimCheckedAgainAfter; });
        if (camera.refusedClaims.count(claim.sender) || camera.refusedClaims.size() >= kMaxClaims) {
            ignore({claim.sender, claim.how, camera.observation.uuid, claim.xaddrs, clashReason(camera)});
            return;
        }
        auto same = std::find_if(camera.claims.begin(), camera.claims.end(),
                                 [&](const MoveClaim& c) { return c.sender == claim.sender; });
        if (same != camera.claims.end()) {
            *same = std::move(claim);  // its latest word, for the move
            return;
        }
        if (camera.claims.size() >= kMaxClaims) {
            ignore({claim.sender, claim.how, camera.observation.uuid, claim.xaddrs,
                    "uuid claimed by more than " + std::to_string(kMaxClaims) + " hosts at once"});
            return;
        }
        log.debug() << configuration_ << ": " << claim.how << " from " << claim.sender << " names camera "
                    << camera.observation.uuid << ", known at " << camera.observation.serviceUrl
                    << "; asking it there";
        camera.claims.push_back(std::move(claim));
        if (!camera.busy) checkClaims(key);
    }

    static std::string clashReason(const Camera& camera) {
        return "uuid already announced by " + camera.sender + ", which still answers";
    }

    // The liveness call to the camera's known address, on behalf of the claims.
    void checkClaims(const std::string& key) {
        Camera& camera = cameras_.at(key);
        camera.busy = true;
        QueryOptions options;
        options.cancelled = pool_->cancelled();
        pool_->submit([channel = channel_, key, url = camera.observation.serviceUrl, options, this,
                       alive = lifetime_.token()] {
            if (channel->closed) return;
            CameraReport result = checkCamera(url, options);
            channel->post([this, alive, key, result = std::move(result)] {
                if (!alive.expired()) claimsChecked(key, result);
            });
        });
    }

    void claimsChecked(const std::string& key, const CameraReport& result) {
        auto it = cameras_.find(key);
        if (it == cameras_.end()) return;
        Camera& camera = it->second;
        camera.busy = false;
        std::vector<MoveClaim> claims = std::move(camera.claims);
        camera.claims.clear();
        if (claims.empty()) return;
        const std::string& uuid = camera.observation.uuid;
        if (result.state == CameraState::UpWithAuth || result.state == CameraState::UpWithoutAuth) {
            const bool wasGone = camera.left || camera.missed >= details_.missedChecks;
            camera.missed = 0;
            camera.left = false;
            camera.observation.report.clockOffset = result.clockOffset;
            for (const MoveClaim& claim : claims) {
                camera.refusedClaims[claim.sender] = std::chrono::steady_clock::now();
                if (ignore({claim.sender, claim.how, uuid, claim.xaddrs, clashReason(camera)}))
                    log.warning() << configuration_ << ": " << claim.how << " from " << claim.sender
                                  << " claims camera " << uuid << ", which still answers at "
                                  << camera.observation.serviceUrl << ": ignored";
            }
            if (wasGone) query(key);  // back where it was: read it again
            return;
        }
        if (claims.size() > 1) {
            // The camera is gone from its address and several hosts say they are it: none
            // is believed. A camera that moved alone says Hello again or answers the next Probe.
            std::string senders;
            for (const MoveClaim& claim : claims) senders += (senders.empty() ? "" : ", ") + claim.sender;
            for (const MoveClaim& claim : claims)
                ignore({claim.sender, claim.how, uuid, claim.xaddrs,
                        "uuid claimed by several hosts at once (" + senders +
                            ") while the camera does not "
                            "answer at " +
                            camera.observation.serviceUrl + "; none is taken for it"});
            log.warning() << configuration_ << ": camera " << uuid << " does not answer at "
                          << camera.observation.serviceUrl << " and " << senders
                          << " claim its uuid: not moved";
            return;
        }
        move(key, std::move(claims.front()), result.error);
    }

    // Re-keys the camera to the claimant's service URL and queries it there. The instance
    // keeps its id (and so its name, its slots and the pods holding them); its properties
    // change once the query at the new address returns (queried()).
    void move(const std::string& key, MoveClaim claim, const std::string& why) {
        auto node = cameras_.extract(key);
        Camera& camera = node.mapped();
        const std::string uuid = camera.observation.uuid;
        const std::string newKey = claim.url + "-" + uuid;
        if (cameras_.count(newKey)) {
            // Found at the new address on its own meanwhile: that one stands.
            cameras_.insert(std::move(node));
            return;
        }
        camera.observation.firstInstanceId = cameraInstanceId(camera.observation);
        camera.observation.scopes = claim.scopes;
        camera.sender = claim.sender;
        camera.metadataVersion = claim.metadataVersion;
        camera.left = false;
        camera.missed = 0;
        camera.refusedClaims.clear();
        log.info() << configuration_ << ": camera " << uuid << " moved from " << camera.observation.serviceUrl
                   << " to " << claim.url << " (" << claim.how << " from " << claim.sender
                   << "; no answer at the old address: " << why << "); instance "
                   << camera.observation.firstInstanceId << " kept";
        node.key() = newKey;
        cameras_.insert(std::move(node));
        query(newKey, claim.url);
    }

    // A call on the camera returned: claims that waited for it are checked now.
    void checkWaitingClaims(const std::string& key) {
        auto it = cameras_.find(key);
        if (it != cameras_.end() && !it->second.claims.empty() && !it->second.busy) checkClaims(key);
    }

    // Whether a camera with this uuid was found at one of these service URLs.
    bool knownAt(const std::string& uuid, const std::vector<std::string>& urls) const {
        for (const std::string& url : urls)
            if (cameras_.count(url + "-" + uuid)) return true;
        return false;
    }

    static bool isIpv6(const std::string& address) { return address.find(':') != std::string::npos; }

    static std::string joined(const std::vector<std::string>& items) {
        std::string text;
        for (const std::string& item : items) text += (text.empty() ? "" : " ") + item;
        return text.empty() ? "none" : text;
    }

    // What a sender over its share said is not read, and it may have been a camera's Hello
    // in a burst: once its share has refilled, the sender is asked with a unicast Probe, so
    // a camera is not missed until the next rescan. A flooding host gets one Probe a second.
    void probeAgain(udp::endpoint sender) {
        if (probedAgain_.size() >= kMaxProbedAgain) return;
        if (sender.address().is_v6() && sender.address().to_v6().is_v4_mapped())
            sender.address(asio::ip::make_address_v4(asio::ip::v4_mapped, sender.address().to_v6()));
        sender.port(kDiscoveryPort);
        probedAgain_.insert(sender);
        if (probeAgainArmed_) return;
        probeAgainArmed_ = true;
        probeAgainTimer_.expires_after(std::chrono::seconds(1));
        probeAgainTimer_.async_wait([this, alive = lifetime_.token()](const boost::system::error_code& e) {
            if (e || alive.expired()) return;
            probeAgainArmed_ = false;
            const std::string id = newMessageId();
            sentIds_.insert(id);
            const std::string probe = encodeProbe(id);
            for (const udp::endpoint& target : probedAgain_) {
                udp::socket* socket = target.address().is_v4() ? &probeSocket_
                                      : probe6_                ? &probe6_->socket
                                                               : nullptr;
                if (!socket || !socket->is_open()) continue;
                boost::system::error_code error;
                socket->send_to(asio::buffer(probe), target, 0, error);
            }
            probedAgain_.clear();
        });
    }

    // A Resolve for the endpoint, unicast to the host that announced it.
    void sendResolve(const DiscoveredEndpoint& endpoint, const std::string& from,
                     const udp::endpoint& sender) {
        const std::string uuid = endpointUuid(endpoint.address);
        const auto now = std::chrono::steady_clock::now();
        for (const auto& [id, pending] : resolves_)
            if (pending.sender == from && pending.uuid == uuid && now - pending.sent < kResolveAgainAfter)
                return;  // asked a moment ago
        udp::socket* socket = nullptr;
        if (sender.address().is_v4() ||
            (sender.address().is_v6() && sender.address().to_v6().is_v4_mapped())) {
            if (probeSocket_.is_open()) socket = &probeSocket_;
        } else if (probe6_) {
            socket = &probe6_->socket;
        }
        if (!socket) {
            ignore({from, "", uuid, {}, "no XAddrs, and no socket to send a Resolve on"});
            return;
        }
        const std::string id = newMessageId();
        const std::string resolve = encodeResolve(id, endpoint.address);
        udp::endpoint target = sender;
        target.port(kDiscoveryPort);
        if (target.address().is_v6() && target.address().to_v6().is_v4_mapped())
            target.address(asio::ip::make_address_v4(asio::ip::v4_mapped, target.address().to_v6()));
        boost::system::error_code error;
        socket->send_to(asio::buffer(resolve), target, 0, error);
        if (error) {
            ignore({from, "", uuid, {}, "no XAddrs, and the Resolve could not be sent: " + error.message()});
            return;
        }
        if (resolveOrder_.size() >= kMaxPendingResolves) {
            resolves_.erase(resolveOrder_.front());
            resolveOrder_.pop_front();
        }
        resolves_[id] = PendingResolve{from, uuid, now};
        resolveOrder_.push_back(id);
        log.debug() << configuration_ << ": camera " << uuid << " at " << from
                    << " named no XAddrs; sent a Resolve";
    }

    // ResolveMatches count only from the host the Resolve went to, for the endpoint it asked.
    void resolved(const DiscoveryMessage& message, const std::string& from, const udp::endpoint& sender) {
        auto it = resolves_.find(message.relatesTo);
        if (it == resolves_.end() || it->second.sender != from) {
            ignore(
                {from, "ResolveMatches", uuidOf(message), {}, "answers no Resolve of ours to this address"});
            return;
        }
        const std::string uuid = it->second.uuid;
        resolves_.erase(it);
        std::erase(resolveOrder_, message.relatesTo);
        for (const DiscoveredEndpoint& endpoint : message.endpoints) {
            if (endpointUuid(endpoint.address) != uuid) {
                ignore({from, "ResolveMatches", endpointUuid(endpoint.address), endpoint.xaddrs,
                        "resolves an endpoint that was not asked for"});
                continue;
            }
            if (endpoint.xaddrs.empty()) {
                ignore({from, "ResolveMatches", uuid, {}, "no XAddrs in the ResolveMatch either"});
                continue;
            }
            found(endpoint, "ResolveMatches", from, sender);
        }
    }

    // A Bye counts only from the address the camera was found at: anyone can send one.
    void bye(const DiscoveredEndpoint& endpoint, const std::string& from) {
        const std::string uuid = endpointUuid(endpoint.address);
        std::erase_if(excluded_, [&](const auto& entry) { return entry.second.uuid == uuid; });
        bool changed = false;
        bool elsewhere = false;
        for (auto& [key, camera] : cameras_) {
            if (camera.observation.uuid != uuid || camera.left) continue;
            if (camera.sender != from && !urlHostIs(camera.observation.serviceUrl, from)) {
                elsewhere = true;
                continue;
            }
            camera.left = true;
            changed = true;
        }
        if (elsewhere && !changed)
            ignore({from, "Bye", uuid, {}, "Bye for a camera found at another address"});
        if (changed) {
            log.info() << configuration_ << ": camera " << uuid << " said Bye";
            report();
        }
    }

    std::vector<std::string> refusedCameras() const {
        std::vector<std::string> refused;
        for (const auto& [key, camera] : cameras_) {
            if (!camera.queried || camera.left || camera.missed >= details_.missedChecks) continue;
            if (camera.observation.report.auth == AuthResult::Refused)
                refused.push_back(camera.observation.uuid);
        }
        return refused;
    }

    // The credential for the host the query contacts (`url`'s), within its scope.
    CredentialChoice credentialFor(const Camera& camera, const std::string& url) const {
        return credentials_.find(camera.observation.uuid, urlHost(url), camera.observation.report.macAddress);
    }

    // The full query on a worker, at the camera's service URL or, for a camera that moved,
    // at its new one.
    void query(const std::string& key, std::optional<std::string> at = std::nullopt) {
        Camera& camera = cameras_.at(key);
        camera.busy = true;
        const std::string url = at ? *at : camera.observation.serviceUrl;
        QueryOptions options;
        options.cancelled = pool_->cancelled();
        CredentialChoice choice = credentialFor(camera, url);
        options.credentialWithheld = choice.withheld;
        options.authScheme = camera.observation.report.authScheme;
        pool_->submit([channel = channel_, key, url, credential = std::move(choice.credential), options, this,
                       alive = lifetime_.token()] {
            if (channel->closed) return;
            CameraReport result = queryCamera(url, credential, options);
            channel->post([this, alive, key, url, result = std::move(result)]() mutable {
                if (!alive.expired()) queried(key, url, std::move(result));
            });
        });
    }

    void queried(const std::string& key, const std::string& url, CameraReport result) {
        queriedAt(key, url, std::move(result));
        checkWaitingClaims(key);
    }

    void queriedAt(const std::string& key, const std::string& url, CameraReport result) {
        auto it = cameras_.find(key);
        if (it == cameras_.end()) return;
        Camera& camera = it->second;
        camera.busy = false;
        camera.answered = true;
        if (url != camera.observation.serviceUrl) {
            // The first query after a move: the camera is known at its new address from now on.
            camera.observation.movedFrom = camera.observation.serviceUrl;
            camera.observation.serviceUrl = url;
        }
        const bool up = result.state == CameraState::UpWithAuth || result.state == CameraState::UpWithoutAuth;
        if (!up) {
            ++camera.missed;
            camera.lastCheck = result.state;
            camera.lastCheckError = result.error;
            log.debug() << configuration_ << ": camera " << camera.observation.uuid << " at "
                        << camera.observation.serviceUrl << " is " << describe(result.state) << ": "
                        << result.error;
            if (!camera.queried) camera.observation.report = result;
            report();
            return;
        }
        if (result.auth == AuthResult::Refused && !mode_.pass)
            log.warning() << configuration_ << ": camera " << camera.observation.uuid << " at "
                          << camera.observation.serviceUrl << ": authentication failed";
        camera.missed = 0;
        camera.queried = true;
        camera.observation.report = std::move(result);
        report();
    }

    void scheduleLiveness() {
        if (!running_) return;
        livenessTimer_.expires_after(details_.livenessInterval);
        livenessTimer_.async_wait([this, alive = lifetime_.token()](const boost::system::error_code& e) {
            if (e || alive.expired()) return;
            checkAll();
            scheduleLiveness();
        });
    }

    void checkAll() {
        std::erase_if(cameras_, [&](const auto& entry) {
            return !entry.second.busy && (entry.second.left || entry.second.missed >= kForgetAfterMisses);
        });
        for (auto& [key, camera] : cameras_) {
            if (camera.busy) continue;
            // A camera never fully queried, or back after missing, gets the full query.
            if (!camera.queried || camera.missed > 0) {
                query(key);
                continue;
            }
            camera.busy = true;
            QueryOptions options;
            options.cancelled = pool_->cancelled();
            // key = key: clang before 16 cannot capture a structured binding.
            pool_->submit([channel = channel_, key = key, url = camera.observation.serviceUrl, options, this,
                           alive = lifetime_.token()] {
                if (channel->closed) return;
                CameraReport result = checkCamera(url, options);
                channel->post([this, alive, key, result = std::move(result)] {
                    if (alive.expired()) return;
                    checked(key, result);
                    checkWaitingClaims(key);
                });
            });
        }
    }

    void checked(const std::string& key, const CameraReport& result) {
        auto it = cameras_.find(key);
        if (it == cameras_.end()) return;
        Camera& camera = it->second;
        camera.busy = false;
        if (result.state == CameraState::UpWithAuth || result.state == CameraState::UpWithoutAuth) {
            camera.missed = 0;
            camera.observation.report.clockOffset = result.clockOffset;
            return;
        }
        ++camera.missed;
        camera.lastCheck = result.state;
        camera.lastCheckError = result.error;
        if (camera.missed == details_.missedChecks) {
            log.info() << configuration_ << ": camera " << camera.observation.uuid << " at "
                       << camera.observation.serviceUrl << " stopped answering (" << result.error << ")";
            report();
        }
    }

    // cycleEnd: a discovery cycle's answer window just closed, the end of a pass.
    void report(bool cycleEnd = false) {
        if (!firstWindowDone_ || !running_) return;
        std::vector<CameraObservation> present;
        for (const auto& [key, camera] : cameras_) {
            if (!camera.queried || camera.left || camera.missed >= details_.missedChecks) continue;
            present.push_back(camera.observation);
        }
        reportProblem(refusedCameras());
        refreshStatuses();
        std::vector<Instance> instances = classifyOnvif(present, details_);
        if (!reported_ || !(*reported_ == instances)) {
            if (!reported_ || reported_->size() != instances.size())
                log.info() << configuration_ << ": " << instances.size() << " camera"
                           << (instances.size() == 1 ? "" : "s") << " offered";
            reported_ = instances;
            sink_.reportSnapshot(configuration_, std::move(instances));
        }
        reportScan(cycleEnd);
    }

    // The status page's view of the cameras: the state of those offered, and why the others
    // are not. Sent at the end of every cycle, and between cycles when it changed.
    void reportScan(bool cycleEnd) {
        ScanReport scan;
        for (const CameraStatus& camera : statuses_) {
            if (camera.offered) {
                scan.deviceStates[camera.instanceId] = describe(camera.status);
                if (std::vector<std::string> notes = addressNotes(camera); !notes.empty())
                    scan.deviceNotes[camera.instanceId] = std::move(notes);
            } else if (camera.status != DeviceStatus::Querying) {
                scan.excluded.push_back(
                    {camera.instanceId.empty() ? camera.uuid : camera.instanceId, camera.reason, 1});
            }
        }
        // Answers not used, but for retransmissions: every camera repeats itself.
        for (const IgnoredAnswer& answer : ignoredAnswers_)
            if (answer.reason != kDuplicate)
                scan.excluded.push_back({ignoredAnswerName(answer), answer.reason, 1});
        if (!cycleEnd && scan.excluded == scanned_.excluded && scan.deviceStates == scanned_.deviceStates &&
            scan.deviceNotes == scanned_.deviceNotes)
            return;
        scan.duration = std::chrono::steady_clock::now() - cycleStart_;
        scanned_ = scan;
        sink_.reportScan(configuration_, std::move(scan));
    }

    CameraStatus statusOf(const Camera& camera) const {
        CameraProgress progress;
        progress.answered = camera.answered;
        progress.left = camera.left;
        progress.gone = camera.queried && camera.missed >= details_.missedChecks;
        progress.lastCheck = camera.lastCheck;
        progress.lastCheckError = camera.lastCheckError;
        return queriedCameraStatus(details_, camera.observation, progress);
    }

    // The one place each camera's state is kept for the status server (statuses_): a
    // change of a camera's state or offer is also a log line a user can follow.
    void refreshStatuses() {
        std::vector<CameraStatus> now = statuses();
        if (!mode_.pass) {
            std::map<std::string, const CameraStatus*> before;
            for (const CameraStatus& s : statuses_) before[s.instanceId] = &s;
            for (const CameraStatus& s : now) {
                auto it = before.find(s.instanceId);
                if (s.status == DeviceStatus::Querying) continue;
                if (it != before.end() && it->second->status == s.status && it->second->offered == s.offered)
                    continue;
                log.info() << configuration_ << ": camera " << s.uuid << " at " << s.serviceUrl << ": "
                           << describe(s.status)
                           << (s.offered ? std::string(", offered") : ", not offered: " + s.reason);
            }
        }
        statuses_ = std::move(now);
    }

    // The status page shows probe errors: an unusable credentials file and cameras that
    // refuse their credentials ("authentication failed") are what a user must fix.
    void reportProblem(const std::vector<std::string>& refused) {
        std::string problem = socketProblem_;
        if (!credentialsProblem_.empty()) problem += (problem.empty() ? "" : "; ") + credentialsProblem_;
        if (capIgnored_ > 0) problem += (problem.empty() ? "" : "; ") + capProblem();
        if (!refused.empty()) {
            if (!problem.empty()) problem += "; ";
            problem += "authentication failed for " + std::to_string(refused.size()) + " camera" +
                       (refused.size() == 1 ? "" : "s") + ":";
            for (std::size_t i = 0; i < refused.size() && i < 5; ++i) problem += " " + refused[i];
            if (refused.size() > 5) problem += " …";
        }
        if (problem == reportedProblem_) return;
        reportedProblem_ = problem;
        sink_.reportProbeError(configuration_, problem);
    }

    // The cap keeps one host from making the node register cameras without end; reaching it
    // is a configuration problem a user must see (a narrower configuration, or a filter).
    std::string capProblem() const {
        return "camera cap of " + std::to_string(kMaxCameras) + " reached; " + std::to_string(capIgnored_) +
               " answer" + (capIgnored_ == 1 ? "" : "s") + " ignored";
    }

    void fail(const std::string& message) {
        if (!mode_.pass) log.error() << configuration_ << ": " << message;
        socketProblem_ = message;
        reportProblem({});
    }

    std::string configuration_;
    OnvifDetails details_;
    ProbeMode mode_;
    asio::io_context& loop_;
    ProbeSink& sink_;
    std::shared_ptr<WorkerPool> pool_;
    std::shared_ptr<Channel> channel_;
    CredentialStore credentials_;
    std::map<std::string, std::string> akriCredentials_;  // from Secrets: the cluster mode's
    std::string credentialsProblem_;
    std::string reportedProblem_;
    std::string socketProblem_;
    std::map<std::string, Camera> cameras_;  // by instance id (service URL + uuid)
    // Cameras a discovery filter excluded, by instance id; at most kMaxCameras.
    std::map<std::string, CameraStatus> excluded_;
    // Each camera's state as of the last snapshot: what the status server is to show.
    std::vector<CameraStatus> statuses_;
    ScanReport scanned_;  // what reportScan() told the sink last
    std::chrono::steady_clock::time_point cycleStart_{};
    std::vector<std::string> notCameras_;  // endpoint addresses of responders that are no camera
    std::vector<std::string> notes_;       // a pass's warnings, for the command to print
    std::optional<std::vector<Instance>> reported_;
    RecentIds sentIds_{64};
    RecentIds seenIds_{kRememberedMessages};  // "<sender> <MessageID>"
    SenderRateLimit rateLimit_;
    std::vector<IgnoredAnswer> ignoredAnswers_;  // at most kMaxIgnoredAnswers
    std::vector<std::uint64_t> ignoredCycle_;    // the cycle each was last seen in
    std::uint64_t cycles_ = 0;                   // discovery cycles started
    std::uint64_t ignoredOverflow_ = 0;          // ignored answers past that
    std::uint64_t capIgnored_ = 0;               // answers ignored because of kMaxCameras
    struct PendingResolve {
        std::string sender;
        std::string uuid;
        std::chrono::steady_clock::time_point sent;
    };
    std::set<udp::endpoint> probedAgain_;  // rate-limited senders, asked again when the timer fires
    bool probeAgainArmed_ = false;
    std::map<std::string, PendingResolve> resolves_;  // by the Resolve's MessageID
    std::deque<std::string> resolveOrder_;
    std::string multicastId_;
    std::string unicastId_;
    std::string unicastProbe_;
    std::size_t unicastRange_ = 0;
    std::uint32_t unicastNext_ = 0;
    std::uint64_t unicastSent_ = 0;  // in all sweeps
    std::uint64_t sweepSent_ = 0;    // in the current one
    std::uint64_t sweepFailures_ = 0;
    std::string sweepFailure_;  // the first failed send of the sweep
    bool sweeping_ = false;
    bool running_ = false;
    bool firstWindowDone_ = false;
    Lifetime lifetime_;  // renewed by start(), ended by stop()
    std::array<char, kMaxDatagram> probeBuffer_{};
    std::array<char, kMaxDatagram> listenBuffer_{};
    udp::endpoint probeSender_;
    udp::endpoint listenSender_;
    std::vector<unsigned> ipv6Interfaces_;  // indexes the IPv6 Probe goes out on
    // Declared last: destroyed (and cancelled) before the state their handlers touch.
    udp::socket probeSocket_;
    udp::socket listenSocket_;
    std::unique_ptr<DiscoverySocket> probe6_;   // with `ipv6: true`
    std::unique_ptr<DiscoverySocket> listen6_;  // with `ipv6: true`, not in a pass
    asio::steady_timer cycleTimer_;
    asio::steady_timer windowTimer_;
    asio::steady_timer livenessTimer_;
    asio::steady_timer unicastTimer_;
    asio::steady_timer probeAgainTimer_;
};

// Takes a pass's probes' snapshots and errors; the pass reads the probes themselves.
class IgnoringSink : public ProbeSink {
public:
    void reportSnapshot(const std::string&, std::vector<Instance>) override {}
    void reportProbeError(const std::string&, const std::string&) override {}
};

}  // namespace

std::vector<OnvifPassResult> runOnvifPass(const std::vector<OnvifPassRequest>& requests,
                                          std::chrono::milliseconds limit, std::size_t workers) {
    asio::io_context loop;
    IgnoringSink sink;
    auto pool = std::make_shared<WorkerPool>(workers);
    std::vector<std::unique_ptr<OnvifProbe>> probes;
    for (const OnvifPassRequest& request : requests) {
        ProbeMode mode{true, request.credential};
        probes.push_back(std::make_unique<OnvifProbe>(request.configuration, request.details, loop, sink,
                                                      pool, std::move(mode)));
    }
    for (auto& probe : probes) probe->start();
    // The longest window plus the limit: a camera that takes longer is reported as being queried.
    std::chrono::milliseconds longest{0};
    for (const OnvifPassRequest& request : requests)
        longest = std::max(longest, request.details.discoveryTimeout);
    const auto deadline = std::chrono::steady_clock::now() + longest + limit;
    auto done = [&] {
        return std::all_of(probes.begin(), probes.end(), [](const auto& p) { return p->passDone(); });
    };
    while (!done() && std::chrono::steady_clock::now() < deadline) {
        loop.restart();
        loop.run_for(std::chrono::milliseconds(20));
    }
    std::vector<OnvifPassResult> results;
    for (auto& probe : probes) {
        results.push_back(probe->passResult());
        probe->stop();
    }
    return results;
}

OnvifHandler::OnvifHandler(std::size_t workers) : workers_(workers) {}

OnvifHandler::~OnvifHandler() = default;

std::vector<DetailsProblem> OnvifHandler::check(const Configuration& configuration) const {
    std::vector<DetailsProblem> problems;
    parseOnvifDetails(configuration.discoveryDetails, problems);
    return problems;
}

std::vector<PropertyWarning> OnvifHandler::checkDiscoveryProperties(
    const Configuration& configuration) const {
    std::set<std::string> fromSecrets;
    for (const PropertyReference& reference : configuration.propertyReferences)
        fromSecrets.insert(reference.property);
    return onvifPropertyWarnings(configuration.discoveryProperties, fromSecrets);
}

std::unique_ptr<Probe> OnvifHandler::createProbe(const Configuration& configuration, asio::io_context& loop,
                                                 ProbeSink& sink) {
    std::vector<DetailsProblem> problems;
    OnvifDetails details = parseOnvifDetails(configuration.discoveryDetails, problems);
    if (!pool_) pool_ = std::make_shared<WorkerPool>(workers_);
    auto probe = std::make_unique<OnvifProbe>(configuration.name, std::move(details), loop, sink, pool_);
    probe->setAkriCredentials(
        akriCredentialProperties(configuration.discoveryProperties, configuration.referencedProperties));
    return probe;
}

}  // namespace devlet::onvif
