#include "cluster/slot_leases.h"

#include <algorithm>

#include <boost/asio/post.hpp>
#include <boost/json.hpp>

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

// One Allocate's slots: answered once every one of them is taken or one is refused.
struct SlotLeases::Take {
    std::size_t pending = 0;
    std::string refusal;                 // the first reason one was not taken
    std::vector<std::string> newlyHeld;  // Leases this call created or took over
    std::function<void(Outcome)> done;
};

SlotLeases::SlotLeases(boost::asio::io_context& loop, ApiClient& client, ApiClient& allocating,
                       Inventory& inventory, Options options)
    : loop_(loop),
      client_(client),
      allocateClient_(allocating),
      inventory_(inventory),
      options_(std::move(options)),
      collection_(collectionPath("coordination.k8s.io/v1", options_.namespaceName, "leases")),
      table_(options_.node),
      renewTimer_(loop),
      lapseTimer_(loop) {
    // Until the Leases are listed nobody knows who holds a shared slot.
    inventory_.setClusterUnavailable("the Kubernetes API has not been listed yet");
}

SlotLeases::~SlotLeases() {
    stop();
}

void SlotLeases::start() {
    Informer::Handlers handlers;
    handlers.added = [this](const json::object& o) { leaseSeen(o); };
    handlers.modified = [this](const json::object& o) { leaseSeen(o); };
    handlers.deleted = [this](const json::object& o) { leaseGone(o); };
    handlers.synced = [this] {
        const bool first = !state_.synced;
        state_.synced = true;
        refreshElsewhere();
        // Leases found again after a restart: renewed where a container here holds the
        // slot, deleted where none does, created where one does and none exists.
        if (first) renewAll();
        changed();
    };
    handlers.stateChanged = [this] {
        refreshElsewhere();
        changed();
    };
    Informer::Options options;
    options.labelSelector = std::string(kManagedByLabel) + "=" + kManagedByValue;
    informer_ = std::make_unique<Informer>(client_, collection_, std::move(handlers), options);
    informer_->start();
    scheduleRenewal();
}

void SlotLeases::stop() {
    *alive_ = false;
    if (informer_) informer_->stop();
    renewTimer_.cancel();
    lapseTimer_.cancel();
}

std::string SlotLeases::path(const std::string& slotId) const {
    return collection_ + "/" + slotId;
}

