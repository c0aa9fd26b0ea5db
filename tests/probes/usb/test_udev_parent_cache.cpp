// What a uevent makes stale among the parents the udev handler keeps between events: the
// webcam's hub, camera and interface (webcam_observations.h) as kept devices.

#include <string>

#include <gtest/gtest.h>

#include "probes/usb/udev_parent_cache.h"
#include "tests/probes/usb/webcam_observations.h"

namespace devlet::usb {
namespace {

using namespace test;

const std::string kHub = std::string(kController) + "/usb1/1-1";
const std::string kInterface = cameraPath() + "/1-1.2:1.0";

UdevParentCache keptWebcam() {
    UdevParentCache cache;
    const Tree tree = webcam();
    for (const std::string& devpath : {std::string(kController), kHub, cameraPath(), kInterface}) {
        cache.remember(tree.devices.at(devpath));
    }
    return cache;
}

TEST(UdevParentCache, KeptDeviceIsFoundWithItsAttributes) {
    const UdevParentCache cache = keptWebcam();
    const UdevDevice* camera = cache.find(cameraPath());
    ASSERT_NE(camera, nullptr);
    EXPECT_EQ(camera->attributes.at("serial"), "73BD39DF\n");
    EXPECT_EQ(cache.find(videoPath()), nullptr);
}

TEST(UdevParentCache, ChangeDropsOnlyTheDeviceItself) {
    UdevParentCache cache = keptWebcam();
    cache.forget("change", cameraPath());
    EXPECT_EQ(cache.find(cameraPath()), nullptr);
    EXPECT_NE(cache.find(kInterface), nullptr);
    EXPECT_NE(cache.find(kHub), nullptr);
    cache.forget("unbind", kInterface);
    cache.forget("bind", kHub);
    EXPECT_EQ(cache.size(), 1u);
}

TEST(UdevParentCache, RemoveDropsTheDeviceAndEverythingBelow) {
    UdevParentCache cache = keptWebcam();
    cache.forget("remove", kHub);
    EXPECT_EQ(cache.find(kHub), nullptr);
    EXPECT_EQ(cache.find(cameraPath()), nullptr);
    EXPECT_EQ(cache.find(kInterface), nullptr);
    EXPECT_NE(cache.find(kController), nullptr);
}

TEST(UdevParentCache, AddDropsWhatAnEarlierDeviceAtThatPathLeft) {
    // A hub replugged while its remove event was lost: what was below it is another device now.
    UdevParentCache cache = keptWebcam();
    cache.forget("add", cameraPath());
    EXPECT_EQ(cache.find(cameraPath()), nullptr);
    EXPECT_EQ(cache.find(kInterface), nullptr);
    EXPECT_EQ(cache.size(), 2u);
}

TEST(UdevParentCache, EventOnASiblingWithACommonPrefixKeepsTheOthers) {
    UdevParentCache cache = keptWebcam();
    cache.forget("remove", kHub + "/1-1.");                                   // not a parent of 1-1.2
    cache.forget("remove", cameraPath().substr(0, cameraPath().size() - 1));  // ".../1-1." again
    cache.forget("remove", std::string(kController) + "/usb1/1-1.2");         // another port
    EXPECT_EQ(cache.size(), 4u);
}

TEST(UdevParentCache, ClearForgetsEverything) {
    UdevParentCache cache = keptWebcam();
    cache.clear();
    EXPECT_EQ(cache.size(), 0u);
}

}  // namespace
}  // namespace devlet::usb
