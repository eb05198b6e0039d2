/*
 * EINTR: blocking accept, epoll_wait, poll and select, each interrupted by SIGALRM from
 * setitimer, return -1 with EINTR when the handler was installed without SA_RESTART;
 * epoll_wait and poll do so even with SA_RESTART.
 *
 * The server is the side under test, alone: nothing ever connects.
 */
#include "common.h"

#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/time.h>
#include <time.h>

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

static void install(int flags)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGALRM, &sa, NULL) == 0, "sigaction");
}

/* SIGALRM once, 100 ms from now. */
static void interrupt_soon(void)
{
    struct itimerval it;
    memset(&it, 0, sizeof it);
    it.it_value.tv_usec = 100000;
    CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0, "setitimer");
}

static void report(const char *label, int r)
{
    int e = errno;
    printf("%s: %d %s, handler ran %d time(s)\n", label, r, r < 0 ? errname(e) : "",
           (int)alarms);
    alarms = 0;
}

/* The watchdog cannot be alarm(), whose SIGALRM is the signal under test: a POSIX
 * timer kills the process instead. */
static void watchdog(void)
{
    timer_t t;
    struct sigevent sev;
    struct itimerspec its;
    memset(&sev, 0, sizeof sev);
    memset(&its, 0, sizeof its);
    sev.sigev_notify = SIGEV_SIGNAL;
    sev.sigev_signo = SIGKILL;
    its.it_value.tv_sec = WATCHDOG_SECONDS;
    CHECK(timer_create(CLOCK_MONOTONIC, &sev, &t) == 0, "timer_create");
    CHECK(timer_settime(t, 0, &its, NULL) == 0, "timer_settime");
}

static void server(const struct args *a)
{
    int lfd = listen_quietly(a->server_ip, a->port);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
    struct epoll_event out[2];
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    fd_set r;
    int n;

    CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) == 0, "epoll");

    printf("-- handler without SA_RESTART\n");
    install(0);
    interrupt_soon();
    n = accept(lfd, NULL, NULL);
    report("accept", n);
    interrupt_soon();
    n = epoll_wait(ep, out, 2, -1);
    report("epoll_wait, no timeout", n);
    interrupt_soon();
    n = epoll_wait(ep, out, 2, 10000);
    report("epoll_wait, 10 s timeout", n);
    interrupt_soon();
    n = poll(&p, 1, -1);
    report("poll", n);
    FD_ZERO(&r);
    FD_SET(lfd, &r);
    interrupt_soon();
    n = select(lfd + 1, &r, NULL, NULL, NULL);
    report("select", n);
    interrupt_soon();
    n = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    report("accept4", n);

    printf("-- handler with SA_RESTART\n");
    install(SA_RESTART);
    interrupt_soon();
    n = epoll_wait(ep, out, 2, -1);
    report("epoll_wait", n);
    interrupt_soon();
    n = poll(&p, 1, -1);
    report("poll", n);

    close(ep);
    close(lfd);
    printf("done\n");
}

int main(int argc, char **argv)
{
    struct args a = parse_args(argc, argv);
    setup_io();
    watchdog();
    if (is_server(&a))
        server(&a);
    else
        die("eintr has no client: it runs alone");
    return 0;
}
