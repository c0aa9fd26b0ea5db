#pragma once
// ADDRESS:PORT, as the status server's listen setting and `devlet status --listen`
// give it: an IPv4 address or a bracketed IPv6 one ("[::1]:9797"), then a port from 0
// to 65535 (0 takes a free port). No host names: a listen address binds, and a name
// could resolve to several addresses or none. Pure; any thread.

#include <string>
#include <string_view>
#include <variant>

namespace devlet {

struct ListenAddress {
    std::string address;  // without brackets: "127.0.0.1", "::1"
    unsigned short port = 0;
    bool v6 = false;
};

// The address, or why `text` is not one, worded to follow it ("must end in a port
// number from 0 to 65535").
std::variant<ListenAddress, std::string> parseListenAddress(std::string_view text);

}  // namespace devlet
