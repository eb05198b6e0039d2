/*
 * An epoll set inside another epoll set and inside a poll set: the inner set holds a
 * connected socket and a pipe, and the outer waits see the inner set readable when
 * either is.
 *
 * The server is the side under test. The client connects, then waits for a command
 * byte before sending anything:
 *   'p'  the client answers "pong"
 *   'q'  the client closes
 */
#include "common.h"

#include <sys/epoll.h>

/* How many events one epoll_wait on `ep` reports within `ms`. */
static int ready_in(int ep, int ms)
{
    struct epoll_event ev[4];
    int n = epoll_wait(ep, ev, 4, ms);
    CHECK(n >= 0, "epoll_wait");
    return n;
}

/* Whether poll finds `fd` readable within `ms`. */
static int poll_readable(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = poll(&p, 1, ms);
    CHECK(n >= 0, "poll");
    return n == 1 && (p.revents & POLLIN);
}

static void report(const char *label, int inner, int outer, int ms)
{
    int o = ready_in(outer, ms);
    int p = poll_readable(inner, 0);
    int i = ready_in(inner, 0);
    printf("%s: outer %d, poll on inner %s, inner %d\n", label, o, p ? "readable" : "quiet", i);
}

static void server(const struct args *a)
{
    int lfd = listen_quietly(a->server_ip, a->port);
    int p[2];
    int inner = epoll_create1(EPOLL_CLOEXEC);
    int outer = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN};
    int cfd;

    CHECK(pipe2(p, O_NONBLOCK | O_CLOEXEC) == 0, "pipe2");
    CHECK(inner >= 0 && outer >= 0, "epoll_create1");
    announce_listening();
    cfd = accept_one(lfd);

    ev.data.u32 = 1;
    CHECK(epoll_ctl(inner, EPOLL_CTL_ADD, cfd, &ev) == 0, "epoll_ctl ADD socket");
    ev.data.u32 = 2;
    CHECK(epoll_ctl(inner, EPOLL_CTL_ADD, p[0], &ev) == 0, "epoll_ctl ADD pipe");
    ev.data.u32 = 3;
    CHECK(epoll_ctl(outer, EPOLL_CTL_ADD, inner, &ev) == 0, "epoll_ctl ADD inner set");
    report("idle", inner, outer, 0);

    write_str(cfd, "p");
    report("socket readable", inner, outer, 5000);
    expect_str(cfd, "pong");
    report("socket drained", inner, outer, 0);

    CHECK(write(p[1], "x", 1) == 1, "pipe write");
    report("pipe readable", inner, outer, 5000);
    {
        char c;
        CHECK(read(p[0], &c, 1) == 1, "pipe read");
    }
    report("pipe drained", inner, outer, 0);

    CHECK(epoll_ctl(outer, EPOLL_CTL_DEL, inner, NULL) == 0, "epoll_ctl DEL inner set");
    write_str(cfd, "p");
    {
        struct pollfd pf = {.fd = inner, .events = POLLIN};
        int n = poll(&pf, 1, 5000);
        printf("inner set removed, socket readable: outer %d, poll on inner %d\n",
               ready_in(outer, 0), n);
    }
    expect_str(cfd, "pong");

    write_str(cfd, "q");
    close(cfd);
    close(lfd);
    close(p[0]);
    close(p[1]);
    close(inner);
    close(outer);
    printf("done\n");
}

static void client(const struct args *a)
{
    int fd = connect_to(a->server_ip, a->port);
    answer_commands(fd, 'p', "pong");
    close(fd);
}

RUN_ROLES(server, client)
