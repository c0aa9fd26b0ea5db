// The gpu handler's discoveryDetails: defaults, every key, and clear errors with lines.

#include <gtest/gtest.h>

#include "probes/gpu/gpu_details.h"

namespace devlet::gpu {
namespace {

GpuDetails parse(const std::string& text, std::vector<DetailsProblem>& problems) {
    return parseGpuDetails(text, problems);
}

TEST(GpuDetails, EmptyDetailsOfferEveryIntelI915AndXeGpu) {
    std::vector<DetailsProblem> problems;
    const GpuDetails details = parse("", problems);
    EXPECT_TRUE(problems.empty());
    EXPECT_EQ(details.vendors, (std::set<std::string>{"0x8086"}));
    EXPECT_EQ(details.drivers, (std::set<std::string>{"i915", "xe"}));
    EXPECT_EQ(details.type, GpuType::Any);
    EXPECT_EQ(details.deviceNodes, DeviceNodes::All);
    EXPECT_EQ(details.byPath, ByPath::Single);
    EXPECT_FALSE(details.allocationPolicy.has_value());
    EXPECT_TRUE(details.topologyAware);
    EXPECT_EQ(details.rescanInterval, std::chrono::seconds(300));
    EXPECT_EQ(parse("# all defaults\n\n", problems), details);
    EXPECT_TRUE(problems.empty());
}

TEST(GpuDetails, EveryKeyIsRead) {
    std::vector<DetailsProblem> problems;
    const GpuDetails details = parse(
        "vendors: [0x8086, '0x1002']\n"
        "drivers: [i915, xe, amdgpu]\n"
        "allowIds: [0x56A0, 56a1]\n"
        "type: discrete\n"
        "deviceNodes: render\n"
        "byPath: none\n"
        "allocationPolicy: balanced\n"
        "topologyAware: false\n"
        "queryMemory: false\n"
        "rescanIntervalSeconds: 60\n",
        problems);
    ASSERT_TRUE(problems.empty()) << problems[0].message;
    EXPECT_EQ(details.vendors, (std::set<std::string>{"0x8086", "0x1002"}));
    EXPECT_EQ(details.drivers, (std::set<std::string>{"i915", "xe", "amdgpu"}));
    EXPECT_EQ(details.allowIds, (std::set<std::string>{"0x56a0", "0x56a1"}));
    EXPECT_EQ(details.type, GpuType::Discrete);
    EXPECT_EQ(details.deviceNodes, DeviceNodes::Render);
    EXPECT_EQ(details.byPath, ByPath::None);
    EXPECT_EQ(details.allocationPolicy, GpuAllocationPolicy::Balanced);
    EXPECT_FALSE(details.topologyAware);
    EXPECT_FALSE(details.queryMemory);
    EXPECT_EQ(details.rescanInterval, std::chrono::seconds(60));
}

TEST(GpuDetails, AnyVendorMeansNoVendorFilter) {
    std::vector<DetailsProblem> problems;
    EXPECT_TRUE(parse("vendors: any\n", problems).vendors.empty());
    EXPECT_TRUE(problems.empty());
}

TEST(GpuDetails, UnknownKeyIsAnErrorWithItsLineAndTheKeyMeant) {
    std::vector<DetailsProblem> problems;
    parse("type: any\nallocationPolcy: packed\n", problems);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0].line, 2);
    EXPECT_NE(problems[0].message.find("did you mean \"allocationPolicy\""), std::string::npos)
        << problems[0].message;
}

TEST(GpuDetails, MisspelledPolicyNamesTheIntelPolicies) {
    std::vector<DetailsProblem> problems;
    parse("allocationPolicy: packd\n", problems);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0].line, 1);
    EXPECT_NE(problems[0].message.find("none, balanced, packed"), std::string::npos) << problems[0].message;
    EXPECT_NE(problems[0].message.find("did you mean \"packed\""), std::string::npos) << problems[0].message;
}

TEST(GpuDetails, AllowAndDenyIdsExcludeEachOther) {
    std::vector<DetailsProblem> problems;
    parse("allowIds: [0x56a0]\ndenyIds: [0x56a1]\n", problems);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_NE(problems[0].message.find("exclude each other"), std::string::npos);
}

TEST(GpuDetails, BadIdsAndValuesAreReportedAtTheirLines) {
    std::vector<DetailsProblem> problems;
    parse(
        "denyIds:\n  - 0x56a0\n  - intel\nvendors: [nvidia]\ntopologyAware: maybe\nrescanIntervalSeconds: "
        "0\n",
        problems);
    ASSERT_EQ(problems.size(), 4u);
    std::map<int, std::string> byLine;
    for (const DetailsProblem& problem : problems) byLine[problem.line] = problem.message;
    EXPECT_NE(byLine[3].find("\"intel\" is not a PCI id"), std::string::npos);
    EXPECT_NE(byLine[4].find("\"nvidia\" is not a PCI vendor id"), std::string::npos);
    EXPECT_NE(byLine[5].find("true or false"), std::string::npos);
    EXPECT_NE(byLine[6].find("from 1 to"), std::string::npos);
}

TEST(GpuDetails, NotAMappingIsAnError) {
    std::vector<DetailsProblem> problems;
    parse("- i915\n", problems);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0].line, 1);
}

TEST(GpuDetails, PciIdsAreNormalised) {
    EXPECT_EQ(normalisedPciId("0x56A0"), "0x56a0");
    EXPECT_EQ(normalisedPciId("56a0"), "0x56a0");
    EXPECT_EQ(normalisedPciId("0x56a"), "");
    EXPECT_EQ(normalisedPciId("0xgggg"), "");
}

}  // namespace
}  // namespace devlet::gpu
