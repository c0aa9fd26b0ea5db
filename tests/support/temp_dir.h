#pragma once
// Scratch space for tests: a fresh directory per test, so tests can run in parallel
// (meson runs test programs concurrently) and leave nothing behind. Owned by one test,
// used from the thread that created it.

#include <filesystem>
#include <string>

namespace devlet::test {

// A directory $TMPDIR/devlet-test-XXXXXX, removed (recursively) on destruction.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::filesystem::path& path() const { return path_; }
    // Writes content to relative (creating its parent directories); returns its full path.
    std::string file(const std::string& relative, const std::string& content = "") const;
    // Creates the directory relative (and its parents); returns its full path.
    std::string dir(const std::string& relative) const;

private:
    std::filesystem::path path_;
};

// Creates the parent directories; replaces path whole, so a watcher never sees half a file.
void writeFile(const std::filesystem::path& path, const std::string& text);
// The whole file, or "" when it cannot be read.
std::string readFile(const std::filesystem::path& path);

}  // namespace devlet::test
