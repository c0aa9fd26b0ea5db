#include "cluster/slot_leases.h"

#include <algorithm>
#include <ctime>

#include <boost/asio/post.hpp>
#include <boost/json.hpp>

#include "cluster/service_account_token.h"
#include "runtime/log.h"

namespace devlet::kube {

namespace {
constexpr Log log{"cluster"};
namespace json = boost::json;
using Steady = std::chrono::steady_clock;

// A Lease is named after its slot: a DNS subdomain, as instance names already are.
bool validLeaseName(const std::string& name) {
    if (name.empty() || name.size() > 253) return false;
    for (char c : name) {
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
    }
    return name.front() != '-' && name.back() != '-';
}

std::string instanceOf(const std::string& slotId) {
    const auto dash = slotId.rfind('-');
    return dash == std::string::npos ? slotId : slotId.substr(0, dash);
}
}  // namespace

// One Allocate's slots: answered once every one of them is taken or one is refused, and
// by its deadline whatever the API does.
struct SlotLeases::Take {
    std::size_t pending = 0;
    std::string refusal;                 // the first reason one was not taken
    std::vector<std::string> newlyHeld;  // Leases this call created or took over
    std::function<void(Outcome)> done;
    Steady::time_point deadline;
    bool background = false;  // this node confirming its own holds, not an Allocate
};

std::chrono::milliseconds SlotLeases::trustFor(int durationSeconds) {
    return std::chrono::milliseconds(std::max(durationSeconds, 1) * 2000 / 3);
}

SlotLeases::SlotLeases(boost::asio::io_context& loop, ApiClient& client, ApiClient& allocating,
                       ApiClient& heartbeat, SlotArbiter& arbiter, Inventory& inventory, Options options)
    : loop_(loop),
      client_(client),
      allocateClient_(allocating),
      heartbeatClient_(heartbeat),
      arbiter_(arbiter),
      inventory_(inventory),
      options_(std::move(options)),
      collection_(collectionPath("coordination.k8s.io/v1", options_.namespaceName, "leases")),
      nodeLease_(nodeLeaseName(options_.node)),
      table_(options_.node, trustFor(options_.durationSeconds)),
      tickTimer_(loop),
      lapseTimer_(loop),
      trustTimer_(loop) {
    // Until the Leases are listed nobody knows who holds a shared slot.
    arbiter_.setClusterUnavailable("the Kubernetes API has not been listed yet");
}

SlotLeases::~SlotLeases() {
    stop();
}

void SlotLeases::start() {
    loopThread_.check();
    Informer::Handlers handlers;
    handlers.added = [this](const json::object& o) { leaseSeen(o); };
    handlers.modified = [this](const json::object& o) { leaseSeen(o); };
    handlers.deleted = [this](const json::object& o) { leaseGone(o, false); };
    handlers.vanished = [this](const json::object& o) { leaseGone(o, true); };
    handlers.synced = [this] {
        const bool first = !state_.synced;
        state_.synced = true;
        // A fresh list shows everything written before it.
        echoes_.clear();
        refresh();
        // Leases found again after a restart: confirmed again where a container here holds
        // the slot, deleted where none does, taken where one does and none exists.
        if (first) confirmHolds();
        changed();
    };
    handlers.stateChanged = [this] {
        refresh();
        changed();
    };
    Informer::Options options;
    options.labelSelector = std::string(kManagedByLabel) + "=" + kManagedByValue;
    informer_ = std::make_unique<Informer>(client_, collection_, std::move(handlers), options);
    informer_->start();
    if (!validLeaseName(nodeLease_))
        log.error() << "node name " << options_.node << " cannot name a Lease (" << nodeLease_
                    << "): no shared slot is given on this node";
    renewNodeLease();
    tick();
}

void SlotLeases::stop() {
    loopThread_.check();
    *alive_ = false;
    if (informer_) informer_->stop();
    tickTimer_.cancel();
    lapseTimer_.cancel();
    trustTimer_.cancel();
}

std::string SlotLeases::path(const std::string& slotId) const {
    return collection_ + "/" + slotId;
}

bool SlotLeases::apiCurrent() const {
    return informer_ && state_.synced && informer_->state().connected && table_.confirmed(Steady::now());
}

std::string SlotLeases::unavailableReason() const {
    if (!state_.synced) return "the Kubernetes API has not been listed yet";
    std::string why;
    if (!table_.confirmed(Steady::now())) {
        // Said the same way until the next confirmation: it is logged once, not per second.
        why = "the Kubernetes API has not confirmed this node's Lease " + options_.namespaceName + "/" +
              nodeLease_ + " in time";
        if (state_.lastConfirmedMs)
            why += " (last confirmed " + formatUnixTime(state_.lastConfirmedMs / 1000) + ")";
        if (!renewProblem_.empty()) why += " (" + renewProblem_ + ")";
        return why;
    }
    why = "the Kubernetes API cannot say who holds it";
    if (informer_ && !informer_->state().lastError.empty()) why += " (" + informer_->state().lastError + ")";
    return why;
}

Lease SlotLeases::ownLease(const std::string& slotId, const Lease* previous) const {
    Lease lease;
    const std::string now = microTime(std::chrono::system_clock::now());
    lease.name = slotId;
    lease.instance = instanceOf(slotId);
    lease.holder = options_.node;
    lease.durationSeconds = options_.durationSeconds;
    lease.renewTime = now;
    lease.acquireTime = now;
    if (previous) {
        lease.resourceVersion = previous->resourceVersion;
        lease.transitions = previous->transitions;
        if (previous->holder == options_.node && !previous->acquireTime.empty())
            lease.acquireTime = previous->acquireTime;
        else
            ++lease.transitions;
    }
    return lease;
}

std::string SlotLeases::problem() const {
    loopThread_.check();
    return apiCurrent() ? std::string() : unavailableReason();
}

CallOptions SlotLeases::callFor(const std::shared_ptr<Take>& take) const {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(take->deadline - Steady::now());
    return CallOptions{0, std::max(left, std::chrono::milliseconds(1))};
}

void SlotLeases::take(const std::vector<std::string>& slotIds, std::function<void(Outcome)> done) {
    loopThread_.check();
    auto take = std::make_shared<Take>();
    take->pending = slotIds.size();
    take->done = std::move(done);
    take->deadline = Steady::now() + options_.takeDeadline;
    if (slotIds.empty()) {
        boost::asio::post(loop_, [take, alive = std::weak_ptr<bool>(alive_)] {
            if (auto a = alive.lock(); a && *a) take->done(Outcome::ok());
        });
        return;
    }
    for (const std::string& id : slotIds) takeOne(id, take);
}

void SlotLeases::finishTake(const std::shared_ptr<Take>& take, const std::string& refusal) {
    if (!refusal.empty() && take->refusal.empty()) take->refusal = refusal;
    if (--take->pending > 0) return;
    if (!take->refusal.empty()) {
        if (!take->background) ++state_.refused;
        // None of this call's Leases outlives its refusal.
        for (const std::string& id : take->newlyHeld) {
            if (!arbiter_.slotHeld(id)) release(id);
        }
        take->done(Outcome::failure(take->refusal));
    } else {
        take->done(Outcome::ok());
    }
    refresh();
    changed();
}

void SlotLeases::takeOne(const std::string& slotId, const std::shared_ptr<Take>& take) {
    auto later = [this, take](std::string refusal) {
        boost::asio::post(loop_,
                          [this, take, refusal = std::move(refusal), alive = std::weak_ptr<bool>(alive_)] {
                              if (auto a = alive.lock(); a && *a) finishTake(take, refusal);
                          });
    };
    if (!validLeaseName(slotId)) {
        later("slot " + slotId + " cannot name a Lease (lower-case letters, digits, '-' and '.')");
        return;
    }
    // A Lease being deleted is taken again once it is gone: never two holders meanwhile.
    // The wait ends at the call's deadline: the kubelet waits for Allocate.
    if (deleting_.count(slotId)) {
        auto settled = std::make_shared<bool>(false);
        auto timer = std::make_shared<boost::asio::steady_timer>(loop_, take->deadline);
        waitingForDelete_[slotId].push_back([this, slotId, take, settled, timer] {
            if (*settled) return;
            *settled = true;
            timer->cancel();
            takeOne(slotId, take);
        });
        timer->async_wait([this, slotId, take, settled, timer,
                           alive = std::weak_ptr<bool>(alive_)](boost::system::error_code ec) {
            if (auto a = alive.lock(); ec || !a || !*a || *settled) return;
            *settled = true;
            finishTake(take, "slot " + slotId +
                                 " is being released and the Kubernetes API has not answered: " +
                                 unavailableReason());
        });
        return;
    }
    releasing_.erase(slotId);
    const auto now = Steady::now();
    const LeaseTable::Decision decision = table_.decide(slotId, now);
    using Kind = LeaseTable::Decision::Kind;
    if (decision.kind == Kind::Ours) {
        later("");
        return;
    }
    if (!apiCurrent()) {
        later("slot " + slotId +
              " of a shared device is given only while the Kubernetes API can say who holds it (" +
              unavailableReason() + ")");
        return;
    }
    if (decision.kind == Kind::HeldElsewhere) {
        later("slot " + slotId + " is held on node " + decision.lease.holder + " (Lease " +
              options_.namespaceName + "/" + slotId + "); it is free here once that node releases it or " +
              "stops renewing its Lease for " + std::to_string(decision.lease.durationSeconds) + " s");
        return;
    }
    if (decision.kind == Kind::Create) return write(slotId, std::nullopt, take, false);
    if (decision.kind == Kind::Confirm || decision.lease.holder.empty())
        return write(slotId, decision.lease, take, false);
    // A lapsed hold: the holder's node Lease is read once more (a quorum read), since this
    // node's watch may be behind. Renewed since: the holder is alive.
    const std::string holderLease = nodeLeaseName(decision.lease.holder);
    allocateClient_.get(
        path(holderLease),
        [this, slotId, take, decision, alive = std::weak_ptr<bool>(alive_)](ApiResult result) {
            if (auto a = alive.lock(); !a || !*a) return;
            if (!result.ok() && !result.notFound()) {
                finishTake(take, "cannot read the Lease of node " + decision.lease.holder + ": " +
                                     result.describe());
                return;
            }
            if (result.ok() && result.body.is_object()) {
                std::string error;
                if (auto fresh = parseLease(result.body.get_object(), error);
                    fresh && fresh->holder == decision.lease.holder) {
                    if (table_.renewedSince(decision.holderLease, *fresh)) {
                        table_.seen(*fresh, Steady::now());
                        finishTake(take, "slot " + slotId + " is held on node " + decision.lease.holder +
                                             ", which renews its Lease (Lease " + options_.namespaceName +
                                             "/" + slotId + ")");
                        return;
                    }
                }
            }
            write(slotId, decision.lease, take, false);
        },
        callFor(take));
}

void SlotLeases::write(const std::string& slotId, const std::optional<Lease>& previous,
                       const std::shared_ptr<Take>& take, bool again) {
    const std::uint64_t run = table_.run(Steady::now());
    auto answered = [this, slotId, take, run, again, alive = std::weak_ptr<bool>(alive_)](ApiResult result) {
        if (auto a = alive.lock(); !a || !*a) return;
        const auto now = Steady::now();
        if (result.ok() && result.body.is_object()) {
            std::string error;
            if (auto lease = parseLease(result.body.get_object(), error))
                table_.slotConfirmed(*lease, run, now);
            take->newlyHeld.push_back(slotId);
            if (!take->background) ++state_.taken;
            // The write vouches for the hold only if it was answered while the node's
            // Lease still vouched for this node.
            if (!table_.trusted(slotId, now)) {
                finishTake(take, "the Lease of slot " + slotId +
                                     " was written, but this node's own Lease was not "
                                     "confirmed in time: " +
                                     unavailableReason());
                return;
            }
            finishTake(take, "");
            return;
        }
        if (!result.alreadyExists() && !result.conflict()) {
            state_.lastError = result.describe();
            finishTake(take, "cannot take the Lease of slot " + slotId + ": " + result.describe());
            return;
        }
        // Another node wrote first, or holds it now: read who.
        allocateClient_.get(
            path(slotId),
            [this, slotId, take, again, alive](ApiResult current) {
                if (auto a = alive.lock(); !a || !*a) return;
                std::string error;
                std::optional<Lease> lease;
                if (current.ok() && current.body.is_object())
                    lease = parseLease(current.body.get_object(), error);
                if (!lease) {
                    finishTake(take, "slot " + slotId + " was taken on another node at the same moment");
                    return;
                }
                table_.seen(*lease, Steady::now());
                // This node's own Lease, changed by someone else (a label): written once more.
                if (lease->holder == options_.node && !again) return write(slotId, lease, take, true);
                finishTake(take, "slot " + slotId + " is held on node " +
                                     (lease->holder.empty() ? "(none)" : lease->holder) + " (Lease " +
                                     options_.namespaceName + "/" + slotId + ", written at the same moment)");
            },
            callFor(take));
    };
    if (!previous) {
        allocateClient_.create(collection_, leaseObject(ownLease(slotId, nullptr), options_.namespaceName),
                               std::move(answered), callFor(take));
    } else {
        allocateClient_.replace(path(slotId),
                                leaseObject(ownLease(slotId, &*previous), options_.namespaceName),
                                std::move(answered), callFor(take));
    }
}

void SlotLeases::release(const std::string& slotId) {
    loopThread_.check();
    releasing_.insert(slotId);
    deleteLease(slotId);
}

void SlotLeases::deleteLease(const std::string& slotId) {
    const Lease* lease = table_.find(slotId);
    if (!lease || lease->holder != options_.node) {
        releasing_.erase(slotId);
        return;
    }
    if (deleting_.count(slotId)) return;
    deleting_.insert(slotId);
    const CallOptions call{0, trustFor(options_.durationSeconds)};
    client_.remove(
        path(slotId), {lease->resourceVersion, lease->uid},
        [this, slotId, alive = std::weak_ptr<bool>(alive_)](const ApiResult& result) {
            if (auto a = alive.lock(); !a || !*a) return;
            auto settle = [this, slotId] {
                deleting_.erase(slotId);
                auto waiting = waitingForDelete_.find(slotId);
                if (waiting != waitingForDelete_.end()) {
                    auto calls = std::move(waiting->second);
                    waitingForDelete_.erase(waiting);
                    for (auto& call : calls) call();
                }
                refresh();
                changed();
            };
            if (result.ok() || result.notFound()) {
                table_.gone(slotId);
                releasing_.erase(slotId);
                return settle();
            }
            if (result.conflict()) {
                // Changed since this node saw it: taken over by another node, or touched by
                // someone else. Read what it is before anything is given again.
                client_.get(
                    path(slotId),
                    [this, slotId, settle, alive = std::weak_ptr<bool>(alive_)](ApiResult current) {
                        if (auto a = alive.lock(); !a || !*a) return;
                        std::string error;
                        if (current.notFound()) {
                            table_.gone(slotId);
                            releasing_.erase(slotId);
                        } else if (current.ok() && current.body.is_object()) {
                            if (auto lease = parseLease(current.body.get_object(), error)) {
                                table_.seen(*lease, Steady::now());
                                if (lease->holder != options_.node) releasing_.erase(slotId);
                            }
                        }
                        settle();
                    },
                    CallOptions{0, trustFor(options_.durationSeconds)});
                return;
            }
            // Kept in releasing_: deleted again at the next tick. Said once per reason, not
            // at every tick (a Role without delete).
            if (state_.lastError != result.describe())
                log.warning() << "cannot delete the Lease of slot " << slotId
                              << " (tried again with the renewals): " << result.describe();
            state_.lastError = result.describe();
            settle();
        },
        call);
}

void SlotLeases::leaseSeen(const json::object& object) {
    std::string error;
    auto lease = parseLease(object, error);
    if (!lease) {
        log.warning() << "a Lease in namespace " << options_.namespaceName << " is ignored: " << error;
        return;
    }
    if (lease->node && lease->name != nodeLease_) {
        // Another node's heartbeat. Renewed in time it changes nothing that is listed (the
        // lapse timer looks again when it is due, and finds it extended): every node sees
        // every node's renewals, so this is the common event at rest.
        const bool wasLapsed = table_.nodeLeaseLapsed(lease->name, Steady::now());
        table_.seen(*lease, Steady::now());
        if (!wasLapsed) return;
        refresh();
        changed();
        return;
    }
    table_.seen(*lease, Steady::now());
    if (lease->node) {
        if (lease->name == nodeLease_) {
            // This node's renewal, shown by its own watch: the watch is alive up to it.
            auto it = echoes_.find(lease->resourceVersion);
            if (it != echoes_.end()) {
                const auto when = it->second;
                std::erase_if(echoes_, [when](const auto& e) { return e.second <= when; });
            }
        }
        return;
    }
    if (lease->holder != options_.node && !lease->holder.empty() && arbiter_.slotHeld(lease->name) &&
        conflicts_.insert(lease->name).second) {
        log.error() << "slot " << lease->name << " is held by a container on this node and by node "
                    << lease->holder << " (its Lease says so): one of them must end";
    }
    refresh();
    changed();
}

void SlotLeases::leaseGone(const json::object& object, bool vanished) {
    const json::value* metadata = object.if_contains("metadata");
    const json::value* name =
        metadata && metadata->is_object() ? metadata->get_object().if_contains("name") : nullptr;
    if (!name || !name->is_string()) return;
    if (vanished)
        table_.vanished(std::string(name->get_string()), Steady::now());
    else
        table_.gone(std::string(name->get_string()));
    conflicts_.erase(std::string(name->get_string()));
    refresh();
    changed();
}

void SlotLeases::refresh() {
    const auto now = Steady::now();
    const bool current = apiCurrent();
    if (!current) {
        state_.lastError = informer_ ? informer_->state().lastError : std::string();
        if (state_.lastError.empty()) state_.lastError = renewProblem_;
        arbiter_.setClusterUnavailable(unavailableReason());
    } else {
        arbiter_.setClusterUnavailable("");
        std::map<std::string, std::string> reasons;
        for (const auto& [name, holder] : table_.heldElsewhere(now)) reasons[name] = "held on node " + holder;
        state_.elsewhere = reasons.size();
        arbiter_.setHeldElsewhere(std::move(reasons));
    }
    // The holds of this node that the API has not confirmed since: their containers run,
    // and another node may take the slots over once this node's Lease lapses there.
    std::map<std::string, std::string> unconfirmed;
    for (const std::string& id : arbiter_.heldSharedSlots()) {
        if (table_.trusted(id, now)) continue;
        const Lease* lease = table_.find(id);
        if (lease && !lease->holder.empty() && lease->holder != options_.node) {
            unconfirmed[id] = "held here and, by its Lease, on node " + lease->holder;
        } else if (!table_.confirmed(now)) {
            unconfirmed[id] = unavailableReason() + "; another node may take it over " +
                              std::to_string(options_.durationSeconds) + " s after the last confirmation";
        } else {
            unconfirmed[id] = "not confirmed since this node's Lease was last unconfirmed; confirming again";
        }
    }
    state_.unconfirmed = unconfirmed.size();
    inventory_.setUnconfirmedHolds(std::move(unconfirmed));
    state_.confirmed = table_.confirmed(now);
    state_.held = table_.ours().size();
    state_.seen = table_.size();
    lapseTimer_.cancel();
    if (auto next = table_.nextLapse(now)) {
        lapseTimer_.expires_at(*next + std::chrono::milliseconds(1));
        lapseTimer_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](boost::system::error_code ec) {
            if (auto a = alive.lock(); ec || !a || !*a) return;
            refresh();
            changed();
        });
    }
    trustTimer_.cancel();
    if (auto until = table_.confirmedUntil(); until && *until > now) {
        trustTimer_.expires_at(*until + std::chrono::milliseconds(1));
        trustTimer_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](boost::system::error_code ec) {
            if (auto a = alive.lock(); ec || !a || !*a) return;
            log.warning()
                << "this node's Lease " << options_.namespaceName << "/" << nodeLease_
                << " is not confirmed by the Kubernetes API: no shared slot is given or offered, and "
                << arbiter_.heldSharedSlots().size() << " held here are unconfirmed";
            refresh();
            changed();
        });
    }
}

