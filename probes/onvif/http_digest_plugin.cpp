// gSOAP's HTTP Digest plugin and what it needs, built as C++ like the generated code (the
// runtime is gSOAP's C++ one). Nothing of devlet's own: see http_digest.h for its use.
// gSOAP ships the plugin as .c sources for the program to build in: included on purpose.
#include "httpda.c"   // NOLINT(bugprone-suspicious-include)
#include "smdevp.c"   // NOLINT(bugprone-suspicious-include)
#include "threads.c"  // NOLINT(bugprone-suspicious-include)
