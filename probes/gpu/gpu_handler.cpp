#include "probes/gpu/gpu_handler.h"

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "probes/gpu/gpu_allocation.h"
#include "probes/gpu/gpu_cards.h"
#include "probes/gpu/gpu_classifier.h"
#include "probes/gpu/gpu_details.h"
#include "probes/gpu/gpu_nfd.h"
#include "probes/udev/udev_monitor.h"
#include "runtime/configuration.h"
#include "runtime/inventory.h"
#include "runtime/lifetime.h"
#include "runtime/log.h"
#include "runtime/thread_bound.h"

namespace devlet::gpu {

namespace {
constexpr Log log{"gpu"};

std::vector<std::string> preferGpuSlots(const Configuration& configuration,
                                        const std::vector<SlotCandidate>& available,
                                        const std::vector<std::string>& mustInclude, int size) {
    std::vector<DetailsProblem> problems;
    const GpuDetails details = parseGpuDetails(configuration.discoveryDetails, problems);
    GpuAllocationRequest request;
    request.mustInclude = mustInclude;
    request.size = size;
    request.policy = details.allocationPolicy.value_or(
        configuration.allocationPolicy == AllocationPolicy::Pack ? GpuAllocationPolicy::Packed
                                                                 : GpuAllocationPolicy::None);
    request.topologyAware = details.topologyAware;
    request.uniqueDevices = configuration.uniqueDevices;
    request.available.reserve(available.size());
    for (const SlotCandidate& candidate : available) {
        GpuSlot slot{candidate.id, candidate.instance, candidate.index, std::nullopt, {}};
        if (candidate.device) {
            slot.numaNode = candidate.device->numaNode;
            if (auto it = candidate.device->properties.find(kPropertyPciRoot);
                it != candidate.device->properties.end())
                slot.pciRoot = it->second;
        }
        request.available.push_back(std::move(slot));
    }
    return chooseGpuSlots(request);
}

// Keeps the offered GPUs of one configuration current: a full sysfs pass at start and on a
// rare safety-net timer; after a batch of drm/pci uevents, a read of the cards the events
// concern (and their SR-IOV relatives), judged together with the cards kept from earlier
// reads. Lives on the loop thread.
class GpuProbe : public Probe {
public:
    GpuProbe(std::string configuration, GpuDetails details, SysfsRoots roots, boost::asio::io_context& loop,
             ProbeSink& sink)
        : configuration_(std::move(configuration)),
          details_(std::move(details)),
          roots_(std::move(roots)),
          sink_(sink),
          events_(loop, log),
          rescanTimer_(loop) {
        roots_.queryMemory = details_.queryMemory;
    }

    ~GpuProbe() override {
        loopThread_.release();
        stop();
    }

    void start() override {
        loopThread_.check();
        running_ = true;
        lifetime_.renew();
        rescan();
    }

    void stop() override {
        loopThread_.check();
        running_ = false;
        lifetime_.end();
        rescanTimer_.cancel();
        events_.close();
        if (wroteFeatures_) {
            writeNfdFeatures(roots_.nfdFeatureDir, configuration_, "");
            wroteFeatures_ = false;
        }
    }

private:
    void rescan() REQUIRES(loopThread_) {
        if (!running_) return;
        std::string monitorError;
        if (!events_.isOpen()) {
            // Cards come and go, drivers bind and unbind, VFs appear: drm and pci events.
            monitorError = events_.open({"drm", "pci"});
            // Armed before the scan: events during it queue up on the socket.
            if (monitorError.empty()) {
                events_.watch(
                    [this](const std::vector<udev::UdevDeviceHandle>& devices) {
                        loopThread_.check();
                        onEvents(devices);
                    },
                    [this](const std::string& message) {
                        loopThread_.check();
                        fail("hotplug events stopped (" + message + ")");
                        scheduleRescan();
                    });
            }
        }
        if (!scan()) {
            scheduleRescan();
            return;
        }
        if (!monitorError.empty()) {
            // The GPUs are offered; only changes wait for the next rescan.
            fail("no hotplug events (" + monitorError + "); GPUs are re-read every " +
                 std::to_string(details_.rescanInterval.count()) + " s");
        } else {
            recovered();
        }
        scheduleRescan();
    }

