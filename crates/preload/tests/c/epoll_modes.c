/*
 * epoll's modes on one connected socket: level-triggered, edge-triggered, EPOLLONESHOT
 * (and its re-arming with EPOLL_CTL_MOD), and EPOLLRDHUP when the peer half-closes.
 *
 * The client is the side under test. It drives the server with one-byte commands, so
 * that data arrives only when the client has asked for it:
 *   'd'  the server writes the 10 bytes "0123456789" in one write
 *   's'  the server shuts down its sending side, reads to EOF and checks it got "bye"
 * Each batch is one small write, which arrives as one segment.
 */
#include "common.h"

#include <sys/epoll.h>

#define BATCH "0123456789"

static int ep;
static int sock;

/* epoll_wait for at most `ms`; print "LABEL: N events [FLAGS]". */
static int wait_print(const char *label, int ms)
{
    struct epoll_event ev[4];
    int n = epoll_wait(ep, ev, 4, ms);
    CHECK(n >= 0, "epoll_wait");
    printf("%s: %d", label, n);
    if (n == 1) {
        uint32_t e = ev[0].events;
        printf(" [%s%s%s%s%s]", e & EPOLLIN ? " IN" : "", e & EPOLLOUT ? " OUT" : "",
               e & EPOLLRDHUP ? " RDHUP" : "", e & EPOLLHUP ? " HUP" : "",
               e & EPOLLERR ? " ERR" : "");
        CHECK(ev[0].data.fd == sock, "event for another descriptor");
    }
    printf("\n");
    return n;
}

static void ctl(int op, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.fd = sock};
    CHECK(epoll_ctl(ep, op, sock, &ev) == 0, "epoll_ctl");
}

static void command(char c) { write_full(sock, &c, 1); }

static void expect_part(size_t from, size_t n)
{
    char buf[16];
    read_full(sock, buf, n);
    CHECK(memcmp(buf, BATCH + from, n) == 0, "batch content");
}

static void client(const struct args *a)
{
    sock = connect_to(a->server_ip, a->port);
    ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0, "epoll_create1");

    printf("-- level-triggered\n");
    ctl(EPOLL_CTL_ADD, EPOLLIN);
    wait_print("idle", 0);
    command('d');
    wait_print("data arrived", 5000);
    wait_print("still unread", 0);
    expect_part(0, 4);
    wait_print("after reading 4 of 10", 5000);
    expect_part(4, 6);
    wait_print("after reading all", 0);

    printf("-- edge-triggered\n");
    ctl(EPOLL_CTL_MOD, EPOLLIN | EPOLLET);
    wait_print("idle", 0);
    command('d');
    wait_print("data arrived", 5000);
    wait_print("no new edge", 0);
    expect_part(0, 4);
    wait_print("after reading 4 of 10", 0);
    command('d');
    wait_print("more data arrived", 5000);
    {
        /* Drain to EAGAIN, as an edge-triggered reader must. */
        char buf[64];
        size_t total = 0;
        int fl = fcntl(sock, F_GETFL);
        CHECK(fcntl(sock, F_SETFL, fl | O_NONBLOCK) == 0, "O_NONBLOCK");
        for (;;) {
            ssize_t r = read(sock, buf, sizeof buf);
            if (r < 0 && errno == EAGAIN && total < 16) {
                CHECK(wait_readable(sock, 5000), "rest of the batch");
                continue;
            }
            if (r < 0) {
                printf("drained %zu bytes, then %s\n", total, errname(errno));
                break;
            }
            CHECK(r > 0, "unexpected EOF");
            total += (size_t)r;
        }
        CHECK(fcntl(sock, F_SETFL, fl) == 0, "clear O_NONBLOCK");
    }
    wait_print("after draining", 0);

    printf("-- oneshot\n");
    ctl(EPOLL_CTL_MOD, EPOLLIN | EPOLLONESHOT);
    wait_print("idle", 0);
    command('d');
    wait_print("data arrived", 5000);
    wait_print("disarmed, data unread", 0);
    ctl(EPOLL_CTL_MOD, EPOLLIN | EPOLLONESHOT);
    wait_print("re-armed with data pending", 0);
    wait_print("disarmed again", 0);
    expect_part(0, 10);
    ctl(EPOLL_CTL_MOD, EPOLLIN | EPOLLONESHOT);
    wait_print("re-armed, nothing pending", 0);

    printf("-- rdhup\n");
    ctl(EPOLL_CTL_MOD, EPOLLIN | EPOLLRDHUP);
    wait_print("idle", 0);
    command('s');
    wait_print("peer shut down writing", 5000);
    {
        char c;
        ssize_t r = read(sock, &c, 1);
        printf("read: %zd\n", r);
    }
    wait_print("EOF stays readable", 0);
    write_str(sock, "bye");
    CHECK(shutdown(sock, SHUT_WR) == 0, "shutdown");
    wait_print("both directions shut", 0);
    CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, sock, NULL) == 0, "EPOLL_CTL_DEL");
    printf("delete again: %s\n", res(epoll_ctl(ep, EPOLL_CTL_DEL, sock, NULL)));
    close(sock);
    close(ep);
    printf("done\n");
}

static void server(const struct args *a)
{
    int lfd = listen_on(a->server_ip, a->port);
    int fd = accept_one(lfd);
    for (;;) {
        char c;
        read_full(fd, &c, 1);
        if (c == 'd') {
            write_str(fd, BATCH);
        } else if (c == 's') {
            uint32_t sum = FNV_START;
            CHECK(shutdown(fd, SHUT_WR) == 0, "shutdown");
            CHECK(read_to_eof(fd, &sum) == 3, "expected 3 bytes after the shutdown");
            break;
        } else {
            die("unknown command %c", c);
        }
    }
    close(fd);
    close(lfd);
    printf("served\n");
}

RUN_ROLES(server, client)
