#include "runtime/live_info.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include <boost/json.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/log.h"

namespace devlet {

namespace {
constexpr Log log{"live-info"};
namespace fs = std::filesystem;
namespace json = boost::json;

constexpr char kFile[] = "devices.json";
constexpr char kTemporary[] = ".devices.json.tmp";
// The container reads, devlet alone writes; the mount is read-only as well.
constexpr mode_t kDirectoryMode = 0755;
constexpr mode_t kFileMode = 0644;

// A full or read-only file system may clear by itself; anything else needs a person.
Fault faultOf(int error) {
    return error == ENOSPC || error == EROFS || error == EDQUOT || error == EIO ? Fault::Passing
                                                                                : Fault::Lasting;
}

Outcome failure(const std::string& what, const fs::path& path, int error) {
    return Outcome::failure(what + " " + path.string() + ": " + std::strerror(error), faultOf(error));
}

// A directory with exactly kDirectoryMode, whatever the umask.
Outcome makeDirectory(const fs::path& path) {
    if (::mkdir(path.c_str(), kDirectoryMode) != 0 && errno != EEXIST)
        return failure("cannot create", path, errno);
    if (::chmod(path.c_str(), kDirectoryMode) != 0) return failure("cannot set the mode of", path, errno);
    return Outcome::ok();
}

// Writes the whole text to a new file; `flush` makes its data reach the disk before the
// file is closed (the caller renames it into place afterwards).
Outcome writeWhole(const fs::path& path, const std::string& text, bool flush) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, kFileMode);
    if (fd < 0) return failure("cannot create", path, errno);
    auto fail = [&](const char* what) {
        const int error = errno;
        ::close(fd);
        return failure(what, path, error);
    };
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return fail("cannot write");
        done += static_cast<std::size_t>(n);
    }
    // The umask may have taken bits the container needs to read.
    if (::fchmod(fd, kFileMode) != 0) return fail("cannot set the mode of");
    if (flush && ::fdatasync(fd) != 0) return fail("cannot flush");
    if (::close(fd) != 0) return failure("cannot close", path, errno);
    return Outcome::ok();
}

// Flushes every file written on the file system that holds `directory`: one flush of the
// disk for a whole batch of documents, where one per file would cost a flush each.
Outcome flushFileSystem(const fs::path& directory) {
    const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return failure("cannot open", directory, errno);
    const int result = ::syncfs(fd);
    const int error = errno;
    ::close(fd);
    return result == 0 ? Outcome::ok() : failure("cannot flush the file system of", directory, error);
}

// Allocation names become directory names: slot ids, never a path of their own.
bool validName(const std::string& allocation) {
    return !allocation.empty() && allocation != "." && allocation != ".." &&
           allocation.find('/') == std::string::npos && allocation.find('\0') == std::string::npos;
}

std::int64_t wallMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace

LiveInfoWriter::LiveInfoWriter(const std::filesystem::path& stateDir) : pods_(stateDir / "pods") {}

fs::path LiveInfoWriter::directory(const std::string& allocation) const {
    return pods_ / allocation;
}

std::string LiveInfoWriter::render(const std::string& allocation, std::uint64_t generation,
                                   std::int64_t writtenMs, const std::vector<LiveDevice>& devices) {
    json::object root;
    root["schemaVersion"] = kSchemaVersion;
    root["generation"] = generation;
    root["allocation"] = allocation;
    root["writtenAtMs"] = writtenMs;
    json::array list;
    for (const LiveDevice& device : devices) {
        json::object d;
        d["slot"] = device.slot;
        d["instance"] = device.instance;
        d["configuration"] = device.configuration;
        d["resource"] = device.resource;
        d["health"] = device.present ? "present" : "gone";
        if (device.clusterHeld) {
            json::object hold{{"confirmed", device.clusterUnconfirmed.empty()}};
            if (!device.clusterUnconfirmed.empty()) hold["reason"] = device.clusterUnconfirmed;
            d["clusterHold"] = std::move(hold);
        }
        json::object properties;
        for (const auto& [key, value] : device.properties) properties[key] = value;
        d["properties"] = std::move(properties);
        json::array nodes;
        for (const DeviceNode& node : device.nodes) {
            nodes.push_back(json::object{
                {"hostPath", node.hostPath},
                {"containerPath", node.containerPath.empty() ? node.hostPath : node.containerPath},
                {"permissions", node.permissions}});
        }
        d["deviceNodes"] = std::move(nodes);
        list.push_back(std::move(d));
    }
    root["devices"] = std::move(list);
    return json::serialize(root) + "\n";
}

