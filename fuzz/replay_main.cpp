// The main() of a fuzz target in a build without libFuzzer (gcc, the default): every
// file named on the command line, or in a directory named there, goes through
// LLVMFuzzerTestOneInput once, then deterministic mutations of those files do. So the
// normal test suite runs each target over its seed corpus and regression inputs, and a
// little further; the long runs are libFuzzer's (-Dfuzzing=true, see docs/hardening.md).
//
//   fuzz_TARGET [--mutations N] FILE|DIR...

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

using namespace std::string_literals;

void run(const std::string& input) {
    // A copy of exactly the input's size, so ASan sees a read past its end.
    std::vector<std::uint8_t> bytes(input.begin(), input.end());
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
}

// Pieces that make a mutation reach further than a random byte: markup, YAML, HTTP and
// numbers at the edges of what parsers count in.
const std::string kTokens[] = {"<",
                               ">",
                               "</",
                               "/>",
                               "&",
                               "&amp;",
                               "&#0;",
                               "&#x110000;",
                               "<!DOCTYPE a>",
                               "<![CDATA[",
                               "]]>",
                               "xmlns:x=\"\"",
                               "\"",
                               "'",
                               "\xff\xfe",
                               "<?xml?>",
                               ":",
                               "- ",
                               "\n  ",
                               "{",
                               "}",
                               "[",
                               "]",
                               "*a",
                               "&a ",
                               "!!binary ",
                               "---\n",
                               "|",
                               "*",
                               "?",
                               "\\",
                               "\r\n",
                               "\r\n\r\n",
                               "%",
                               "%zz",
                               "%00",
                               "Content-Length: 99999\r\n",
                               "Transfer-Encoding: chunked\r\n",
                               "\x80",
                               "\xff",
                               "\x7f",
                               "4294967295",
                               "-1",
                               "2147483648",
                               "18446744073709551616",
                               "\0"s,
                               "\0\0\0\0\0"s};

std::string mutate(std::string input, std::mt19937& random) {
    const int edits = 1 + int(random() % 8);
    for (int e = 0; e < edits; ++e) {
        if (input.empty()) input = kTokens[random() % std::size(kTokens)];
        const std::size_t at = random() % input.size();
        switch (random() % 6) {
            case 0:
                input[at] = char(random());
                break;
            case 1:
                input.erase(at, random() % 16);
                break;
            case 2:
                input.insert(at, kTokens[random() % std::size(kTokens)]);
                break;
            case 3:
                input.insert(at, input.substr(random() % input.size(), random() % 256));
                break;
            case 4:
                input.resize(at);
                break;
            default:  // 5
                input[at] = char(input[at] ^ (1 << (random() % 8)));
                break;
        }
    }
    return input;
}

}  // namespace

int main(int argc, char** argv) {
    long mutations = 1000;
    std::vector<std::filesystem::path> files;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--mutations" && i + 1 < argc) {
            const std::string_view count = argv[++i];
            if (const auto [stop, error] =
                    std::from_chars(count.data(), count.data() + count.size(), mutations);
                error != std::errc() || stop != count.data() + count.size()) {
                std::cerr << "--mutations needs a whole number, not \"" << count << "\"\n";
                return 1;
            }
            continue;
        }
        if (std::filesystem::is_directory(arg)) {
            for (const auto& entry : std::filesystem::directory_iterator(arg)) {
                if (entry.is_regular_file()) files.push_back(entry.path());
            }
        } else {
            files.emplace_back(arg);
        }
    }
    std::sort(files.begin(), files.end());
    std::vector<std::string> inputs;
    for (const auto& file : files) {
        std::ifstream in(file, std::ios::binary);
        if (!in) {
            std::cerr << "cannot read " << file << "\n";
            return 1;
        }
        inputs.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
        run(inputs.back());
    }
    if (inputs.empty()) {
        std::cerr << "no inputs: name files or directories of them\n";
        return 1;
    }
    std::mt19937 random(20240501);  // NOLINT(bugprone-random-generator-seed): a run is reproducible
    for (long i = 0; i < mutations; ++i) run(mutate(inputs[random() % inputs.size()], random));
    std::cout << inputs.size() << " inputs and " << mutations << " mutations of them ran\n";
    return 0;
}
