// Boost.JSON's implementation, compiled once for the devlet program and every test
// program that links this library.
#include <boost/json/src.hpp>
