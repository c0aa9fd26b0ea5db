#include "probes/usb/udev_handler.h"

#include <algorithm>
#include <charconv>
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
#include "probes/usb/usb_descriptors.h"
#include "runtime/configuration.h"
#include "runtime/log.h"

namespace devlet::usb {

namespace {
constexpr Log log{"usb"};

// The USB device (the one with idVendor and idProduct) at or above an observed device.
UdevDevice* usbDeviceOf(UdevObservation& observation) {
    auto isUsb = [](const UdevDevice& device) {
        return device.attributes.contains("idVendor") && device.attributes.contains("idProduct");
    };
    if (isUsb(observation.device)) return &observation.device;
    for (UdevDevice& parent : observation.parents) {
        if (isUsb(parent)) return &parent;
    }
    return nullptr;
}

bool blank(std::string_view value) {
    return value.find_first_not_of(" \t\n\r") == std::string_view::npos;
}

// busnum and devnum as sysfs writes them ("1\n"); 0 when absent or not a number.
int number(const UdevDevice& device, const std::string& attribute) {
    auto it = device.attributes.find(attribute);
    if (it == device.attributes.end()) return 0;
    std::string_view text = it->second;
    text.remove_prefix(std::min(text.find_first_not_of(" \t"), text.size()));
    int value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    return error == std::errc() ? value : 0;
}

// Keeps the matching devices of one configuration, keyed by devpath, and reports a snapshot
// whenever the classified result changes. Lives on the loop thread.
class UdevProbe : public Probe {
public:
    UdevProbe(std::string configuration, UdevDetails details, boost::asio::io_context& loop, ProbeSink& sink)
        : configuration_(std::move(configuration)),
          details_(std::move(details)),
          sink_(sink),
          source_(loop),
          rescanTimer_(loop) {}

    ~UdevProbe() override { stop(); }

    void start() override {
        running_ = true;
        alive_ = std::make_shared<bool>(true);
        rescan();
    }

    void stop() override {
        running_ = false;
        *alive_ = false;
        rescanTimer_.cancel();
        source_.close();
    }

private:
    // Opens the monitor when it is not (first start, or after it broke), then reads everything.
    void rescan() {
        if (!running_) return;
        if (!source_.isOpen()) {
            if (std::string error = source_.open(details_.hotplugEvents); !error.empty()) {
                fail(error);
                return;
            }
            // Armed before enumerating: events during the scan queue up on the socket.
            if (details_.hotplugEvents) {
                source_.watch([this](std::vector<UdevEvent> events) { apply(std::move(events)); },
                              [this](const std::string& message) { fail(message); });
            }
        }
        std::vector<UdevObservation> seen;
        if (std::string error = source_.enumerate(seen); !error.empty()) {
            fail(error);
            return;
        }
        std::map<std::string, UdevObservation> matching;
        std::map<std::string, std::map<std::string, std::string>> stringsUsed;
        for (UdevObservation& observation : seen) {
            if (!firstMatchingRule(details_.rules, observation)) continue;
            addDescriptorStrings(observation, &stringsUsed);
            std::string devpath = observation.device.devpath;
            matching.insert_or_assign(std::move(devpath), std::move(observation));
        }
        // Devices that went away without a remove event leave the cache with the scan.
        descriptorStrings_ = std::move(stringsUsed);
        log.debug() << configuration_ << ": full scan read " << seen.size() << " devices, " << matching.size()
                    << " match";
        observations_ = std::move(matching);
        recovered();
        report();
        scheduleRescan();
    }

    void apply(std::vector<UdevEvent> events) {
        if (!running_) return;
        for (UdevEvent& event : events) {
            if (event.action == "remove") {
                // A parent's removal takes its children along even if their events were lost.
                const std::string below = event.devpath + "/";
                std::erase_if(observations_, [&](const auto& entry) {
                    return entry.first == event.devpath || entry.first.starts_with(below);
                });
                std::erase_if(descriptorStrings_, [&](const auto& entry) {
                    const std::string devpath = entry.first.substr(0, entry.first.find(' '));
                    return devpath == event.devpath || devpath.starts_with(below);
                });
            } else if (event.observation && firstMatchingRule(details_.rules, *event.observation)) {
                addDescriptorStrings(*event.observation, nullptr);
                observations_.insert_or_assign(event.devpath, std::move(*event.observation));
            } else {
                // A change or unbind can make a device stop matching.
                observations_.erase(event.devpath);
            }
        }
        report();
    }

