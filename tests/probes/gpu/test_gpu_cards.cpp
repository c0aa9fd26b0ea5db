// Which cards a batch of drm/pci uevents concerns, and the cards the gpu probe keeps
// between events: table tests, no sysfs.

#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "probes/gpu/gpu_cards.h"

namespace devlet::gpu {
namespace {

constexpr const char* kGpu = "/devices/pci0000:00/0000:00:01.0/0000:03:00.0";

using Devices = std::optional<std::vector<std::string>>;
using Cards = std::set<std::string, CardOrder>;

TEST(GpuEventAttribution, DrmEventsNameTheDeviceWhoseDrmDirectoryHoldsThem) {
    const std::string gpu = kGpu;
    EXPECT_EQ(devicesOfEvents({{"drm", gpu + "/drm/card1"}}), Devices({gpu}));
    EXPECT_EQ(devicesOfEvents({{"drm", gpu + "/drm/renderD129"}}), Devices({gpu}));
    // A connector's hotplug (a monitor plugged) is a change on the card's device.
    EXPECT_EQ(devicesOfEvents({{"drm", gpu + "/drm/card1/card1-DP-1"}}), Devices({gpu}));
    EXPECT_EQ(devicesOfEvents({{"drm", "/devices/virtual/drm/ttm"}}), Devices({"/devices/virtual"}));
}

TEST(GpuEventAttribution, PciEventsNameTheFunctionItself) {
    EXPECT_EQ(devicesOfEvents({{"pci", kGpu}}), Devices({kGpu}));
    EXPECT_EQ(devicesOfEvents({{"pci", "/devices/pci0000:00/0000:00:01.0"}}),
              Devices({"/devices/pci0000:00/0000:00:01.0"}));
    EXPECT_EQ(devicesOfEvents({{"pci", kGpu}, {"drm", std::string(kGpu) + "/drm/card1"}}),
              Devices({kGpu, kGpu}));
    EXPECT_EQ(devicesOfEvents({}), Devices(std::vector<std::string>{}));
}

TEST(GpuEventAttribution, WhatItCannotPlaceMakesTheWholeBatchAFullPass) {
    EXPECT_EQ(devicesOfEvents({{"usb", "/devices/pci0000:00/0000:00:14.0/usb1"}}), std::nullopt);
    EXPECT_EQ(devicesOfEvents({{"drm", "/devices/platform/simple-framebuffer.0"}}), std::nullopt);
    EXPECT_EQ(devicesOfEvents({{"pci", ""}}), std::nullopt);
    EXPECT_EQ(devicesOfEvents({{"drm", "card1"}}), std::nullopt);
    EXPECT_EQ(devicesOfEvents({{"pci", kGpu}, {"", std::string(kGpu) + "/drm/card1"}}), std::nullopt);
}

GpuObservation card(const std::string& name, const std::string& pciDevpath, const std::string& physfn = "") {
    GpuObservation gpu;
    gpu.card = name;
    gpu.devpath = pciDevpath + "/drm/" + name;
    gpu.pciAddress = pciDevpath.substr(pciDevpath.rfind('/') + 1);
    gpu.physicalFunction = physfn;
    return gpu;
}

// An integrated GPU, an SR-IOV PF behind a port with two VFs, and a card behind another port.
GpuCards machine() {
    GpuCards cards;
    cards.assign({
        card("card0", "/devices/pci0000:00/0000:00:02.0"),
        card("card1", "/devices/pci0000:00/0000:00:01.0/0000:03:00.0"),
        card("card2", "/devices/pci0000:00/0000:00:01.0/0000:03:00.1", "0000:03:00.0"),
        card("card3", "/devices/pci0000:00/0000:00:01.0/0000:03:00.2", "0000:03:00.0"),
        card("card10", "/devices/pci0000:00/0000:00:1c.0/0000:05:00.0"),
    });
    return cards;
}

std::vector<std::string> names(const std::vector<GpuObservation>& observations) {
    std::vector<std::string> result;
    for (const GpuObservation& gpu : observations) result.push_back(gpu.card);
    return result;
}

TEST(GpuCards, KeepsCardsInTheKernelsOrder) {
    EXPECT_EQ(names(machine().observations()),
              (std::vector<std::string>{"card0", "card1", "card2", "card3", "card10"}));
}

TEST(GpuCards, CardsAtADeviceAreItsOwnAndThoseBelowIt) {
    const GpuCards cards = machine();
    EXPECT_EQ(cards.cardsAt({kGpu}), Cards({"card1"}));
    EXPECT_EQ(cards.cardsAt({"/devices/pci0000:00/0000:00:01.0"}), Cards({"card1", "card2", "card3"}));
    EXPECT_EQ(
        cards.cardsAt({"/devices/pci0000:00/0000:00:1c.0/0000:05:00.0", "/devices/pci0000:00/0000:00:02.0"}),
        Cards({"card0", "card10"}));
    // Whole path components: 0000:00:02.0 is not a prefix of 0000:00:02.01.
    EXPECT_EQ(cards.cardsAt({"/devices/pci0000:00/0000:00:02"}), Cards());
    EXPECT_EQ(cards.cardsAt({"/devices/pci0000:00/0000:00:03.0"}), Cards());
}

TEST(GpuCards, RelativesAreAVirtualFunctionsPhysicalFunctionAndAPhysicalFunctionsVirtualFunctions) {
    const GpuCards cards = machine();
    EXPECT_EQ(cards.relativesOf(*cards.find("card2")), Cards({"card1"}));
    EXPECT_EQ(cards.relativesOf(*cards.find("card1")), Cards({"card2", "card3"}));
    EXPECT_EQ(cards.relativesOf(*cards.find("card0")), Cards());
    // A VF not kept yet (just created) still leads to its PF.
    EXPECT_EQ(
        cards.relativesOf(card("card4", "/devices/pci0000:00/0000:00:01.0/0000:03:00.3", "0000:03:00.0")),
        Cards({"card1"}));
}

TEST(GpuCards, UpdateReplacesWhatWasReadAndDropsWhatIsGone) {
    GpuCards cards = machine();
    GpuObservation rebound = *cards.find("card1");
    rebound.driver = "vfio-pci";
    // card2 and card3 were read and are gone (VFs disabled); card4 is new.
    cards.update({"card1", "card2", "card3", "card4"},
                 {rebound, card("card4", "/devices/pci0000:00/0000:00:1d.0/0000:06:00.0")});
    EXPECT_EQ(names(cards.observations()), (std::vector<std::string>{"card0", "card1", "card4", "card10"}));
    EXPECT_EQ(cards.find("card1")->driver, "vfio-pci");
    EXPECT_EQ(cards.find("card2"), nullptr);
}

}  // namespace
}  // namespace devlet::gpu
