/* The pod sandbox's process, as Kubernetes' own pause: sleeps until a signal ends it and
 * reaps the children it inherits as the pod's PID 1. Built static by build-upstream. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int signal) {
    (void)signal;
    _exit(0);
}

static void reap(int signal) {
    (void)signal;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction action = {0};
    action.sa_handler = stop;
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGTERM, &action, NULL);
    action.sa_handler = reap;
    action.sa_flags = SA_NOCLDSTOP;
    sigaction(SIGCHLD, &action, NULL);
    for (;;) pause();
    return 0;
}
