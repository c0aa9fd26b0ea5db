#include "tests/support/power_cut_vfs.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>
#include <system_error>

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

namespace devlet::test {

namespace {

constexpr const char* kName = "devlet-power-cut";

PowerCutVfs* owner(sqlite3_vfs* vfs) {
    return static_cast<PowerCutVfs*>(vfs->pAppData);
}
sqlite3_vfs* innerVfs(sqlite3_vfs* vfs) {
    return owner(vfs)->inner();
}

std::optional<std::string> readWhole(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return std::nullopt;
    std::ifstream stream(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>());
}

void apply(std::string& image, const PowerCutVfs::Tracked::Change& change) {
    const auto offset = static_cast<std::size_t>(change.offset);
    if (change.truncate) {
        image.resize(offset);
        return;
    }
    if (image.size() < offset + change.data.size()) image.resize(offset + change.data.size());
    image.replace(offset, change.data.size(), change.data);
}

}  // namespace

// SQLite allocates vfs->szOsFile bytes: this header, then the wrapped VFS's file.
struct PowerCutVfs::File {
    sqlite3_file base;
    PowerCutVfs* owner;
    Tracked* tracked;  // nullptr for temporary files, which do not outlive a crash anyway
    sqlite3_file* inner() { return reinterpret_cast<sqlite3_file*>(this + 1); }
};
static_assert(sizeof(PowerCutVfs::File) % 8 == 0, "the wrapped file must stay aligned");

namespace {

using File = PowerCutVfs::File;
File* self(sqlite3_file* file) {
    return reinterpret_cast<File*>(file);
}
sqlite3_file* inner(sqlite3_file* file) {
    return self(file)->inner();
}

int fileClose(sqlite3_file* file) {
    return inner(file)->pMethods->xClose(inner(file));
}
int fileRead(sqlite3_file* file, void* buffer, int amount, sqlite3_int64 offset) {
    return inner(file)->pMethods->xRead(inner(file), buffer, amount, offset);
}
int fileWrite(sqlite3_file* file, const void* buffer, int amount, sqlite3_int64 offset) {
    int rc = inner(file)->pMethods->xWrite(inner(file), buffer, amount, offset);
    if (rc == SQLITE_OK && self(file)->tracked)
        self(file)->owner->changed(
            *self(file)->tracked,
            {false, offset, std::string(static_cast<const char*>(buffer), static_cast<std::size_t>(amount))});
    return rc;
}
int fileTruncate(sqlite3_file* file, sqlite3_int64 size) {
    int rc = inner(file)->pMethods->xTruncate(inner(file), size);
    if (rc == SQLITE_OK && self(file)->tracked)
        self(file)->owner->changed(*self(file)->tracked, {true, size, {}});
    return rc;
}
int fileSync(sqlite3_file* file, int flags) {
    int rc = inner(file)->pMethods->xSync(inner(file), flags);
    if (rc == SQLITE_OK && self(file)->tracked) self(file)->owner->synced(*self(file)->tracked);
    return rc;
}
int fileSize(sqlite3_file* file, sqlite3_int64* size) {
    return inner(file)->pMethods->xFileSize(inner(file), size);
}
int fileLock(sqlite3_file* file, int level) {
    return inner(file)->pMethods->xLock(inner(file), level);
}
int fileUnlock(sqlite3_file* file, int level) {
    return inner(file)->pMethods->xUnlock(inner(file), level);
}
int fileCheckReservedLock(sqlite3_file* file, int* out) {
    return inner(file)->pMethods->xCheckReservedLock(inner(file), out);
}
int fileControl(sqlite3_file* file, int op, void* arg) {
    return inner(file)->pMethods->xFileControl(inner(file), op, arg);
}
int fileSectorSize(sqlite3_file* file) {
    return inner(file)->pMethods->xSectorSize(inner(file));
}
int fileDeviceCharacteristics(sqlite3_file* file) {
    return inner(file)->pMethods->xDeviceCharacteristics(inner(file));
}
int fileShmMap(sqlite3_file* file, int region, int size, int extend, void volatile** out) {
    return inner(file)->pMethods->xShmMap(inner(file), region, size, extend, out);
}
int fileShmLock(sqlite3_file* file, int offset, int n, int flags) {
    return inner(file)->pMethods->xShmLock(inner(file), offset, n, flags);
}
void fileShmBarrier(sqlite3_file* file) {
    inner(file)->pMethods->xShmBarrier(inner(file));
}
int fileShmUnmap(sqlite3_file* file, int deleteFlag) {
    return inner(file)->pMethods->xShmUnmap(inner(file), deleteFlag);
}
int fileFetch(sqlite3_file* file, sqlite3_int64 offset, int amount, void** out) {
    return inner(file)->pMethods->xFetch(inner(file), offset, amount, out);
}
int fileUnfetch(sqlite3_file* file, sqlite3_int64 offset, void* pointer) {
    return inner(file)->pMethods->xUnfetch(inner(file), offset, pointer);
}

const sqlite3_io_methods kMethods = {
    3,
    fileClose,
    fileRead,
    fileWrite,
    fileTruncate,
    fileSync,
    fileSize,
    fileLock,
    fileUnlock,
    fileCheckReservedLock,
    fileControl,
    fileSectorSize,
    fileDeviceCharacteristics,
    fileShmMap,
    fileShmLock,
    fileShmBarrier,
    fileShmUnmap,
    fileFetch,
    fileUnfetch,
};

int vfsOpen(sqlite3_vfs* vfs, const char* name, sqlite3_file* file, int flags, int* outFlags) {
    File* f = self(file);
    f->base.pMethods = nullptr;
    f->owner = owner(vfs);
    f->tracked = name && !(flags & SQLITE_OPEN_DELETEONCLOSE) ? f->owner->track(name) : nullptr;
    int rc = innerVfs(vfs)->xOpen(innerVfs(vfs), name, f->inner(), flags, outFlags);
    // SQLite calls xClose after a failed xOpen only when pMethods is set.
    if (f->inner()->pMethods) f->base.pMethods = &kMethods;
    return rc;
}
int vfsDelete(sqlite3_vfs* vfs, const char* name, int syncDirectory) {
    int rc = innerVfs(vfs)->xDelete(innerVfs(vfs), name, syncDirectory);
    if (rc == SQLITE_OK || (rc & 0xff) == SQLITE_IOERR) owner(vfs)->deleted(name);
    return rc;
}
int vfsAccess(sqlite3_vfs* vfs, const char* name, int flags, int* out) {
    return innerVfs(vfs)->xAccess(innerVfs(vfs), name, flags, out);
}
int vfsFullPathname(sqlite3_vfs* vfs, const char* name, int size, char* out) {
    return innerVfs(vfs)->xFullPathname(innerVfs(vfs), name, size, out);
}
void* vfsDlOpen(sqlite3_vfs* vfs, const char* name) {
    return innerVfs(vfs)->xDlOpen(innerVfs(vfs), name);
}
void vfsDlError(sqlite3_vfs* vfs, int size, char* out) {
    innerVfs(vfs)->xDlError(innerVfs(vfs), size, out);
}
void (*vfsDlSym(sqlite3_vfs* vfs, void* handle, const char* symbol))(void) {
    return innerVfs(vfs)->xDlSym(innerVfs(vfs), handle, symbol);
}
void vfsDlClose(sqlite3_vfs* vfs, void* handle) {
    innerVfs(vfs)->xDlClose(innerVfs(vfs), handle);
}
int vfsRandomness(sqlite3_vfs* vfs, int size, char* out) {
    return innerVfs(vfs)->xRandomness(innerVfs(vfs), size, out);
}
int vfsSleep(sqlite3_vfs* vfs, int microseconds) {
    return innerVfs(vfs)->xSleep(innerVfs(vfs), microseconds);
}
int vfsCurrentTime(sqlite3_vfs* vfs, double* out) {
    return innerVfs(vfs)->xCurrentTime(innerVfs(vfs), out);
}
int vfsGetLastError(sqlite3_vfs* vfs, int size, char* out) {
    return innerVfs(vfs)->xGetLastError(innerVfs(vfs), size, out);
}
int vfsCurrentTimeInt64(sqlite3_vfs* vfs, sqlite3_int64* out) {
    return innerVfs(vfs)->xCurrentTimeInt64(innerVfs(vfs), out);
}
int vfsSetSystemCall(sqlite3_vfs* vfs, const char* name, sqlite3_syscall_ptr call) {
    return innerVfs(vfs)->xSetSystemCall(innerVfs(vfs), name, call);
}
sqlite3_syscall_ptr vfsGetSystemCall(sqlite3_vfs* vfs, const char* name) {
    return innerVfs(vfs)->xGetSystemCall(innerVfs(vfs), name);
}
const char* vfsNextSystemCall(sqlite3_vfs* vfs, const char* name) {
    return innerVfs(vfs)->xNextSystemCall(innerVfs(vfs), name);
}

}  // namespace

PowerCutVfs::PowerCutVfs() {
    inner_ = sqlite3_vfs_find(nullptr);
    if (!inner_ || inner_->iVersion < 3)
        throw std::runtime_error("no default SQLite VFS of version 3 to wrap");
    vfs_ = new sqlite3_vfs{};
    vfs_->iVersion = 3;
    vfs_->szOsFile = static_cast<int>(sizeof(File)) + inner_->szOsFile;
    vfs_->mxPathname = inner_->mxPathname;
    vfs_->zName = kName;
    vfs_->pAppData = this;
    vfs_->xOpen = vfsOpen;
    vfs_->xDelete = vfsDelete;
    vfs_->xAccess = vfsAccess;
    vfs_->xFullPathname = vfsFullPathname;
    vfs_->xDlOpen = vfsDlOpen;
    vfs_->xDlError = vfsDlError;
    vfs_->xDlSym = vfsDlSym;
    vfs_->xDlClose = vfsDlClose;
    vfs_->xRandomness = vfsRandomness;
    vfs_->xSleep = vfsSleep;
    vfs_->xCurrentTime = vfsCurrentTime;
    vfs_->xGetLastError = vfsGetLastError;
    vfs_->xCurrentTimeInt64 = vfsCurrentTimeInt64;
    vfs_->xSetSystemCall = vfsSetSystemCall;
    vfs_->xGetSystemCall = vfsGetSystemCall;
    vfs_->xNextSystemCall = vfsNextSystemCall;
    if (sqlite3_vfs_register(vfs_, /*makeDefault=*/1) != SQLITE_OK) {
        delete vfs_;
        throw std::runtime_error("registering the power-cut VFS failed");
    }
}

PowerCutVfs::~PowerCutVfs() {
    sqlite3_vfs_unregister(vfs_);  // the unix VFS is the default again
    delete vfs_;
}

void PowerCutVfs::keepUnsyncedWrites(double probability, std::uint64_t seed) {
    keepProbability_ = probability;
    random_.emplace(seed);
}

PowerCutVfs::Tracked* PowerCutVfs::track(const std::string& path) {
    auto [it, added] = files_.try_emplace(path);
    if (added) {
        // A file that was there before the VFS saw it is on the disk as it is.
        it->second.durable = readWhole(path);
        if (image_ && !image_->contains(path)) (*image_)[path] = it->second.durable;
    }
    return &it->second;
}

void PowerCutVfs::changed(Tracked& file, Tracked::Change change) {
    file.unsynced.push_back(std::move(change));
    operation();
}

void PowerCutVfs::synced(Tracked& file) {
    // The first sync of a created file also syncs its directory entry (SQLite's DIRSYNC).
    std::string durable = file.durable.value_or(std::string());
    for (const Tracked::Change& change : file.unsynced) apply(durable, change);
    file.durable = std::move(durable);
    file.unsynced.clear();
    ++file.syncs;
    operation();
}

void PowerCutVfs::deleted(const std::string& path) {
    Tracked& file = files_[path];
    file.durable.reset();
    file.unsynced.clear();
    operation();
}

void PowerCutVfs::operation() {
    if (operationsToCut_ == 0) return;  // no cut armed
    if (--operationsToCut_ == 0) cutNow();
}

void PowerCutVfs::cutAfter(std::uint64_t operations) {
    operationsToCut_ = operations;
}

std::optional<std::string> PowerCutVfs::imageOf(const Tracked& file) {
    // A created file never synced has no durable name: its writes go with it.
    if (!file.durable) return std::nullopt;
    std::string image = *file.durable;
    std::bernoulli_distribution lands(keepProbability_);
    for (const Tracked::Change& change : file.unsynced)
        if (keepProbability_ > 0 && lands(*random_)) apply(image, change);
    return image;
}

void PowerCutVfs::cutNow() {
    operationsToCut_ = 0;
    if (image_) return;
    image_.emplace();
    for (const auto& [path, file] : files_) (*image_)[path] = imageOf(file);
}

std::string PowerCutVfs::restore() {
    if (!image_) return "no power cut to restore from";
    std::string problems;
    for (const auto& [path, contents] : *image_) {
        std::error_code ec;
        if (!contents) {
            std::filesystem::remove(path, ec);
        } else {
            // 0600 as the store's files; a file the cut brings back keeps its mode.
            int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            bool written = fd >= 0 && ::write(fd, contents->data(), contents->size()) ==
                                          static_cast<ssize_t>(contents->size());
            if (fd >= 0) ::close(fd);
            if (!written) problems += "cannot write " + path + "; ";
        }
        if (ec) problems += "cannot remove " + path + ": " + ec.message() + "; ";
        Tracked& file = files_[path];
        file.durable = contents;
        file.unsynced.clear();
    }
    image_.reset();
    operationsToCut_ = 0;
    return problems;
}

std::uint64_t PowerCutVfs::syncs(const std::string& path) const {
    auto it = files_.find(path);
    return it == files_.end() ? 0 : it->second.syncs;
}

namespace {
int ignoreSynchronousPragma(void*, int action, const char* pragma, const char*, const char*, const char*) {
    return action == SQLITE_PRAGMA && pragma && sqlite3_stricmp(pragma, "synchronous") == 0 ? SQLITE_IGNORE
                                                                                            : SQLITE_OK;
}
int keepSynchronousNormal(sqlite3* db, const char**, const sqlite3_api_routines*) {
    sqlite3_exec(db, "PRAGMA synchronous = NORMAL", nullptr, nullptr, nullptr);
    sqlite3_set_authorizer(db, ignoreSynchronousPragma, nullptr);
    return SQLITE_OK;
}
using Extension = void (*)();
}  // namespace

std::uint64_t PowerCutVfs::seed() {
    if (const char* seed = std::getenv("DEVLET_FAULT_SEED")) return std::strtoull(seed, nullptr, 10);
    return std::random_device{}();
}

SynchronousNormalForced::SynchronousNormalForced() {
    sqlite3_auto_extension(reinterpret_cast<Extension>(keepSynchronousNormal));
}

SynchronousNormalForced::~SynchronousNormalForced() {
    sqlite3_cancel_auto_extension(reinterpret_cast<Extension>(keepSynchronousNormal));
}

}  // namespace devlet::test