    // A full sysfs pass; reports the snapshot if it changed. False when sysfs is unreadable.
    bool scan() REQUIRES(loopThread_) {
        if (!running_) return false;
        const auto started = std::chrono::steady_clock::now();
        std::vector<GpuObservation> observations;
        std::vector<GpuScanProblem> problems;
        std::string error;
        if (!scanGpus(roots_, observations, problems, error)) {
            fail(error);
            scanned_ = false;
            return false;
        }
        unreadable_.clear();
        noteProblems(problems);
        cards_.assign(std::move(observations));
        scanned_ = true;
        publish(started);
        return true;
    }

    void onEvents(const std::vector<udev::UdevDeviceHandle>& devices) REQUIRES(loopThread_) {
        if (!running_) return;
        std::vector<GpuUevent> events;
        events.reserve(devices.size());
        for (const udev::UdevDeviceHandle& device : devices) {
            udev::UdevEventFacts facts = udev::eventFacts(device);
            events.push_back({std::move(facts.subsystem), std::move(facts.devpath)});
        }
        std::optional<std::vector<std::string>> concerned = devicesOfEvents(events);
        // Without a full pass to build on (sysfs was unreadable), or for an event it cannot
        // place, everything is read again.
        if (!scanned_ || !concerned) {
            scan();
            return;
        }
        reread(*concerned);
    }

    // Re-reads the cards at or below `devices` (those kept and those sysfs shows there
    // now) and their SR-IOV relatives, then reports the snapshot if it changed.
    void reread(const std::vector<std::string>& devices) REQUIRES(loopThread_) {
        const auto started = std::chrono::steady_clock::now();
        std::set<std::string, CardOrder> cards = cards_.cardsAt(devices);
        for (const std::string& devpath : devices) {
            for (std::string& card : cardsOfDevice(roots_, devpath)) cards.insert(std::move(card));
        }
        std::vector<GpuObservation> observations;
        std::vector<GpuScanProblem> problems;
        readGpus(roots_, {cards.begin(), cards.end()}, observations, problems);
        // A VF's arrival or departure changes its PF's sriov_numvfs, and with it whether
        // the PF is offered: the relatives of what was and what is are read too.
        std::set<std::string, CardOrder> relatives;
        auto addRelatives = [&](const GpuObservation& gpu) {
            loopThread_.check();  // a lambda is a function of its own to the analysis
            for (const std::string& card : cards_.relativesOf(gpu)) {
                if (!cards.contains(card)) relatives.insert(card);
            }
        };
        for (const std::string& card : cards) {
            if (const GpuObservation* before = cards_.find(card)) addRelatives(*before);
        }
        for (const GpuObservation& gpu : observations) addRelatives(gpu);
        readGpus(roots_, {relatives.begin(), relatives.end()}, observations, problems);
        cards.insert(relatives.begin(), relatives.end());
        for (const std::string& card : cards) unreadable_.erase(card);
        noteProblems(problems);
        cards_.update(cards, std::move(observations));
        publish(started);
    }

    void noteProblems(const std::vector<GpuScanProblem>& problems) REQUIRES(loopThread_) {
        for (const GpuScanProblem& problem : problems) {
            log.debug() << configuration_ << ": " << problem.card << " skipped: " << problem.message;
            unreadable_[problem.card] = problem.message;
        }
    }

    // Judges every kept card; reports the snapshot if it changed, and the pass that
    // began at `started` with everything it does not offer.
    void publish(std::chrono::steady_clock::time_point started) REQUIRES(loopThread_) {
        ScanReport report;
        for (const auto& [card, message] : unreadable_)
            report.excluded.push_back({card, "cannot be read: " + message, 1});
        const std::vector<GpuObservation> observations = cards_.observations();
        std::vector<GpuVerdict> verdicts = judgeGpus(observations, details_);
        std::map<std::string, std::string> excluded;
        for (const GpuVerdict& verdict : verdicts) {
            if (verdict.offered) continue;
            excluded[verdict.observation.pciAddress] = verdict.reason;
            report.excluded.push_back({verdict.observation.pciAddress, verdict.reason, 1});
        }
        if (excluded != excluded_) {
            for (const auto& [address, reason] : excluded) {
                auto it = excluded_.find(address);
                if (it == excluded_.end() || it->second != reason)
                    log.info() << configuration_ << ": GPU " << address << " not offered: " << reason;
            }
            excluded_ = std::move(excluded);
        }
        std::vector<Instance> instances = classifyGpus(observations, details_);
        if (!reported_ || !(*reported_ == instances)) {
            if (!reported_ || reported_->size() != instances.size()) {
                log.info() << configuration_ << ": " << instances.size() << " GPU"
                           << (instances.size() == 1 ? "" : "s") << " offered";
            }
            reported_ = instances;
            updateFeatures(instances);
            sink_.reportSnapshot(configuration_, std::move(instances));
        }
        report.duration = std::chrono::steady_clock::now() - started;
        sink_.reportScan(configuration_, std::move(report));
    }

