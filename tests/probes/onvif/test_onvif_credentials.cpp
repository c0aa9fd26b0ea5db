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

// Akri's credential properties as its ONVIF handler reads them (credential_store.rs),
// here from Secrets in cluster mode.
class AkriCredentials : public ::testing::Test {
protected:
    CredentialStore store(const std::map<std::string, std::string>& properties) {
        std::string error;
        std::vector<IpNetwork> networks = {*IpNetwork::parse("192.0.2.0/24", error)};
        notes_.clear();
        return CredentialStore::fromAkriProperties(properties, networks, "the attached subnets", notes_);
    }
    std::string credentialFor(const CredentialStore& store, const std::string& uuid) {
        CredentialChoice choice = store.find(uuid, "192.0.2.10", "");
        return choice.credential ? choice.credential->username + ":" + choice.credential->password : "none";
    }
    std::vector<std::string> notes_;
};

constexpr const char* kUuid2 = "7a21dc67-8438-5588-1547-4d1349048438";

TEST_F(AkriCredentials, EveryFormAkriReads) {
    const CredentialStore s = store({
        {"device_credential_list", R"(["list1"])"},
        {"list1", R"({"3FA1FE68-B915-4053-A3E1-AC15A21F5F91": {"username": "u1", "password": "cDE=",
                      "base64encoded": true}})"},
        {"device_credential_ref_list", R"(["refs"])"},
        {"refs", R"({"7a21dc67-8438-5588-1547-4d1349048438": {"username_ref": "cam2_user",
                     "password_ref": "cam2_pass"}})"},
        {"cam2_user", "u2"},
        {"cam2_pass", "p2"},
        {"username_11111111_2222_4333_8444_555555555555", "u3"},
        {"password_11111111_2222_4333_8444_555555555555", "p3"},
        {"username_default", "admin"},
        {"password_default", "d"},
    });
    EXPECT_TRUE(notes_.empty()) << notes_.front();
    EXPECT_EQ(credentialFor(s, kUuid), "u1:p1");
    EXPECT_EQ(credentialFor(s, kUuid2), "u2:p2");
    EXPECT_EQ(credentialFor(s, "11111111-2222-4333-8444-555555555555"), "u3:p3");
    EXPECT_EQ(credentialFor(s, "other"), "admin:d");
}

TEST_F(AkriCredentials, LaterFormsReplaceEarlierOnesForTheSameCamera) {
    const std::string uuid = "3fa1fe68_b915_4053_a3e1_ac15a21f5f91";
    const CredentialStore s = store({
        {"device_credential_list", R"(["list1"])"},
        {"list1", R"({"3fa1fe68-b915-4053-a3e1-ac15a21f5f91": {"username": "from-list", "password": "x"}})"},
        {"username_" + uuid, "from-entry"},
        {"password_" + uuid, "y"},
    });
    EXPECT_EQ(credentialFor(s, kUuid), "from-entry:y");
}

TEST_F(AkriCredentials, StayInsideTheirNetworksAsTheFilesEntriesDo) {
    const CredentialStore s = store({{"username_default", "admin"}, {"password_default", "d"}});
    CredentialChoice outside = s.find(kUuid, "203.0.113.9", "");
    EXPECT_FALSE(outside.credential);
    EXPECT_EQ(outside.withheld, "no credential for this address: outside the attached subnets");
}

TEST_F(AkriCredentials, WhatIsNotUsedIsNamedWithoutItsValue) {
    const CredentialStore s = store({
        {"device_credential_list", R"(["list1", "missing"])"},
        {"list1", "not json: {secret-value"},
        {"device_credential_ref_list", "secret-value-2"},
        {"FOO", "secret-value-3"},
        {"username_default", "admin"},
    });
    EXPECT_EQ(credentialFor(s, "other"), "admin:");
    const std::vector<std::string> expected = {
        "list1 (named by device_credential_list) is not a JSON object of cameras; not used",
        "missing (named by device_credential_list) is not given; not used",
        "device_credential_ref_list is not a JSON list of property names; not used",
        "FOO is no credential the onvif handler reads; not used",
    };
    EXPECT_EQ(notes_, expected);
    for (const std::string& note : notes_) EXPECT_EQ(note.find("secret-value"), std::string::npos) << note;
}

}  // namespace
}  // namespace devlet::onvif
