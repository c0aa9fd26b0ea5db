#pragma once
// A laptop's camera that is two cameras on one USB device, as a umockdev testbed: an HP
// Wide Vision FHD Camera with its colour function on interface 0 and its infrared function
// (for face login) on interface 2, each with a capture node and a metadata node beside it,
// behind the laptop's internal hub. Facts from a public v4l2-ctl report of this camera
// (card names "HP Wide Vision FHD Camera: HP W" and ": HP I", serial 200901010001, bus
// info usb-0000:04:00.3-5.2, video0/video2 capture, video1/video3 metadata) and systemd's
// hwdb (70-cameras.hwdb: 0bda:58e6, "HP Wide Vision FHD Camera (IR function)"), trimmed to
// what the rules and the classifier read. The internal hub's ids are a common hub's, and
// the manufacturer string (not in the report) a stand-in, so that no libusb read is asked for.

#include <string>

namespace devlet::test {

inline constexpr const char* kDualCameraUsbDevpath =
    "/devices/pci0000:00/0000:00:08.1/0000:04:00.3/usb3/3-5/3-5.2";
inline constexpr const char* kDualCameraSerial = "200901010001";

inline std::string dualCameraVideo(int number) {
    const char* interface = number < 2 ? "3-5.2:1.0" : "3-5.2:1.2";
    return std::string(kDualCameraUsbDevpath) + "/" + interface + "/video4linux/video" +
           std::to_string(number);
}

inline constexpr const char* kDualCameraTestbed = R"(P: /devices/pci0000:00/0000:00:08.1/0000:04:00.3
E: DRIVER=xhci_hcd
E: PCI_ID=1022:1639
E: PCI_SLOT_NAME=0000:04:00.3
E: SUBSYSTEM=pci
A: vendor=0x1022
A: device=0x1639
A: class=0x0c0330
L: driver=../../../../bus/pci/drivers/xhci_hcd

P: /devices/pci0000:00/0000:00:08.1/0000:04:00.3/usb3
N: bus/usb/003/001
E: BUSNUM=003
E: DEVNAME=/dev/bus/usb/003/001
E: DEVNUM=001
E: DEVTYPE=usb_device
E: DRIVER=usb
E: ID_VENDOR_ID=1d6b
E: ID_MODEL_ID=0002
E: MAJOR=189
E: MINOR=256
E: SUBSYSTEM=usb
A: dev=189:256
A: idVendor=1d6b
A: idProduct=0002
A: bDeviceClass=09
A: busnum=3
A: devnum=1
A: serial=0000:04:00.3
A: product=xHCI Host Controller
L: driver=../../../../../bus/usb/drivers/usb

P: /devices/pci0000:00/0000:00:08.1/0000:04:00.3/usb3/3-5
N: bus/usb/003/002
E: BUSNUM=003
E: DEVNAME=/dev/bus/usb/003/002
E: DEVNUM=002
E: DEVTYPE=usb_device
E: DRIVER=usb
E: ID_VENDOR_ID=05e3
E: ID_MODEL_ID=0610
E: MAJOR=189
E: MINOR=257
E: SUBSYSTEM=usb
A: dev=189:257
A: idVendor=05e3
A: idProduct=0610
A: bDeviceClass=09
A: busnum=3
A: devnum=2
A: product=USB2.1 Hub
L: driver=../../../../../../bus/usb/drivers/usb

P: /devices/pci0000:00/0000:00:08.1/0000:04:00.3/usb3/3-5/3-5.2
N: bus/usb/003/004
E: BUSNUM=003
E: DEVNAME=/dev/bus/usb/003/004
E: DEVNUM=004
E: DEVTYPE=usb_device
E: DRIVER=usb
E: ID_MODEL=HP_Wide_Vision_FHD_Camera
E: ID_MODEL_ID=58e6
E: ID_SERIAL_SHORT=200901010001
E: ID_VENDOR_ID=0bda
E: MAJOR=189
E: MINOR=259
E: SUBSYSTEM=usb
A: dev=189:259
A: idVendor=0bda
A: idProduct=58e6
A: bcdDevice=0012
A: bDeviceClass=ef
A: bNumInterfaces= 4
A: busnum=3
A: devnum=4
A: speed=480
A: serial=200901010001
A: manufacturer=Generic
A: product=HP Wide Vision FHD Camera
L: driver=../../../../../../../bus/usb/drivers/usb

P: /devices/pci0000:00/0000:00:08.1/0000:04:00.3/usb3/3-5/3-5.2/3-5.2:1.0
E: DEVTYPE=usb_interface
E: DRIVER=uvcvideo
E: INTERFACE=14/1/0
E: SUBSYSTEM=usb
A: bInterfaceClass=0e
A: bInterfaceSubClass=01
A: bInterfaceNumber=00
L: driver=../../../../../../../../bus/usb/drivers/uvcvideo

P: /devices/pci0000:00/0000:00:08.1/0000:04:00.3/usb3/3-5/3-5.2/3-5.2:1.2
E: DEVTYPE=usb_interface
E: DRIVER=uvcvideo
E: INTERFACE=14/1/0
E: SUBSYSTEM=usb
A: bInterfaceClass=0e
A: bInterfaceSubClass=01
A: bInterfaceNumber=02
L: driver=../../../../../../../../bus/usb/drivers/uvcvideo

P: /devices/pci0000:00/0000:00:08.1/0000:04:00.3/usb3/3-5/3-5.2/3-5.2:1.0/video4linux/video0
N: video0=00
E: DEVNAME=/dev/video0
E: ID_V4L_CAPABILITIES=:capture:
E: ID_MODEL_ID=58e6
E: ID_SERIAL_SHORT=200901010001
E: ID_USB_INTERFACE_NUM=00
E: ID_VENDOR_ID=0bda
E: MAJOR=81
E: MINOR=0
E: SUBSYSTEM=video4linux
E: TAGS=:seat:uaccess:
A: dev=81:0
A: index=0
A: name=HP Wide Vision FHD Camera: HP W
L: device=../..

P: /devices/pci0000:00/0000:00:08.1/0000:04:00.3/usb3/3-5/3-5.2/3-5.2:1.0/video4linux/video1
N: video1=00
E: DEVNAME=/dev/video1
E: ID_V4L_CAPABILITIES=:
E: ID_USB_INTERFACE_NUM=00
E: MAJOR=81
E: MINOR=1
E: SUBSYSTEM=video4linux
A: dev=81:1
A: index=1
A: name=HP Wide Vision FHD Camera: HP W
L: device=../..

P: /devices/pci0000:00/0000:00:08.1/0000:04:00.3/usb3/3-5/3-5.2/3-5.2:1.2/video4linux/video2
N: video2=00
E: DEVNAME=/dev/video2
E: ID_V4L_CAPABILITIES=:capture:
E: ID_INFRARED_CAMERA=1
E: ID_USB_INTERFACE_NUM=02
E: MAJOR=81
E: MINOR=2
E: SUBSYSTEM=video4linux
E: TAGS=:seat:uaccess:
A: dev=81:2
A: index=0
A: name=HP Wide Vision FHD Camera: HP I
L: device=../..

P: /devices/pci0000:00/0000:00:08.1/0000:04:00.3/usb3/3-5/3-5.2/3-5.2:1.2/video4linux/video3
N: video3=00
E: DEVNAME=/dev/video3
E: ID_V4L_CAPABILITIES=:
E: ID_USB_INTERFACE_NUM=02
E: MAJOR=81
E: MINOR=3
E: SUBSYSTEM=video4linux
A: dev=81:3
A: index=1
A: name=HP Wide Vision FHD Camera: HP I
L: device=../..
)";

}  // namespace devlet::test
