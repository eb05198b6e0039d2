/*
 * select() and poll() over a listening socket, a connected socket and a pipe, all
 * below 1024: readiness for reading and writing, timeouts, EOF, and the answers for a
 * closed descriptor (EBADF from select, POLLNVAL from poll).
 *
 * The server is the side under test. The client connects, then waits for commands:
 *   'g'  the client sends "data"
 *   'q'  the client closes
 */
#include "common.h"

#include <sys/select.h>

/* select for reading on fds[0..n) with a timeout in ms; print which were ready. */
static void sel_read(const char *label, const int *fds, const char *const *names, int n,
                     int ms)
{
    fd_set r;
    int max = -1, got;
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    FD_ZERO(&r);
    for (int i = 0; i < n; i++) {
        CHECK(fds[i] < FD_SETSIZE, "descriptor above FD_SETSIZE");
        FD_SET(fds[i], &r);
        if (fds[i] > max)
            max = fds[i];
    }
    got = select(max + 1, &r, NULL, NULL, &tv);
    printf("select %s: %d", label, got);
    if (got < 0)
        printf(" %s", errname(errno));
    else
        for (int i = 0; i < n; i++)
            if (FD_ISSET(fds[i], &r))
                printf(" %s", names[i]);
    printf("\n");
}

static void print_revents(short r)
{
    printf("%s%s%s%s%s%s", r & POLLIN ? " IN" : "", r & POLLOUT ? " OUT" : "",
           r & POLLRDHUP ? " RDHUP" : "", r & POLLHUP ? " HUP" : "", r & POLLERR ? " ERR" : "",
           r & POLLNVAL ? " NVAL" : "");
}

static void poll_print(const char *label, struct pollfd *p, const char *const *names, int n,
                       int ms)
{
    int got = poll(p, (nfds_t)n, ms);
    printf("poll %s: %d", label, got);
    if (got < 0)
        printf(" %s", errname(errno));
    for (int i = 0; got > 0 && i < n; i++) {
        if (p[i].revents) {
            printf(" %s[", names[i]);
            print_revents(p[i].revents);
            printf(" ]");
        }
    }
    printf("\n");
}

static void server(const struct args *a)
{
    int lfd = listen_quietly(a->server_ip, a->port);
    int p[2], c;
    char buf[8];

    CHECK(pipe(p) == 0, "pipe");
    {
        int fds[] = {lfd, p[0]};
        const char *const names[] = {"listener", "pipe"};
        sel_read("idle", fds, names, 2, 0);
        sel_read("idle for 50 ms", fds, names, 2, 50);
        announce_listening();
        sel_read("client connecting", fds, names, 2, 10000);
    }
    c = accept_one(lfd);
    {
        int fds[] = {c, p[0], lfd};
        const char *const names[] = {"conn", "pipe", "listener"};
        sel_read("accepted", fds, names, 3, 0);
        CHECK(write(p[1], "x", 1) == 1, "pipe write");
        sel_read("pipe written", fds, names, 3, 0);
        CHECK(read(p[0], buf, 1) == 1, "pipe read");
    }
    {
        fd_set w;
        struct timeval tv = {0, 0};
        int max = c > p[1] ? c : p[1];
        FD_ZERO(&w);
        FD_SET(c, &w);
        FD_SET(p[1], &w);
        printf("select writable: %d conn %s pipe %s\n", select(max + 1, NULL, &w, NULL, &tv),
               yn(FD_ISSET(c, &w)), yn(FD_ISSET(p[1], &w)));
    }
    {
        struct pollfd pf[] = {{.fd = c, .events = POLLIN},
                              {.fd = p[0], .events = POLLIN},
                              {.fd = p[1], .events = POLLOUT}};
        const char *const names[] = {"conn", "pipe-r", "pipe-w"};
        poll_print("idle", pf, names, 3, 0);
        write_str(c, "g");
        poll_print("client sending", pf, names, 2, 5000);
        read_full(c, buf, 4);
        CHECK(memcmp(buf, "data", 4) == 0, "client's data");
        poll_print("data read", pf, names, 2, 0);
        pf[0].events = POLLIN | POLLOUT;
        poll_print("conn for both", pf, names, 1, 0);
        pf[0].events = POLLIN | POLLRDHUP;
        write_str(c, "q");
        poll_print("client closing", pf, names, 1, 5000);
        printf("read at EOF: %zd\n", read(c, buf, 1));
        poll_print("after EOF", pf, names, 1, 0);
    }
    close(c);
    {
        int fds[] = {c};
        const char *const names[] = {"closed"};
        struct pollfd pf[] = {{.fd = c, .events = POLLIN}, {.fd = -1, .events = POLLIN}};
        const char *const pnames[] = {"closed", "negative"};
        sel_read("closed descriptor", fds, names, 1, 0);
        poll_print("closed descriptor", pf, pnames, 2, 0);
    }
    close(lfd);
    close(p[0]);
    close(p[1]);
    printf("done\n");
}

static void client(const struct args *a)
{
    int fd = connect_to(a->server_ip, a->port);
    answer_commands(fd, 'g', "data");
    close(fd);
    printf("done\n");
}

RUN_ROLES(server, client)
