#pragma once
// An FTDI FT230X USB-serial adapter (0403:6015, ftdi_sio, /dev/ttyUSB0) on an xHCI
// controller, as a umockdev testbed description: facts from a real machine's udev database
// (an `udevadm info --export-db`, converted to umockdev's format: udev properties as
// recorded, sysfs attributes and driver links derived from them; no binary USB
// descriptors), trimmed to what the rules and the classifier read. The recording's
// gpiochip1 (the adapter's CBUS pins, a node of another subsystem on the same interface)
// is kept: a rule without SUBSYSTEM matches it too.

#include <cstdio>
#include <string>
#include <string_view>

#include "tests/probes/usb/testbed_text.h"

namespace devlet::test {

inline constexpr const char* kSerialAdapterTestbed = R"(P: /devices/pci0000:00/0000:00:14.0
E: DRIVER=xhci_hcd
E: PCI_CLASS=C0330
E: PCI_ID=8086:06ED
E: PCI_SLOT_NAME=0000:00:14.0
E: SUBSYSTEM=pci
A: vendor=0x8086
A: device=0x06ed
A: class=0x0c0330
L: driver=../../../bus/pci/drivers/xhci_hcd

P: /devices/pci0000:00/0000:00:14.0/usb1
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
A: serial=0000:00:14.0
A: manufacturer=Linux 5.4.0-1000-iot xhci-hcd
A: product=xHCI Host Controller
L: driver=../../../../bus/usb/drivers/usb

P: /devices/pci0000:00/0000:00:14.0/usb1/1-10
N: bus/usb/001/004
E: BUSNUM=001
E: DEVNAME=/dev/bus/usb/001/004
E: DEVNUM=004
E: DEVTYPE=usb_device
E: DRIVER=usb
E: ID_MODEL=UMFT230XB
E: ID_MODEL_ID=6015
E: ID_SERIAL=FTDI_UMFT230XB_FT50KUPS
E: ID_SERIAL_SHORT=FT50KUPS
E: ID_VENDOR=FTDI
E: ID_VENDOR_ID=0403
E: MAJOR=189
E: MINOR=3
E: SUBSYSTEM=usb
A: dev=189:3
A: idVendor=0403
A: idProduct=6015
A: bcdDevice=1000
A: bDeviceClass=00
A: busnum=1
A: devnum=4
A: serial=FT50KUPS
A: manufacturer=FTDI
A: product=UMFT230XB
L: driver=../../../../../bus/usb/drivers/usb

P: /devices/pci0000:00/0000:00:14.0/usb1/1-10/1-10:1.0
E: DEVTYPE=usb_interface
E: DRIVER=ftdi_sio
E: INTERFACE=255/255/255
E: SUBSYSTEM=usb
A: bInterfaceClass=ff
A: bInterfaceSubClass=ff
A: bInterfaceProtocol=ff
A: bInterfaceNumber=00
L: driver=../../../../../../bus/usb/drivers/ftdi_sio

P: /devices/pci0000:00/0000:00:14.0/usb1/1-10/1-10:1.0/gpiochip1
N: gpiochip1=00
E: DEVNAME=/dev/gpiochip1
E: MAJOR=254
E: MINOR=1
E: SUBSYSTEM=gpio
A: dev=254:1
L: device=..

P: /devices/pci0000:00/0000:00:14.0/usb1/1-10/1-10:1.0/ttyUSB0
E: DRIVER=ftdi_sio
E: SUBSYSTEM=usb-serial
L: driver=../../../../../../../bus/usb-serial/drivers/ftdi_sio
L: device=..

P: /devices/pci0000:00/0000:00:14.0/usb1/1-10/1-10:1.0/ttyUSB0/tty/ttyUSB0
N: ttyUSB0=00
E: DEVLINKS=/dev/serial/by-id/usb-FTDI_UMFT230XB_FT50KUPS-if00-port0 /dev/serial/by-path/pci-0000:00:14.0-usb-0:10:1.0-port0
E: DEVNAME=/dev/ttyUSB0
E: ID_BUS=usb
E: ID_MODEL_ID=6015
E: ID_SERIAL_SHORT=FT50KUPS
E: ID_USB_DRIVER=ftdi_sio
E: ID_USB_INTERFACE_NUM=00
E: ID_VENDOR_ID=0403
E: MAJOR=188
E: MINOR=0
E: SUBSYSTEM=tty
E: TAGS=:systemd:
A: dev=188:0
L: device=../../..
)";

inline constexpr const char* kSerialAdapterUsbDevpath = "/devices/pci0000:00/0000:00:14.0/usb1/1-10";
inline constexpr const char* kSerialAdapterTty =
    "/devices/pci0000:00/0000:00:14.0/usb1/1-10/1-10:1.0/ttyUSB0/tty/ttyUSB0";
inline constexpr const char* kSerialAdapterGpiochip =
    "/devices/pci0000:00/0000:00:14.0/usb1/1-10/1-10:1.0/gpiochip1";

// The same testbed in two halves, for hotplug: the controller with its root hub, and the
// adapter plugged into root port `port` ("1-10" as recorded) with USB device number
// `devnum` (4 as recorded, /dev/bus/usb/001/004). The nodes are plain files, not ptys,
// and the /dev/serial links are left out (udev's DEVLINKS property keeps them): a replug
// would find the old links in place.
inline constexpr std::string_view kSerialAdapterDeviceStart =
    "P: /devices/pci0000:00/0000:00:14.0/usb1/1-10\n";

inline std::string serialAdapterHostTestbed() {
    const std::string_view all = kSerialAdapterTestbed;
    return std::string(all.substr(0, all.find(kSerialAdapterDeviceStart)));
}

inline std::string serialAdapterDeviceTestbed(const std::string& port = "1-10", int devnum = 4) {
    const std::string_view all = kSerialAdapterTestbed;
    char number[4];
    std::snprintf(number, sizeof number, "%03d", devnum);
    // The by-path link names the root port as "usb-0:<port number>".
    const std::string portNumber = port.substr(port.find('-') + 1);
    return replacedEach(std::string(all.substr(all.find(kSerialAdapterDeviceStart))),
                        {
                            {"1-10", port},
                            {"usb-0:10:1.0", "usb-0:" + portNumber + ":1.0"},
                            {"bus/usb/001/004", std::string("bus/usb/001/") + number},
                            {"DEVNUM=004", std::string("DEVNUM=") + number},
                            {"A: devnum=4\n", "A: devnum=" + std::to_string(devnum) + "\n"},
                            {"E: MINOR=3\n", "E: MINOR=" + std::to_string(devnum - 1) + "\n"},
                            {"A: dev=189:3\n", "A: dev=189:" + std::to_string(devnum - 1) + "\n"},
                        });
}

inline std::string serialAdapterUsbDevpath(const std::string& port = "1-10") {
    return "/devices/pci0000:00/0000:00:14.0/usb1/" + port;
}

inline std::string serialAdapterTty(const std::string& port = "1-10") {
    return serialAdapterUsbDevpath(port) + "/" + port + ":1.0/ttyUSB0/tty/ttyUSB0";
}

}  // namespace devlet::test
