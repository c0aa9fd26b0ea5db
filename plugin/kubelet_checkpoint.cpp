#include "plugin/kubelet_checkpoint.h"

#include <cerrno>
#include <cstring>

#include <boost/json.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace devlet {

namespace {
// A node's allocations take a few hundred bytes each: this is far beyond any real file,
// and keeps a runaway or hostile one from costing devlet its memory.
constexpr std::size_t kMaxCheckpointBytes = std::size_t{32} << 20;

namespace json = boost::json;

// The entry's device ids: {"<NUMA node>": [ids]} since 1.20, [ids] before.
bool readDeviceIds(const json::value& ids, std::vector<std::string>& out) {
    auto readList = [&out](const json::value& list) {
        if (!list.is_array()) return false;
        for (const json::value& id : list.get_array()) {
            if (!id.is_string()) return false;
            out.emplace_back(id.get_string());
        }
        return true;
    };
    if (ids.is_null()) return true;
    if (ids.is_array()) return readList(ids);
    if (!ids.is_object()) return false;
    for (const auto& [node, list] : ids.get_object()) {
        if (!readList(list)) return false;
    }
    return true;
}

KubeletCheckpoint failed(std::string why) {
    KubeletCheckpoint checkpoint;
    checkpoint.present = true;
    checkpoint.error = std::move(why);
    return checkpoint;
}
}  // namespace

KubeletCheckpoint parseKubeletCheckpoint(std::string_view text) {
    boost::system::error_code ec;
    json::value root = json::parse(json::string_view(text.data(), text.size()), ec);
    if (ec) return failed("not JSON (" + ec.message() + ")");
    if (!root.is_object()) return failed("not a JSON object");
    const json::value* data = root.get_object().if_contains("Data");
    if (!data || !data->is_object()) return failed("no \"Data\" object");
    KubeletCheckpoint checkpoint;
    checkpoint.present = true;
    const json::value* entries = data->get_object().if_contains("PodDeviceEntries");
    if (!entries || entries->is_null()) return checkpoint;  // a kubelet with no allocations
    if (!entries->is_array()) return failed("\"PodDeviceEntries\" is not a list");
    for (const json::value& entry : entries->get_array()) {
        if (!entry.is_object()) return failed("an entry of \"PodDeviceEntries\" is not an object");
        const json::object& e = entry.get_object();
        const json::value* resource = e.if_contains("ResourceName");
        const json::value* uid = e.if_contains("PodUID");
        const json::value* ids = e.if_contains("DeviceIDs");
        if (!resource || !resource->is_string()) return failed("an entry has no \"ResourceName\"");
        if (uid && !uid->is_string()) return failed("an entry's \"PodUID\" is not text");
        std::vector<std::string> deviceIds;
        if (!ids || !readDeviceIds(*ids, deviceIds))
            return failed("an entry's \"DeviceIDs\" is not a list of ids");
        for (std::string& id : deviceIds) {
            PodDevice device;
            device.resource = std::string(resource->get_string());
            device.deviceId = std::move(id);
            if (uid) device.podUid = std::string(uid->get_string());
            checkpoint.devices.push_back(std::move(device));
        }
    }
    return checkpoint;
}

KubeletCheckpoint readKubeletCheckpoint(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT) return {};
        return failed("cannot open " + path + ": " + std::strerror(errno));
    }
    struct stat info {};
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
        ::close(fd);
        return failed(path + " is not a regular file");
    }
    std::string text;
    char buffer[65536];
    bool tooLarge = false;
    for (;;) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int error = errno;
            ::close(fd);
            return failed("cannot read " + path + ": " + std::strerror(error));
        }
        if (n == 0) break;
        if (text.size() + static_cast<std::size_t>(n) > kMaxCheckpointBytes) {
            tooLarge = true;
            break;
        }
        text.append(buffer, static_cast<std::size_t>(n));
    }
    ::close(fd);
    if (tooLarge)
        return failed(path + " is larger than " + std::to_string(kMaxCheckpointBytes >> 20) + " MiB");
    KubeletCheckpoint checkpoint = parseKubeletCheckpoint(text);
    if (!checkpoint.error.empty()) checkpoint.error = path + ": " + checkpoint.error;
    return checkpoint;
}

}  // namespace devlet
