#pragma once
// Akri's brokers and services in cluster mode: for each instance this node offers whose
// configuration has a broker or service spec, the Pod, Job and Services Akri's controller
// would make, named and labelled as it names them, applied with server-side apply (field
// manager `devlet-<node>`) and deleted when the inventory withdraws the instance or the
// configuration drops the spec. Watches what it made, so an object deleted by hand is
// applied again and a broker's phase shows on the status page; as Akri's controller, makes
// a broker Pod again that ended or stayed Pending too long, with a backoff. Loop thread.

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
#include <boost/json/object.hpp>

#include "cluster/api_client.h"
#include "runtime/inventory.h"
#include "runtime/lifetime.h"
#include "runtime/slot_arbiter.h"
#include "runtime/thread_bound.h"

namespace devlet::kube {

// Akri's label keys (akri:shared/src/k8s/mod.rs).
inline constexpr char kAkriConfigurationLabel[] = "akri.sh/configuration";
inline constexpr char kAkriInstanceLabel[] = "akri.sh/instance";
inline constexpr char kAkriTargetNodeLabel[] = "akri.sh/target-node";
inline constexpr char kAkriControllerLabel[] = "controller";
inline constexpr char kAkriControllerValue[] = "akri.sh";

// Akri's names: '.' becomes '-'; a shared instance's broker Pod carries the node's name,
// since every node that sees the instance runs one.
std::string brokerPodName(const std::string& node, const std::string& instance, bool shared);
std::string brokerJobName(const std::string& instance, const std::string& jobSpecJson);
std::string instanceServiceName(const std::string& instance);
std::string configurationServiceName(const std::string& configuration);

class Brokers {
public:
    struct Options {
        std::string namespaceName;
        std::string node;
        std::chrono::milliseconds retryInterval{5000};  // after a failed apply or delete
        // A broker Pod Pending this long is deleted and made again (Akri: 5 minutes).
        std::chrono::milliseconds pendingGrace{std::chrono::minutes(5)};
        // Between two recreations of one broker: none before the first, then this, doubled
        // each time up to the limit, so that a Pod that ends at once does not make a storm of
        // deletes and creates; forgotten after `recreateBackoffReset` without a recreation.
        std::chrono::milliseconds recreateBackoff{std::chrono::seconds(10)};
        std::chrono::milliseconds recreateBackoffLimit{std::chrono::minutes(5)};
        std::chrono::milliseconds recreateBackoffReset{std::chrono::minutes(10)};
    };
    // One broker Pod of this node, as the API last showed it.
    struct Broker {
        std::string pod;
        std::string configuration;
        std::string instance;
        std::string phase;   // Pending, Running, Succeeded, Failed, Unknown; "" before the API says
        std::string reason;  // why it failed or waits (a container's waiting/terminated reason)
        // Failed, or a container that cannot start (CrashLoopBackOff, an image that cannot be pulled)
        bool failed = false;
        std::uint64_t recreations = 0;  // times this node deleted the broker to make it again
        std::string recreatedBecause;   // why the last time ("Failed (Error)", "Pending for 300 s")
        bool operator==(const Broker&) const = default;
    };
    struct State {
        std::size_t applied = 0;             // objects applied and current
        std::uint64_t applies = 0;           // apply calls answered 2xx since start
        std::uint64_t deletes = 0;           // delete calls answered 2xx or 404 since start
        std::uint64_t released = 0;          // shared objects left to the other nodes applying them
        std::uint64_t recreatedPending = 0;  // broker Pods made again after the pending grace
        std::uint64_t recreatedEnded = 0;    // and after they ended (Failed or Succeeded)
        std::string ownerProblem;            // why the Pods have no owner (the Node cannot be read)
        // The last failed apply or delete; after a success, a spec devlet does not apply
        // (fields the Kubernetes schema lacks) or the API still refuses as invalid, or empty.
        std::string lastError;
    };

    Brokers(boost::asio::io_context& loop, ApiClient& client, const Inventory& inventory,
            const SlotArbiter& arbiter, Options options);
    ~Brokers();
    Brokers(const Brokers&) = delete;
    Brokers& operator=(const Brokers&) = delete;

