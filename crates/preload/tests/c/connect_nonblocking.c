/*
 * Non-blocking connect: EINPROGRESS, then writability and SO_ERROR 0; a refused one
 * (nothing listens on PORT+1) reports ECONNREFUSED through SO_ERROR, and a blocking one
 * through connect itself.
 *
 * The client is the side under test; the server takes one connection, reads "hi" and
 * answers "ok".
 */
#include "common.h"

static void print_revents(const char *label, short r)
{
    printf("%s:%s%s%s%s\n", label, r & POLLIN ? " IN" : "", r & POLLOUT ? " OUT" : "",
           r & POLLERR ? " ERR" : "", r & POLLHUP ? " HUP" : "");
}

static int so_error(int fd)
{
    int err = -1;
    socklen_t len = sizeof err;
    CHECK(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0, "SO_ERROR");
    return err;
}

static void client(const struct args *a)
{
    struct sockaddr_in sa = addr_of(a->server_ip, a->port);
    struct sockaddr_in closed = addr_of(a->server_ip, a->port + 1);
    struct pollfd p;
    int fd, r;

    printf("-- accepted\n");
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(fd >= 0, "socket");
    r = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    printf("connect: %d %s\n", r, r < 0 ? errname(errno) : "");
    p = (struct pollfd){.fd = fd, .events = POLLOUT};
    printf("poll: %d\n", poll(&p, 1, 10000));
    print_revents("revents", p.revents);
    printf("SO_ERROR: %s\n", errname(so_error(fd)));
    r = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    printf("connect again: %d %s\n", r, r < 0 ? errname(errno) : "");
    r = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    printf("connect a third time: %d %s\n", r, r < 0 ? errname(errno) : "");
    write_str(fd, "hi");
    expect_str(fd, "ok");
    printf("exchanged hi/ok\n");
    {
        char c;
        CHECK(wait_readable(fd, 10000), "EOF");
        printf("read at EOF: %zd\n", read(fd, &c, 1));
    }
    close(fd);

    printf("-- refused, non-blocking\n");
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(fd >= 0, "socket");
    r = connect(fd, (struct sockaddr *)&closed, sizeof closed);
    printf("connect: %d %s\n", r, r < 0 ? errname(errno) : "");
    p = (struct pollfd){.fd = fd, .events = POLLOUT};
    printf("poll: %d\n", poll(&p, 1, 10000));
    print_revents("revents", p.revents);
    printf("SO_ERROR: %s\n", errname(so_error(fd)));
    printf("SO_ERROR read again: %s\n", errname(so_error(fd)));
    close(fd);

    printf("-- refused, blocking\n");
    fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0, "socket");
    r = connect(fd, (struct sockaddr *)&closed, sizeof closed);
    printf("connect: %d %s\n", r, r < 0 ? errname(errno) : "");
    printf("SO_ERROR: %s\n", errname(so_error(fd)));
    close(fd);
    printf("done\n");
}

static void server(const struct args *a)
{
    int lfd = listen_on(a->server_ip, a->port);
    int fd = accept_one(lfd);
    expect_str(fd, "hi");
    write_str(fd, "ok");
    close(fd);
    close(lfd);
    printf("served\n");
}

RUN_ROLES(server, client)
