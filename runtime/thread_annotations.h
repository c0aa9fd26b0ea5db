#pragma once
// Clang's thread-safety annotations (-Wthread-safety), as libcamera and Abseil spell them:
// a member GUARDED_BY(loopThread_) may be touched only where the analysis knows the loop
// thread holds it (after loopThread_.check(), or in a function that REQUIRES it), so
// clang rejects code that reaches loop-only state without the check. Other compilers see
// nothing; the run-time check in ThreadBound stays what it was.
//
// Abseil's thread_annotations.h (which gRPC's headers bring into the tests) defines some of
// the same names with the same meaning: each is defined here only where it is not yet.

#if defined(__clang__)
#define DEVLET_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define DEVLET_THREAD_ANNOTATION(x)
#endif

// A type whose objects are a capability ("mutex", "loop thread").
#ifndef CAPABILITY
#define CAPABILITY(x) DEVLET_THREAD_ANNOTATION(capability(x))
#endif
// A member that may be read or written only while the capability is held.
#ifndef GUARDED_BY
#define GUARDED_BY(x) DEVLET_THREAD_ANNOTATION(guarded_by(x))
#endif
// A pointer member whose pointee (not the pointer) needs the capability.
#ifndef PT_GUARDED_BY
#define PT_GUARDED_BY(x) DEVLET_THREAD_ANNOTATION(pt_guarded_by(x))
#endif
// A function that must be called with the capabilities held.
#ifndef REQUIRES
#define REQUIRES(...) DEVLET_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#endif
// A function that must be called without them (it takes them itself).
#ifndef EXCLUDES
#define EXCLUDES(...) DEVLET_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#endif
// A function that takes or releases them.
#ifndef ACQUIRE
#define ACQUIRE(...) DEVLET_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#endif
#ifndef RELEASE
#define RELEASE(...) DEVLET_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#endif
// A function that returns only if the calling thread holds the capability (a run-time
// check that aborts otherwise); afterwards the analysis counts it as held.
#ifndef ASSERT_CAPABILITY
#define ASSERT_CAPABILITY(x) DEVLET_THREAD_ANNOTATION(assert_capability(x))
#endif
// A function that returns a reference to the capability (an accessor).
#ifndef RETURN_CAPABILITY
#define RETURN_CAPABILITY(x) DEVLET_THREAD_ANNOTATION(lock_returned(x))
#endif
// Opts a function out of the analysis; say in a comment why it is safe.
#ifndef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS DEVLET_THREAD_ANNOTATION(no_thread_safety_analysis)
#endif
