#pragma once
// Akri's `udevRules` entries, read with udev's own grammar and matched with udev's own
// semantics against plain observations of a device and its parents. Pure values: no
// libudev, no sysfs; any thread. The OS adapter fills UdevObservation; `devlet probe usb`
// prints explain().

#include <bitset>
#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace devlet::usb {

// One device as sysfs and the udev database describe it.
struct UdevDevice {
    std::string devpath;                            // without "/sys", as udev and Akri write it
    std::string subsystem;                          // empty: none
    std::string kernel;                             // sysname
    std::string driver;                             // empty: none bound
    std::map<std::string, std::string> attributes;  // sysattr values as read
    std::set<std::string> tags;
    // Empty: none. Filled for parents, whose node is where a device without one is found
    // (the observed device's own is UdevObservation::devnode); rules never read it.
    std::string devnode = {};
    // A USB device's string descriptors that sysfs lacks, read through libusb ("serial",
    // "manufacturer", "product"); rules never read them, the classifier falls back to them.
    std::map<std::string, std::string> descriptorStrings = {};
    // For a USB device: the strings its device descriptor names ("manufacturer", "product",
    // "serial": iManufacturer, iProduct, iSerialNumber not 0); nullopt when unknown. Only
    // a named string that sysfs lacks is worth asking the device for. Rules never read it.
    std::optional<std::set<std::string>> namedStrings = {};
    // A PCI device's IOMMU group (the name its sysfs `iommu_group` link points to); empty:
    // none, or not read. vfioPassthrough hands /dev/vfio/<group> to containers. Rules never read it.
    std::string iommuGroup = {};
    bool operator==(const UdevDevice&) const = default;
};

// The device a rule is matched against, with its parents for the ...S keys.
struct UdevObservation {
    UdevDevice device;
    std::string devnode;                            // empty: none
    std::map<std::string, std::string> properties;  // udev database: ENV{}
    std::vector<UdevDevice> parents;                // nearest first, up to the root
    bool operator==(const UdevObservation&) const = default;
};

// Where a rule or pattern is wrong: a 0-based offset into the text and why.
struct SyntaxError {
    std::size_t offset = 0;
    std::string reason;
};

// A udev match value: alternatives split at every '|'; when the value holds any of
// '*', '?', '[' each alternative is an fnmatch(3) pattern with no flags (byte-wise, the
// C locale), otherwise an exact string. An empty alternative matches the empty string.
class UdevPattern {
public:
    static std::optional<UdevPattern> parse(std::string_view text, SyntaxError& error);
    bool matches(std::string_view value) const;
    const std::string& text() const { return text_; }
    bool endsWithWhitespace() const;

private:
    struct Element {
        enum class Kind { Literal, AnyOne, AnyRun, Set } kind = Kind::Literal;
        char literal = 0;
        std::bitset<256> set;
    };
    using Alternative = std::vector<Element>;
    static std::optional<Alternative> compile(std::string_view text, std::size_t base, SyntaxError& error);
    static bool matchesAlternative(const Alternative& pattern, std::string_view value);

    std::string text_;
    bool glob_ = false;
    std::vector<std::string> exact_;
    std::vector<Alternative> globs_;
};

enum class UdevKey {
    Attr,
    Attrs,
    Devpath,
    Driver,
    Drivers,
    Env,
    Kernel,
    Kernels,
    Subsystem,
    Subsystems,
    Tag,
    Tags
};

// One `KEY{name}=="value"` or `KEY!="value"` of a rule.
struct UdevFilter {
    UdevKey key = UdevKey::Kernel;
    std::string name;  // the {...} of ATTR, ATTRS and ENV
    bool negated = false;
    UdevPattern pattern;
    // Searches the device and its parents (ATTRS, DRIVERS, KERNELS, SUBSYSTEMS, TAGS).
    bool searchesParents() const;
    // The filter as udev would print it: KERNELS=="1-1".
    std::string text() const;
};

// Why a rule did or did not match, for `devlet probe`.
struct UdevMatch {
    bool matched = false;
    std::string explanation;
};

// One entry of udevRules: filters AND-ed. A rule list matches when any rule does.
class UdevRule {
public:
    // `index` is the entry's place in udevRules, for messages.
    static std::optional<UdevRule> parse(std::string_view text, std::size_t index, std::string& error);

    bool matches(const UdevObservation& observation) const;
    // Whether the first `count` filters hold. Filters are AND-ed, so when a prefix fails
    // the rule fails: an adapter that reads attributes lazily reads those of the next
    // filter only while the prefix before it holds.
    bool prefixMatches(const UdevObservation& observation, std::size_t count) const;
    UdevMatch explain(const UdevObservation& observation) const;

    const std::string& text() const { return text_; }
    const std::vector<UdevFilter>& filters() const { return filters_; }

private:
    struct Verdict {
        std::optional<std::size_t> failed;    // first filter that failed, in written order
        std::optional<std::size_t> ancestor;  // the device the ...S filters matched: 0 = itself
    };
    Verdict evaluate(const UdevObservation& observation, std::size_t count) const;
    std::optional<std::size_t> parentFilterDevice(const UdevObservation& observation,
                                                  std::size_t count) const;

    std::string text_;
    std::vector<UdevFilter> filters_;
};

// Parses every entry; each broken one adds a message to `problems` and is left out.
std::vector<UdevRule> parseUdevRules(const std::vector<std::string>& texts,
                                     std::vector<std::string>& problems);

// The subsystems every event a rule set can match is in, for filtering the udev monitor:
// nullopt when some rule has no SUBSYSTEM=="..." (non-negated, without wildcards), as then
// any subsystem may match.
std::optional<std::set<std::string>> ruleSubsystems(const std::vector<UdevRule>& rules);

// The index of the first rule that matches, if any.
std::optional<std::size_t> firstMatchingRule(const std::vector<UdevRule>& rules,
                                             const UdevObservation& observation);

}  // namespace devlet::usb
