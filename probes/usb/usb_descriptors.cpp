#include "probes/usb/usb_descriptors.h"

#include <cstdint>
#include <cstdio>
#include <memory>

#include <libusb.h>

namespace devlet::usb {

namespace {

// Per control transfer; a device that does not answer within this is not waited for.
constexpr unsigned kTimeoutMs = 200;

struct ContextDeleter {
    void operator()(libusb_context* context) const { libusb_exit(context); }
};
struct ListDeleter {
    void operator()(libusb_device** list) const { libusb_free_device_list(list, 1); }
};
struct HandleDeleter {
    void operator()(libusb_device_handle* handle) const { libusb_close(handle); }
};

std::string hex4(std::uint16_t value) {
    char text[5];
    std::snprintf(text, sizeof text, "%04x", value);
    return text;
}

std::string why(int error) {
    return libusb_strerror(static_cast<libusb_error>(error));
}

void appendUtf8(std::string& out, std::uint32_t code) {
    if (code < 0x20 || code == 0x7f) code = '?';  // no control characters in properties
    if (code < 0x80) {
        out += static_cast<char>(code);
    } else if (code < 0x800) {
        out += static_cast<char>(0xc0 | (code >> 6));
        out += static_cast<char>(0x80 | (code & 0x3f));
    } else if (code < 0x10000) {
        out += static_cast<char>(0xe0 | (code >> 12));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (code & 0x3f));
    } else {
        out += static_cast<char>(0xf0 | (code >> 18));
        out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (code & 0x3f));
    }
}

// One GET_DESCRIPTOR(STRING) request: the raw UTF-16LE descriptor, or a libusb error.
int requestString(libusb_device_handle* handle, std::uint8_t index, std::uint16_t language,
                  std::vector<std::uint16_t>& units) {
    unsigned char buffer[255];
    const int read = libusb_control_transfer(handle, LIBUSB_ENDPOINT_IN, LIBUSB_REQUEST_GET_DESCRIPTOR,
                                             static_cast<std::uint16_t>((LIBUSB_DT_STRING << 8) | index),
                                             language, buffer, sizeof buffer, kTimeoutMs);
    if (read < 0) return read;
    if (read < 2 || buffer[1] != LIBUSB_DT_STRING || buffer[0] > read || buffer[0] < 2) {
        return LIBUSB_ERROR_IO;
    }
    units.clear();
    for (int i = 2; i + 1 < buffer[0]; i += 2) {
        units.push_back(static_cast<std::uint16_t>(buffer[i] | (buffer[i + 1] << 8)));
    }
    return LIBUSB_SUCCESS;
}

std::string utf8Of(const std::vector<std::uint16_t>& units) {
    std::string out;
    for (std::size_t i = 0; i < units.size(); ++i) {
        std::uint32_t code = units[i];
        if (code >= 0xd800 && code < 0xdc00 && i + 1 < units.size() && units[i + 1] >= 0xdc00 &&
            units[i + 1] < 0xe000) {
            code = 0x10000 + ((code - 0xd800) << 10) + (units[i + 1] - 0xdc00);
            ++i;
        } else if (code >= 0xd800 && code < 0xe000) {
            code = 0xfffd;
        }
        appendUtf8(out, code);
    }
    return out;
}

}  // namespace

UsbStrings readUsbStrings(int busnum, int devnum, const std::set<std::string>& wanted) {
    UsbStrings result;
    libusb_context* raw = nullptr;
    if (const int error = libusb_init(&raw); error < 0) {
        result.problems.push_back("libusb: " + why(error));
        return result;
    }
    std::unique_ptr<libusb_context, ContextDeleter> context(raw);
    libusb_device** rawList = nullptr;
    const ssize_t count = libusb_get_device_list(context.get(), &rawList);
    if (count < 0) {
        result.problems.push_back("libusb cannot list devices: " + why(static_cast<int>(count)));
        return result;
    }
    std::unique_ptr<libusb_device*, ListDeleter> list(rawList);
    libusb_device* device = nullptr;
    for (ssize_t i = 0; i < count; ++i) {
        if (libusb_get_bus_number(list.get()[i]) == busnum &&
            libusb_get_device_address(list.get()[i]) == devnum) {
            device = list.get()[i];
        }
    }
    if (!device) {
        result.problems.push_back("libusb does not list the device (gone?)");
        return result;
    }
    libusb_device_descriptor descriptor{};
    if (const int error = libusb_get_device_descriptor(device, &descriptor); error < 0) {
        result.problems.push_back("device descriptor: " + why(error));
        return result;
    }
    result.found = true;
    result.vendorId = hex4(descriptor.idVendor);
    result.productId = hex4(descriptor.idProduct);

    const std::pair<const char*, std::uint8_t> indexes[] = {{"manufacturer", descriptor.iManufacturer},
                                                            {"product", descriptor.iProduct},
                                                            {"serial", descriptor.iSerialNumber}};
    bool any = false;
    for (const auto& [name, index] : indexes) {
        if (!wanted.contains(name)) continue;
        if (index == 0) {
            result.problems.push_back(std::string(name) + ": the device has none");
        } else {
            any = true;
        }
    }
    if (!any) return result;

    libusb_device_handle* rawHandle = nullptr;
    if (const int error = libusb_open(device, &rawHandle); error < 0) {
        result.problems.push_back("cannot open the device: " + why(error));
        return result;
    }
    std::unique_ptr<libusb_device_handle, HandleDeleter> handle(rawHandle);
    // String descriptor 0 lists the languages; the first is the device's own.
    std::vector<std::uint16_t> languages;
    if (const int error = requestString(handle.get(), 0, 0, languages); error < 0 || languages.empty()) {
        result.problems.push_back("string languages: " + (error < 0 ? why(error) : "none"));
        return result;
    }
    for (const auto& [name, index] : indexes) {
        if (!wanted.contains(name) || index == 0) continue;
        std::vector<std::uint16_t> units;
        if (const int error = requestString(handle.get(), index, languages.front(), units); error < 0) {
            result.problems.push_back(std::string(name) + ": " + why(error));
            continue;
        }
        result.strings[name] = utf8Of(units);
    }
    return result;
}

}  // namespace devlet::usb
