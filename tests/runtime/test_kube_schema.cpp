// The Kubernetes field table: unknown fields found at any depth, named by index as devlet's
// warnings name them and by key as a server-side apply names them.

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "kube_schema/kube_schema.h"

namespace devlet::kube_schema {
namespace {

namespace json = boost::json;

std::vector<UnknownField> inPodSpec(const char* text) {
    const Type* spec = findType("PodSpec");
    EXPECT_NE(spec, nullptr);
    return spec ? unknownFields(json::parse(text), *spec, "spec") : std::vector<UnknownField>{};
}

TEST(KubeSchema, KeyedListItemsAreNamedByTheirKeysInTheApplyForm) {
    const auto unknown =
        inPodSpec(R"({"containers": [{"name": "c", "image": "i", "imagePullPolicyy": "Always",
        "ports": [{"containerPort": 80, "protocol": "TCP", "nme": "http"}]}]})");
    ASSERT_EQ(unknown.size(), 2u);
    EXPECT_EQ(unknown[0].path, "spec.containers[0].imagePullPolicyy");
    EXPECT_EQ(unknown[0].keyPath, R"(spec.containers[name="c"].imagePullPolicyy)");
    EXPECT_EQ(unknown[1].path, "spec.containers[0].ports[0].nme");
    EXPECT_EQ(unknown[1].keyPath, R"(spec.containers[name="c"].ports[containerPort=80,protocol="TCP"].nme)");
}

TEST(KubeSchema, AnItemWithoutItsKeysAndAnAtomicListAreNamedByIndex) {
    const auto unknown = inPodSpec(R"({"containers": [{"image": "i", "foo": 1}],
        "tolerations": [{"key": "k", "bar": 2}]})");
    ASSERT_EQ(unknown.size(), 2u);
    EXPECT_EQ(unknown[0].keyPath, "spec.containers[0].foo");
    EXPECT_EQ(unknown[1].keyPath, "spec.tolerations[0].bar");  // tolerations is an atomic list
}

TEST(KubeSchema, AnApplyNamesEachObjectsFieldsUpToItsFirstUnknownOne) {
    const Type* spec = findType("PodSpec");
    ASSERT_NE(spec, nullptr);
    const auto unknown = unknownFields(json::parse(R"({"containers": [{"name": "c", "foo": 1,
        "resources": {"limts": {}}}], "bar": 2, "baz": 3})"),
                                       *spec, "spec", Report::AsApply);
    ASSERT_EQ(unknown.size(), 2u);
    EXPECT_EQ(unknown[0].keyPath, R"(spec.containers[name="c"].foo)");
    EXPECT_EQ(unknown[1].keyPath, "spec.bar");
}

TEST(KubeSchema, FreeKeyMapsAreNeverUnknown) {
    EXPECT_TRUE(inPodSpec(R"({"nodeSelector": {"any": "x"}, "containers": [{"name": "c",
        "resources": {"limits": {"akri.sh/cam": "1"}}}]})")
                    .empty());
}

}  // namespace
}  // namespace devlet::kube_schema
