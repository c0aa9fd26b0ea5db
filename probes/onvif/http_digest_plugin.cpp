// gSOAP's HTTP Digest plugin and what it needs, built as C++ like the generated code (the
// runtime is gSOAP's C++ one). Nothing of devlet's own: see http_digest.h for its use.
#include "httpda.c"
#include "smdevp.c"
#include "threads.c"
