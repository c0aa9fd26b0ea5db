#pragma once
// The main() of a test that needs the udev testbed: it skips (exit 77, with the reason)
// unless umockdev-wrapper runs it, or when umockdev was missing at build time.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#if DEVLET_HAVE_UMOCKDEV
#include <glib.h>
#include <umockdev.h>
#endif

namespace devlet::test {

#if DEVLET_HAVE_UMOCKDEV
// The testbed's sysfs root (umockdev hands over a string the caller must free).
inline std::string testbedSysDir(UMockdevTestbed* testbed) {
    gchar* dir = umockdev_testbed_get_sys_dir(testbed);
    std::string result = dir;
    g_free(dir);
    return result;
}
#endif

inline int runUnderUmockdev(int argc, char** argv) {
#if DEVLET_HAVE_UMOCKDEV
    // umockdev_in_mock_environment() reads false until a testbed has devices; the preload
    // library in LD_PRELOAD is what umockdev-wrapper sets up, and children inherit it.
    const char* preload = std::getenv("LD_PRELOAD");
    if (!preload || !std::strstr(preload, "libumockdev-preload")) {
        std::fprintf(stderr, "skipped: not running under umockdev-wrapper, which the udev testbed needs\n");
        return 77;
    }
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
#else
    (void)argc;
    (void)argv;
    std::fprintf(stderr, "skipped: umockdev (libumockdev-dev) was not found when this was built\n");
    return 77;
#endif
}

}  // namespace devlet::test