    // Node labels through Node Feature Discovery, where it is installed.
    void updateFeatures(const std::vector<Instance>& instances) REQUIRES(loopThread_) {
        if (roots_.nfdFeatureDir.empty()) return;
        std::error_code ignored;
        if (!std::filesystem::is_directory(roots_.nfdFeatureDir, ignored)) return;
        if (std::string error = writeNfdFeatures(roots_.nfdFeatureDir, configuration_,
                                                 nfdFeatures(configuration_, instances));
            !error.empty()) {
            log.warning() << configuration_ << ": node labels not updated: " << error;
            return;
        }
        wroteFeatures_ = true;
    }

    void scheduleRescan() REQUIRES(loopThread_) {
        if (!running_) return;
        rescanTimer_.expires_after(details_.rescanInterval);
        rescanTimer_.async_wait(lifetime_.guard([this](const boost::system::error_code& error) {
            loopThread_.check();
            if (error) return;
            rescan();
        }));
    }

    void fail(const std::string& message) REQUIRES(loopThread_) {
        if (failure_ != message) log.error() << configuration_ << ": " << message;
        failure_ = message;
        sink_.reportProbeError(configuration_, message);
    }

    void recovered() REQUIRES(loopThread_) {
        if (failure_.empty()) return;
        failure_.clear();
        log.info() << configuration_ << ": GPU discovery works again";
        sink_.reportProbeError(configuration_, "");
    }

    std::string configuration_;
    GpuDetails details_;
    SysfsRoots roots_;
    ProbeSink& sink_;
    GpuCards cards_ GUARDED_BY(loopThread_);  // every card as last read
    // cards_ holds a full pass (events may re-read parts of it)
    bool scanned_ GUARDED_BY(loopThread_) = false;
    // card -> why it cannot be read
    std::map<std::string, std::string, CardOrder> unreadable_ GUARDED_BY(loopThread_);
    std::optional<std::vector<Instance>> reported_ GUARDED_BY(loopThread_);
    std::map<std::string, std::string> excluded_ GUARDED_BY(loopThread_);  // PCI address -> why not offered
    std::string failure_ GUARDED_BY(loopThread_);
    bool wroteFeatures_ GUARDED_BY(loopThread_) = false;
    bool running_ GUARDED_BY(loopThread_) = false;
    Lifetime lifetime_ GUARDED_BY(loopThread_);  // renewed by start(), ended by stop()
    ThreadBound loopThread_;
    // Declared after the state their callbacks touch, so they are destroyed first.
    udev::UdevMonitor events_ GUARDED_BY(loopThread_);
    boost::asio::steady_timer rescanTimer_ GUARDED_BY(loopThread_);
};

}  // namespace

GpuHandler::GpuHandler(SysfsRoots roots) : roots_(std::move(roots)) {}

SlotPreference GpuHandler::slotPreference() const {
    return preferGpuSlots;
}

std::vector<DetailsProblem> GpuHandler::check(const Configuration& configuration) const {
    std::vector<DetailsProblem> problems;
    parseGpuDetails(configuration.discoveryDetails, problems);
    return problems;
}

std::unique_ptr<Probe> GpuHandler::createProbe(const Configuration& configuration,
                                               boost::asio::io_context& loop, ProbeSink& sink) {
    std::vector<DetailsProblem> problems;
    GpuDetails details = parseGpuDetails(configuration.discoveryDetails, problems);
    return std::make_unique<GpuProbe>(configuration.name, std::move(details), roots_, loop, sink);
}

}  // namespace devlet::gpu