void SlotLeases::tick() {
    tickTimer_.expires_after(std::chrono::milliseconds(options_.durationSeconds * 1000 / 3));
    tickTimer_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](boost::system::error_code ec) {
        if (auto a = alive.lock(); ec || !a || !*a) return;
        renewNodeLease();
        if (state_.synced) confirmHolds();
        checkWatchEcho();
        tick();
    });
}

void SlotLeases::renewNodeLease() {
    if (!validLeaseName(nodeLease_)) return;
    // At most one on its way: a renewal without an answer is not joined by more, so an API
    // that drops requests sees no queue build up, and nothing stale is sent after it.
    if (renewing_) {
        ++state_.renewalsSkipped;
        return;
    }
    renewing_ = true;
    const Lease* known = table_.find(nodeLease_);
    Lease lease;
    lease.name = nodeLease_;
    lease.node = true;
    lease.holder = options_.node;
    lease.durationSeconds = options_.durationSeconds;
    lease.renewTime = microTime(std::chrono::system_clock::now());
    lease.acquireTime = known && known->holder == options_.node && !known->acquireTime.empty()
                            ? known->acquireTime
                            : lease.renewTime;
    if (known) {
        lease.resourceVersion = known->resourceVersion;
        lease.transitions = known->transitions;
    }
    const auto sent = Steady::now();
    // Its deadline is the trust window: an answer after it vouches for nothing.
    const CallOptions call{0, trustFor(options_.durationSeconds)};
    auto answered = [this, sent, call, alive = std::weak_ptr<bool>(alive_)](ApiResult result) {
        if (auto a = alive.lock(); !a || !*a) return;
        renewing_ = false;
        const auto now = Steady::now();
        std::string error;
        std::optional<Lease> written;
        if (result.ok() && result.body.is_object()) written = parseLease(result.body.get_object(), error);
        if (written) {
            const bool was = table_.confirmed(now);
            // The watch may have shown it before this answer arrived.
            const Lease* shown = table_.find(nodeLease_);
            const bool echoed = shown && shown->resourceVersion == written->resourceVersion;
            // Not the Lease this node wrote before: deleted, or the API server lost its state
            // (an etcd restore, resourceVersions gone back). What it held may be gone too.
            const bool anew = !nodeLeaseUid_.empty() && nodeLeaseUid_ != written->uid;
            nodeLeaseUid_ = written->uid;
            table_.nodeLeaseConfirmed(*written, sent, now, anew);
            if (anew) {
                log.warning()
                    << "this node's Lease " << options_.namespaceName << "/" << nodeLease_
                    << " was gone from the Kubernetes API (deleted, or the API server lost its state): "
                    << "listing the Leases again and writing the held slots' Leases again";
                ++state_.watchRelists;
                if (informer_ && state_.synced) informer_->relist();
            }
            ++state_.nodeRenewals;
            state_.lastConfirmedMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::system_clock::now().time_since_epoch())
                                         .count();
            if (!echoed && echoes_.size() < 8) echoes_.emplace(written->resourceVersion, now);
            if (!renewProblem_.empty() || (!was && table_.confirmed(now) && state_.nodeRenewals > 1))
                log.info() << "this node's Lease " << options_.namespaceName << "/" << nodeLease_
                           << " is confirmed again; holds are confirmed again before they are given";
            renewProblem_.clear();
            // Holds from before a broken run are written again now, not at the next tick.
            if (!was && state_.synced) confirmHolds();
            refresh();
            changed();
            return;
        }
        const std::string problem = result.describe();
        if (problem != renewProblem_)
            log.warning() << "cannot renew this node's Lease " << nodeLease_ << ": " << problem;
        renewProblem_ = problem;
        if (result.conflict() || result.alreadyExists() || result.notFound()) {
            // Written by someone else, or gone: read it and renew at once from what it is.
            renewing_ = true;
            heartbeatClient_.get(
                path(nodeLease_),
                [this, alive = std::weak_ptr<bool>(alive_)](ApiResult current) {
                    if (auto a = alive.lock(); !a || !*a) return;
                    renewing_ = false;
                    std::string error;
                    if (current.notFound()) {
                        table_.gone(nodeLease_);
                    } else if (current.ok() && current.body.is_object()) {
                        if (auto lease = parseLease(current.body.get_object(), error))
                            table_.seen(*lease, Steady::now());
                    }
                    renewNodeLease();
                },
                call);
            return;
        }
        refresh();
        changed();
    };
    if (known) {
        heartbeatClient_.replace(path(nodeLease_), leaseObject(lease, options_.namespaceName),
                                 std::move(answered), call);
    } else {
        heartbeatClient_.create(collection_, leaseObject(lease, options_.namespaceName), std::move(answered),
                                call);
    }
}

