#include "runtime/listen_address.h"

#include <algorithm>

#include <arpa/inet.h>
#include <netinet/in.h>

namespace devlet {

std::variant<ListenAddress, std::string> parseListenAddress(std::string_view text) {
    const std::string example = " (e.g. 127.0.0.1:9797 or [::1]:9797)";
    if (text.empty()) return "is empty; it must be ADDRESS:PORT" + example;
    ListenAddress parsed;
    std::string_view port;
    parsed.v6 = text.front() == '[';
    if (parsed.v6) {
        std::size_t close = text.find(']');
        if (close == std::string_view::npos) return "has '[' without ']'" + example;
        parsed.address = std::string(text.substr(1, close - 1));
        std::string_view rest = text.substr(close + 1);
        if (rest.empty() || rest.front() != ':') return "must be ADDRESS:PORT" + example;
        port = rest.substr(1);
    } else {
        std::size_t colon = text.rfind(':');
        if (colon == std::string_view::npos) return "must be ADDRESS:PORT" + example;
        parsed.address = std::string(text.substr(0, colon));
        port = text.substr(colon + 1);
        if (parsed.address.find(':') != std::string::npos)
            return "has an IPv6 address without brackets" + example;
    }
    if (parsed.address.empty()) return "has no address (0.0.0.0:PORT listens on every address)";
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return "must end in a port number from 0 to 65535";
    }
    int portNumber = std::stoi(std::string(port));
    if (portNumber > 65535) return "must end in a port number from 0 to 65535";
    parsed.port = static_cast<unsigned short>(portNumber);
    unsigned char buffer[sizeof(in6_addr)];
    if (::inet_pton(parsed.v6 ? AF_INET6 : AF_INET, parsed.address.c_str(), buffer) != 1) {
        return "has \"" + parsed.address + "\", which is not an " + (parsed.v6 ? "IPv6" : "IPv4") +
               " address" + example;
    }
    return parsed;
}

}  // namespace devlet
