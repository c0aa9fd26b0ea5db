#pragma once
// Cluster-wide capacity of shared devices: each slot of a shared instance is held by at
// most one container in the cluster, through a coordination.k8s.io/v1 Lease named after
// the slot and held by this node. A slot's Lease is taken inside Allocate (one API round
// trip, answered within `takeDeadline` whatever the API does) and deleted when the slot is
// freed; it is not renewed on its own: it lives while this node's one node Lease is
// renewed, every third of the duration, so the writes at rest do not grow with the slots
// held. Every node watches the Leases and lists the slots others hold Unhealthy, with the
// holder named. Who holds what, and whether this node's own holds are confirmed, is
// LeaseTable's rule; this class does the I/O around it. While the API cannot confirm this
// node's Lease, no shared slot is given or offered, and the held ones are reported
// unconfirmed (status, metrics, the holders' live files). Loop thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "cluster/api_client.h"
#include "cluster/lease_table.h"
#include "runtime/inventory.h"
#include "runtime/shared_slots.h"
#include "runtime/slot_arbiter.h"
#include "runtime/thread_bound.h"

namespace devlet::kube {

class SlotLeases : public SharedSlotGate {
public:
    struct Options {
        std::string namespaceName;
        std::string node;
        int durationSeconds = 15;  // spec.leaseDurationSeconds; the node Lease is renewed every third of it
        // How long Allocate waits for the API, retries included, before it refuses.
        std::chrono::milliseconds takeDeadline{4000};
    };
    // How long a confirmed write of the node Lease vouches for this node's holds: two
    // thirds of the duration, so that one renewal may fail and no other node can have seen
    // the Lease lapse meanwhile.
    static std::chrono::milliseconds trustFor(int durationSeconds);
    struct State {
        bool synced = false;        // the Leases have been listed and the watch is current
        std::size_t held = 0;       // Leases this node holds
        std::size_t seen = 0;       // devlet Leases in the namespace
        std::size_t elsewhere = 0;  // slots other nodes hold now
        std::uint64_t taken = 0;    // Leases taken by Allocate since start
        std::uint64_t refused = 0;  // Allocate calls refused for a slot held elsewhere or an unreachable API
        std::string lastError;
        // This node's Lease: confirmed by the API within the trust window now; when the
        // last confirmation arrived (system clock, ms; 0: never).
        bool confirmed = false;
        std::int64_t lastConfirmedMs = 0;
        std::size_t unconfirmed = 0;        // slots held here whose hold the API has not confirmed since
        std::uint64_t nodeRenewals = 0;     // writes of the node Lease answered
        std::uint64_t renewalsSkipped = 0;  // renewals not sent because the one before had no answer yet
        std::uint64_t watchRelists = 0;     // the watch did not show this node's own renewal in time
    };

    // `allocating` answers Allocate's calls alone, so that a take never queues behind
    // renewals; `heartbeat` renews the node Lease alone, so that its confirmations never
    // queue behind deletes; `client` deletes, confirms holds again and watches.
    SlotLeases(boost::asio::io_context& loop, ApiClient& client, ApiClient& allocating, ApiClient& heartbeat,
               SlotArbiter& arbiter, Inventory& inventory, Options options);
    ~SlotLeases() override;
    SlotLeases(const SlotLeases&) = delete;
    SlotLeases& operator=(const SlotLeases&) = delete;

    // Watches the Leases and starts renewing; call after the inventory restored its slots.
    void start();
    void stop();

    void take(const std::vector<std::string>& slotIds, std::function<void(Outcome)> done) override;
    void release(const std::string& slotId) override;

    const State& state() const { return state_; }
    // Why no shared slot is given or offered now (the API not listed, this node's Lease not
    // confirmed, the watch failing); empty while the API answers.
    std::string problem() const;
    // The Lease watch's own state; nullptr before start().
    const Informer::State* watch() const { return informer_ ? &informer_->state() : nullptr; }
    // Called when state() changes (the daemon's status line and page).
    void onStateChanged(std::function<void()> changed) { stateChanged_ = std::move(changed); }

private:
    struct Take;
    void takeOne(const std::string& slotId, const std::shared_ptr<Take>& take);
    // Writes the slot's Lease for this node (create, or replace at `previous`'s version) and
    // finishes the take with the outcome; `again`: a 409 showed this node's own Lease.
    void write(const std::string& slotId, const std::optional<Lease>& previous,
               const std::shared_ptr<Take>& take, bool again);
    void finishTake(const std::shared_ptr<Take>& take, const std::string& refusal);
    void leaseSeen(const boost::json::object& object);
    // `vanished`: missing from a fresh list rather than seen deleted.
    void leaseGone(const boost::json::object& object, bool vanished);
    // Tells the inventory which free slots it may not offer and which holds are
    // unconfirmed, and arms the timers for the next lapse and the end of the trust window.
    void refresh();
    void tick();  // every third of the duration
    void renewNodeLease();
    void confirmHolds();
    void checkWatchEcho();
    void deleteLease(const std::string& slotId);
    Lease ownLease(const std::string& slotId, const Lease* previous) const;
    std::string path(const std::string& slotId) const;
    bool apiCurrent() const;
    std::string unavailableReason() const;
    CallOptions callFor(const std::shared_ptr<Take>& take) const;
    void changed();

    boost::asio::io_context& loop_;
    ApiClient& client_;
    ApiClient& allocateClient_;
    ApiClient& heartbeatClient_;
    SlotArbiter& arbiter_;  // decides who holds: told what the cluster says
    Inventory& inventory_;  // shows which holds the cluster has not confirmed
    Options options_;
    std::string collection_;
    std::string nodeLease_;  // this node's Lease's name
    LeaseTable table_;
    std::unique_ptr<Informer> informer_;
    boost::asio::steady_timer tickTimer_;
    boost::asio::steady_timer lapseTimer_;
    boost::asio::steady_timer trustTimer_;
    bool renewing_ = false;             // a write of the node Lease is on its way
    std::string nodeLeaseUid_;          // the node Lease's uid, as this node last wrote it
    std::set<std::string> releasing_;   // freed here; their Leases are deleted when the API answers
    std::set<std::string> deleting_;    // a DELETE is on its way
    std::set<std::string> confirming_;  // a write confirming a hold again is on its way
    // Takes of a slot whose Lease is being deleted: run once it is gone (or refused at
    // their deadline).
    std::map<std::string, std::vector<std::function<void()>>> waitingForDelete_;
    std::set<std::string> conflicts_;  // held here and by another node: said once
    // This node's renewals not yet shown by its own watch: resourceVersion -> when answered.
    std::map<std::string, std::chrono::steady_clock::time_point> echoes_;
    std::string renewProblem_;  // the last renewal failure said in the log
    State state_;
    std::function<void()> stateChanged_;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // false once stopped
    ThreadBound loopThread_;  // every public member is called on the loop thread
};

}  // namespace devlet::kube