bool SlotLeases::apiCurrent() const {
    return informer_ && state_.synced && informer_->state().connected;
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

void SlotLeases::take(const std::vector<std::string>& slotIds, std::function<void(Outcome)> done) {
    auto take = std::make_shared<Take>();
    take->pending = slotIds.size();
    take->done = std::move(done);
    if (slotIds.empty()) {
        boost::asio::post(loop_, [take, alive = std::weak_ptr<bool>(alive_)] {
            if (auto a = alive.lock(); a && *a) take->done(Outcome::ok());
        });
        return;
    }
    for (const std::string& id : slotIds) takeOne(id, take);
}

void SlotLeases::takeOne(const std::string& slotId, const std::shared_ptr<Take>& take) {
    auto finish = [this, take](const std::string& refusal) {
        if (!refusal.empty() && take->refusal.empty()) take->refusal = refusal;
        if (--take->pending > 0) return;
        if (!take->refusal.empty()) {
            ++state_.refused;
            // None of this call's Leases outlives its refusal.
            for (const std::string& id : take->newlyHeld) {
                if (!inventory_.slotHeld(id)) release(id);
            }
            take->done(Outcome::failure(take->refusal));
        } else {
            take->done(Outcome::ok());
        }
        refreshElsewhere();
        changed();
    };
    auto later = [this, finish](std::string refusal) {
        boost::asio::post(loop_, [finish, refusal = std::move(refusal), alive = std::weak_ptr<bool>(alive_)] {
            if (auto a = alive.lock(); a && *a) finish(refusal);
        });
    };
    if (!validLeaseName(slotId)) {
        later("slot " + slotId + " cannot name a Lease (lower-case letters, digits, '-' and '.')");
        return;
    }
    // A Lease being deleted is taken again once it is gone: never two holders meanwhile.
    if (deleting_.count(slotId)) {
        waitingForDelete_[slotId].push_back([this, slotId, take] { takeOne(slotId, take); });
        return;
    }
    releasing_.erase(slotId);
    const LeaseTable::Decision decision = table_.decide(slotId, Steady::now());
    using Kind = LeaseTable::Decision::Kind;
    if (decision.kind == Kind::Ours) {
        later("");
        return;
    }
    if (!apiCurrent()) {
        later("slot " + slotId +
              " of a shared device is given only while the Kubernetes API can say who holds it (" +
              (state_.lastError.empty() ? std::string("not listed yet") : state_.lastError) + ")");
        return;
    }
    if (decision.kind == Kind::HeldElsewhere) {
        later("slot " + slotId + " is held on node " + decision.lease.holder + " (Lease " +
              options_.namespaceName + "/" + slotId + "); it is free here once that node releases it or " +
              "stops renewing it for " + std::to_string(decision.lease.durationSeconds) + " s");
        return;
    }
    auto answered = [this, slotId, take, finish, alive = std::weak_ptr<bool>(alive_)](ApiResult result) {
        if (auto a = alive.lock(); !a || !*a) return;
        if (result.ok() && result.body.is_object()) {
            std::string error;
            if (auto lease = parseLease(result.body.get_object(), error)) table_.seen(*lease, Steady::now());
            take->newlyHeld.push_back(slotId);
            ++state_.taken;
            finish("");
            return;
        }
        if (!result.alreadyExists() && !result.conflict()) {
            state_.lastError = result.describe();
            finish("cannot take the Lease of slot " + slotId + ": " + result.describe());
            return;
        }
        // Another node wrote first: read who.
        allocateClient_.get(
            path(slotId),
            [this, slotId, finish, alive](ApiResult current) {
                if (auto a = alive.lock(); !a || !*a) return;
                std::string error;
                std::optional<Lease> lease;
                if (current.ok() && current.body.is_object())
                    lease = parseLease(current.body.get_object(), error);
                if (!lease) {
                    finish("slot " + slotId + " was taken on another node at the same moment");
                    return;
                }
                table_.seen(*lease, Steady::now());
                if (lease->holder == options_.node) {
                    finish("");
                    return;
                }
                finish("slot " + slotId + " is held on node " + lease->holder + " (Lease " +
                       options_.namespaceName + "/" + slotId + ", taken at the same moment)");
            },
            CallOptions{0, options_.takeDeadline});
    };
    const CallOptions call{0, options_.takeDeadline};
    if (decision.kind == Kind::Create) {
        allocateClient_.create(collection_, leaseObject(ownLease(slotId, nullptr), options_.namespaceName),
                               std::move(answered), call);
    } else {  // TakeOver: released, or lapsed as seen from here
        allocateClient_.replace(path(slotId),
                                leaseObject(ownLease(slotId, &decision.lease), options_.namespaceName),
                                std::move(answered), call);
    }
}

void SlotLeases::release(const std::string& slotId) {
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
    client_.remove(path(slotId), {lease->resourceVersion, lease->uid},
                   [this, slotId, alive = std::weak_ptr<bool>(alive_)](ApiResult result) {
                       if (auto a = alive.lock(); !a || !*a) return;
                       deleting_.erase(slotId);
                       if (result.ok() || result.notFound()) {
                           table_.gone(slotId);
                           releasing_.erase(slotId);
                       } else if (!result.conflict()) {
                           // Kept in releasing_: deleted with the next renewal. Said once
                           // per reason, not at every renewal (a Role without delete).
                           if (state_.lastError != result.describe())
                               log.warning() << "cannot delete the Lease of slot " << slotId
                                             << " (tried again with the renewals): " << result.describe();
                           state_.lastError = result.describe();
                       }
                       auto waiting = waitingForDelete_.find(slotId);
                       if (waiting != waitingForDelete_.end()) {
                           auto calls = std::move(waiting->second);
                           waitingForDelete_.erase(waiting);
                           for (auto& call : calls) call();
                       }
                       refreshElsewhere();
                       changed();
                   });
}

void SlotLeases::leaseSeen(const json::object& object) {
    std::string error;
    auto lease = parseLease(object, error);
    if (!lease) {
        log.warning() << "a Lease in namespace " << options_.namespaceName << " is ignored: " << error;
        return;
    }
    table_.seen(*lease, Steady::now());
    if (lease->holder != options_.node && !lease->holder.empty() && inventory_.slotHeld(lease->name) &&
        conflicts_.insert(lease->name).second) {
        log.error() << "slot " << lease->name << " is held by a container on this node and by node "
                    << lease->holder << " (its Lease says so): one of them must end";
    }
    refreshElsewhere();
    changed();
}

void SlotLeases::leaseGone(const json::object& object) {
    const json::value* metadata = object.if_contains("metadata");
    const json::value* name =
        metadata && metadata->is_object() ? metadata->get_object().if_contains("name") : nullptr;
    if (!name || !name->is_string()) return;
    table_.gone(std::string(name->get_string()));
    conflicts_.erase(std::string(name->get_string()));
    refreshElsewhere();
    changed();
}

void SlotLeases::refreshElsewhere() {
    const auto now = Steady::now();
    if (!apiCurrent()) {
        std::string why = "the Kubernetes API cannot say who holds it";
        if (informer_ && !informer_->state().lastError.empty())
            why += " (" + informer_->state().lastError + ")";
        if (!state_.synced) why = "the Kubernetes API has not been listed yet";
        state_.lastError = informer_ ? informer_->state().lastError : std::string();
        inventory_.setClusterUnavailable(why);
    } else {
        inventory_.setClusterUnavailable("");
        std::map<std::string, std::string> reasons;
        for (const auto& [name, holder] : table_.heldElsewhere(now)) reasons[name] = "held on node " + holder;
        state_.elsewhere = reasons.size();
        inventory_.setHeldElsewhere(std::move(reasons));
    }
    state_.held = table_.ours().size();
    state_.seen = table_.size();
    lapseTimer_.cancel();
    if (auto next = table_.nextLapse(now)) {
        lapseTimer_.expires_at(*next + std::chrono::milliseconds(1));
        lapseTimer_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](boost::system::error_code ec) {
            if (auto a = alive.lock(); ec || !a || !*a) return;
            refreshElsewhere();
            changed();
        });
    }
}

