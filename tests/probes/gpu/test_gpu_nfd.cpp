// The Node Feature Discovery feature file of a gpu configuration: its text, and that it is
// written whole and only where NFD's directory exists.

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <stdlib.h>

#include "probes/gpu/gpu_nfd.h"

namespace devlet::gpu {
namespace {

Instance gpu(const std::string& address, std::optional<int> numa, const std::string& memory,
             const std::string& tiles) {
    Instance instance;
    instance.id = address;
    instance.numaNode = numa;
    if (!memory.empty()) instance.properties["GPU_LOCAL_MEMORY_BYTES"] = memory;
    if (!tiles.empty()) instance.properties["GPU_TILES"] = tiles;
    return instance;
}

TEST(GpuNfd, FeaturesCountMemoryTilesAndTheNumaMap) {
    const std::string text = nfdFeatures(
        "gpus", {gpu("0000:03:00.0", 0, "8589934592", "2"), gpu("0000:04:00.0", 0, "8589934592", "2"),
                 gpu("0000:83:00.0", 1, "17179869184", ""), gpu("0000:84:00.0", 1, "", "")});
    EXPECT_EQ(text,
              "devlet-gpu.gpus.count=4\n"
              "devlet-gpu.gpus.memory=34359738368\n"
              "devlet-gpu.gpus.tiles=6\n"
              "devlet-gpu.gpus.numa-gpu-map=0-0.1_1-2.3\n");
}

TEST(GpuNfd, NoNumaNoMap) {
    EXPECT_EQ(nfdFeatures("igpu", {gpu("0000:00:02.0", std::nullopt, "", "")}),
              "devlet-gpu.igpu.count=1\ndevlet-gpu.igpu.memory=0\ndevlet-gpu.igpu.tiles=1\n");
}

TEST(GpuNfd, FileIsWrittenWhereTheDirExistsAndRemovedWithEmptyText) {
    char pattern[] = "/tmp/devlet-gpu-nfd-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    const std::string dir = pattern;
    EXPECT_EQ(writeNfdFeatures(dir, "gpus", "devlet-gpu.gpus.count=1\n"), "");
    std::ifstream in(nfdFeatureFile(dir, "gpus"));
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(text.str(), "devlet-gpu.gpus.count=1\n");
    EXPECT_EQ(writeNfdFeatures(dir, "gpus", ""), "");
    EXPECT_FALSE(std::filesystem::exists(nfdFeatureFile(dir, "gpus")));
    // Only the file itself was ever left there.
    EXPECT_TRUE(std::filesystem::is_empty(dir));
    std::filesystem::remove_all(dir);
    // NFD not installed: nothing is written, and that is no error.
    EXPECT_EQ(writeNfdFeatures(dir, "gpus", "devlet-gpu.gpus.count=1\n"), "");
    EXPECT_FALSE(std::filesystem::exists(dir));
}

}  // namespace
}  // namespace devlet::gpu
