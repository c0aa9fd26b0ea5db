#include "probes/usb/udev_handler.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "probes/usb/udev_classifier.h"
#include "probes/usb/udev_details.h"
#include "probes/usb/udev_source.h"
#include "probes/usb/usb_string_cache.h"
#include "probes/usb/usb_string_reader.h"
#include "runtime/configuration.h"
#include "runtime/lifetime.h"
#include "runtime/log.h"
#include "runtime/thread_bound.h"

namespace devlet::usb {

namespace {
constexpr Log log{"usb"};

// How long a device waits to be offered for its libusb string read. A read that gets no
// answer takes at most about a second (200 ms per transfer); reads run one at a time.
constexpr std::chrono::milliseconds kStringReadHoldLimit{3000};

// Keeps the matching devices of one configuration, keyed by devpath, and reports a snapshot
// whenever the classified result changes. Lives on the loop thread.
class UdevProbe : public Probe {
public:
    UdevProbe(std::string configuration, UdevDetails details, boost::asio::io_context& loop, ProbeSink& sink,
              UsbStringReader::ReadFunction read)
        : configuration_(std::move(configuration)),
          details_(std::move(details)),
          sink_(sink),
          strings_(kStringReadHoldLimit),
          source_(loop, &details_.rules),
          rescanTimer_(loop),
          holdTimer_(loop),
          reader_(
              loop,
              [this](const UsbStringRequest& request, UsbStrings strings) {
                  loopThread_.check();
                  answered(request, std::move(strings));
              },
              std::move(read)) {}

    ~UdevProbe() override {
        loopThread_.release();
        stop();
    }

    void start() override {
        loopThread_.check();
        running_ = true;
        lifetime_.renew();
        // Reads in flight at a stop() never answer: ask again.
        strings_ = UsbStringCache(kStringReadHoldLimit);
        holdArmed_ = false;
        rescan();
    }

    void stop() override {
        loopThread_.check();
        running_ = false;
        lifetime_.end();
        rescanTimer_.cancel();
        holdTimer_.cancel();
        source_.close();
        reader_.stop();
    }

private:
    // Opens the monitor when it is not (first start, or after it broke), then reads everything.
    void rescan() REQUIRES(loopThread_) {
        if (!running_) return;
        if (!source_.isOpen()) {
            if (std::string error = source_.open(details_.hotplugEvents); !error.empty()) {
                fail(error);
                return;
            }
            // Armed before enumerating: events during the scan queue up on the socket.
            if (details_.hotplugEvents) {
                source_.watch(
                    [this](std::vector<UdevEvent> events) {
                        loopThread_.check();
                        apply(std::move(events));
                    },
                    [this](const std::string& message) {
                        loopThread_.check();
                        fail(message);
                    });
            }
        }
        const auto started = std::chrono::steady_clock::now();
        std::vector<UdevObservation> seen;
        if (std::string error = source_.enumerate(seen); !error.empty()) {
            fail(error);
            return;
        }
        std::map<std::string, UdevObservation> matching;
        std::set<std::string> stringKeys;
        for (UdevObservation& observation : seen) {
            if (!firstMatchingRule(details_.rules, observation)) continue;
            if (auto wanted = usbStringsWanted(observation)) stringKeys.insert(wanted->key());
            std::string devpath = observation.device.devpath;
            matching.insert_or_assign(std::move(devpath), std::move(observation));
        }
        // Devices that went away without a remove event leave the cache with the scan.
        strings_.retain(stringKeys);
        log.debug() << configuration_ << ": full scan read " << seen.size() << " devices, " << matching.size()
                    << " match";
        const std::size_t unmatched = seen.size() - matching.size();
        observations_ = std::move(matching);
        recovered();
        report();
        // Devices no rule matches are most of sysfs: they are counted, not listed.
        ScanReport scan;
        scan.duration = std::chrono::steady_clock::now() - started;
        if (unmatched > 0) scan.excluded.push_back({"", "no rule in udevRules matches them", unmatched});
        sink_.reportScan(configuration_, std::move(scan));
        scheduleRescan();
    }

    void apply(std::vector<UdevEvent> events) REQUIRES(loopThread_) {
        if (!running_) return;
        for (UdevEvent& event : events) {
            if (event.action == "remove") {
                // A parent's removal takes its children along even if their events were lost.
                const std::string below = event.devpath + "/";
                std::erase_if(observations_, [&](const auto& entry) {
                    return entry.first == event.devpath || entry.first.starts_with(below);
                });
                strings_.forgetBelow(event.devpath);
            } else if (event.observation && firstMatchingRule(details_.rules, *event.observation)) {
                observations_.insert_or_assign(event.devpath, std::move(*event.observation));
            } else {
                // A change or unbind can make a device stop matching.
                observations_.erase(event.devpath);
            }
        }
        report();
    }

    // A libusb read answered (on the loop thread, posted by the reader).
    void answered(const UsbStringRequest& request, UsbStrings strings) REQUIRES(loopThread_) {
        if (!running_) return;
        for (const std::string& problem : strings.problems) {
            log.debug() << configuration_ << ": " << request.devpath << ": " << problem;
        }
        if (strings_.complete(request.ticket, std::move(strings))) report();
    }

