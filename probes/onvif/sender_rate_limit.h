#pragma once
// How many WS-Discovery datagrams of each sender the probe parses: a token bucket per
// sender address, in bounded memory. Anyone on the segment can send to the discovery
// sockets; parsing a 64 KiB datagram is the costly part, so a flooding host gets its share
// and no more. A plain value owned by one probe; the probe's loop thread.

#include <chrono>
#include <cstddef>
#include <map>
#include <string>

namespace devlet::onvif {

class SenderRateLimit {
public:
    using Clock = std::chrono::steady_clock;

    // A camera sends a few datagrams per Probe (one answer per Probe copy), a Hello when it
    // starts and a Bye when it stops: 128 at once and 32 a second more is far above that,
    // even for a camera restarting in a loop. A sender over its share is asked again with a
    // unicast Probe once it has refilled (the probe's probeAgain). 4,096 tracked senders
    // cover a /20 answering one Probe together.
    explicit SenderRateLimit(double burst = 128, double perSecond = 32, std::size_t senders = 4096)
        : burst_(burst), perSecond_(perSecond), maxSenders_(senders) {}

    // False when the sender has used its share. When `senders` are tracked already, those
    // whose bucket is full again are forgotten; if none is, a new sender waits (false).
    bool admit(const std::string& sender, Clock::time_point now) {
        auto it = buckets_.find(sender);
        if (it == buckets_.end()) {
            if (buckets_.size() >= maxSenders_) {
                for (auto idle = buckets_.begin(); idle != buckets_.end();)
                    idle = refill(idle->second, now) >= burst_ ? buckets_.erase(idle) : std::next(idle);
                if (buckets_.size() >= maxSenders_) return false;
            }
            it = buckets_.emplace(sender, Bucket{burst_, now}).first;
        }
        if (refill(it->second, now) < 1) return false;
        it->second.tokens -= 1;
        return true;
    }

    std::size_t trackedSenders() const { return buckets_.size(); }
    double burst() const { return burst_; }
    double perSecond() const { return perSecond_; }

private:
    struct Bucket {
        double tokens;
        Clock::time_point updated;
    };
    double refill(Bucket& bucket, Clock::time_point now) const {
        const std::chrono::duration<double> elapsed = now - bucket.updated;
        if (elapsed.count() > 0) {
            bucket.tokens = std::min(burst_, bucket.tokens + elapsed.count() * perSecond_);
            bucket.updated = now;
        }
        return bucket.tokens;
    }

    double burst_;
    double perSecond_;
    std::size_t maxSenders_;
    std::map<std::string, Bucket> buckets_;
};

}  // namespace devlet::onvif
