#pragma once
// A USB keyboard behind three hubs as a umockdev testbed description: facts recorded with
// umockdev-record on a real machine (the umockdev project's devices/input recording,
// LGPL-2.1+), trimmed to what the rules and the classifier read. A Kinesis Advantage PRO
// keyboard (05f3:0007, usbhid, /dev/input/event5) at port 1-1.5.4.2, behind its own
// integrated hub (05f3:0081 "Kinesis Keyboard Hub", 1-1.5.4), a Lenovo hub (17ef:1005,
// 1-1.5) and the chipset's rate-matching hub (8087:0020, 1-1), on an EHCI controller.
// The keyboard has no serial and names no string in its device descriptor (the binary
// `descriptors` are kept as recorded), so nothing is read through libusb.

#include <string>

namespace devlet::test {

inline constexpr const char* kKeyboardTestbed = R"(P: /devices/pci0000:00/0000:00:1a.0
E: DRIVER=ehci-pci
E: PCI_CLASS=C0320
E: PCI_ID=8086:3B3C
E: PCI_SLOT_NAME=0000:00:1a.0
E: SUBSYSTEM=pci
A: vendor=0x8086
A: device=0x3b3c
A: class=0x0c0320
L: driver=../../../bus/pci/drivers/ehci-pci

P: /devices/pci0000:00/0000:00:1a.0/usb1
N: bus/usb/001/001=12010002090000406B1D020010030302010109021900010100E0000904000001090000000705810304000C
E: BUSNUM=001
E: DEVNAME=/dev/bus/usb/001/001
E: DEVNUM=001
E: DEVTYPE=usb_device
E: DRIVER=usb
E: ID_MODEL_ID=0002
E: ID_VENDOR_ID=1d6b
E: MAJOR=189
E: MINOR=0
E: SUBSYSTEM=usb
A: bDeviceClass=09
A: busnum=1
H: descriptors=12010002090000406B1D020010030302010109021900010100E0000904000001090000000705810304000C
A: dev=189:0
A: devnum=1
A: idProduct=0002
A: idVendor=1d6b
A: manufacturer=Linux 3.10.0-2-generic ehci_hcd
A: product=EHCI Host Controller
A: serial=0000:00:1a.0
A: speed=480
L: driver=../../../../bus/usb/drivers/usb

P: /devices/pci0000:00/0000:00:1a.0/usb1/1-1
N: bus/usb/001/002=12010002090001408780200000000000000109021900010100E0000904000001090000000705810301000C
E: BUSNUM=001
E: DEVNAME=/dev/bus/usb/001/002
E: DEVNUM=002
E: DEVTYPE=usb_device
E: DRIVER=usb
E: ID_MODEL_ID=0020
E: ID_VENDOR_ID=8087
E: MAJOR=189
E: MINOR=1
E: SUBSYSTEM=usb
A: bDeviceClass=09
A: busnum=1
H: descriptors=12010002090001408780200000000000000109021900010100E0000904000001090000000705810301000C
A: dev=189:1
A: devnum=2
A: idProduct=0020
A: idVendor=8087
A: speed=480
L: driver=../../../../../bus/usb/drivers/usb

P: /devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.5
N: bus/usb/001/004=1201000209000240EF17051001000000000109022900010100E0010904000001090001000705810301000C0904000101090002000705810301000C
E: BUSNUM=001
E: DEVNAME=/dev/bus/usb/001/004
E: DEVNUM=004
E: DEVTYPE=usb_device
E: DRIVER=usb
E: ID_MODEL_ID=1005
E: ID_VENDOR_ID=17ef
E: MAJOR=189
E: MINOR=3
E: SUBSYSTEM=usb
A: bDeviceClass=09
A: busnum=1
H: descriptors=1201000209000240EF17051001000000000109022900010100E0010904000001090001000705810301000C0904000101090002000705810301000C
A: dev=189:3
A: devnum=4
A: idProduct=1005
A: idVendor=17ef
A: speed=480
L: driver=../../../../../../bus/usb/drivers/usb

P: /devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.5/1-1.5.4
N: bus/usb/001/007=1201100109000008F305810020030102000109021900010100A019090400000109000000070581030100FF
E: BUSNUM=001
E: DEVNAME=/dev/bus/usb/001/007
E: DEVNUM=007
E: DEVTYPE=usb_device
E: DRIVER=usb
E: ID_MODEL=Kinesis_Keyboard_Hub
E: ID_MODEL_ID=0081
E: ID_VENDOR=PI_Engineering
E: ID_VENDOR_ID=05f3
E: MAJOR=189
E: MINOR=6
E: SUBSYSTEM=usb
A: bDeviceClass=09
A: busnum=1
H: descriptors=1201100109000008F305810020030102000109021900010100A019090400000109000000070581030100FF
A: dev=189:6
A: devnum=7
A: idProduct=0081
A: idVendor=05f3
A: manufacturer=PI Engineering
A: product=Kinesis Keyboard Hub
A: speed=12
L: driver=../../../../../../../bus/usb/drivers/usb

P: /devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.5/1-1.5.4/1-1.5.4.2
N: bus/usb/001/009=1201100100000008F305070020030000000109023B00020100A020090400000103010100092100012101223F000705810308000809040100010300000009210001000122640007058203040008
E: BUSNUM=001
E: DEVNAME=/dev/bus/usb/001/009
E: DEVNUM=009
E: DEVTYPE=usb_device
E: DRIVER=usb
E: ID_MODEL_ID=0007
E: ID_SERIAL=05f3_0007
E: ID_VENDOR_ID=05f3
E: MAJOR=189
E: MINOR=8
E: SUBSYSTEM=usb
A: bDeviceClass=00
A: bcdDevice=0320
A: busnum=1
H: descriptors=1201100100000008F305070020030000000109023B00020100A020090400000103010100092100012101223F000705810308000809040100010300000009210001000122640007058203040008
A: dev=189:8
A: devnum=9
A: idProduct=0007
A: idVendor=05f3
A: speed=12
L: driver=../../../../../../../../bus/usb/drivers/usb

P: /devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.5/1-1.5.4/1-1.5.4.2/1-1.5.4.2:1.0
E: DEVTYPE=usb_interface
E: DRIVER=usbhid
E: INTERFACE=3/1/1
E: SUBSYSTEM=usb
A: bInterfaceClass=03
A: bInterfaceNumber=00
A: bInterfaceProtocol=01
A: bInterfaceSubClass=01
L: driver=../../../../../../../../../bus/usb/drivers/usbhid

P: /devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.5/1-1.5.4/1-1.5.4.2/1-1.5.4.2:1.0/input/input5
E: ID_INPUT=1
E: ID_INPUT_KEY=1
E: ID_INPUT_KEYBOARD=1
E: NAME="HID 05f3:0007"
E: PHYS="usb-0000:00:1a.0-1.5.4.2/input0"
E: PRODUCT=3/5f3/7/100
E: SUBSYSTEM=input
E: TAGS=:seat:
A: name=HID 05f3:0007
A: phys=usb-0000:00:1a.0-1.5.4.2/input0
A: uniq=
L: device=../../../1-1.5.4.2:1.0

P: /devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.5/1-1.5.4/1-1.5.4.2/1-1.5.4.2:1.0/input/input5/event5
N: input/event5
S: input/by-id/usb-05f3_0007-event-kbd
S: input/by-path/pci-0000:00:1a.0-usb-0:1.5.4.2:1.0-event-kbd
E: DEVLINKS=/dev/input/by-id/usb-05f3_0007-event-kbd /dev/input/by-path/pci-0000:00:1a.0-usb-0:1.5.4.2:1.0-event-kbd
E: DEVNAME=/dev/input/event5
E: ID_BUS=usb
E: ID_INPUT=1
E: ID_INPUT_KEY=1
E: ID_INPUT_KEYBOARD=1
E: ID_MODEL_ID=0007
E: ID_PATH=pci-0000:00:1a.0-usb-0:1.5.4.2:1.0
E: ID_SERIAL=05f3_0007
E: ID_USB_DRIVER=usbhid
E: ID_VENDOR_ID=05f3
E: MAJOR=13
E: MINOR=69
E: SUBSYSTEM=input
E: XKBLAYOUT=us
A: dev=13:69
L: device=../../input5
)";

inline constexpr const char* kKeyboardUsbDevpath =
    "/devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.5/1-1.5.4/1-1.5.4.2";
inline constexpr const char* kKeyboardHubDevpath = "/devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.5/1-1.5.4";
inline constexpr const char* kKeyboardInput =
    "/devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.5/1-1.5.4/1-1.5.4.2/1-1.5.4.2:1.0/input/input5";
inline constexpr const char* kKeyboardEvent =
    "/devices/pci0000:00/0000:00:1a.0/usb1/1-1/1-1.5/1-1.5.4/1-1.5.4.2/1-1.5.4.2:1.0/input/input5/event5";

}  // namespace devlet::test