    // Reads that ran out of time: their devices are offered with what sysfs has.
    void armHoldTimer() REQUIRES(loopThread_) {
        const std::optional<UsbStringCache::Clock::time_point> expiry = strings_.nextExpiry();
        if (!expiry || (holdArmed_ && holdAt_ <= *expiry)) return;
        holdArmed_ = true;
        holdAt_ = *expiry;
        holdTimer_.expires_at(*expiry);
        holdTimer_.async_wait(lifetime_.guard([this](const boost::system::error_code& error) {
            loopThread_.check();
            if (error) return;
            holdArmed_ = false;
            if (strings_.expire(UsbStringCache::Clock::now())) {
                log.warning() << configuration_ << ": a USB device did not answer libusb's string reads in "
                              << kStringReadHoldLimit.count() << " ms; offered with what sysfs has";
                report();
            }
            armHoldTimer();
        }));
    }

    // Classifies the matching devices, except those whose libusb read is still in flight
    // (they follow when it answers), and reports the snapshot if it changed.
    void report() REQUIRES(loopThread_) {
        std::vector<UdevObservation> seen;
        seen.reserve(observations_.size());
        const auto now = UsbStringCache::Clock::now();
        for (const auto& [devpath, observation] : observations_) {
            UdevObservation copy = observation;
            UsbStringCache::Resolution resolution = strings_.resolve(copy, now);
            if (resolution.request) {
                log.debug() << configuration_ << ": " << resolution.request->devpath
                            << ": reading the USB strings sysfs lacks; offered when they are read";
                reader_.read(std::move(*resolution.request));
            }
            if (!resolution.held) seen.push_back(std::move(copy));
        }
        armHoldTimer();
        std::vector<Instance> instances = classifyUdev(seen, details_);
        if (reported_ && *reported_ == instances) return;
        if (!reported_ || reported_->size() != instances.size()) {
            log.info() << configuration_ << ": " << instances.size() << " udev device"
                       << (instances.size() == 1 ? "" : "s") << " found";
        }
        reported_ = instances;
        sink_.reportSnapshot(configuration_, std::move(instances));
    }

    void scheduleRescan() REQUIRES(loopThread_) {
        if (!running_) return;
        rescanTimer_.expires_after(details_.rescanInterval);
        // A wait that completed just before stop() still runs; the token says whether to act.
        rescanTimer_.async_wait(lifetime_.guard([this](const boost::system::error_code& error) {
            loopThread_.check();
            if (error) return;
            rescan();
        }));
    }

    void fail(const std::string& message) REQUIRES(loopThread_) {
        log.error() << configuration_ << ": " << message << "; retrying in "
                    << details_.rescanInterval.count() << " s";
        failed_ = true;
        sink_.reportProbeError(configuration_, message);
        scheduleRescan();
    }

    void recovered() REQUIRES(loopThread_) {
        if (!failed_) return;
        failed_ = false;
        log.info() << configuration_ << ": udev discovery works again";
        sink_.reportProbeError(configuration_, "");
    }

    std::string configuration_;
    UdevDetails details_;
    ProbeSink& sink_;
    // Declared after the state its callbacks touch, so it is destroyed (and cancelled) first.
    std::map<std::string, UdevObservation> observations_
        GUARDED_BY(loopThread_);  // matching devices by devpath
    std::optional<std::vector<Instance>> reported_ GUARDED_BY(loopThread_);
    // libusb's answers by USB device and device number: a re-enumerated device is read again.
    UsbStringCache strings_ GUARDED_BY(loopThread_);
    bool running_ GUARDED_BY(loopThread_) = false;
    bool holdArmed_ GUARDED_BY(loopThread_) = false;
    UsbStringCache::Clock::time_point holdAt_ GUARDED_BY(loopThread_){};
    bool failed_ GUARDED_BY(loopThread_) = false;
    Lifetime lifetime_ GUARDED_BY(loopThread_);  // renewed by start(), ended by stop()
    UdevSource source_ GUARDED_BY(loopThread_);
    boost::asio::steady_timer rescanTimer_ GUARDED_BY(loopThread_);
    boost::asio::steady_timer holdTimer_ GUARDED_BY(loopThread_);
    ThreadBound loopThread_;
    // Declared last: stopped first, so no answer reaches the state above once it is going.
    UsbStringReader reader_;
};
}  // namespace

std::vector<DetailsProblem> UdevHandler::check(const Configuration& configuration) const {
    std::vector<DetailsProblem> problems;
    parseUdevDetails(configuration.discoveryDetails, problems);
    return problems;
}

std::vector<PropertyWarning> UdevHandler::checkDiscoveryProperties(const Configuration& configuration) const {
    return udevPropertyWarnings(configuration.discoveryProperties);
}

std::unique_ptr<Probe> UdevHandler::createProbe(const Configuration& configuration,
                                                boost::asio::io_context& loop, ProbeSink& sink) {
    std::vector<DetailsProblem> problems;
    UdevDetails details = parseUdevDetails(configuration.discoveryDetails, problems);
    applyDiscoveryProperties(configuration.discoveryProperties, details);
    return std::make_unique<UdevProbe>(configuration.name, std::move(details), loop, sink, readStrings_);
}

}  // namespace devlet::usb
