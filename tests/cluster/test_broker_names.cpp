// Akri's names for what its controller makes (akri:shared/src/k8s/pod.rs
// create_broker_app_name, service.rs): '.' becomes '-', and a shared instance's broker
// Pod carries the node's name.

#include <gtest/gtest.h>

#include "cluster/brokers.h"

namespace devlet::kube {
namespace {

TEST(BrokerNames, SharedInstancePodCarriesTheNodeName) {
    EXPECT_EQ(brokerPodName("node-a", "cams-836108", true), "node-a-cams-836108-pod");
}

TEST(BrokerNames, UnsharedInstancePodIsNamedAfterTheInstanceAlone) {
    EXPECT_EQ(brokerPodName("node-a", "usb-cams-3ab9f2", false), "usb-cams-3ab9f2-pod");
}

TEST(BrokerNames, DotsBecomeDashes) {
    EXPECT_EQ(brokerPodName("n1.example.com", "cams.v2-836108", true), "n1-example-com-cams-v2-836108-pod");
    EXPECT_EQ(instanceServiceName("cams.v2-836108"), "cams-v2-836108-svc");
    EXPECT_EQ(configurationServiceName("cams.v2"), "cams-v2-svc");
}

TEST(BrokerNames, JobNameChangesWithItsSpecOnly) {
    const std::string a = brokerJobName("cams-836108", R"({"template":{"spec":{}}})");
    EXPECT_EQ(a, brokerJobName("cams-836108", R"({"template":{"spec":{}}})"));
    EXPECT_NE(a, brokerJobName("cams-836108", R"({"template":{"spec":{"x":1}}})"));
    ASSERT_EQ(a.size(), std::string("cams-836108-").size() + 8 + 4);
    EXPECT_EQ(a.rfind("cams-836108-", 0), 0u);
    EXPECT_EQ(a.substr(a.size() - 4), "-job");
}

}  // namespace
}  // namespace devlet::kube
