#pragma once
// Who holds a slot of a shared device, as this node may judge it: the one place where the
// rule lives (docs/cluster.md, "A partitioned node").
//
// Each node renews one Lease of its own (its node Lease); a slot's Lease names its holder
// and lives as long as the holder's node Lease is renewed, so the cost at rest does not
// grow with the slots a node holds.
//
// Another node's hold has lapsed only when this node has seen neither the slot's Lease nor
// the holder's node Lease change for their whole duration, measured by this node's clock
// from when it saw the change: another node's renewTime is never compared with this
// node's clock, so skewed clocks cannot make a held slot look free. Before it takes such a
// slot over, the node reads the holder's node Lease once more (TakeOver::holderLease).
// Only time this node could see counts: while its own run of confirmations was broken it
// saw nothing, so a new run starts every other node's clock again. An API server that was
// down for everyone (restarted, upgraded) thus frees no slot: each holder has a whole
// duration after the API returns to renew, as it had before.
//
// This node's own hold counts only while the API has confirmed it: a slot Lease it wrote
// in the current run of confirmations of its node Lease, each answered less than `trust`
// after the one before it was sent (trust < duration, so no other node can have seen the
// node Lease lapse in between). When a run breaks (a partition, a hanging API server),
// every hold of this node must be written again before it is given again (Confirm), and
// a 409 on that write means another node holds the slot.
// Lives on the loop thread; plain data, no I/O.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cluster/lease.h"

namespace devlet::kube {

class LeaseTable {
public:
    using Clock = std::chrono::steady_clock;

    // `trust`: how long after it was sent a confirmed write of this node's Lease vouches
    // for this node's holds (less than the Lease duration).
    LeaseTable(std::string node, std::chrono::milliseconds trust);

    // A Lease (slot or node) as the API has it now: from a watch event, a list, or the
    // answer to a write.
    void seen(const Lease& lease, Clock::time_point now);
    // The Lease was deleted.
    void gone(const std::string& name);
    // The Lease is missing from a fresh list: a slot another node held stays held for its
    // duration from now (an API server that lost its state: the holder writes it again
    // first); anything else is gone.
    void vanished(const std::string& name, Clock::time_point now);

    // This node's own writes. A run number names an unbroken run of confirmations of the
    // node Lease; 0 is none.
    std::uint64_t run(Clock::time_point now) const;
    // A write of this node's Lease, sent at `sent`, was answered with `written` at `now`.
    // `anew`: the API did not have the Lease this node wrote before (it was deleted, or the
    // API server lost its state): whatever this node held is not vouched for, and a new
    // run starts.
    void nodeLeaseConfirmed(const Lease& written, Clock::time_point sent, Clock::time_point now,
                            bool anew = false);
    // A write of a slot's Lease for this node, sent during run `runAtSend`, was answered
    // with `written` at `now`: the hold is this node's for as long as that run lasts. A
    // write answered after the run broke is recorded, not trusted.
    void slotConfirmed(const Lease& written, std::uint64_t runAtSend, Clock::time_point now);
    // Whether this node's Lease is confirmed now, and until when it will be.
    bool confirmed(Clock::time_point now) const { return run(now) != 0; }
    std::optional<Clock::time_point> confirmedUntil() const { return trustedUntil_; }

    // What taking the slot's Lease means now.
    struct Decision {
        enum class Kind {
            Create,         // no Lease: create one
            Ours,           // this node holds it, confirmed in the current run: no round trip
            Confirm,        // this node's as last seen, but not confirmed since: write it again at
                            // `lease.resourceVersion` (409: another node holds it)
            TakeOver,       // released or lapsed: replace it, at `lease.resourceVersion`
            HeldElsewhere,  // another node holds it: refuse, naming `lease.holder`
        } kind;
        Lease lease;                       // as last seen (empty for Create)
        std::chrono::milliseconds left{};  // HeldElsewhere: until it lapses if not renewed
        // TakeOver of a lapsed hold: the holder's node Lease as last seen here (nullopt:
        // none seen). Read it again first; changed, the holder is alive.
        std::optional<Lease> holderLease;
    };
    Decision decide(const std::string& name, Clock::time_point now) const;
    // Whether a fresh read of a holder's node Lease shows it renewed since this node last
    // saw it (or shows one where none was seen).
    bool renewedSince(const std::optional<Lease>& seenBefore, const Lease& now) const;

    // The slot Leases other nodes hold and that have not lapsed: name -> holder.
    std::map<std::string, std::string> heldElsewhere(Clock::time_point now) const;
    // The slot Leases this node holds, as last seen.
    std::vector<Lease> ours() const;
    // Whether this node's hold of the slot is confirmed now (Ours).
    bool trusted(const std::string& name, Clock::time_point now) const;
    // When the next slot held elsewhere lapses, if one is held elsewhere.
    std::optional<Clock::time_point> nextLapse(Clock::time_point now) const;
    // Whether the node Lease `name` is unknown here or has not been seen renewed for its
    // duration.
    bool nodeLeaseLapsed(const std::string& name, Clock::time_point now) const;
    // A slot Lease, or this node's or another node's node Lease.
    const Lease* find(const std::string& name) const;
    std::size_t size() const { return slots_.size(); }   // slot Leases
    std::size_t nodes() const { return nodes_.size(); }  // node Leases

private:
    struct Seen {
        Lease lease;
        Clock::time_point changed;  // when this node saw its holder or renewTime change
        // Held by another node when this node last knew, and missing from a fresh list (an
        // API server restored without its state): taken as held until it lapses, so that
        // its holder can write it again first. There is no object to replace.
        bool vanished = false;
    };
    static Clock::time_point lapsesAt(const Seen& seen);
    // A new run of this node's confirmations: what others did while it could not see
    // counts from now.
    void restartOthersClocks(Clock::time_point now);
    // When another node's hold of the slot lapses: its own Lease and its holder's node
    // Lease both unchanged for their durations.
    Clock::time_point slotLapsesAt(const Seen& slot) const;
    std::map<std::string, Seen>& mapFor(const Lease& lease) { return lease.node ? nodes_ : slots_; }

    std::string node_;
    std::chrono::milliseconds trust_;
    std::map<std::string, Seen> slots_;
    std::map<std::string, Seen> nodes_;  // node Leases, by Lease name
    std::uint64_t run_ = 0;              // the last run of confirmations; see run()
    std::optional<Clock::time_point> trustedUntil_;
    std::map<std::string, std::uint64_t> slotRun_;  // this node's slot Leases: the run they were written in
};

}  // namespace devlet::kube
