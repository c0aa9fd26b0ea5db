#include "probes/onvif/network_interfaces.h"

#include <algorithm>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

namespace devlet::onvif {

std::optional<boost::asio::ip::address_v4> interfaceAddress(const std::string& name) {
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return std::nullopt;
    std::optional<boost::asio::ip::address_v4> found;
    for (ifaddrs* i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || name != i->ifa_name) continue;
        const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
        found = boost::asio::ip::address_v4(ntohl(in->sin_addr.s_addr));
        break;
    }
    freeifaddrs(list);
    return found;
}

std::vector<unsigned> ipv6Interfaces(const std::vector<std::string>& names,
                                     std::vector<std::string>& missing) {
    std::vector<unsigned> indexes;
    if (!names.empty()) {
        for (const std::string& name : names) {
            if (const unsigned index = if_nametoindex(name.c_str())) {
                indexes.push_back(index);
            } else {
                missing.push_back(name);
            }
        }
        return indexes;
    }
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return indexes;
    for (ifaddrs* i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET6) continue;
        if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0 ||
            (i->ifa_flags & IFF_MULTICAST) == 0)
            continue;
        const unsigned index = if_nametoindex(i->ifa_name);
        if (index && std::find(indexes.begin(), indexes.end(), index) == indexes.end())
            indexes.push_back(index);
    }
    freeifaddrs(list);
    return indexes;
}

std::vector<IpNetwork> attachedNetworks(const std::vector<std::string>& names) {
    std::vector<IpNetwork> networks;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return networks;
    for (ifaddrs* i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr || !i->ifa_netmask || (i->ifa_flags & IFF_UP) == 0 ||
            (i->ifa_flags & IFF_LOOPBACK) != 0)
            continue;
        if (!names.empty() && std::find(names.begin(), names.end(), i->ifa_name) == names.end()) continue;
        char text[INET6_ADDRSTRLEN] = {};
        int prefix = 0;
        if (i->ifa_addr->sa_family == AF_INET) {
            const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
            const auto* mask = reinterpret_cast<const sockaddr_in*>(i->ifa_netmask);
            inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
            prefix = __builtin_popcount(mask->sin_addr.s_addr);
        } else if (i->ifa_addr->sa_family == AF_INET6) {
            const auto* in = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
            const auto* mask = reinterpret_cast<const sockaddr_in6*>(i->ifa_netmask);
            inet_ntop(AF_INET6, &in->sin6_addr, text, sizeof text);
            for (unsigned char byte : mask->sin6_addr.s6_addr) prefix += __builtin_popcount(byte);
        } else {
            continue;
        }
        std::string error;
        if (auto network = IpNetwork::parse(std::string(text) + "/" + std::to_string(prefix), error))
            networks.push_back(*network);
    }
    freeifaddrs(list);
    return networks;
}

std::string interfaceName(unsigned index) {
    char name[IF_NAMESIZE] = {};
    return if_indextoname(index, name) ? std::string(name) : std::to_string(index);
}

}  // namespace devlet::onvif