void SlotLeases::confirmHolds() {
    const auto now = Steady::now();
    for (const Lease& lease : table_.ours()) {
        if (deleting_.count(lease.name) || confirming_.count(lease.name)) continue;
        if (releasing_.count(lease.name) || !arbiter_.slotHeld(lease.name)) {
            // Freed here, or found after a restart with no container here holding it.
            deleteLease(lease.name);
            continue;
        }
        if (table_.trusted(lease.name, now) || !apiCurrent()) continue;
        // Held here, from before the current run of confirmations: written again, so that
        // a 409 says at once if another node took it over meanwhile.
        confirming_.insert(lease.name);
        auto take = std::make_shared<Take>();
        take->pending = 1;
        take->background = true;
        take->deadline = now + trustFor(options_.durationSeconds);
        take->done = [this, id = lease.name](const Outcome& outcome) {
            confirming_.erase(id);
            if (!outcome && conflicts_.insert(id).second)
                log.error() << "slot " << id
                            << " is held by a container on this node, and its hold cannot be "
                            << "confirmed: " << outcome.error();
        };
        write(lease.name, lease, take, false);
    }
    // A slot a container here holds with no Lease of this node's (a restart after a
    // crash before the Lease was written, or a Lease lost): taken again.
    if (!apiCurrent()) return;
    for (const std::string& id : arbiter_.heldSharedSlots()) {
        const Lease* lease = table_.find(id);
        if ((lease && lease->holder == options_.node) || deleting_.count(id) || confirming_.count(id))
            continue;
        confirming_.insert(id);
        auto take = std::make_shared<Take>();
        take->pending = 1;
        take->background = true;
        take->deadline = now + trustFor(options_.durationSeconds);
        take->done = [this, id](const Outcome& outcome) {
            confirming_.erase(id);
            if (!outcome && conflicts_.insert(id).second)
                log.error() << "slot " << id << " is held here without its Lease: " << outcome.error();
        };
        takeOne(id, take);
    }
}

void SlotLeases::checkWatchEcho() {
    if (echoes_.empty() || !informer_ || !state_.synced) return;
    // The watch must show this node's own renewal soon after the API answered it; one that
    // does not is open but blind (a half-open connection, a server that stopped sending).
    const auto limit = std::max(trustFor(options_.durationSeconds), std::chrono::milliseconds(5000));
    auto oldest = std::min_element(echoes_.begin(), echoes_.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
    if (Steady::now() - oldest->second < limit) return;
    log.warning() << "the Lease watch has not shown this node's renewal of " << nodeLease_ << " for "
                  << std::chrono::duration_cast<std::chrono::seconds>(Steady::now() - oldest->second).count()
                  << " s: listing the Leases again";
    echoes_.clear();
    ++state_.watchRelists;
    informer_->relist();
}

void SlotLeases::changed() {
    if (stateChanged_) stateChanged_();
}

}  // namespace devlet::kube
