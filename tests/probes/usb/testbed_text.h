#pragma once
// Editing umockdev testbed descriptions: the same recorded device on another port or with
// another device number is the recording with some values replaced.

#include <string>
#include <utility>
#include <vector>

namespace devlet::test {

// Replaces every occurrence of each `from` (in order; a replacement is not searched again).
inline std::string replacedEach(std::string text,
                                const std::vector<std::pair<std::string, std::string>>& replacements) {
    for (const auto& [from, to] : replacements) {
        for (std::size_t at = text.find(from); at != std::string::npos;
             at = text.find(from, at + to.size())) {
            text.replace(at, from.size(), to);
        }
    }
    return text;
}

}  // namespace devlet::test