    // Where sysfs has no manufacturer, product or serial for the USB device of a matched
    // observation (the kernel's read at enumeration failed), asks the device through
    // libusb, once per device number; strings that fail again stay absent. `used` collects
    // the cache entries a full scan still needs.
    void addDescriptorStrings(UdevObservation& observation,
                              std::map<std::string, std::map<std::string, std::string>>* used) {
        UdevDevice* usb = usbDeviceOf(observation);
        if (!usb) return;
        std::set<std::string> missing;
        for (const std::string& name : usbStringNames()) {
            auto it = usb->attributes.find(name);
            if (it == usb->attributes.end() || blank(it->second)) missing.insert(name);
        }
        const int busnum = number(*usb, "busnum");
        const int devnum = number(*usb, "devnum");
        if (missing.empty() || busnum <= 0 || devnum <= 0) return;
        const std::string key = usb->devpath + " " + std::to_string(busnum) + ":" + std::to_string(devnum);
        auto cached = descriptorStrings_.find(key);
        if (cached == descriptorStrings_.end()) {
            UsbStrings read = readUsbStrings(busnum, devnum, missing);
            for (const std::string& problem : read.problems) {
                log.debug() << configuration_ << ": " << usb->devpath << ": " << problem;
            }
            // A device libusb does not list yet is asked again at its next event or scan.
            if (!read.found) return;
            cached = descriptorStrings_.emplace(key, std::move(read.strings)).first;
        }
        usb->descriptorStrings = cached->second;
        if (used) used->insert(*cached);
    }

    void report() {
        std::vector<UdevObservation> seen;
        seen.reserve(observations_.size());
        for (const auto& [devpath, observation] : observations_) seen.push_back(observation);
        std::vector<Instance> instances = classifyUdev(seen, details_);
        if (reported_ && *reported_ == instances) return;
        if (!reported_ || reported_->size() != instances.size()) {
            log.info() << configuration_ << ": " << instances.size() << " udev device"
                       << (instances.size() == 1 ? "" : "s") << " found";
        }
        reported_ = instances;
        sink_.reportSnapshot(configuration_, std::move(instances));
    }

    void scheduleRescan() {
        if (!running_) return;
        rescanTimer_.expires_after(details_.rescanInterval);
        // A wait that completed just before stop() still runs; the token says whether to act.
        rescanTimer_.async_wait([this, alive = alive_](const boost::system::error_code& error) {
            if (error || !*alive) return;
            rescan();
        });
    }

    void fail(const std::string& message) {
        log.error() << configuration_ << ": " << message << "; retrying in "
                    << details_.rescanInterval.count() << " s";
        failed_ = true;
        sink_.reportProbeError(configuration_, message);
        scheduleRescan();
    }

    void recovered() {
        if (!failed_) return;
        failed_ = false;
        log.info() << configuration_ << ": udev discovery works again";
        sink_.reportProbeError(configuration_, "");
    }

    std::string configuration_;
    UdevDetails details_;
    ProbeSink& sink_;
    // Declared after the state its callbacks touch, so it is destroyed (and cancelled) first.
    std::map<std::string, UdevObservation> observations_;  // matching devices by devpath
    std::optional<std::vector<Instance>> reported_;
    // libusb's reads by "<devpath> <busnum>:<devnum>": a re-enumerated device is read again.
    std::map<std::string, std::map<std::string, std::string>> descriptorStrings_;
    bool running_ = false;
    bool failed_ = false;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(false);
    UdevSource source_;
    boost::asio::steady_timer rescanTimer_;
};
}  // namespace

std::vector<DetailsProblem> UdevHandler::check(const Configuration& configuration) const {
    std::vector<DetailsProblem> problems;
    parseUdevDetails(configuration.discoveryDetails, problems);
    return problems;
}

std::unique_ptr<Probe> UdevHandler::createProbe(const Configuration& configuration,
                                                boost::asio::io_context& loop, ProbeSink& sink) {
    std::vector<DetailsProblem> problems;
    UdevDetails details = parseUdevDetails(configuration.discoveryDetails, problems);
    return std::make_unique<UdevProbe>(configuration.name, std::move(details), loop, sink);
}

}  // namespace devlet::usb