Outcome LiveInfoWriter::write(const std::string& allocation, const std::vector<LiveDevice>& devices) {
    return writeAll({{allocation, devices}}).front();
}

std::vector<Outcome> LiveInfoWriter::writeAll(const std::vector<Document>& documents) {
    std::vector<Outcome> outcomes(documents.size(), Outcome::ok());
    // One document is flushed by itself; a batch is written whole, then flushed at once.
    const bool batch = documents.size() > 1;
    const Outcome pods = makeDirectory(pods_);
    const std::int64_t now = wallMs();
    for (std::size_t i = 0; i < documents.size(); ++i) {
        const auto& [allocation, devices] = documents[i];
        Outcome& outcome = outcomes[i];
        if (!validName(allocation)) {
            outcome = Outcome::failure("\"" + allocation + "\" cannot name a live-info directory");
            continue;
        }
        const fs::path dir = directory(allocation);
        outcome = pods;
        if (outcome) outcome = makeDirectory(dir);
        if (outcome)
            outcome = writeWhole(dir / kTemporary,
                                 render(allocation, generations_[allocation] + 1, now, devices), !batch);
    }
    // Flushed before the rename: after a power cut a reader finds the old document or the
    // new one, never a file the rename made visible before its data reached the disk.
    if (batch) {
        bool written = false;
        for (const Outcome& outcome : outcomes) written = written || outcome;
        if (written) {
            if (Outcome flushed = flushFileSystem(pods_); !flushed) {
                for (Outcome& outcome : outcomes) {
                    if (outcome) outcome = flushed;
                }
            }
        }
    }
    for (std::size_t i = 0; i < documents.size(); ++i) {
        const std::string& allocation = documents[i].first;
        Outcome& outcome = outcomes[i];
        if (!validName(allocation)) continue;
        const fs::path dir = directory(allocation);
        if (outcome && ::rename((dir / kTemporary).c_str(), (dir / kFile).c_str()) != 0)
            outcome = failure("cannot replace", dir / kFile, errno);
        if (!outcome) {
            std::error_code ignored;
            fs::remove(dir / kTemporary, ignored);
            stale_[allocation] = outcome.error();
            continue;
        }
        ++generations_[allocation];
        stale_.erase(allocation);
    }
    return outcomes;
}

Outcome LiveInfoWriter::remove(const std::string& allocation) {
    generations_.erase(allocation);
    stale_.erase(allocation);
    if (!validName(allocation)) return Outcome::ok();
    std::error_code ec;
    fs::remove_all(directory(allocation), ec);
    if (ec) return Outcome::failure("cannot remove " + directory(allocation).string() + ": " + ec.message());
    return Outcome::ok();
}

std::map<std::string, LiveAllocation> LiveInfoWriter::existing() {
    std::map<std::string, LiveAllocation> result;
    std::error_code ec;
    fs::directory_iterator it(pods_, ec);
    if (ec) return result;  // none yet
    for (const fs::directory_entry& entry : it) {
        if (!entry.is_directory(ec)) continue;
        const std::string allocation = entry.path().filename().string();
        LiveAllocation& found = result[allocation];
        std::ifstream in(entry.path() / kFile);
        if (!in) continue;
        std::stringstream text;
        text << in.rdbuf();
        boost::system::error_code parseError;
        const json::value root = json::parse(text.str(), parseError);
        const json::object* object = parseError ? nullptr : root.if_object();
        if (!object) {
            log.warning() << (entry.path() / kFile).string() << " is not a live-info document; rewritten";
            continue;
        }
        if (const json::value* g = object->if_contains("generation"); g && g->is_uint64())
            found.generation = g->get_uint64();
        else if (g && g->is_int64() && g->get_int64() > 0)
            found.generation = static_cast<std::uint64_t>(g->get_int64());
        if (const json::value* devices = object->if_contains("devices"); devices && devices->is_array()) {
            for (const json::value& d : devices->get_array()) {
                const json::object* device = d.if_object();
                const json::value* slot = device ? device->if_contains("slot") : nullptr;
                if (slot && slot->is_string()) found.slots.emplace_back(slot->get_string());
            }
        }
        generations_[allocation] = std::max(generations_[allocation], found.generation);
    }
    return result;
}

std::uint64_t LiveInfoWriter::generation(const std::string& allocation) const {
    auto it = generations_.find(allocation);
    return it == generations_.end() ? 0 : it->second;
}

std::string LiveInfoWriter::staleReason(const std::string& allocation) const {
    auto it = stale_.find(allocation);
    return it == stale_.end() ? std::string() : it->second;
}

}  // namespace devlet
