// The kubelet's device checkpoint as devlet reads it: the layouts kubelets write, and
// everything else refused as a whole, never read in part.

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "plugin/kubelet_checkpoint.h"
#include "tests/support/temp_dir.h"

namespace devlet {
namespace {

// Shaped like a kubelet 1.29 file: one container with two devices on NUMA node 0, one
// without topology, the allocation response base64-encoded, the healthy devices by resource.
constexpr char kCurrent[] =
    R"({"Data":{"PodDeviceEntries":[)"
    R"({"PodUID":"5b1a7c1e-8f0a-4e2b-9d6c-3f2e1a0b9c8d","ContainerName":"app",)"
    R"("ResourceName":"akri.sh/cams","DeviceIDs":{"0":["cams-4294ea-0","cams-4294ea-1"]},)"
    R"("AllocResp":"CiQKEk9OVklGX0RFVklDRV9VVUlEEg51dWlkOjEyMzQ="},)"
    R"({"PodUID":"6c2b8d2f-9a1b-4f3c-8e7d-4a3f2b1c0d9e","ContainerName":"init",)"
    R"("ResourceName":"akri.sh/cams-4294ea","DeviceIDs":{"-1":["cams-4294ea-2"]},"AllocResp":""}],)"
    R"("RegisteredDevices":{"akri.sh/cams":["cams-4294ea-3"],"akri.sh/cams-4294ea":[]}},)"
    R"("Checksum":2771352906})";

std::vector<std::string> described(const KubeletCheckpoint& checkpoint) {
    std::vector<std::string> out;
    for (const PodDevice& d : checkpoint.devices)
        out.push_back(d.resource + " " + d.deviceId + " " + d.podUid);
    return out;
}

TEST(KubeletCheckpoint, ReadsEachAllocatedDeviceWithItsResourceAndPod) {
    KubeletCheckpoint checkpoint = parseKubeletCheckpoint(kCurrent);
    EXPECT_TRUE(checkpoint.present);
    EXPECT_EQ(checkpoint.error, "");
    EXPECT_EQ(
        described(checkpoint),
        (std::vector<std::string>{"akri.sh/cams cams-4294ea-0 5b1a7c1e-8f0a-4e2b-9d6c-3f2e1a0b9c8d",
                                  "akri.sh/cams cams-4294ea-1 5b1a7c1e-8f0a-4e2b-9d6c-3f2e1a0b9c8d",
                                  "akri.sh/cams-4294ea cams-4294ea-2 6c2b8d2f-9a1b-4f3c-8e7d-4a3f2b1c0d9e"}));
}

TEST(KubeletCheckpoint, ReadsTheLayoutBeforeKubelet120) {
    KubeletCheckpoint checkpoint = parseKubeletCheckpoint(
        R"({"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c","ResourceName":"akri.sh/x",)"
        R"("DeviceIDs":["x-1","x-2"],"AllocResp":""}],"RegisteredDevices":{}},"Checksum":1})");
    EXPECT_EQ(checkpoint.error, "");
    EXPECT_EQ(described(checkpoint), (std::vector<std::string>{"akri.sh/x x-1 u", "akri.sh/x x-2 u"}));
}

TEST(KubeletCheckpoint, NoAllocationsIsAnEmptyList) {
    for (const char* text : {R"({"Data":{"PodDeviceEntries":null,"RegisteredDevices":{}},"Checksum":0})",
                             R"({"Data":{"PodDeviceEntries":[],"RegisteredDevices":{}},"Checksum":0})"}) {
        KubeletCheckpoint checkpoint = parseKubeletCheckpoint(text);
        EXPECT_TRUE(checkpoint.present) << text;
        EXPECT_EQ(checkpoint.error, "") << text;
        EXPECT_TRUE(checkpoint.devices.empty()) << text;
    }
}

TEST(KubeletCheckpoint, AnythingMalformedIsAnErrorWithNoDevices) {
    const std::string cutShort = std::string(kCurrent).substr(0, 200);
    for (const std::string& text :
         {cutShort, std::string(""), std::string("[]"), std::string(R"({"Checksum":1})"),
          std::string(R"({"Data":{"PodDeviceEntries":{}}})"),
          std::string(R"({"Data":{"PodDeviceEntries":[{"ResourceName":7,"DeviceIDs":["a"]}]}})"),
          std::string(R"({"Data":{"PodDeviceEntries":[{"ResourceName":"r","DeviceIDs":{"0":[1]}}]}})"),
          std::string(R"({"Data":{"PodDeviceEntries":[{"ResourceName":"r"}]}})"),
          std::string("{\"Data\":{\"PodDeviceEntries\":[]}}\0garbage", 41)}) {
        KubeletCheckpoint checkpoint = parseKubeletCheckpoint(text);
        EXPECT_TRUE(checkpoint.present) << text;
        EXPECT_NE(checkpoint.error, "") << text;
        EXPECT_TRUE(checkpoint.devices.empty()) << text;
    }
}

TEST(KubeletCheckpoint, MissingFileIsNoCheckpointAndNoError) {
    test::TempDir dir;
    KubeletCheckpoint checkpoint =
        readKubeletCheckpoint((dir.path() / "kubelet_internal_checkpoint").string());
    EXPECT_FALSE(checkpoint.present);
    EXPECT_EQ(checkpoint.error, "");
}

TEST(KubeletCheckpoint, FileIsReadAndErrorsNameIt) {
    test::TempDir dir;
    const auto file = dir.path() / "kubelet_internal_checkpoint";
    std::ofstream(file) << kCurrent;
    EXPECT_EQ(readKubeletCheckpoint(file.string()).devices.size(), 3u);
    std::ofstream(file) << "{";
    KubeletCheckpoint broken = readKubeletCheckpoint(file.string());
    EXPECT_NE(broken.error.find(file.string()), std::string::npos) << broken.error;
}

TEST(KubeletCheckpoint, SomethingOtherThanAFileIsRefusedWithoutBlocking) {
    test::TempDir dir;
    const auto fifo = dir.path() / "kubelet_internal_checkpoint";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    KubeletCheckpoint checkpoint = readKubeletCheckpoint(fifo.string());
    EXPECT_TRUE(checkpoint.present);
    EXPECT_NE(checkpoint.error.find("not a regular file"), std::string::npos) << checkpoint.error;
}

}  // namespace
}  // namespace devlet
