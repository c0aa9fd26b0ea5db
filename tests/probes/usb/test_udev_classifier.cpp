// What becomes an instance: observations shaped like a recorded Logitech C920 webcam
// behind a hub (webcam_observations.h) classified with Akri's rules, devlet's USB
// properties and the USB stable identity. No hardware.

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "probes/usb/udev_classifier.h"
#include "runtime/naming.h"
#include "tests/probes/usb/webcam_observations.h"

namespace devlet::usb {
namespace {

using namespace test;

std::vector<std::string> idsOf(const std::vector<Instance>& instances) {
    std::vector<std::string> ids;
    ids.reserve(instances.size());
    for (const Instance& instance : instances) ids.push_back(instance.id);
    return ids;
}

std::string property(const Instance& instance, const std::string& name) {
    auto it = instance.properties.find(name);
    return it == instance.properties.end() ? "<absent>" : it->second;
}

TEST(UdevClassifier, MatchedDeviceWithNodeIsOfferedUnderItsDevpath) {
    auto instances = classifyUdev(webcam().observeAll(), detailsFor({R"(SUBSYSTEM=="video4linux")"}));
    ASSERT_EQ(instances.size(), 1u);
    const Instance& video = instances[0];
    EXPECT_EQ(video.id, videoPath());
    EXPECT_FALSE(video.shared);
    EXPECT_EQ(video.nodes, (std::vector<DeviceNode>{{"/dev/video0", "/dev/video0", "rwm"}}));
    EXPECT_TRUE(video.mounts.empty());
    EXPECT_EQ(property(video, "UDEV_DEVNODE"), "/dev/video0");
    EXPECT_EQ(property(video, "UDEV_DEVPATH"), videoPath());
}

TEST(UdevClassifier, UnmatchedDevicesAreNotOffered) {
    auto instances = classifyUdev(webcam().observeAll(), detailsFor({R"(SUBSYSTEM=="tty")"}));
    EXPECT_TRUE(instances.empty());
}

TEST(UdevClassifier, DeviceMatchingAnyRuleIsOffered) {
    auto instances =
        classifyUdev(webcam().observeAll(), detailsFor({R"(SUBSYSTEM=="tty")", R"(KERNEL=="controlC0")"}));
    EXPECT_EQ(idsOf(instances), (std::vector<std::string>{soundPath() + "/controlC0"}));
}

TEST(UdevClassifier, DeviceWithoutNodeIsOfferedThroughNearestAncestorWithOne) {
    // The UVC interface has no node; its parent USB device has /dev/bus/usb/001/003.
    auto instances = classifyUdev(webcam().observeAll(), detailsFor({R"(DRIVER=="uvcvideo")"}));
    ASSERT_EQ(instances.size(), 1u);
    EXPECT_EQ(instances[0].id, cameraPath());
    EXPECT_EQ(property(instances[0], "UDEV_DEVPATH"), cameraPath());
    EXPECT_EQ(property(instances[0], "UDEV_DEVNODE"), "/dev/bus/usb/001/003");
    EXPECT_EQ(instances[0].nodes,
              (std::vector<DeviceNode>{{"/dev/bus/usb/001/003", "/dev/bus/usb/001/003", "rwm"}}));
}

TEST(UdevClassifier, DeviceWithoutNodeAnywhereIsOfferedWithoutNode) {
    auto instances = classifyUdev(webcam().observeAll(), detailsFor({R"(SUBSYSTEM=="pci")"}));
    ASSERT_EQ(instances.size(), 1u);
    EXPECT_EQ(instances[0].id, kController);
    EXPECT_TRUE(instances[0].nodes.empty());
    EXPECT_EQ(property(instances[0], "UDEV_DEVNODE"), "<absent>");
    EXPECT_EQ(property(instances[0], "UDEV_DEVPATH"), kController);
}

TEST(UdevClassifier, DuplicatesCollapseIntoOneInstance) {
    const Tree tree = webcam();
    std::vector<UdevObservation> seen = tree.observeAll();
    seen.push_back(tree.observe(videoPath()));  // reported twice (enumeration and a uevent)
    // Both interfaces fall back to the same USB device; video0 matches two rules.
    auto instances = classifyUdev(seen, detailsFor({R"(DRIVER=="uvcvideo|snd-usb-audio")",
                                                    R"(KERNEL=="video0")", R"(SUBSYSTEM=="video4linux")"}));
    EXPECT_EQ(idsOf(instances), (std::vector<std::string>{cameraPath(), videoPath()}));
}

TEST(UdevClassifier, ConfiguredPermissionsGoOnEveryNode) {
    UdevDetails details = detailsFor({R"(KERNEL=="video0|controlC0")"});
    details.permissions = "r";
    for (const Instance& instance : classifyUdev(webcam().observeAll(), details)) {
        ASSERT_EQ(instance.nodes.size(), 1u) << instance.id;
        EXPECT_EQ(instance.nodes[0].permissions, "r") << instance.id;
    }
}

const std::vector<std::string> kCameraRules = {R"(SUBSYSTEM=="usb", ATTR{idVendor}=="046d")",
                                               R"(SUBSYSTEM=="video4linux")",
                                               R"(KERNEL=="controlC0|pcmC0D0c")"};

TEST(UdevClassifier, WithoutGroupRecursiveEveryMatchIsItsOwnInstance) {
    auto instances = classifyUdev(webcam().observeAll(), detailsFor(kCameraRules));
    EXPECT_EQ(instances.size(), 4u);
}

TEST(UdevClassifier, GroupRecursiveMergesChildrenIntoTopMostWithIndexesInDevpathOrder) {
    UdevDetails details = detailsFor(kCameraRules);
    details.groupRecursive = true;
    std::vector<UdevObservation> seen = webcam().observeAll();
    auto instances = classifyUdev(seen, details);
    ASSERT_EQ(instances.size(), 1u);
    const Instance& camera = instances[0];
    EXPECT_EQ(camera.id, cameraPath());
    EXPECT_EQ(property(camera, "UDEV_DEVPATH"), cameraPath());
    EXPECT_EQ(property(camera, "UDEV_DEVNODE"), "<absent>");
    EXPECT_EQ(property(camera, "UDEV_DEVNODE_0"), "/dev/bus/usb/001/003");
    EXPECT_EQ(property(camera, "UDEV_DEVNODE_1"), "/dev/video0");
    EXPECT_EQ(property(camera, "UDEV_DEVNODE_2"), "/dev/snd/controlC0");
    EXPECT_EQ(property(camera, "UDEV_DEVNODE_3"), "/dev/snd/pcmC0D0c");
    ASSERT_EQ(camera.nodes.size(), 4u);
    EXPECT_EQ(camera.nodes[1], (DeviceNode{"/dev/video0", "/dev/video0", "rwm"}));

    // Akri numbers members in hash-set order; here any order of observations gives the same.
    std::reverse(seen.begin(), seen.end());
    EXPECT_EQ(classifyUdev(seen, details), instances);
}

TEST(UdevClassifier, GroupRecursiveSuffixesEvenALoneMemberAsAkriDoes) {
    UdevDetails details = detailsFor({R"(SUBSYSTEM=="video4linux")"});
    details.groupRecursive = true;
    auto instances = classifyUdev(webcam().observeAll(), details);
    ASSERT_EQ(instances.size(), 1u);
    EXPECT_EQ(property(instances[0], "UDEV_DEVNODE_0"), "/dev/video0");
    EXPECT_EQ(property(instances[0], "UDEV_DEVNODE"), "<absent>");
}

TEST(UdevClassifier, GroupRecursiveKeepsSiblingsWhoseNamesShareAPrefixApart) {
    Tree tree;
    tree.add("/devices/virtual/video4linux/video1", "video4linux", "", {}, "/dev/video1");
    tree.add("/devices/virtual/video4linux/video10", "video4linux", "", {}, "/dev/video10");
    UdevDetails details = detailsFor({R"(SUBSYSTEM=="video4linux")"});
    details.groupRecursive = true;
    auto instances = classifyUdev(tree.observeAll(), details);
    EXPECT_EQ(idsOf(instances), (std::vector<std::string>{"/devices/virtual/video4linux/video1",
                                                          "/devices/virtual/video4linux/video10"}));
}

TEST(UdevClassifier, UsbPropertiesComeFromTheUsbDeviceAboveTheNode) {
    auto instances = classifyUdev(webcam().observeAll(), detailsFor({R"(SUBSYSTEM=="video4linux")"}));
    ASSERT_EQ(instances.size(), 1u);
    const std::map<std::string, std::string> expected = {
        {"UDEV_DEVNODE", "/dev/video0"},
        {"UDEV_DEVPATH", videoPath()},
        {"USB_VENDOR_ID", "046d"},
        {"USB_PRODUCT_ID", "082d"},
        {"USB_SERIAL", "73BD39DF"},
        {"USB_MANUFACTURER", "046d"},
        {"USB_PRODUCT", "HD Pro Webcam C920"},
        {"USB_BUSNUM", "1"},
        {"USB_DEVNUM", "3"},
        {"USB_PORT_PATH", "1-1.2"},
        {"USB_CLASS", "ef"},
    };
    EXPECT_EQ(instances[0].properties, expected);  // the recording has no speed attribute
}

TEST(UdevClassifier, UsbSpeedIsReportedWhenSysfsHasIt) {
    Tree tree = webcam();
    tree.devices[cameraPath()].attributes["speed"] = "480\n";
    auto instances = classifyUdev(tree.observeAll(), detailsFor({R"(SUBSYSTEM=="video4linux")"}));
    ASSERT_EQ(instances.size(), 1u);
    EXPECT_EQ(property(instances[0], "USB_SPEED"), "480");
}

TEST(UdevClassifier, MissingOrEmptyUsbAttributesAreLeftOut) {
    Tree tree = webcam();
    // Descriptor string reads fail on some devices: sysfs then has no file or an empty one.
    tree.devices[cameraPath()].attributes = {
        {"idVendor", "046d\n"}, {"idProduct", "082d\n"}, {"serial", "\n"}};
    auto instances = classifyUdev(tree.observeAll(), detailsFor({R"(SUBSYSTEM=="video4linux")"}));
    ASSERT_EQ(instances.size(), 1u);
    const std::map<std::string, std::string> expected = {
        {"UDEV_DEVNODE", "/dev/video0"}, {"UDEV_DEVPATH", videoPath()}, {"USB_VENDOR_ID", "046d"},
        {"USB_PRODUCT_ID", "082d"},      {"USB_PORT_PATH", "1-1.2"},
    };
    EXPECT_EQ(instances[0].properties, expected);
}

UdevDetails usbIdentityFor(const std::vector<std::string>& rules) {
    UdevDetails details = detailsFor(rules);
    details.stableIdentity = StableIdentity::Usb;
    return details;
}

TEST(UdevClassifier, StringsSysfsLacksComeFromTheDescriptorsLibusbRead) {
    Tree tree = webcam();
    UdevDevice& camera = tree.devices[cameraPath()];
    camera.attributes.erase("serial");
    camera.attributes["product"] = "\n";
    // libusb read the serial and the product; sysfs's manufacturer stays first.
    camera.descriptorStrings = {
        {"serial", "73BD39DF"}, {"product", " HD Pro Webcam C920 "}, {"manufacturer", "x"}};
    auto instances = classifyUdev(tree.observeAll(), usbIdentityFor({R"(SUBSYSTEM=="video4linux")"}));
    ASSERT_EQ(instances.size(), 1u);
    EXPECT_EQ(instances[0].id, "usb:046d:082d:73BD39DF");
    EXPECT_EQ(property(instances[0], "USB_SERIAL"), "73BD39DF");
    EXPECT_EQ(property(instances[0], "USB_PRODUCT"), "HD Pro Webcam C920");
    EXPECT_EQ(property(instances[0], "USB_MANUFACTURER"), "046d");
}

TEST(UdevClassifier, DescriptorStringsNeverReachTheRules) {
    Tree tree = webcam();
    UdevDevice& camera = tree.devices[cameraPath()];
    camera.attributes.erase("serial");
    camera.descriptorStrings = {{"serial", "73BD39DF"}};
    auto instances = classifyUdev(tree.observeAll(),
                                  detailsFor({R"(SUBSYSTEM=="video4linux", ATTRS{serial}=="73BD39DF")"}));
    EXPECT_TRUE(instances.empty());
}

TEST(UdevClassifier, DeviceOutsideUsbHasNoUsbProperties) {
    auto instances = classifyUdev(webcam().observeAll(), detailsFor({R"(SUBSYSTEM=="pci")"}));
    ASSERT_EQ(instances.size(), 1u);
    for (const auto& [name, value] : instances[0].properties) EXPECT_NE(name.rfind("USB_", 0), 0u) << name;
}

TEST(UdevClassifier, InstanceNameIsAkrisHashOfDevpathAndNode) {
    auto instances = classifyUdev(webcam().observeAll(), detailsFor({R"(SUBSYSTEM=="video4linux")"}));
    ASSERT_EQ(instances.size(), 1u);
    // BLAKE2b, 3-byte digest, over devpath + node name: udev devices are not shared.
    EXPECT_EQ(instanceHash(instances[0].id, "node-a", instances[0].shared), "477a24");
    EXPECT_EQ(instanceName("akri-udev-video", instanceHash(instances[0].id, "node-a", false)),
              "akri-udev-video-477a24");
}

UdevDetails usbIdentity(const std::vector<std::string>& rules) {
    UdevDetails details = detailsFor(rules);
    details.stableIdentity = StableIdentity::Usb;
    return details;
}

TEST(UdevClassifier, UsbIdentityNamesTheCameraByVendorProductAndSerial) {
    auto instances = classifyUdev(webcam().observeAll(), usbIdentity({R"(SUBSYSTEM=="video4linux")"}));
    ASSERT_EQ(instances.size(), 1u);
    EXPECT_EQ(instances[0].id, "usb:046d:082d:73BD39DF");
    EXPECT_EQ(property(instances[0], "UDEV_DEVNODE"), "/dev/video0");
    EXPECT_EQ(property(instances[0], "UDEV_DEVPATH"), videoPath());
}

TEST(UdevClassifier, UsbIdentityKeepsTheIdWhenTheCameraMovesToAnotherPort) {
    const UdevDetails details = usbIdentity({R"(SUBSYSTEM=="video4linux")"});
    const Plug moved{"1-1.3", 5};
    auto before = classifyUdev(webcam().observeAll(), details);
    auto after = classifyUdev(webcam(moved).observeAll(), details);
    ASSERT_EQ(before.size(), 1u);
    ASSERT_EQ(after.size(), 1u);
    EXPECT_EQ(after[0].id, before[0].id);
    EXPECT_EQ(property(after[0], "UDEV_DEVPATH"), videoPath(moved));
    EXPECT_EQ(property(after[0], "USB_PORT_PATH"), "1-1.3");
}

TEST(UdevClassifier, UsbIdentityKeepsTheIdWhenTheDeviceReEnumeratesWithANewNode) {
    // Akri issue #734: a reset gives the device a new /dev/bus/usb/BBB/DDD.
    const UdevDetails details = usbIdentity({R"(SUBSYSTEM=="usb", ATTR{idVendor}=="046d")"});
    auto before = classifyUdev(webcam().observeAll(), details);
    auto after = classifyUdev(webcam(Plug{"1-1.2", 7}).observeAll(), details);
    ASSERT_EQ(before.size(), 1u);
    ASSERT_EQ(after.size(), 1u);
    EXPECT_EQ(after[0].id, before[0].id);
    EXPECT_EQ(after[0].nodes,
              (std::vector<DeviceNode>{{"/dev/bus/usb/001/007", "/dev/bus/usb/001/007", "rwm"}}));
    EXPECT_EQ(property(after[0], "UDEV_DEVNODE"), "/dev/bus/usb/001/007");
    EXPECT_EQ(property(after[0], "USB_DEVNUM"), "7");
}

TEST(UdevClassifier, UsbIdentityWithoutSerialFallsBackToThePortPath) {
    Tree tree = webcam();
    tree.devices[cameraPath()].attributes.erase("serial");
    auto instances = classifyUdev(tree.observeAll(), usbIdentity({R"(SUBSYSTEM=="video4linux")"}));
    EXPECT_EQ(idsOf(instances), (std::vector<std::string>{"usb:046d:082d:port:1-1.2"}));
}

TEST(UdevClassifier, UsbIdentityGivesDevicesSharingASerialTheirPortPaths) {
    Tree tree = webcam();
    const Plug second{"1-1.4", 4};
    for (const auto& [devpath, device] : webcam(second).devices) tree.devices.try_emplace(devpath, device);
    tree.devices[videoPath(second)].devnode = "/dev/video2";
    auto instances = classifyUdev(tree.observeAll(), usbIdentity({R"(SUBSYSTEM=="video4linux")"}));
    EXPECT_EQ(idsOf(instances),
              (std::vector<std::string>{"usb:046d:082d:port:1-1.2", "usb:046d:082d:port:1-1.4"}));
}

TEST(UdevClassifier, UsbIdentityPutsEveryNodeOfOneDeviceInOneInstance) {
    auto instances = classifyUdev(webcam().observeAll(),
                                  usbIdentity({R"(SUBSYSTEM=="video4linux")", R"(KERNEL=="controlC0")"}));
    ASSERT_EQ(instances.size(), 1u);
    EXPECT_EQ(instances[0].id, "usb:046d:082d:73BD39DF");
    EXPECT_EQ(property(instances[0], "UDEV_DEVNODE_0"), "/dev/video0");
    EXPECT_EQ(property(instances[0], "UDEV_DEVNODE_1"), "/dev/snd/controlC0");
    EXPECT_EQ(property(instances[0], "UDEV_DEVPATH"), videoPath());
}

TEST(UdevClassifier, UsbIdentityLeavesDevicesOutsideUsbUnderTheirDevpath) {
    auto instances = classifyUdev(webcam().observeAll(), usbIdentity({R"(SUBSYSTEM=="pci")"}));
    EXPECT_EQ(idsOf(instances), (std::vector<std::string>{kController}));
}

}  // namespace
}  // namespace devlet::usb