    // From the first object the inventory's configurations ask for on: reads the Node (the
    // Pods' owner), watches the objects and applies what the inventory offers.
    void start();
    void stop();
    // The inventory's instances or configurations changed: reconciled after the work at hand.
    void inventoryChanged();
    // Whether a configuration has asked for a broker or Service since start.
    bool active() const { return watching_; }

    const State& state() const { return state_; }
    std::vector<Broker> brokers() const;
    void onStateChanged(std::function<void()> changed) { stateChanged_ = std::move(changed); }

private:
    struct Wanted {
        std::string collection;
        std::string name;
        boost::json::object body;
    };
    // By "<resource>/<name>": every object this node should have applied now. A spec with
    // fields the Kubernetes schema lacks is not applied (the API server would drop or refuse
    // them): `withheld` says why, by configuration and spec.
    std::map<std::string, Wanted> wanted(const std::vector<ConfigurationView>& views,
                                         std::map<std::string, std::string>& withheld) const;
    bool couldHoldSlot(const InstanceView& i) const;
    void addPod(std::map<std::string, Wanted>& out, const Configuration& c, const InstanceView& i) const;
    void addJob(std::map<std::string, Wanted>& out, const Configuration& c, const InstanceView& i) const;
    void addService(std::map<std::string, Wanted>& out, const std::string& name, const std::string& spec,
                    const std::map<std::string, std::string>& labels, const std::string& selectorKey,
                    const std::string& selectorValue) const;
    // The watches and the Node's read, from the first object wanted on.
    void startWatching();
    void readNode();
    void reconcile();
    void answered();
    void removeObject(const std::string& key, const DeletePreconditions& preconditions);
    void withdrawShared(const std::string& key);
    std::string standingError() const;
    void retryLater();
    void objectGone(const std::string& resource, const boost::json::object& object);
    void changed();

    using Clock = std::chrono::steady_clock;
    // One broker Pod's life as this node has watched it, by Pod name: kept while the broker
    // is wanted, across its Pods.
    struct Life {
        std::string uid;  // the Pod now; empty while there is none
        std::string phase;
        std::string reason;
        bool terminating = false;        // deleted, waiting for its containers to stop
        Clock::time_point pendingSince;  // when this node first saw this Pod Pending (its own clock)
        Clock::time_point notBefore;     // after a delete that failed: not tried again until then
        std::uint64_t recreations = 0;
        std::string recreatedBecause;
        unsigned streak = 0;  // recreations with less than recreateBackoffReset between them
        Clock::time_point lastRecreated;
    };
    void podSeen(const boost::json::object& pod);
    // When the Pod is to be deleted and made again; nullopt while it is not.
    std::optional<Clock::time_point> recreateAt(const std::string& name, const Life& life) const;
    void scheduleRecreations();
    void recreateDue();
    void recreate(const std::string& name, Life& life);
    void recreateAnswered(const std::string& name, const std::string& why, bool pending,
                          const ApiResult& result);

    boost::asio::io_context& loop_;
    ApiClient& client_;
    const Inventory& inventory_;
    const SlotArbiter& arbiter_;  // whether cluster mode knows who holds shared slots
    Options options_;
    std::string nodeUid_;
    bool started_ = false;
    bool watching_ = false;
    bool nodeRead_ = false;
    bool recheck_ = false;  // a reconcile skipped an object whose call was in flight
    bool reconcileScheduled_ = false;
    std::map<std::string, std::string> applied_;  // key -> the body last applied (serialized)
    struct Refused {
        std::string body;
        std::string message;
    };
    std::map<std::string, Refused> refused_;       // key -> a body the API refused as invalid
    std::map<std::string, std::string> withheld_;  // "<configuration> <spec>" -> why it is not applied
    std::map<std::string, std::string> paths_;     // key -> the object's path, for deletes
    std::set<std::string> inFlight_;               // keys with an apply or delete on its way
    std::unique_ptr<Informer> pods_;
    std::unique_ptr<Informer> services_;
    std::unique_ptr<Informer> jobs_;
    boost::asio::steady_timer retryTimer_;
    std::map<std::string, Life> lives_;
    boost::asio::steady_timer recreateTimer_;
    State state_;
    std::function<void()> stateChanged_;
    Lifetime lifetime_;       // ended by stop()
    ThreadBound loopThread_;  // every public member is called on the loop thread
};

}  // namespace devlet::kube
