#pragma once
// Node labels without cluster credentials: a Node Feature Discovery feature file per gpu
// configuration (NFD's local source reads `key=value` lines from its features.d dir and
// labels the node `feature.node.kubernetes.io/<key>`). Rewritten when the offered GPUs
// change, removed when the configuration stops. Main (loop) thread.

#include <string>
#include <vector>

#include "runtime/instance.h"

namespace devlet::gpu {

// The feature file's text: GPU count, memory, tiles and the NUMA map (GPUs numbered in
// PCI address order, "0-0.1_1-2.3", as Intel's labeler writes it). Pure.
std::string nfdFeatures(const std::string& configuration, const std::vector<Instance>& offered);

// The file for a configuration in `dir`.
std::string nfdFeatureFile(const std::string& dir, const std::string& configuration);

// Writes (atomically: a temp file renamed) or, for empty text, removes the file. Does
// nothing where `dir` does not exist (NFD is not installed). Returns an error message,
// empty on success.
std::string writeNfdFeatures(const std::string& dir, const std::string& configuration,
                             const std::string& text);

}  // namespace devlet::gpu