void SlotLeases::scheduleRenewal() {
    renewTimer_.expires_after(std::chrono::milliseconds(options_.durationSeconds * 1000 / 3));
    renewTimer_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](boost::system::error_code ec) {
        if (auto a = alive.lock(); ec || !a || !*a) return;
        if (state_.synced) renewAll();
        scheduleRenewal();
    });
}

void SlotLeases::renewAll() {
    auto alive = std::weak_ptr<bool>(alive_);
    for (const Lease& lease : table_.ours()) {
        if (deleting_.count(lease.name)) continue;
        if (releasing_.count(lease.name) || !inventory_.slotHeld(lease.name)) {
            // Freed here, or found after a restart with no container here holding it.
            deleteLease(lease.name);
            continue;
        }
        client_.replace(path(lease.name), leaseObject(ownLease(lease.name, &lease), options_.namespaceName),
                        [this, name = lease.name, alive](ApiResult result) {
                            if (auto a = alive.lock(); !a || !*a) return;
                            if (result.ok() && result.body.is_object()) {
                                std::string error;
                                if (auto seen = parseLease(result.body.get_object(), error))
                                    table_.seen(*seen, Steady::now());
                                return;
                            }
                            log.warning()
                                << "cannot renew the Lease of slot " << name << ": " << result.describe();
                            state_.lastError = result.describe();
                            changed();
                        });
    }
    // A slot a container here holds with no Lease of this node's (a restart after a
    // crash before the Lease was written, or a Lease lost): taken again.
    if (!apiCurrent()) return;
    for (const std::string& id : inventory_.heldSharedSlots()) {
        const Lease* lease = table_.find(id);
        if ((lease && lease->holder == options_.node) || deleting_.count(id)) continue;
        auto take = std::make_shared<Take>();
        take->pending = 1;
        take->done = [this, id](Outcome outcome) {
            if (!outcome && conflicts_.insert(id).second)
                log.error() << "slot " << id << " is held here without its Lease: " << outcome.error();
        };
        takeOne(id, take);
    }
}

void SlotLeases::changed() {
    if (stateChanged_) stateChanged_();
}

}  // namespace devlet::kube
