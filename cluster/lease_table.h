#pragma once
// What this node has seen of devlet's Leases (through its watch and its own writes) and,
// by its own clock, when each last changed hands or was renewed. A Lease has lapsed only
// when this node has not seen it renewed for its whole duration: another node's
// renewTime is never compared with this node's clock, so skewed clocks cannot make a held
// slot look free. Lives on the loop thread; plain data, no I/O.

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cluster/lease.h"

namespace devlet::kube {

class LeaseTable {
public:
    using Clock = std::chrono::steady_clock;

    explicit LeaseTable(std::string node);

    // A Lease as the API has it now: from a watch event, a list, or the answer to a write.
    void seen(const Lease& lease, Clock::time_point now);
    // The Lease was deleted.
    void gone(const std::string& name);
    // A fresh list replaces everything seen; a Lease unchanged since it was last seen keeps
    // the time it was first seen so, so a relist does not extend another node's hold.
    void replaceAll(const std::vector<Lease>& leases, Clock::time_point now);

    // What taking the slot's Lease means now.
    struct Decision {
        enum class Kind {
            Create,         // no Lease: create one
            Ours,           // this node holds it already
            TakeOver,       // released or lapsed: replace it, at `lease.resourceVersion`
            HeldElsewhere,  // another node holds it: refuse, naming `lease.holder`
        } kind;
        Lease lease;                       // as last seen (empty for Create)
        std::chrono::milliseconds left{};  // HeldElsewhere: until it lapses if not renewed
    };
    Decision decide(const std::string& name, Clock::time_point now) const;

    // The Leases other nodes hold and that have not lapsed: name -> holder.
    std::map<std::string, std::string> heldElsewhere(Clock::time_point now) const;
    // The Leases this node holds, as last seen.
    std::vector<Lease> ours() const;
    // When the next Lease held elsewhere lapses, if one is held elsewhere.
    std::optional<Clock::time_point> nextLapse(Clock::time_point now) const;
    const Lease* find(const std::string& name) const;
    std::size_t size() const { return seen_.size(); }

private:
    struct Seen {
        Lease lease;
        Clock::time_point changed;  // when this node saw its holder or renewTime change
    };
    bool lapsed(const Seen& seen, Clock::time_point now) const;
    Clock::time_point lapsesAt(const Seen& seen) const;

    std::string node_;
    std::map<std::string, Seen> seen_;
};

}  // namespace devlet::kube
