// Which USB devices wait for libusb's string reads, and what they are offered with: the
// webcam observations of webcam_observations.h with strings missing from sysfs, the reads
// answered by hand and the time given as values. No hardware, no threads.

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "probes/usb/udev_classifier.h"
#include "probes/usb/usb_string_cache.h"
#include "tests/probes/usb/webcam_observations.h"

namespace devlet::usb {
namespace {

using namespace test;
using namespace std::chrono_literals;
using Clock = UsbStringCache::Clock;

constexpr std::chrono::milliseconds kLimit = 3000ms;
const Clock::time_point kStart{};

// The webcam as the kernel leaves it when its string reads failed at enumeration.
Tree webcamWithoutSerial(const Plug& plug = {}) {
    Tree tree = webcam(plug);
    tree.devices[cameraPath(plug)].attributes.erase("serial");
    return tree;
}

// The camera's USB device among an observation's parents.
const UdevDevice& cameraIn(const UdevObservation& observation) {
    for (const UdevDevice& parent : observation.parents) {
        if (parent.devpath == cameraPath()) return parent;
    }
    ADD_FAILURE() << "no camera above " << observation.device.devpath;
    return observation.device;
}

UsbStrings answer(std::map<std::string, std::string> strings) {
    UsbStrings read;
    read.found = true;
    read.strings = std::move(strings);
    return read;
}

// What the probe does for a snapshot: resolve each observation, keep those not held back,
// start the reads handed out.
struct Snapshot {
    std::vector<UdevObservation> offered;
    std::vector<UsbStringRequest> requests;
    std::size_t held = 0;
};

Snapshot resolveAll(UsbStringCache& cache, std::vector<UdevObservation> observations,
                    Clock::time_point now = kStart) {
    Snapshot snapshot;
    for (UdevObservation& observation : observations) {
        UsbStringCache::Resolution resolution = cache.resolve(observation, now);
        if (resolution.request) snapshot.requests.push_back(*resolution.request);
        if (resolution.held) {
            ++snapshot.held;
        } else {
            snapshot.offered.push_back(std::move(observation));
        }
    }
    return snapshot;
}

// The camera and the devices below it (the hub above names no serial of its own).
std::vector<UdevObservation> cameraAndBelow(const Tree& tree) {
    return {tree.observe(cameraPath()), tree.observe(videoPath()), tree.observe(soundPath() + "/pcmC0D0c")};
}

TEST(UsbStringCache, DeviceWithEveryStringInSysfsIsNeitherReadNorHeld) {
    UsbStringCache cache(kLimit);
    const Snapshot snapshot = resolveAll(cache, cameraAndBelow(webcam()));
    EXPECT_TRUE(snapshot.requests.empty());
    EXPECT_EQ(snapshot.held, 0u);
    EXPECT_EQ(snapshot.offered.size(), 3u);
    // Nor is a device outside USB.
    EXPECT_EQ(resolveAll(cache, {webcam().observe(kController)}).offered.size(), 1u);
}

TEST(UsbStringCache, WantedNamesAreTheStringsSysfsLacksOrLeavesBlank) {
    Tree tree = webcam();
    tree.devices[cameraPath()].attributes.erase("serial");
    tree.devices[cameraPath()].attributes["product"] = " \n";
    const std::optional<UsbStringRequest> wanted = usbStringsWanted(tree.observe(videoPath()));
    ASSERT_TRUE(wanted);
    EXPECT_EQ(wanted->devpath, cameraPath());
    EXPECT_EQ(wanted->busnum, 1);
    EXPECT_EQ(wanted->devnum, 3);
    EXPECT_EQ(wanted->names, (std::set<std::string>{"product", "serial"}));
    EXPECT_EQ(wanted->key(), cameraPath() + " 1:3");
}

TEST(UsbStringCache, StringTheDeviceDescriptorDoesNotNameIsNeverAskedFor) {
    // A serial-less adapter: the kernel had nothing to read, asking again would only delay it.
    Tree tree = webcamWithoutSerial();
    tree.devices[cameraPath()].namedStrings = std::set<std::string>{"manufacturer", "product"};
    EXPECT_FALSE(usbStringsWanted(tree.observe(videoPath())));
    UsbStringCache cache(kLimit);
    EXPECT_EQ(resolveAll(cache, cameraAndBelow(tree)).offered.size(), 3u);
    // Named but missing from sysfs: the kernel's read failed, so it is asked for.
    tree.devices[cameraPath()].namedStrings = std::set<std::string>{"manufacturer", "product", "serial"};
    const std::optional<UsbStringRequest> wanted = usbStringsWanted(tree.observe(videoPath()));
    ASSERT_TRUE(wanted);
    EXPECT_EQ(wanted->names, (std::set<std::string>{"serial"}));
}

TEST(UsbStringCache, DeviceOutsideUsbOrWithoutDeviceNumberIsNeverRead) {
    Tree tree = webcamWithoutSerial();
    EXPECT_FALSE(usbStringsWanted(tree.observe(kController)));
    tree.devices[cameraPath()].attributes.erase("devnum");
    EXPECT_FALSE(usbStringsWanted(tree.observe(videoPath())));
}

TEST(UsbStringCache, DeviceLackingItsSerialWaitsForItsRead) {
    UsbStringCache cache(kLimit);
    const Tree tree = webcamWithoutSerial();
    const Snapshot first = resolveAll(cache, {tree.observe(videoPath())});
    EXPECT_TRUE(first.offered.empty());
    ASSERT_EQ(first.requests.size(), 1u);
    EXPECT_EQ(first.requests[0].names, (std::set<std::string>{"serial"}));
    EXPECT_EQ(cache.inFlight(), 1u);

    // Another event for the same device before the answer: still held, not read twice.
    const Snapshot second = resolveAll(cache, {tree.observe(videoPath())}, kStart + 10ms);
    EXPECT_TRUE(second.offered.empty());
    EXPECT_TRUE(second.requests.empty());

    EXPECT_TRUE(cache.complete(first.requests[0].ticket, answer({{"serial", "73BD39DF"}})));
    const Snapshot third = resolveAll(cache, {tree.observe(videoPath())}, kStart + 20ms);
    ASSERT_EQ(third.offered.size(), 1u);
    EXPECT_TRUE(third.requests.empty());
    EXPECT_EQ(cameraIn(third.offered[0]).descriptorStrings,
              (std::map<std::string, std::string>{{"serial", "73BD39DF"}}));
    EXPECT_EQ(cache.inFlight(), 0u);
}

TEST(UsbStringCache, EveryMatchedDeviceOfOneUsbDeviceSharesOneRead) {
    UsbStringCache cache(kLimit);
    const Tree tree = webcamWithoutSerial();
    const Snapshot snapshot = resolveAll(
        cache,
        {tree.observe(videoPath()), tree.observe(soundPath() + "/pcmC0D0c"), tree.observe(cameraPath())});
    EXPECT_EQ(snapshot.requests.size(), 1u);
    EXPECT_EQ(snapshot.held, 3u);
}

TEST(UsbStringCache, StableIdentityNameIsDecidedOnceTheReadAnswers) {
    // Under stableIdentity: usb the serial is the name: offered without it first, the
    // camera would be renamed from its port path to its serial when the answer came.
    UsbStringCache cache(kLimit);
    const UdevDetails details = [] {
        UdevDetails d = detailsFor({R"(SUBSYSTEM=="video4linux")"});
        d.stableIdentity = StableIdentity::Usb;
        return d;
    }();
    const Tree tree = webcamWithoutSerial();
    std::vector<std::string> names;
    auto snapshotNames = [&](Clock::time_point now) {
        const Snapshot snapshot = resolveAll(cache, cameraAndBelow(tree), now);
        for (const Instance& instance : classifyUdev(snapshot.offered, details)) names.push_back(instance.id);
        return snapshot;
    };
    const Snapshot first = snapshotNames(kStart);
    ASSERT_EQ(first.requests.size(), 1u);
    EXPECT_TRUE(names.empty());
    ASSERT_TRUE(cache.complete(first.requests[0].ticket, answer({{"serial", "73BD39DF"}})));
    snapshotNames(kStart + 5ms);
    EXPECT_EQ(names, (std::vector<std::string>{"usb:046d:082d:73BD39DF"}));
}

TEST(UsbStringCache, FailedReadReleasesTheDeviceWithWhatSysfsHas) {
    UsbStringCache cache(kLimit);
    const Tree tree = webcamWithoutSerial();
    const Snapshot first = resolveAll(cache, {tree.observe(videoPath())});
    ASSERT_EQ(first.requests.size(), 1u);
    UsbStrings refused;
    refused.found = true;
    refused.problems = {"serial: Input/Output Error"};
    EXPECT_TRUE(cache.complete(first.requests[0].ticket, refused));
    const Snapshot second = resolveAll(cache, {tree.observe(videoPath())});
    ASSERT_EQ(second.offered.size(), 1u);
    EXPECT_TRUE(second.requests.empty());  // not asked again for this device number
    EXPECT_TRUE(cameraIn(second.offered[0]).descriptorStrings.empty());
}

TEST(UsbStringCache, ReadThatRunsOutOfTimeReleasesTheDeviceAndItsLateAnswerIsDropped) {
    UsbStringCache cache(kLimit);
    const Tree tree = webcamWithoutSerial();
    const Snapshot first = resolveAll(cache, {tree.observe(videoPath())});
    ASSERT_EQ(first.requests.size(), 1u);
    EXPECT_EQ(cache.nextExpiry(), kStart + kLimit);
    EXPECT_FALSE(cache.expire(kStart + kLimit - 1ms));
    EXPECT_TRUE(cache.expire(kStart + kLimit));
    EXPECT_FALSE(cache.nextExpiry());
    EXPECT_EQ(resolveAll(cache, {tree.observe(videoPath())}).offered.size(), 1u);
    // The answer after the limit would rename an instance already offered.
    EXPECT_FALSE(cache.complete(first.requests[0].ticket, answer({{"serial", "73BD39DF"}})));
    const Snapshot later = resolveAll(cache, {tree.observe(videoPath())});
    ASSERT_EQ(later.offered.size(), 1u);
    EXPECT_TRUE(cameraIn(later.offered[0]).descriptorStrings.empty());
}

TEST(UsbStringCache, NextExpiryIsTheOldestReadInFlight) {
    UsbStringCache cache(kLimit);
    resolveAll(cache, {webcamWithoutSerial().observe(videoPath())}, kStart + 100ms);
    const Plug other{"1-1.3", 4};
    const Snapshot second =
        resolveAll(cache, {webcamWithoutSerial(other).observe(videoPath(other))}, kStart + 200ms);
    ASSERT_EQ(second.requests.size(), 1u);
    EXPECT_EQ(cache.nextExpiry(), kStart + 100ms + kLimit);
    EXPECT_EQ(cache.inFlight(), 2u);
}

TEST(UsbStringCache, RemovedDeviceForgetsItsReadAndDropsTheAnswer) {
    UsbStringCache cache(kLimit);
    const Tree tree = webcamWithoutSerial();
    const Snapshot first = resolveAll(cache, {tree.observe(videoPath())});
    ASSERT_EQ(first.requests.size(), 1u);
    // The hub's removal takes the camera below it along.
    cache.forgetBelow(std::string(kController) + "/usb1/1-1");
    EXPECT_EQ(cache.inFlight(), 0u);
    EXPECT_FALSE(cache.complete(first.requests[0].ticket, answer({{"serial", "73BD39DF"}})));
    // Plugged again: read again, under a new ticket.
    const Snapshot again = resolveAll(cache, {tree.observe(videoPath())});
    ASSERT_EQ(again.requests.size(), 1u);
    EXPECT_NE(again.requests[0].ticket, first.requests[0].ticket);
}

TEST(UsbStringCache, RemovalOfAnotherDeviceWithTheSamePrefixKeepsTheRead) {
    UsbStringCache cache(kLimit);
    resolveAll(cache, {webcamWithoutSerial().observe(videoPath())});
    cache.forgetBelow(std::string(kController) + "/usb1/1-1/1-1.2:1.0");  // an interface
    cache.forgetBelow(std::string(kController) + "/usb1/1-1/1-1");        // a prefix, not a parent
    EXPECT_EQ(cache.inFlight(), 1u);
}

TEST(UsbStringCache, ReEnumeratedDeviceIsReadAgain) {
    UsbStringCache cache(kLimit);
    const Snapshot first = resolveAll(cache, {webcamWithoutSerial().observe(videoPath())});
    ASSERT_EQ(first.requests.size(), 1u);
    ASSERT_TRUE(cache.complete(first.requests[0].ticket, answer({{"serial", "73BD39DF"}})));
    const Plug renumbered{"1-1.2", 7};
    const Snapshot second =
        resolveAll(cache, {webcamWithoutSerial(renumbered).observe(videoPath(renumbered))});
    ASSERT_EQ(second.requests.size(), 1u);
    EXPECT_EQ(second.requests[0].devnum, 7);
}

TEST(UsbStringCache, RetainKeepsOnlyTheDevicesAScanStillSees) {
    UsbStringCache cache(kLimit);
    const Snapshot first = resolveAll(cache, {webcamWithoutSerial().observe(videoPath())});
    ASSERT_EQ(first.requests.size(), 1u);
    ASSERT_TRUE(cache.complete(first.requests[0].ticket, answer({{"serial", "73BD39DF"}})));
    cache.retain({first.requests[0].key()});
    EXPECT_TRUE(resolveAll(cache, {webcamWithoutSerial().observe(videoPath())}).requests.empty());
    cache.retain({});
    EXPECT_EQ(resolveAll(cache, {webcamWithoutSerial().observe(videoPath())}).requests.size(), 1u);
}

TEST(UsbStringCache, AnswerForAnUnknownTicketIsIgnored) {
    UsbStringCache cache(kLimit);
    EXPECT_FALSE(cache.complete(42, answer({{"serial", "x"}})));
}

}  // namespace
}  // namespace devlet::usb
