#pragma once
// Who holds which capacity slot, through which resource: the record. It refuses a second
// holder itself ("never twice"; the store refuses it again), writes every hold and release
// to the store before it counts, and hands every change of holder to its listeners. It
// decides nothing else: whether a slot may be given, adopted from the kubelet's word or
// released is the slot arbiter's (runtime/slot_arbiter.h), the only caller of its changing
// members. It knows nothing of configurations or discovery. Lives on the loop thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/clock.h"
#include "runtime/outcome.h"
#include "runtime/slot.h"
#include "runtime/thread_bound.h"

namespace devlet {

class Store;

class SlotLedger {
public:
    class Listener {
    public:
        virtual ~Listener() = default;
        // A slot's holder changed ("" = free): the resources that list it change.
        virtual void holderChanged(const Slot& slot, const std::string& before) = 0;
        // Something a person should read: logged and kept with the events.
        virtual void event(const std::string& level, const std::string& subject, const std::string& message) {
            (void)level;
            (void)subject;
            (void)message;
        }
    };

    SlotLedger(Store* store, const Clock& clock);

    // The held slots recorded in the store, each given a full grace period (a restart is
    // no evidence its pod went away), and the handler's device id of each instance.
    void restore();

    // --- reading ----------------------------------------------------------------
    const Slot* holder(const std::string& instance, int index) const;
    bool anyHeld(const std::string& instance) const;
    // The highest held index of the instance; -1 when none is held.
    int highestHeld(const std::string& instance) const;
    std::size_t heldBy(const std::string& instance) const;
    std::size_t size() const;
    // Every held slot of a configuration's instances, by instance name.
    std::vector<Slot> heldFor(const std::string& configuration) const;
    // The handler's id of a held instance's device, for when its configuration returns.
    std::string instanceDeviceId(const std::string& instance) const;
    // Changes whenever a holder or a pod name changes.
    std::uint64_t revision() const {
        loopThread_.check();
        return revision_;
    }

    // --- changing ----------------------------------------------------------------
    // Holds the slots through their `holderResource`: durable first (one synced
    // transaction), then in memory. Nothing is held when one of them is held through
    // another resource already, or when the store refuses.
    Outcome hold(const std::vector<Slot>& slots, const std::string& instanceDeviceId = {});
    // The holder was just confirmed (an Allocate for the slot it holds).
    void confirm(const std::string& instance, int index);

    // Frees a slot, store first; false (still held) when the store refuses. `placed`: its
    // instance is still offered by its configuration (else the instance's row goes with
    // its last held slot).
    bool release(const std::string& instance, int index, bool placed);
    // The kubelet names the pod that holds the slot.
    void namePod(const std::string& instance, int index, const std::string& pod,
                 const std::string& podNamespace);
    // Every held slot, with the last evidence that a container uses it (its allocation, or
    // PodResources listing it): the release grace counts from there.
    struct Entry {
        Slot slot;
        std::chrono::steady_clock::time_point lastConfirmed{};
    };
    std::vector<Entry> entries() const;

    // Several listeners: the inventory (its device lists and events), the arbiter (a
    // shared slot freed goes back to the cluster) and the live files.
    void addListener(Listener& listener) {
        loopThread_.beforeLoop();  // wiring
        listeners_.push_back(&listener);
    }
    void removeListener(Listener& listener) {
        loopThread_.beforeLoop();  // wiring
        std::erase(listeners_, &listener);
    }

private:
    struct Held {
        Slot slot;
        std::string instanceDeviceId;
        // The last evidence that a container uses it: its allocation, or PodResources
        // listing it. The release grace counts from here.
        std::chrono::steady_clock::time_point lastConfirmed{};
    };
    Held* find(const std::string& instance, int index) REQUIRES(loopThread_);
    void place(Held held) REQUIRES(loopThread_);
    void holderChanged(const Slot& slot, const std::string& before) REQUIRES(loopThread_);
    void event(const std::string& level, const std::string& subject, const std::string& message)
        REQUIRES(loopThread_);

    ThreadBound loopThread_;  // every public member is called on the loop thread
    Store* store_;
    const Clock& clock_;
    std::vector<Listener*> listeners_ GUARDED_BY(loopThread_);
    std::map<std::string, std::map<int, Held>> held_ GUARDED_BY(loopThread_);  // by instance, then index
    std::uint64_t revision_ GUARDED_BY(loopThread_) = 0;
};

// "<instance>-<k>" -> ("<instance>", k); k = -1 when the id has no slot suffix.
std::pair<std::string, int> splitSlotId(const std::string& id);

}  // namespace devlet
