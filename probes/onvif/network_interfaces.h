#pragma once
// The node's network interfaces as the onvif probe needs them: where a multicast Probe goes
// out, where Hello is listened for, and which subnets are directly attached (the scope of a
// credential given on the command line or from Secrets). Reads getifaddrs; any thread.

#include <optional>
#include <string>
#include <vector>

#include <boost/asio/ip/address_v4.hpp>

#include "probes/onvif/credentials.h"

namespace devlet::onvif {

// The IPv4 address of a network interface, or nullopt.
std::optional<boost::asio::ip::address_v4> interfaceAddress(const std::string& name);

// Interfaces for IPv6 discovery, by index: the configured ones (a name that does not exist
// goes to `missing`), else every interface that is up, not loopback, can multicast and has
// an IPv6 address.
std::vector<unsigned> ipv6Interfaces(const std::vector<std::string>& names,
                                     std::vector<std::string>& missing);

// The networks of the interfaces discovery uses (the configured ones, else every one that
// is up and not loopback), IPv4 and IPv6: the directly attached subnets.
std::vector<IpNetwork> attachedNetworks(const std::vector<std::string>& names);

// An interface's name by index ("eth0"), or the index as text.
std::string interfaceName(unsigned index);

}  // namespace devlet::onvif
