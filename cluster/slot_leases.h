#pragma once
// Cluster-wide capacity of shared devices: each slot of a shared instance is held by at
// most one container in the cluster, through a coordination.k8s.io/v1 Lease named after
// the slot and held by this node. A Lease is taken inside Allocate (one API round trip),
// renewed while a container here holds the slot, and deleted when it is freed. Every node
// watches the Leases and lists the slots others hold Unhealthy, with the holder named;
// while the API cannot be reached a node offers no shared slot it does not hold. Whether
// another node's Lease has lapsed is judged by when this node saw it renewed
// (LeaseTable). Loop thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "cluster/api_client.h"
#include "cluster/lease_table.h"
#include "runtime/inventory.h"
#include "runtime/shared_slots.h"

namespace devlet::kube {

class SlotLeases : public SharedSlotGate {
public:
    struct Options {
        std::string namespaceName;
        std::string node;
        int durationSeconds = 15;  // spec.leaseDurationSeconds; renewed every third of it
        // How long Allocate waits for the API, retries included, before it refuses.
        std::chrono::milliseconds takeDeadline{10000};
    };
    struct State {
        bool synced = false;        // the Leases have been listed and the watch is current
        std::size_t held = 0;       // Leases this node holds
        std::size_t seen = 0;       // devlet Leases in the namespace
        std::size_t elsewhere = 0;  // slots other nodes hold now
        std::uint64_t taken = 0;    // Leases taken by Allocate since start
        std::uint64_t refused = 0;  // Allocate calls refused for a slot held elsewhere or an unreachable API
        std::string lastError;
    };

    // `allocating` answers Allocate's calls alone, so that a take never queues behind
    // renewals; `client` renews, deletes and watches.
    SlotLeases(boost::asio::io_context& loop, ApiClient& client, ApiClient& allocating, Inventory& inventory,
               Options options);
    ~SlotLeases() override;
    SlotLeases(const SlotLeases&) = delete;
    SlotLeases& operator=(const SlotLeases&) = delete;

    // Watches the Leases and starts renewing; call after the inventory restored its slots.
    void start();
    void stop();

    void take(const std::vector<std::string>& slotIds, std::function<void(Outcome)> done) override;
    void release(const std::string& slotId) override;

    const State& state() const { return state_; }
    // The Lease watch's own state; nullptr before start().
    const Informer::State* watch() const { return informer_ ? &informer_->state() : nullptr; }
    // Called when state() changes (the daemon's status line and page).
    void onStateChanged(std::function<void()> changed) { stateChanged_ = std::move(changed); }

private:
    struct Take;
    void takeOne(const std::string& slotId, const std::shared_ptr<Take>& take);
    void answered(const std::string& slotId, const ApiResult& result, const std::shared_ptr<Take>& take);
    void leaseSeen(const boost::json::object& object);
    void leaseGone(const boost::json::object& object);
    // Tells the inventory which free slots it may not offer, and arms the timer for the
    // next Lease held elsewhere to lapse.
    void refreshElsewhere();
    void renewAll();
    void scheduleRenewal();
    void deleteLease(const std::string& slotId);
    Lease ownLease(const std::string& slotId, const Lease* previous) const;
    std::string path(const std::string& slotId) const;
    bool apiCurrent() const;
    void changed();

    boost::asio::io_context& loop_;
    ApiClient& client_;
    ApiClient& allocateClient_;
    Inventory& inventory_;
    Options options_;
    std::string collection_;
    LeaseTable table_;
    std::unique_ptr<Informer> informer_;
    boost::asio::steady_timer renewTimer_;
    boost::asio::steady_timer lapseTimer_;
    std::set<std::string> releasing_;  // freed here; their Leases are deleted when the API answers
    std::set<std::string> deleting_;   // a DELETE is on its way
    // Takes of a slot whose Lease is being deleted: run once it is gone.
    std::map<std::string, std::vector<std::function<void()>>> waitingForDelete_;
    std::set<std::string> conflicts_;  // held here and by another node: said once
    State state_;
    std::function<void()> stateChanged_;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // false once stopped
};

}  // namespace devlet::kube
