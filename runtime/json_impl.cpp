// Boost.JSON's implementation, compiled once for the devlet program and every program that
// links the runtime (the kubelet checkpoint reader and the status server use it).
#include <boost/json/src.hpp>
