#pragma once
// "Lives on the loop thread" as a check: a member that remembers the first thread to
// use its owner and, in builds with assertions (not NDEBUG), aborts with the caller's
// name when another thread uses it. Bound at first use, not construction, because the
// loop's objects are often built before the loop thread runs them. Without assertions
// it is empty and its check compiles to nothing.
//
// For clang's -Wthread-safety it is a capability, "loop thread": members that only the loop
// touches are GUARDED_BY(loopThread_), and check() asserts the capability, so a member
// function that reaches them without checking first does not compile (thread_annotations.h).

#include "runtime/thread_annotations.h"

#ifndef NDEBUG
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#endif

namespace devlet {

class CAPABILITY("loop thread") ThreadBound {
public:
    // For the wiring done before any loop runs the object (a constructor, the composition
    // root connecting its parts): the object is not shared yet, so nothing is checked and
    // no thread is bound; the loop thread binds at its first check().
    void beforeLoop() const ASSERT_CAPABILITY(this) {}

#ifdef NDEBUG
    void check(const char* = nullptr, const char* = nullptr, unsigned = 0) const ASSERT_CAPABILITY(this) {}
    void release() {}
#else
    // The caller's place comes from the compiler's builtins (std::source_location needs a
    // newer clang than Debian's for its default argument).
    void check(const char* function = __builtin_FUNCTION(), const char* file = __builtin_FILE(),
               unsigned line = __builtin_LINE()) const ASSERT_CAPABILITY(this) {
        const std::thread::id self = std::this_thread::get_id();
        // The usual case, a plain load: readers on hot paths (the slot ledger's, per slot
        // of a device list) check too, and a read-modify-write each time would cost more.
        if (owner_.load(std::memory_order_relaxed) == self) return;
        std::thread::id bound;  // no thread yet
        if (owner_.compare_exchange_strong(bound, self) || bound == self) return;
        std::fprintf(stderr, "%s:%u: %s: called off its thread\n", file, line, function);
        std::abort();
    }

    // For destructors: an object may be destroyed on another thread once no loop runs it
    // any more (a test that joined its loop thread). The checks that follow bind anew.
    void release() {
        owner_.store(std::thread::id());
    }

private:
    mutable std::atomic<std::thread::id> owner_{};
#endif
};

}  // namespace devlet
