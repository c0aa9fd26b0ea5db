#include <string>

#include <gtest/gtest.h>

#include "runtime/naming.h"

namespace devlet {
namespace {

// Vectors from Akri's repository (shared/src/akri/instance.rs tests and debugEcho).
TEST(InstanceHash, LocalDeviceHashesIdPlusNodeName) {
    EXPECT_EQ(instanceHash("my_local_device", "my_node", false), "e77db4");
    EXPECT_EQ(instanceHash("my_local_device", "my_other_node", false), "099763");
}

TEST(InstanceHash, SharedDeviceIgnoresNodeName) {
    EXPECT_EQ(instanceHash("my_shared_device", "my_node", true), "4294ea");
    EXPECT_EQ(instanceHash("my_shared_device", "my_other_node", true), "4294ea");
}

TEST(InstanceHash, DebugEchoDescriptionsMatchAkri) {
    EXPECT_EQ(instanceHash("foo0", "", true), "8120fe");
    EXPECT_EQ(instanceHash("foo1", "", true), "a19705");
    EXPECT_EQ(instanceHash("foo0", "", false), "8120fe");
}

TEST(InstanceHash, IsSixLowerCaseHexDigits) {
    std::string hash = instanceHash("/devices/pci0000:00/0000:00:14.0/usb1/1-1", "Node-A", false);
    ASSERT_EQ(hash.size(), 6u);
    for (char c : hash) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << hash;
}

TEST(InstanceName, JoinsConfigurationAndHash) {
    EXPECT_EQ(instanceName("akri-debug-echo", "8120fe"), "akri-debug-echo-8120fe");
}

TEST(SlotId, AppendsIndexToInstance) {
    EXPECT_EQ(slotId("akri-debug-echo-8120fe", 0), "akri-debug-echo-8120fe-0");
    EXPECT_EQ(slotId("cams-4294ea", 12), "cams-4294ea-12");
}

TEST(ResourceName, AkriStyleNamesAreValid) {
    EXPECT_EQ(resourceNameProblem("akri.sh/akri-debug-echo-8120fe"), "");
    EXPECT_EQ(resourceNameProblem("akri.sh/akri-debug-echo"), "");
    EXPECT_EQ(resourceNameProblem("gpu.intel.com/i915"), "");
    EXPECT_EQ(resourceNameProblem("example.com/My_Name.v2"), "");
}

TEST(ResourceName, NameWithoutDomainIsNative) {
    EXPECT_NE(resourceNameProblem("cameras"), "");
}

TEST(ResourceName, KubernetesIoDomainIsReserved) {
    EXPECT_NE(resourceNameProblem("kubernetes.io/cameras"), "");
    EXPECT_NE(resourceNameProblem("devices.kubernetes.io/cameras"), "");
}

TEST(ResourceName, RequestsPrefixRejected) {
    EXPECT_NE(resourceNameProblem("requests.akri.sh/cameras"), "");
}

TEST(ResourceName, NamePartLongerThan63Rejected) {
    std::string name(63, 'a');
    EXPECT_EQ(resourceNameProblem("akri.sh/" + name), "");
    std::string problem = resourceNameProblem("akri.sh/" + name + "b");
    EXPECT_NE(problem.find("63"), std::string::npos) << problem;
}

TEST(ResourceName, NamePartMustStartAndEndAlphanumeric) {
    EXPECT_NE(resourceNameProblem("akri.sh/-cams"), "");
    EXPECT_NE(resourceNameProblem("akri.sh/cams_"), "");
    EXPECT_NE(resourceNameProblem("akri.sh/ca ms"), "");
    EXPECT_NE(resourceNameProblem("akri.sh/"), "");
}

TEST(ResourceName, DomainMustBeLowerCaseSubdomain) {
    EXPECT_NE(resourceNameProblem("Akri.sh/cams"), "");
    EXPECT_NE(resourceNameProblem("akri..sh/cams"), "");
    EXPECT_NE(resourceNameProblem("/cams"), "");
    EXPECT_NE(resourceNameProblem("a_b.sh/cams"), "");
}

TEST(ResourceName, MoreThanOneSlashRejected) {
    EXPECT_NE(resourceNameProblem("akri.sh/a/b"), "");
}

TEST(ResourceName, DomainMustLeaveRoomForRequestsPrefix) {
    // "requests." + domain must stay within 253 characters.
    std::string label(60, 'a');
    std::string domain = label + "." + label + "." + label + "." + label;  // 243 characters
    EXPECT_EQ(resourceNameProblem(domain + "a/x"), "");                    // 244
    EXPECT_NE(resourceNameProblem(domain + "ab/x"), "");                   // 245
}

TEST(Domain, ValidSubdomainsAccepted) {
    EXPECT_EQ(domainProblem("akri.sh"), "");
    EXPECT_EQ(domainProblem("devices.example-corp.com"), "");
    EXPECT_EQ(domainProblem("localhost"), "");
}

TEST(Domain, InvalidSubdomainsRejectedWithReason) {
    EXPECT_NE(domainProblem(""), "");
    EXPECT_NE(domainProblem("Akri.sh").find("lower case"), std::string::npos);
    EXPECT_NE(domainProblem("akri_sh"), "");
    EXPECT_NE(domainProblem("-akri.sh"), "");
    EXPECT_NE(domainProblem("akri.sh-"), "");
    EXPECT_NE(domainProblem(".akri.sh"), "");
    EXPECT_NE(domainProblem("akri.sh."), "");
    EXPECT_NE(domainProblem("akri..sh"), "");
}

TEST(Domain, LabelLongerThan63Rejected) {
    EXPECT_EQ(domainProblem(std::string(63, 'a') + ".sh"), "");
    EXPECT_NE(domainProblem(std::string(64, 'a') + ".sh"), "");
}

TEST(Domain, LongerThan253Rejected) {
    std::string label(50, 'a');
    std::string domain = label + "." + label + "." + label + "." + label + "." + label;  // 254
    EXPECT_NE(domainProblem(domain), "");
    EXPECT_EQ(domainProblem(domain.substr(1)), "");
}

TEST(ConfigurationName, KubernetesObjectNamesUpToAkrisLimitAccepted) {
    EXPECT_EQ(configurationNameProblem("akri-debug-echo"), "");
    EXPECT_EQ(configurationNameProblem("cams.lab-1"), "");
    EXPECT_EQ(configurationNameProblem("0"), "");
    EXPECT_EQ(configurationNameProblem(std::string(56, 'a')), "");
    // The longest name gives the longest instance-level resource the kubelet takes.
    EXPECT_EQ(resourceNameProblem("akri.sh/" + instanceName(std::string(56, 'a'), "8120fe")), "");
    EXPECT_NE(resourceNameProblem("akri.sh/" + instanceName(std::string(57, 'a'), "8120fe")), "");
}

TEST(ConfigurationName, OthersRejectedWithReason) {
    EXPECT_NE(configurationNameProblem(std::string(57, 'a')).find("has 57 characters; at most 56 fit"),
              std::string::npos);
    EXPECT_NE(configurationNameProblem("Cams").find("must be lower case"), std::string::npos);
    EXPECT_NE(configurationNameProblem("cams_lab").find("contains \"_\""), std::string::npos);
    EXPECT_NE(configurationNameProblem("cams..lab").find("empty label"), std::string::npos);
    EXPECT_NE(configurationNameProblem("cams.-lab").find("does not start and end"), std::string::npos);
    EXPECT_NE(configurationNameProblem(""), "");
}

}  // namespace
}  // namespace devlet
