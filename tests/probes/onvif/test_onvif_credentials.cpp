// The credentials file and the scope rule: which contacted address gets which credential.

#include <gtest/gtest.h>

#include "probes/onvif/credentials.h"

namespace devlet::onvif {
namespace {

constexpr const char* kUuid = "3fa1fe68-b915-4053-a3e1-ac15a21f5f91";

CredentialStore parsed(const std::string& text) {
    CredentialStore store;
    Outcome outcome = CredentialStore::parse(text, "test", store);
    EXPECT_TRUE(outcome) << outcome.error();
    return store;
}

std::string userFor(const CredentialStore& store, const std::string& uuid, const std::string& host,
                    const std::string& mac = "") {
    CredentialChoice choice = store.find(uuid, host, mac);
    return choice.credential ? choice.credential->username : "none: " + choice.withheld;
}

const std::string kEntries =
    "default: {username: admin, password: d}\n"
    "cameras:\n"
    "  3FA1FE68-b915-4053-a3e1-ac15a21f5f91: {username: u1, password: p1}\n"
    "  198.51.100.11: {username: u2, password: p2}\n"
    "  00-11-22-aa-bb-cc: {username: u3, password: p3}\n"
    "  2001:db8:1::5: {username: u4, password: p4}\n";

TEST(Credentials, EntriesInsideTheNetworks) {
    CredentialStore store = parsed("networks: [192.0.2.0/24, '2001:db8::/64']\n" + kEntries);
    EXPECT_EQ(userFor(store, kUuid, "192.0.2.10"), "u1");
    EXPECT_EQ(userFor(store, "other", "192.0.2.12", "00:11:22:AA:BB:CC"), "u3");
    EXPECT_EQ(userFor(store, "other", "192.0.2.12"), "admin");
    EXPECT_EQ(userFor(store, "other", "2001:db8::7"), "admin");
    EXPECT_EQ(userFor(store, "other", "[2001:db8::7]"), "admin");
    EXPECT_EQ(userFor(store, kUuid, "2001:DB8:0::7"), "u1");
}

TEST(Credentials, UuidMacAndDefaultStayInsideTheNetworks) {
    CredentialStore store = parsed("networks: [192.0.2.0/24, '2001:db8::/64']\n" + kEntries);
    // A spoofer elsewhere announcing the camera's uuid, or claiming its MAC address.
    const std::string outside =
        "none: no credential for this address: outside the credentials file's networks";
    EXPECT_EQ(userFor(store, kUuid, "192.0.3.10"), outside);
    EXPECT_EQ(userFor(store, "other", "203.0.113.9", "00:11:22:aa:bb:cc"), outside);
    EXPECT_EQ(userFor(store, "other", "192.0.3.1"), outside);
    EXPECT_EQ(userFor(store, "other", "2001:db8:0:1::7"), outside);
    // A host name is not an address inside a network.
    EXPECT_EQ(userFor(store, kUuid, "camera.example"), outside);
    EXPECT_EQ(userFor(store, kUuid, ""), outside);
}

TEST(Credentials, AnEntryByAddressGoesOnlyToThatAddress) {
    CredentialStore store = parsed("networks: [192.0.2.0/24]\n" + kEntries);
    // Outside the networks, the entry's own address still gets it, and wins over the uuid.
    EXPECT_EQ(userFor(store, kUuid, "198.51.100.11"), "u2");
    EXPECT_EQ(userFor(store, "other", "198.51.100.12").substr(0, 5), "none:");
    EXPECT_EQ(userFor(store, "other", "2001:db8:1::5"), "u4");
    EXPECT_EQ(userFor(store, "other", "[2001:db8:1:0::5]"), "u4");
    EXPECT_EQ(userFor(store, "other", "fe80::1%eth0").substr(0, 5), "none:");
}

TEST(Credentials, EntriesByAddressAloneNeedNoNetworks) {
    CredentialStore store = parsed("cameras:\n  192.0.2.11: {username: u2, password: p2}\n");
    EXPECT_EQ(userFor(store, "other", "192.0.2.11"), "u2");
    EXPECT_EQ(userFor(store, "other", "192.0.2.12"), "none: ");
}

TEST(Credentials, EntriesThatNeedNetworksWithoutThemRefuseTheFile) {
    for (const std::string& text :
         {std::string("default: {username: admin, password: d}\n"),
          std::string("cameras:\n  ") + kUuid + ": {username: u, password: p}\n",
          std::string("cameras:\n  00:11:22:aa:bb:cc: {username: u, password: p}\n")}) {
        CredentialStore store;
        Outcome outcome = CredentialStore::parse(text, "creds.yaml", store);
        ASSERT_FALSE(outcome) << text;
        EXPECT_NE(outcome.error().find("no networks key"), std::string::npos) << outcome.error();
        EXPECT_NE(outcome.error().find("the file is not used"), std::string::npos) << outcome.error();
    }
    // An empty list is a choice: those entries go nowhere.
    CredentialStore store = parsed("networks: []\ndefault: {username: admin, password: d}\n");
    EXPECT_EQ(userFor(store, "other", "192.0.2.1").substr(0, 5), "none:");
}

TEST(Credentials, BadNetworksAreRefusedClearly) {
    for (const char* text :
         {"networks: 192.0.2.0/24\n", "networks: [192.0.2.0/33]\n", "networks: ['2001:db8::/129']\n",
          "networks: [camera.example]\n", "networks: [192.0.2.0/x]\n", "networks: [[1]]\n"}) {
        CredentialStore store;
        Outcome outcome = CredentialStore::parse(text, "creds.yaml", store);
        ASSERT_FALSE(outcome) << text;
        EXPECT_EQ(outcome.error().rfind("creds.yaml: networks", 0), 0u) << outcome.error();
    }
}

TEST(Credentials, NetworksContainWhatTheirPrefixSays) {
    std::string error;
    auto v4 = IpNetwork::parse("192.0.2.77/26", error);
    ASSERT_TRUE(v4) << error;
    EXPECT_TRUE(v4->contains(*parseIpAddress("192.0.2.64")));
    EXPECT_TRUE(v4->contains(*parseIpAddress("192.0.2.127")));
    EXPECT_FALSE(v4->contains(*parseIpAddress("192.0.2.128")));
    EXPECT_FALSE(v4->contains(*parseIpAddress("::ffff:192.0.3.64")));
    auto all = IpNetwork::parse("0.0.0.0/0", error);
    ASSERT_TRUE(all);
    EXPECT_TRUE(all->contains(*parseIpAddress("203.0.113.1")));
    EXPECT_FALSE(all->contains(*parseIpAddress("2001:db8::1")));
    auto host = IpNetwork::parse("2001:db8::5", error);
    ASSERT_TRUE(host);
    EXPECT_TRUE(host->contains(*parseIpAddress("2001:db8::5")));
    EXPECT_FALSE(host->contains(*parseIpAddress("2001:db8::6")));
    auto v6 = IpNetwork::parse("2001:db8:a::/48", error);
    ASSERT_TRUE(v6);
    EXPECT_TRUE(v6->contains(*parseIpAddress("2001:db8:a:ffff::1")));
    EXPECT_FALSE(v6->contains(*parseIpAddress("2001:db8:b::1")));
    Ipv4Range range{0xC0000200, 0xC00002FF, "192.0.2.0/24"};
    EXPECT_TRUE(IpNetwork::fromRange(range).contains(*parseIpAddress("192.0.2.200")));
    EXPECT_FALSE(IpNetwork::fromRange(range).contains(*parseIpAddress("192.0.3.0")));
}

TEST(Credentials, TheCommandLineDefaultHasItsOwnScope) {
    std::string error;
    CredentialStore store = CredentialStore::withDefault(
        Credential{"admin", "pw"}, {*IpNetwork::parse("192.0.2.0/24", error)}, "the --target ranges");
    EXPECT_EQ(userFor(store, kUuid, "192.0.2.9"), "admin");
    EXPECT_EQ(userFor(store, kUuid, "198.51.100.9"),
              "none: no credential for this address: outside the --target ranges");
}

TEST(Credentials, UnknownKeysAreRefusedWithoutTheirValues) {
    CredentialStore store;
    Outcome outcome = CredentialStore::parse("network: [192.0.2.0/24]\n", "creds.yaml", store);
    ASSERT_FALSE(outcome);
    EXPECT_NE(outcome.error().find("networks"), std::string::npos) << outcome.error();
}

}  // namespace
}  // namespace devlet::onvif
