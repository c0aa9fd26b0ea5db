#include "probes/onvif/onvif_handler.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <variant>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/multicast.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include "probes/onvif/credentials.h"
#include "probes/onvif/network_interfaces.h"
#include "probes/onvif/onvif_cameras.h"
#include "probes/onvif/onvif_client.h"
#include "probes/onvif/onvif_details.h"
#include "probes/onvif/soap_wire.h"
#include "runtime/clock.h"
#include "runtime/configuration.h"
#include "runtime/lifetime.h"
#include "runtime/log.h"
#include "runtime/thread_bound.h"

namespace devlet::onvif {

namespace asio = boost::asio;
using udp = asio::ip::udp;

namespace {
constexpr Log log{"onvif"};
constexpr unsigned short kDiscoveryPort = 3702;
const asio::ip::address_v4 kDiscoveryGroup = asio::ip::make_address_v4("239.255.255.250");
// Senders over their share that are asked again with a unicast Probe, at most this many at
// a time, once a second.
constexpr std::size_t kMaxProbedAgain = 256;

// WS-Discovery's IPv6 group, link-local: a Probe goes out on each interface separately.
const asio::ip::address_v6 kDiscoveryGroup6 = asio::ip::make_address_v6("ff02::c");

// The address a datagram came from, as text; an IPv4-mapped IPv6 address as IPv4.
std::string senderAddress(const udp::endpoint& sender) {
    asio::ip::address address = sender.address();
    if (address.is_v6() && address.to_v6().is_v4_mapped())
        address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
    return address.to_string();
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

// The route from the workers back to a probe's loop while the probe runs. Guarded by
// `mutex`: workers read `loop`, the probe clears it on stop, after which nothing is posted
// and work not yet begun is skipped (a worker never posts to a loop that is gone).
struct Channel {
    std::mutex mutex;
    asio::io_context* loop = nullptr;
    bool open() {
        std::lock_guard lock(mutex);
        return loop != nullptr;
    }
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

// The address a Resolve or a second Probe goes to: the datagram's sender at port 3702,
// an IPv4-mapped IPv6 address as IPv4.
udp::endpoint discoveryPortOf(udp::endpoint sender) {
    if (sender.address().is_v6() && sender.address().to_v6().is_v4_mapped())
        sender.address(asio::ip::make_address_v4(asio::ip::v4_mapped, sender.address().to_v6()));
    sender.port(kDiscoveryPort);
    return sender;
}

// What a probe is for: the daemon's long-running discovery, or one pass of
// `devlet probe onvif`, which probes once, listens for no Hello and checks no liveness.
struct ProbeMode {
    bool pass = false;
    std::optional<Credential> credential;  // replaces the configuration's credentials
};

// The OS side of one configuration's discovery: the WS-Discovery sockets, the timers of the
// discovery cycle, the unicast sweep and the liveness checks, and the calls handed to the
// worker pool. What the datagrams and answers mean is OnvifCameras' to say (onvif_cameras.h);
// this class feeds it and carries out what it returns. Lives on the loop thread.
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
          cameras_(configuration_, details_, mode_.pass),
          probeSocket_(loop),
          listenSocket_(loop),
          cycleTimer_(loop),
          windowTimer_(loop),
          livenessTimer_(loop),
          unicastTimer_(loop),
          probeAgainTimer_(loop) {}

    ~OnvifProbe() override {
        // A pass's probes and a test's may be destroyed off the loop once it no longer runs.
        loopThread_.release();
        stop();
    }

    // Akri's credential properties, read from Secrets (cluster mode); before start().
    void setAkriCredentials(std::map<std::string, std::string> properties) {
        loopThread_.check();
        akriCredentials_ = std::move(properties);
    }

    void start() override {
        loopThread_.check();
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
        loopThread_.check();
        if (cameras_.networkProblem().empty() && (!cameras_.firstWindowDone() || sweeping_)) return false;
        return !cameras_.callsInFlight();
    }

    OnvifPassResult passResult() const {
        loopThread_.check();
        OnvifPassResult result;
        result.configuration = configuration_;
        result.cameras = cameras_.statuses();
        result.problems = notes_;
        if (!cameras_.credentialsProblem().empty()) result.problems.push_back(cameras_.credentialsProblem());
        if (!cameras_.networkProblem().empty()) result.problems.push_back(cameras_.networkProblem());
        result.networkUnusable = !cameras_.networkProblem().empty();
        if (std::string cap = cameras_.capProblem(); !cap.empty()) result.problems.push_back(std::move(cap));
        result.notCameras = cameras_.notCameras();
        result.ignored = cameras_.ignoredAnswers();
        result.ignoredUnlisted = cameras_.ignoredUnlisted();
        result.unicastProbes = unicastSent_;
        return result;
    }

    void stop() override {
        loopThread_.check();
        if (!running_) return;
        running_ = false;
        lifetime_.end();
        {
            std::lock_guard lock(channel_->mutex);
            channel_->loop = nullptr;
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

    // Carries out what the cameras asked for. `sender`: the datagram being handled, where
    // Resolves and a second Probe go.
    void apply(CameraEffects effects, const udp::endpoint* sender = nullptr) {
        for (SinkReport& report : effects.reports) {
            if (auto* snapshot = std::get_if<OfferedSnapshot>(&report)) {
                sink_.reportSnapshot(configuration_, std::move(snapshot->instances));
            } else if (auto* problem = std::get_if<ProbeProblem>(&report)) {
                sink_.reportProbeError(configuration_, problem->message);
            } else {
                sink_.reportScan(configuration_, std::move(std::get<ScanReport>(report)));
            }
        }
        for (CameraCall& call : effects.calls) submit(std::move(call));
        if (!sender) return;
        for (const ResolveRequest& request : effects.resolves) sendResolve(request, *sender);
        if (effects.probeSenderAgain) probeAgain(*sender);
    }

    // A call on a worker; its result goes back to the cameras on the loop.
    void submit(CameraCall call) {
        QueryOptions options;
        options.cancelled = pool_->cancelled();
        options.credentialWithheld = call.credentialWithheld;
        options.authScheme = call.authScheme;
        std::optional<Credential> credential = std::move(call.credential);
        call.credential.reset();
        pool_->submit([channel = channel_, call = std::move(call), credential = std::move(credential),
                       options, this, alive = lifetime_.token()] {
            if (!channel->open()) return;
            CameraReport result = call.purpose == CameraCall::Purpose::Query
                                      ? queryCamera(call.url, credential, options)
                                      : checkCamera(call.url, options);
            channel->post([this, alive, call, result = std::move(result)]() mutable {
                if (!alive.expired()) apply(cameras_.callReturned(call, std::move(result), clock_.steady()));
            });
        });
    }

    void loadCredentials() {
        Outcome loaded = Outcome::ok();
        CredentialStore credentials;
        if (mode_.credential) {
            // `--user`: the addresses the command was pointed at (--target) and the subnets it
            // probes by multicast; an answer naming any other address gets no credential.
            std::vector<IpNetwork> networks = attachedNetworks(details_.interfaces);
            for (const Ipv4Range& range : details_.unicastTargets)
                networks.push_back(IpNetwork::fromRange(range));
            credentials =
                CredentialStore::withDefault(*mode_.credential, std::move(networks),
                                             "the --target ranges and the directly attached subnets");
        } else if (!details_.credentialsFile.empty()) {
            loaded = CredentialStore::load(details_.credentialsFile, credentials);
        } else if (!details_.credential.empty()) {
            loaded = CredentialStore::loadSystemdCredential(details_.credential, credentials);
        } else if (!akriCredentials_.empty()) {
            // As `--user`: Akri sends them to whatever answers; devlet only inside the subnets
            // it probes by multicast and the unicastTargets.
            std::vector<IpNetwork> networks = attachedNetworks(details_.interfaces);
            for (const Ipv4Range& range : details_.unicastTargets)
                networks.push_back(IpNetwork::fromRange(range));
            std::vector<std::string> notes;
            credentials = CredentialStore::fromAkriProperties(
                akriCredentials_, std::move(networks), "the directly attached subnets and unicastTargets",
                notes);
            for (const std::string& note : notes) warn("discoveryProperties from Secrets: " + note);
        }
        if ((!details_.credentialsFile.empty() || !details_.credential.empty()) && !akriCredentials_.empty())
            warn("discoveryProperties from Secrets are not used: discoveryDetails name a credentials file");
        std::string problem;
        if (!loaded) {
            problem = loaded.error();
            if (!mode_.pass) log.error() << configuration_ << ": " << loaded.error();
        } else if (!credentials.empty()) {
            log.debug() << configuration_ << ": " << credentials.size() << " credential entries loaded";
        }
        cameras_.setCredentials(std::move(credentials), std::move(problem));
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
        cameras_.cycleStarted(clock_.steady());
        const std::string multicastId = newMessageId();
        cameras_.probeSent(multicastId);
        const std::string probe = encodeProbe(multicastId);
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
            apply(cameras_.windowClosed(clock_.steady()));
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
        cameras_.probeSent(unicastId_);
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
        if (!cameras_.firstWindowDone()) startWindow();
    }

    void receiveProbeMatches() {
        probeSocket_.async_receive_from(
            asio::buffer(probeBuffer_), probeSender_,
            [this, alive = lifetime_.token()](const boost::system::error_code& error, std::size_t size) {
                if (alive.expired() || error == asio::error::operation_aborted) return;
                if (!error) datagram(std::string_view(probeBuffer_.data(), size), probeSender_, true);
                receiveProbeMatches();
            });
    }

    void receiveAnnouncements() {
        listenSocket_.async_receive_from(
            asio::buffer(listenBuffer_), listenSender_,
            [this, alive = lifetime_.token()](const boost::system::error_code& error, std::size_t size) {
                if (alive.expired() || error == asio::error::operation_aborted) return;
                if (!error) datagram(std::string_view(listenBuffer_.data(), size), listenSender_, false);
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
                                               datagram(std::string_view(from.buffer.data(), size),
                                                        from.sender, answers);
                                           receive(from, answers);
                                       });
    }

    void datagram(std::string_view bytes, const udp::endpoint& sender, bool answers) {
        apply(cameras_.datagram(bytes, senderAddress(sender), answers, clock_.steady()), &sender);
    }

    // What a sender over its share said is not read, and it may have been a camera's Hello
    // in a burst: once its share has refilled, the sender is asked with a unicast Probe, so
    // a camera is not missed until the next rescan. A flooding host gets one Probe a second.
    void probeAgain(const udp::endpoint& sender) {
        if (probedAgain_.size() >= kMaxProbedAgain) return;
        probedAgain_.insert(discoveryPortOf(sender));
        if (probeAgainArmed_) return;
        probeAgainArmed_ = true;
        probeAgainTimer_.expires_after(std::chrono::seconds(1));
        probeAgainTimer_.async_wait([this, alive = lifetime_.token()](const boost::system::error_code& e) {
            if (e || alive.expired()) return;
            probeAgainArmed_ = false;
            const std::string id = newMessageId();
            cameras_.probeSent(id);
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

    // A Resolve for an endpoint announced without XAddrs, unicast to the host that announced it.
    void sendResolve(const ResolveRequest& request, const udp::endpoint& sender) {
        udp::socket* socket = nullptr;
        if (sender.address().is_v4() ||
            (sender.address().is_v6() && sender.address().to_v6().is_v4_mapped())) {
            if (probeSocket_.is_open()) socket = &probeSocket_;
        } else if (probe6_) {
            socket = &probe6_->socket;
        }
        if (!socket) {
            apply(cameras_.resolveNotSent(request, "no XAddrs, and no socket to send a Resolve on",
                                          clock_.steady()));
            return;
        }
        const std::string id = newMessageId();
        const std::string resolve = encodeResolve(id, request.endpointAddress);
        boost::system::error_code error;
        socket->send_to(asio::buffer(resolve), discoveryPortOf(sender), 0, error);
        if (error) {
            apply(cameras_.resolveNotSent(request,
                                          "no XAddrs, and the Resolve could not be sent: " + error.message(),
                                          clock_.steady()));
            return;
        }
        apply(cameras_.resolveSent(request, id, clock_.steady()));
    }

    void scheduleLiveness() {
        if (!running_) return;
        livenessTimer_.expires_after(details_.livenessInterval);
        livenessTimer_.async_wait([this, alive = lifetime_.token()](const boost::system::error_code& e) {
            if (e || alive.expired()) return;
            apply(cameras_.livenessDue(clock_.steady()));
            scheduleLiveness();
        });
    }

    void fail(const std::string& message) {
        if (!mode_.pass) log.error() << configuration_ << ": " << message;
        apply(cameras_.networkFailed(message, clock_.steady()));
    }

    ThreadBound loopThread_;  // every public member is called on the loop thread
    std::string configuration_;
    OnvifDetails details_;
    ProbeMode mode_;
    asio::io_context& loop_;
    ProbeSink& sink_;
    std::shared_ptr<WorkerPool> pool_;
    std::shared_ptr<Channel> channel_;
    Clock clock_ = Clock::system();
    std::map<std::string, std::string> akriCredentials_;  // from Secrets: the cluster mode's
    std::vector<std::string> notes_;                      // a pass's warnings, for the command to print
    OnvifCameras cameras_;
    std::set<udp::endpoint> probedAgain_;  // rate-limited senders, asked again when the timer fires
    bool probeAgainArmed_ = false;
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
