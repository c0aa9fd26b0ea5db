#include "probes/usb/usb_string_cache.h"

#include <algorithm>
#include <charconv>
#include <string_view>
#include <utility>

namespace devlet::usb {

namespace {

bool isUsbDevice(const UdevDevice& device) {
    return device.attributes.contains("idVendor") && device.attributes.contains("idProduct");
}

// Where the USB device (the one with idVendor and idProduct) is at or above an observed
// device: 0 is the device itself, n its n-th parent.
std::optional<std::size_t> usbLevel(const UdevObservation& observation) {
    if (isUsbDevice(observation.device)) return 0;
    for (std::size_t i = 0; i < observation.parents.size(); ++i) {
        if (isUsbDevice(observation.parents[i])) return i + 1;
    }
    return std::nullopt;
}

template <typename Observation>
auto& deviceAt(Observation& observation, std::size_t level) {
    return level == 0 ? observation.device : observation.parents[level - 1];
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

}  // namespace

std::optional<UsbStringRequest> usbStringsWanted(const UdevObservation& observation) {
    const std::optional<std::size_t> level = usbLevel(observation);
    if (!level) return std::nullopt;
    const UdevDevice* usb = &deviceAt(observation, *level);
    UsbStringRequest request;
    for (const std::string& name : usbStringNames()) {
        if (usb->namedStrings && !usb->namedStrings->contains(name)) continue;  // the device has none
        auto it = usb->attributes.find(name);
        if (it == usb->attributes.end() || blank(it->second)) request.names.insert(name);
    }
    request.busnum = number(*usb, "busnum");
    request.devnum = number(*usb, "devnum");
    if (request.names.empty() || request.busnum <= 0 || request.devnum <= 0) return std::nullopt;
    request.devpath = usb->devpath;
    return request;
}

void addUsbStrings(UdevObservation& observation, const std::map<std::string, std::string>& strings) {
    if (const std::optional<std::size_t> level = usbLevel(observation)) {
        deviceAt(observation, *level).descriptorStrings = strings;
    }
}

UsbStringCache::Resolution UsbStringCache::resolve(UdevObservation& observation, Clock::time_point now) {
    std::optional<UsbStringRequest> wanted = usbStringsWanted(observation);
    if (!wanted) return {};
    const std::string key = wanted->key();
    auto it = entries_.find(key);
    if (it == entries_.end()) {
        wanted->ticket = nextTicket_++;
        entries_.emplace(key, Entry{wanted->ticket, false, now + holdLimit_, {}});
        return {true, std::move(wanted)};
    }
    if (!it->second.done) return {true, std::nullopt};
    addUsbStrings(observation, it->second.strings);
    return {};
}

bool UsbStringCache::complete(std::uint64_t ticket, UsbStrings strings) {
    for (auto& [key, entry] : entries_) {
        if (entry.ticket != ticket) continue;
        if (entry.done) return false;  // given up on already: its device was offered without
        entry.done = true;
        // Only the strings asked for: sysfs's own always win.
        entry.strings = std::move(strings.strings);
        return true;
    }
    return false;
}

bool UsbStringCache::expire(Clock::time_point now) {
    bool released = false;
    for (auto& [key, entry] : entries_) {
        if (entry.done || entry.deadline > now) continue;
        entry.done = true;
        released = true;
    }
    return released;
}

std::optional<UsbStringCache::Clock::time_point> UsbStringCache::nextExpiry() const {
    std::optional<Clock::time_point> next;
    for (const auto& [key, entry] : entries_) {
        if (!entry.done && (!next || entry.deadline < *next)) next = entry.deadline;
    }
    return next;
}

void UsbStringCache::forgetBelow(const std::string& devpath) {
    const std::string below = devpath + "/";
    std::erase_if(entries_, [&](const auto& entry) {
        const std::string_view device = std::string_view(entry.first).substr(0, entry.first.rfind(' '));
        return device == devpath || device.starts_with(below);
    });
}

void UsbStringCache::retain(const std::set<std::string>& keys) {
    std::erase_if(entries_, [&](const auto& entry) { return !keys.contains(entry.first); });
}

std::size_t UsbStringCache::inFlight() const {
    return static_cast<std::size_t>(std::count_if(entries_.begin(), entries_.end(),
                                                  [](const auto& entry) { return !entry.second.done; }));
}

}  // namespace devlet::usb
