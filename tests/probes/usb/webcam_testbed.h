#pragma once
// A Logitech C920 webcam as a umockdev testbed description: facts from a real machine's
// udev database, trimmed to what the rules and the classifier read. Shared by the tests
// that run the udev probe and `devlet probe usb` on a testbed.

#include <cstdio>
#include <string>
#include <string_view>
#include <utility>

#include "tests/probes/usb/testbed_text.h"

namespace devlet::test {

// The webcam behind an Intel hub on an EHCI controller.
inline constexpr const char* kWebcamTestbed = R"(P: /devices/pci0000:00/0000:00:1a.0
E: DRIVER=ehci-pci
E: PCI_ID=8086:1E2D
E: PCI_SLOT_NAME=0000:00:1a.0
E: SUBSYSTEM=pci
A: vendor=0x8086
A: device=0x1e2d
A: class=0x0c0320
L: driver=../../../bus/pci/drivers/ehci-pci

P: /devices/pci0000:00/0000:00:1a.0/usb1
N: bus/usb/001/001
E: BUSNUM=001
E: DEVNAME=/dev/bus/usb/001/001
E: DEVNUM=001
E: DEVTYPE=usb_device
E: DRIVER=usb
E: ID_VENDOR_ID=1d6b
E: ID_MODEL_ID=0002
E: MAJOR=189
E: MINOR=0
E: SUBSYSTEM=usb
A: dev=189:0
A: idVendor=1d6b
A: idProduct=0002
A: bDeviceClass=09
A: busnum=1
A: devnum=1
A: serial=0000:00:1a.0
A: product=EHCI Host Controller
L: driver=../../../../bus/usb/drivers/usb

P: /devices/pci0000:00/0000:00:1a.0/usb1/1-1
N: bus/usb/001/002
E: BUSNUM=001
E: DEVNAME=/dev/bus/usb/001/002
E: DEVNUM=002
E: DEVTYPE=usb_device
E: DRIVER=usb
E: ID_VENDOR_ID=8087
E: ID_MODEL_ID=0024
E: MAJOR=189
E: MINOR=1
E: SUBSYSTEM=usb
A: dev=189:1
A: idVendor=8087
A: idProduct=0024
A: bDeviceClass=09
A: busnum=1
A: devnum=2
L: driver=../../../../../bus/usb/drivers/usb

P: /devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.2
N: bus/usb/001/003
E: BUSNUM=001
E: DEVNAME=/dev/bus/usb/001/003
E: DEVNUM=003
E: DEVTYPE=usb_device
E: DRIVER=usb
E: ID_MODEL=HD_Pro_Webcam_C920
E: ID_MODEL_ID=082d
E: ID_SERIAL_SHORT=73BD39DF
E: ID_VENDOR_ID=046d
E: MAJOR=189
E: MINOR=2
E: SUBSYSTEM=usb
A: dev=189:2
A: idVendor=046d
A: idProduct=082d
A: bcdDevice=0011
A: bDeviceClass=ef
A: busnum=1
A: devnum=3
A: serial=73BD39DF
A: manufacturer=046d
A: product=HD Pro Webcam C920
L: driver=../../../../../../bus/usb/drivers/usb

P: /devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.2/1-1.2:1.0
E: DEVTYPE=usb_interface
E: DRIVER=uvcvideo
E: INTERFACE=14/1/0
E: SUBSYSTEM=usb
A: bInterfaceClass=0e
A: bInterfaceSubClass=01
A: bInterfaceNumber=00
L: driver=../../../../../../../bus/usb/drivers/uvcvideo

P: /devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.2/1-1.2:1.0/video4linux/video0
N: video0
E: DEVNAME=/dev/video0
E: ID_MODEL_ID=082d
E: ID_SERIAL_SHORT=73BD39DF
E: ID_V4L_CAPABILITIES=:capture:
E: ID_VENDOR_ID=046d
E: MAJOR=81
E: MINOR=0
E: SUBSYSTEM=video4linux
E: TAGS=:seat:uaccess:
A: dev=81:0
A: name=HD Pro Webcam C920
L: device=../..
)";

inline constexpr const char* kWebcamVideo0 =
    "/devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.2/1-1.2:1.0/video4linux/video0";

// The same testbed in two halves, for hotplug: the controller and the hub, and the webcam
// (USB device, its video interface, /dev/video0) plugged into hub port `port` ("1-1.2" as
// recorded) with USB device number `devnum` (3 as recorded, /dev/bus/usb/001/003).
// umockdev_testbed_add_from_string() sends an add uevent for each device; an unplug is
// umockdev_testbed_uevent(..., "remove") and then umockdev_testbed_remove_device().
inline constexpr std::string_view kWebcamDeviceStart = "P: /devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.2\n";

inline std::string webcamHostTestbed() {
    const std::string_view all = kWebcamTestbed;
    return std::string(all.substr(0, all.find(kWebcamDeviceStart)));
}

inline std::string webcamDeviceTestbed(const std::string& port = "1-1.2", int devnum = 3) {
    const std::string_view all = kWebcamTestbed;
    std::string text(all.substr(all.find(kWebcamDeviceStart)));
    char number[4];
    std::snprintf(number, sizeof number, "%03d", devnum);
    return replacedEach(std::move(text),
                        {
                            {"1-1.2", port},
                            {"bus/usb/001/003", std::string("bus/usb/001/") + number},
                            {"DEVNUM=003", std::string("DEVNUM=") + number},
                            {"A: devnum=3\n", "A: devnum=" + std::to_string(devnum) + "\n"},
                            {"E: MINOR=2\n", "E: MINOR=" + std::to_string(devnum - 1) + "\n"},
                            {"A: dev=189:2\n", "A: dev=189:" + std::to_string(devnum - 1) + "\n"},
                            // A plain file instead of a pty: plugging it a thousand times opens
                            // no terminals.
                            {"N: video0\n", "N: video0=00\n"},
                        });
}

// A second capture node on the webcam's video interface (as recorded, port 1-1.2).
inline constexpr const char* kWebcamVideo1Testbed =
    R"(P: /devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.2/1-1.2:1.0/video4linux/video1
N: video1=00
E: DEVNAME=/dev/video1
E: ID_V4L_CAPABILITIES=:capture:
E: MAJOR=81
E: MINOR=1
E: SUBSYSTEM=video4linux
A: dev=81:1
A: name=HD Pro Webcam C920
L: device=../..
)";

// The USB device's sysfs devpath at `port`.
inline std::string webcamUsbDevpath(const std::string& port = "1-1.2") {
    return "/devices/pci0000:00/0000:00:1a.0/usb1/1-1/" + port;
}

// Another webcam of the same model for a machine with several: plugged into hub port
// `port` with USB device number `devnum` as webcamDeviceTestbed() does, its capture node
// /dev/video<video>, and its own serial number (the recorded one with its last digit
// replaced by `video`), as two webcams of one model have.
inline std::string anotherWebcamTestbed(const std::string& port, int devnum, int video) {
    std::string text = webcamDeviceTestbed(port, devnum);
    const std::string number = std::to_string(video);
    const std::pair<std::string, std::string> replacements[] = {
        {"video0", "video" + number},
        {"E: MINOR=0\n", "E: MINOR=" + number + "\n"},
        {"A: dev=81:0\n", "A: dev=81:" + number + "\n"},
        {"73BD39DF", "73BD39D" + number},
    };
    for (const auto& [from, to] : replacements) {
        for (std::size_t at = text.find(from); at != std::string::npos;
             at = text.find(from, at + to.size())) {
            text.replace(at, from.size(), to);
        }
    }
    return text;
}

}  // namespace devlet::test
