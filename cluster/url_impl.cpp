// Boost.URL's implementation, compiled once for the programs that link cluster/ (the
// kubeconfig's server URL is read with it).
#include <boost/url/src.hpp>
