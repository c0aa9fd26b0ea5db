// What becomes an instance: observations shaped like a recorded Logitech C920 webcam
// behind a hub (webcam_observations.h) classified with Akri's rules, devlet's USB
// properties and the USB stable identity. No hardware.

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "probes/usb/udev_classifier.h"
#include "probes/usb/udev_details.h"
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

TEST(UdevClassifier, UsbIdentityNamesNodesOnOtherInterfacesByTheirInterface) {
    // The webcam's sound card is on interface 2: a function of its own, as an infrared
    // camera on a second interface is.
    auto instances = classifyUdev(webcam().observeAll(),
                                  usbIdentity({R"(SUBSYSTEM=="video4linux")", R"(KERNEL=="controlC0")"}));
    EXPECT_EQ(idsOf(instances),
              (std::vector<std::string>{"usb:046d:082d:73BD39DF", "usb:046d:082d:73BD39DF:if02"}));
    for (const Instance& instance : instances) EXPECT_EQ(property(instance, "UDEV_DEVNODE_0"), "<absent>");
    EXPECT_EQ(property(instances[1], "UDEV_DEVNODE"), "/dev/snd/controlC0");

    UdevDetails grouped = usbIdentity({R"(SUBSYSTEM=="video4linux")", R"(KERNEL=="controlC0")"});
    grouped.groupRecursive = true;
    instances = classifyUdev(webcam().observeAll(), grouped);
    EXPECT_EQ(idsOf(instances), (std::vector<std::string>{"usb:046d:082d:73BD39DF"}));
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

TEST(UdevClassifier, UsbIdentityLeavesDevicesOutsideUsbUnderTheirDevpath) {
    auto instances = classifyUdev(webcam().observeAll(), usbIdentity({R"(SUBSYSTEM=="pci")"}));
    EXPECT_EQ(idsOf(instances), (std::vector<std::string>{kController}));
}

// --- Akri's udev discoveryProperties: devicePluginResourceName and vfioPassthrough ---

TEST(UdevResourceProperties, VariableNamesAreAkris) {
    // Akri's own test vectors (discovery-handlers/udev/src/device_utils.rs).
    const std::pair<const char*, const char*> cases[] = {
        {"akri.sh/udev-usb-keyboard", "USB_RESOURCE_AKRI_SH_UDEV-USB-KEYBOARD"},
        {"example.com/my-device", "USB_RESOURCE_EXAMPLE_COM_MY-DEVICE"},
    };
    for (const auto& [name, expected] : cases) EXPECT_EQ(resourceVariable("USB_RESOURCE", name), expected);
    EXPECT_EQ(resourceVariable("PCI_RESOURCE", "akri.sh/udev-gpu-t400e"),
              "PCI_RESOURCE_AKRI_SH_UDEV-GPU-T400E");
    EXPECT_EQ(resourceVariable("PCI_RESOURCE", "vendor.io/device"), "PCI_RESOURCE_VENDOR_IO_DEVICE");
}

TEST(UdevResourceProperties, UsbAddressComesFromUsbfsNodesOnly) {
    const std::pair<const char*, std::optional<std::string>> cases[] = {
        {"/dev/bus/usb/001/003", "1:3"},
        {"/dev/bus/usb/002/127", "2:127"},
        {"/dev/bus/usb/1/10", "1:10"},
        {"/dev/video0", std::nullopt},
        {"/dev/bus/usb/00a/001", std::nullopt},
        {"/dev/bus/usb/001/", std::nullopt},
        {"/dev/bus/usb/99999999999/001", std::nullopt},
    };
    for (const auto& [devnode, expected] : cases) EXPECT_EQ(usbAddress(devnode), expected) << devnode;
}

TEST(UdevResourceProperties, PciAddressIsTheLastOneInTheDevpath) {
    const std::pair<const char*, std::optional<std::string>> cases[] = {
        {"/devices/pci0000:00/0000:00:01.0/0000:01:00.0", "0000:01:00.0"},
        {"/devices/pci0000:00/0000:00:02.0/drm/card0", "0000:00:02.0"},
        {"/devices/pci0000:00/0000:00:1c.0/0000:3b:00.1/net/eth0", "0000:3b:00.1"},
        {"/devices/platform/serial8250/tty/ttyS0", std::nullopt},
        {"/devices/pci0000:00", std::nullopt},
        {"/devices/virtual/vfio/13", std::nullopt},
        {"/devices/pci0000:00/0000:00:0g.0", std::nullopt},
    };
    for (const auto& [devpath, expected] : cases) EXPECT_EQ(pciAddress(devpath), expected) << devpath;
}

// A discrete GPU bound to vfio-pci in IOMMU group 13, and an integrated one driven by i915.
Tree pciHost() {
    Tree tree;
    tree.add("/devices/pci0000:00", "", "");
    tree.add("/devices/pci0000:00/0000:00:01.0", "pci", "pcieport", {{"class", "0x060400\n"}}).iommuGroup =
        "2";
    tree.add("/devices/pci0000:00/0000:00:01.0/0000:01:00.0", "pci", "vfio-pci",
             {{"vendor", "0x10de\n"}, {"device", "0x1fb2\n"}})
        .iommuGroup = "13";
    tree.add("/devices/pci0000:00/0000:00:02.0", "pci", "i915", {{"vendor", "0x8086\n"}}).iommuGroup = "0";
    tree.add("/devices/pci0000:00/0000:00:02.0/drm/card0", "drm", "", {}, "/dev/dri/card0");
    return tree;
}

constexpr const char* kGpu = "/devices/pci0000:00/0000:00:01.0/0000:01:00.0";

UdevDetails withProperties(UdevDetails details, const std::map<std::string, std::string>& properties) {
    applyDiscoveryProperties(properties, details);
    return details;
}

TEST(UdevResourceProperties, VfioBoundPciDeviceGetsItsGroupAndTheContainerNode) {
    auto details =
        withProperties(detailsFor({R"(SUBSYSTEM=="pci", DRIVER=="vfio-pci")"}),
                       {{"devicePluginResourceName", "akri.sh/udev-gpu-t400e"}, {"vfioPassthrough", "true"}});
    auto instances = classifyUdev(pciHost().observeAll(), details);
    ASSERT_EQ(instances.size(), 1u);
    const Instance& gpu = instances[0];
    EXPECT_EQ(gpu.id, kGpu);
    EXPECT_EQ(property(gpu, "PCI_RESOURCE_AKRI_SH_UDEV-GPU-T400E"), "0000:01:00.0");
    EXPECT_EQ(property(gpu, "UDEV_DEVPATH"), kGpu);
    EXPECT_EQ(property(gpu, "UDEV_DEVNODE"), "<absent>");
    EXPECT_EQ(gpu.nodes, (std::vector<DeviceNode>{{"/dev/vfio/13", "/dev/vfio/13", "rwm"},
                                                  {"/dev/vfio/vfio", "/dev/vfio/vfio", "rwm"}}));
}

TEST(UdevResourceProperties, WhatEachCombinationGives) {
    struct Case {
        const char* name;
        std::map<std::string, std::string> properties;
        bool pciResource;
        bool vfioNodes;
    };
    const Case cases[] = {
        {"none", {}, false, false},
        {"resource name only", {{"devicePluginResourceName", "example.com/gpu"}}, true, false},
        {"both", {{"devicePluginResourceName", "example.com/gpu"}, {"vfioPassthrough", "true"}}, true, true},
        {"true in capitals, blanks around",
         {{"devicePluginResourceName", " example.com/gpu\n"}, {"vfioPassthrough", " TRUE "}},
         true,
         true},
        {"vfio off",
         {{"devicePluginResourceName", "example.com/gpu"}, {"vfioPassthrough", "false"}},
         true,
         false},
        {"vfio yes is not true",
         {{"devicePluginResourceName", "example.com/gpu"}, {"vfioPassthrough", "yes"}},
         true,
         false},
        // Akri passes VFIO groups only for devices that get PCI_RESOURCE_<NAME>.
        {"vfio without a resource name", {{"vfioPassthrough", "true"}}, false, false},
        {"empty resource name",
         {{"devicePluginResourceName", ""}, {"vfioPassthrough", "true"}},
         false,
         false},
    };
    for (const Case& c : cases) {
        auto details = withProperties(detailsFor({R"(SUBSYSTEM=="pci", DRIVER=="vfio-pci")"}), c.properties);
        auto instances = classifyUdev(pciHost().observeAll(), details);
        ASSERT_EQ(instances.size(), 1u) << c.name;
        EXPECT_EQ(property(instances[0], "PCI_RESOURCE_EXAMPLE_COM_GPU"),
                  c.pciResource ? "0000:01:00.0" : "<absent>")
            << c.name;
        EXPECT_EQ(instances[0].nodes.size(), c.vfioNodes ? 2u : 0u) << c.name;
    }
}

TEST(UdevResourceProperties, PciDeviceWithoutIommuGroupGetsNoVfioNodes) {
    Tree tree = pciHost();
    tree.devices.at(kGpu).iommuGroup.clear();  // IOMMU off
    auto details =
        withProperties(detailsFor({R"(SUBSYSTEM=="pci", DRIVER=="vfio-pci")"}),
                       {{"devicePluginResourceName", "example.com/gpu"}, {"vfioPassthrough", "true"}});
    auto instances = classifyUdev(tree.observeAll(), details);
    ASSERT_EQ(instances.size(), 1u);
    EXPECT_EQ(property(instances[0], "PCI_RESOURCE_EXAMPLE_COM_GPU"), "0000:01:00.0");
    EXPECT_TRUE(instances[0].nodes.empty());
}

TEST(UdevResourceProperties, DrmNodeGetsItsPciAddressButNoVfioGroup) {
    // Akri reads iommu_group at the instance's own devpath: a DRM card has none.
    auto details =
        withProperties(detailsFor({R"(SUBSYSTEM=="drm", KERNEL=="card*")"}),
                       {{"devicePluginResourceName", "example.com/igpu"}, {"vfioPassthrough", "true"}});
    auto instances = classifyUdev(pciHost().observeAll(), details);
    ASSERT_EQ(instances.size(), 1u);
    EXPECT_EQ(property(instances[0], "PCI_RESOURCE_EXAMPLE_COM_IGPU"), "0000:00:02.0");
    EXPECT_EQ(instances[0].nodes, (std::vector<DeviceNode>{{"/dev/dri/card0", "/dev/dri/card0", "rwm"}}));
}

TEST(UdevResourceProperties, UsbDeviceGetsBusAndDeviceNumberNotAPciAddress) {
    auto details = withProperties(detailsFor({R"(SUBSYSTEM=="usb", ATTR{idVendor}=="046d")"}),
                                  {{"devicePluginResourceName", "akri.sh/udev-usb-camera"}});
    auto instances = classifyUdev(webcam().observeAll(), details);
    ASSERT_EQ(instances.size(), 1u);
    EXPECT_EQ(property(instances[0], "USB_RESOURCE_AKRI_SH_UDEV-USB-CAMERA"), "1:3");
    // Below a USB bus (usb1 in the devpath): no PCI_RESOURCE, though the controller is PCI.
    EXPECT_EQ(property(instances[0], "PCI_RESOURCE_AKRI_SH_UDEV-USB-CAMERA"), "<absent>");
}

TEST(UdevResourceProperties, VideoNodeOfAUsbCameraGetsNeither) {
    auto details = withProperties(detailsFor({R"(SUBSYSTEM=="video4linux")"}),
                                  {{"devicePluginResourceName", "example.com/cam"}});
    auto instances = classifyUdev(webcam().observeAll(), details);
    ASSERT_EQ(instances.size(), 1u);
    for (const auto& [name, value] : instances[0].properties) {
        EXPECT_FALSE(name.starts_with("USB_RESOURCE_") || name.starts_with("PCI_RESOURCE_")) << name;
    }
}

TEST(UdevResourceProperties, GroupedUsbNodesAreSuffixedLikeTheirDevnodes) {
    UdevDetails details = detailsFor({R"(SUBSYSTEM=="usb")"});
    details.groupRecursive = true;
    details = withProperties(std::move(details), {{"devicePluginResourceName", "example.com/usb"}});
    auto instances = classifyUdev(webcam().observeAll(), details);
    ASSERT_EQ(instances.size(), 1u);
    const Instance& group = instances[0];
    for (int i = 0; i < 3; ++i) {
        const std::string suffix = "_" + std::to_string(i);
        const std::string devnode = property(group, "UDEV_DEVNODE" + suffix);
        ASSERT_TRUE(devnode.starts_with("/dev/bus/usb/001/")) << devnode;
        EXPECT_EQ(property(group, "USB_RESOURCE_EXAMPLE_COM_USB" + suffix), "1:" + std::to_string(i + 1));
    }
    EXPECT_EQ(property(group, "USB_RESOURCE_EXAMPLE_COM_USB"), "<absent>");
}

}  // namespace
}  // namespace devlet::usb
