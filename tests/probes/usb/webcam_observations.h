#pragma once
// Observations shaped like a recorded Logitech C920 webcam behind a hub (values copied
// from the project's umockdev recording), built as plain values for the pure tests of the
// udev handler: no hardware, no libudev.

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "probes/usb/udev_details.h"
#include "probes/usb/udev_rule.h"

namespace devlet::usb::test {

inline constexpr const char* kController = "/devices/pci0000:00/0000:00:1a.0";

// A sysfs tree: devices by devpath; an observation's parents are the devpath's prefixes
// that the tree holds, nearest first.
struct Tree {
    std::map<std::string, UdevDevice> devices;

    UdevDevice& add(const std::string& devpath, const std::string& subsystem, const std::string& driver,
                    std::map<std::string, std::string> attributes = {}, const std::string& devnode = {}) {
        UdevDevice& device = devices[devpath];
        device.devpath = devpath;
        device.subsystem = subsystem;
        device.kernel = devpath.substr(devpath.rfind('/') + 1);
        device.driver = driver;
        device.attributes = std::move(attributes);
        device.devnode = devnode;
        return device;
    }

    UdevObservation observe(const std::string& devpath) const {
        UdevObservation observation;
        observation.device = devices.at(devpath);
        observation.devnode = observation.device.devnode;
        for (std::size_t end = devpath.rfind('/'); end != 0 && end != std::string::npos;
             end = devpath.rfind('/', end - 1)) {
            if (auto it = devices.find(devpath.substr(0, end)); it != devices.end()) {
                observation.parents.push_back(it->second);
            }
        }
        return observation;
    }

    std::vector<UdevObservation> observeAll() const {
        std::vector<UdevObservation> all;
        for (const auto& [devpath, device] : devices) all.push_back(observe(devpath));
        return all;
    }
};

// Where the camera is plugged in: its port path and its USB device number.
struct Plug {
    std::string port = "1-1.2";
    int devnum = 3;
};

inline std::string cameraPath(const Plug& plug = {}) {
    return std::string(kController) + "/usb1/1-1/" + plug.port;
}
inline std::string videoPath(const Plug& plug = {}) {
    return cameraPath(plug) + "/" + plug.port + ":1.0/video4linux/video0";
}
inline std::string soundPath(const Plug& plug = {}) {
    return cameraPath(plug) + "/" + plug.port + ":1.2/sound/card0";
}

// The recorded C920 behind an Intel hub on an EHCI controller. Attribute values end in
// "\n" where sysfs gives them so.
inline Tree webcam(const Plug& plug = {}) {
    Tree tree;
    tree.add("/devices/pci0000:00", "", "");
    tree.add(kController, "pci", "ehci-pci", {{"vendor", "0x8086\n"}, {"device", "0x1e2d\n"}});
    tree.add(std::string(kController) + "/usb1", "usb", "usb",
             {{"idVendor", "1d6b\n"},
              {"idProduct", "0002\n"},
              {"bDeviceClass", "09\n"},
              {"busnum", "1\n"},
              {"devnum", "1\n"},
              {"serial", "0000:00:1a.0\n"},
              {"manufacturer", "Linux 3.8.0-25-generic ehci_hcd\n"},
              {"product", "EHCI Host Controller\n"}},
             "/dev/bus/usb/001/001");
    tree.add(std::string(kController) + "/usb1/1-1", "usb", "usb",
             {{"idVendor", "8087\n"},
              {"idProduct", "0024\n"},
              {"bDeviceClass", "09\n"},
              {"busnum", "1\n"},
              {"devnum", "2\n"},
              {"manufacturer", "8087\n"},
              {"product", "0024\n"}},
             "/dev/bus/usb/001/002");
    char devnode[32];
    std::snprintf(devnode, sizeof devnode, "/dev/bus/usb/001/%03d", plug.devnum);
    tree.add(cameraPath(plug), "usb", "usb",
             {{"idVendor", "046d\n"},
              {"idProduct", "082d\n"},
              {"bcdDevice", "0011\n"},
              {"bDeviceClass", "ef\n"},
              {"bDeviceSubClass", "02\n"},
              {"busnum", "1\n"},
              {"devnum", std::to_string(plug.devnum) + "\n"},
              {"serial", "73BD39DF\n"},
              {"manufacturer", "046d\n"},
              {"product", "HD Pro Webcam C920\n"}},
             devnode);
    tree.add(cameraPath(plug) + "/" + plug.port + ":1.0", "usb", "uvcvideo",
             {{"bInterfaceClass", "0e\n"}, {"bInterfaceNumber", "00\n"}});
    tree.add(videoPath(plug), "video4linux", "", {{"name", "HD Pro Webcam C920\n"}}, "/dev/video0");
    tree.add(cameraPath(plug) + "/" + plug.port + ":1.2", "usb", "snd-usb-audio",
             {{"bInterfaceClass", "01\n"}, {"bInterfaceNumber", "02\n"}});
    tree.add(soundPath(plug), "sound", "");
    tree.add(soundPath(plug) + "/controlC0", "sound", "", {}, "/dev/snd/controlC0");
    tree.add(soundPath(plug) + "/pcmC0D0c", "sound", "", {}, "/dev/snd/pcmC0D0c");
    return tree;
}

inline UdevDetails detailsFor(const std::vector<std::string>& rules) {
    UdevDetails details;
    for (std::size_t i = 0; i < rules.size(); ++i) {
        std::string error;
        std::optional<UdevRule> rule = UdevRule::parse(rules[i], i, error);
        EXPECT_TRUE(rule) << rules[i] << ": " << error;
        if (rule) details.rules.push_back(std::move(*rule));
    }
    return details;
}

}  // namespace devlet::usb::test
