// ADDRESS:PORT as the status server's listen setting and `devlet status --listen` read it.

#include <gtest/gtest.h>

#include "runtime/listen_address.h"

namespace devlet {
namespace {

ListenAddress accepted(std::string_view text) {
    auto parsed = parseListenAddress(text);
    if (const auto* problem = std::get_if<std::string>(&parsed)) {
        ADD_FAILURE() << text << ": " << *problem;
        return {};
    }
    return std::get<ListenAddress>(parsed);
}

std::string problemOf(std::string_view text) {
    auto parsed = parseListenAddress(text);
    const auto* problem = std::get_if<std::string>(&parsed);
    return problem ? *problem : std::string();
}

TEST(ListenAddress, Ipv4AddressAndPort) {
    const ListenAddress a = accepted("127.0.0.1:9797");
    EXPECT_EQ(a.address, "127.0.0.1");
    EXPECT_EQ(a.port, 9797);
    EXPECT_FALSE(a.v6);
    EXPECT_EQ(accepted("0.0.0.0:1").address, "0.0.0.0");
}

TEST(ListenAddress, BracketedIpv6LosesItsBrackets) {
    const ListenAddress a = accepted("[::1]:9797");
    EXPECT_EQ(a.address, "::1");
    EXPECT_EQ(a.port, 9797);
    EXPECT_TRUE(a.v6);
    EXPECT_EQ(accepted("[fe80::1]:80").address, "fe80::1");
    EXPECT_EQ(accepted("[::]:65535").port, 65535);
}

TEST(ListenAddress, PortZeroTakesAFreePort) {
    EXPECT_EQ(accepted("127.0.0.1:0").port, 0);
}

TEST(ListenAddress, HostNamesAreNotAddresses) {
    EXPECT_EQ(problemOf("localhost:80"),
              "has \"localhost\", which is not an IPv4 address (e.g. 127.0.0.1:9797 or [::1]:9797)");
    EXPECT_NE(problemOf("[localhost]:80"), "");
}

TEST(ListenAddress, BadPortsSayTheRange) {
    for (const char* text :
         {"127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:http", "127.0.0.1:123456", "127.0.0.1:-1"})
        EXPECT_EQ(problemOf(text), "must end in a port number from 0 to 65535") << text;
}

TEST(ListenAddress, Ipv6WithoutBracketsIsRefused) {
    EXPECT_EQ(problemOf("::1:9797"),
              "has an IPv6 address without brackets (e.g. 127.0.0.1:9797 or [::1]:9797)");
}

TEST(ListenAddress, MalformedShapesAreRefused) {
    for (const char* text : {"", "9797", ":9797", "127.0.0.1", "[::1]", "[::1:9797", "[::1]9797",
                             "[127.0.0.1]:80", "300.1.1.1:80", "[]:80"})
        EXPECT_NE(problemOf(text), "") << text;
    EXPECT_EQ(problemOf(":9797"), "has no address (0.0.0.0:PORT listens on every address)");
}

}  // namespace
}  // namespace devlet
