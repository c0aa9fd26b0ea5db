#include "tests/support/temp_dir.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include <stdlib.h>

namespace devlet::test {

TempDir::TempDir() {
    // temp_directory_path() honours $TMPDIR, so a sandboxed run keeps its files in its sandbox.
    std::string pattern = (std::filesystem::temp_directory_path() / "devlet-test-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = pattern;
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

std::string TempDir::file(const std::string& relative, const std::string& content) const {
    const auto path = path_ / relative;
    writeFile(path, content);
    return path.string();
}

std::string TempDir::dir(const std::string& relative) const {
    const auto path = path_ / relative;
    std::filesystem::create_directories(path);
    return path.string();
}

void writeFile(const std::filesystem::path& path, const std::string& text) {
    std::filesystem::create_directories(path.parent_path());
    // Write then rename, so a watcher never reads half a file.
    const auto tmp = path.parent_path() / ("." + path.filename().string() + ".tmp");
    {
        std::ofstream out(tmp);
        out << text;
    }
    std::filesystem::rename(tmp, path);
}

std::string readFile(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace devlet::test
