/*
 * One epoll set holding a listening socket, a connected socket, a pipe, an eventfd and
 * a timerfd: each reports its own readiness, alone and all together.
 *
 * The server is the side under test. The client connects, then waits for a command
 * byte before sending anything:
 *   'p'  the client answers "pong"
 *   'q'  the client closes
 */
#include "common.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>

enum { LISTENER = 1, CONN = 2, PIPE = 4, EVENTFD = 8, TIMERFD = 16 };

static int ep;

static void add(int fd, int tag)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)tag};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "epoll_ctl ADD");
}

static void print_tags(int tags)
{
    printf("%s%s%s%s%s%s", tags & LISTENER ? " listener" : "", tags & CONN ? " conn" : "",
           tags & PIPE ? " pipe" : "", tags & EVENTFD ? " eventfd" : "",
           tags & TIMERFD ? " timerfd" : "", tags ? "" : " none");
}

/* One epoll_wait; print how many were ready and which. */
static int wait_print(const char *label, int ms)
{
    struct epoll_event ev[8];
    int n = epoll_wait(ep, ev, 8, ms);
    int tags = 0;
    CHECK(n >= 0, "epoll_wait");
    for (int i = 0; i < n; i++) {
        CHECK(ev[i].events == EPOLLIN, "events other than EPOLLIN: %#x", ev[i].events);
        tags |= (int)ev[i].data.u32;
    }
    printf("%s: %d ready:", label, n);
    print_tags(tags);
    printf("\n");
    return tags;
}

/* Wait until every one of `want` has been reported (across several epoll_waits, as
 * they become ready at different times); print the set. */
static void wait_all(const char *label, int want)
{
    int seen = 0;
    /* Level-triggered members already seen keep returning at once: pause between
     * rounds so that the bound is time (5 s), not a count the others could lose. */
    for (int rounds = 0; (seen & want) != want && rounds < 5000; rounds++) {
        struct epoll_event ev[8];
        int n = epoll_wait(ep, ev, 8, 5000);
        CHECK(n > 0, "epoll_wait in wait_all");
        for (int i = 0; i < n; i++)
            seen |= (int)ev[i].data.u32;
        if ((seen & want) != want)
            usleep(1000);
    }
    printf("%s:", label);
    print_tags(seen);
    printf("\n");
}

static void arm_timer(int tfd, long ms)
{
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    its.it_value.tv_sec = ms / 1000;
    its.it_value.tv_nsec = (ms % 1000) * 1000000L;
    CHECK(timerfd_settime(tfd, 0, &its, NULL) == 0, "timerfd_settime");
}

static void server(const struct args *a)
{
    int p[2];
    int lfd = listen_quietly(a->server_ip, a->port);
    int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    uint64_t v;
    int cfd;

    CHECK(pipe2(p, O_NONBLOCK | O_CLOEXEC) == 0, "pipe2");
    CHECK(efd >= 0 && tfd >= 0, "eventfd/timerfd");
    ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0, "epoll_create1");
    add(lfd, LISTENER);
    add(p[0], PIPE);
    add(efd, EVENTFD);
    add(tfd, TIMERFD);
    wait_print("idle", 0);
    wait_print("idle for 50 ms", 50);
    announce_listening();

    wait_print("client connecting", 10000);
    cfd = accept_one(lfd);
    add(cfd, CONN);
    wait_print("accepted, client silent", 0);

    CHECK(write(p[1], "x", 1) == 1, "pipe write");
    wait_print("pipe written", 0);
    CHECK(read(p[0], &v, 1) == 1, "pipe read");
    wait_print("pipe drained", 0);

    CHECK(eventfd_write(efd, 3) == 0, "eventfd_write");
    wait_print("eventfd signalled", 0);
    CHECK(eventfd_read(efd, &v) == 0, "eventfd_read");
    printf("eventfd value: %llu\n", (unsigned long long)v);
    wait_print("eventfd drained", 0);

    arm_timer(tfd, 20);
    wait_print("timer armed", 5000);
    CHECK(read(tfd, &v, sizeof v) == (ssize_t)sizeof v, "timerfd read");
    printf("timer expirations: %llu\n", (unsigned long long)v);
    wait_print("timer drained", 0);

    write_str(cfd, "p");
    wait_print("client answering", 5000);
    expect_str(cfd, "pong");
    wait_print("answer read", 0);

    /* Everything at once: the connection, the pipe, the eventfd and the timer. */
    CHECK(write(p[1], "y", 1) == 1, "pipe write");
    CHECK(eventfd_write(efd, 1) == 0, "eventfd_write");
    arm_timer(tfd, 10);
    write_str(cfd, "p");
    wait_all("all ready", CONN | PIPE | EVENTFD | TIMERFD);
    wait_print("still ready (level-triggered)", 0);
    expect_str(cfd, "pong");
    CHECK(read(p[0], &v, 1) == 1, "pipe read");
    CHECK(eventfd_read(efd, &v) == 0, "eventfd_read");
    CHECK(read(tfd, &v, sizeof v) == (ssize_t)sizeof v, "timerfd read");
    wait_print("all drained", 0);

    /* Removing one member leaves the others reporting. */
    CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, p[0], NULL) == 0, "epoll_ctl DEL");
    CHECK(write(p[1], "z", 1) == 1, "pipe write");
    CHECK(eventfd_write(efd, 1) == 0, "eventfd_write");
    wait_print("pipe removed, pipe and eventfd written", 0);
    CHECK(eventfd_read(efd, &v) == 0, "eventfd_read");

    write_str(cfd, "q");
    wait_print("client closing", 5000);
    {
        char c;
        printf("read at EOF: %zd\n", read(cfd, &c, 1));
    }
    close(cfd);
    close(lfd);
    close(p[0]);
    close(p[1]);
    close(efd);
    close(tfd);
    close(ep);
    printf("done\n");
}

static void client(const struct args *a)
{
    int fd = connect_to(a->server_ip, a->port);
    answer_commands(fd, 'p', "pong");
    close(fd);
    printf("done\n");
}

RUN_ROLES(server, client)
