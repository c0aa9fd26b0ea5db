#pragma once
// Which live file describes which held slot (docs/live-info.md): one file per container
// granted devices, under `<stateDir>/pods/<allocation>/`, mounted into the container. An
// allocation is named by the first slot of its container's grant: a name a restart can
// read back from the directory. A listener of the slot ledger: a freed slot leaves its
// file, and a file left with no slot goes. Writes go through LiveInfoWriter (atomic, with
// one flush of the disk per batch). Loop thread.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/instance.h"
#include "runtime/live_info.h"
#include "runtime/outcome.h"
#include "runtime/slot_ledger.h"
#include "runtime/thread_bound.h"

namespace devlet {

class LiveFiles : public SlotLedger::Listener {
public:
    // What a slot's file says about it; nullopt when the slot is not held.
    using Describe = std::function<std::optional<LiveDevice>(const std::string& slotId)>;
    // Something a person should read (a file that keeps stale content, current again).
    using Event =
        std::function<void(const std::string& level, const std::string& subject, const std::string& message)>;

    LiveFiles(const std::string& stateDir, Describe describe, Event event);

    // A container was granted these slots: its file is written now. The mount and the
    // environment to give the container, or nullopt when the file could not be written
    // (without its directory the container could not start).
    struct Granted {
        Mount mount;
        std::string variable;  // DEVLET_INFO_FILE
        std::string file;      // its path in the container
    };
    std::optional<Granted> granted(const std::vector<std::string>& slotIds);
    // What a slot's file says changed: rewritten with the next writeChanged().
    void instanceChanged(const std::string& instance);
    void slotChanged(const std::string& slotId);
    bool pending() const { return !changed_.empty(); }
    // Every file changed since the last call, with one flush of the disk.
    void writeChanged();
    // After a restart: the files of the slots still held are kept (and rewritten), the
    // others removed.
    void rebuild(const std::function<bool(const std::string& slotId)>& held);
    // The file that describes a held slot; nullopt when none does.
    std::optional<LiveFileView> file(const std::string& slotId) const;

private:
    void holderChanged(const Slot& slot, const std::string& before) override;
    // The allocation no longer lists the slot; an allocation left empty is removed.
    void slotGone(const std::string& slotId);
    std::vector<LiveDevice> devices(const std::string& allocation) const;
    // Records the outcome of a write as events (stale, current again); true when written.
    bool written(const std::string& allocation, const std::string& staleBefore, const Outcome& outcome);
    bool write(const std::string& allocation);

    LiveInfoWriter writer_;
    Describe describe_;
    Event event_;
    std::map<std::string, std::vector<std::string>> slots_;  // allocation -> its slot ids
    std::map<std::string, std::string> allocationOf_;        // slot id -> allocation
    std::set<std::string> changed_;                          // allocations to rewrite
    ThreadBound loopThread_;
};

}  // namespace devlet
