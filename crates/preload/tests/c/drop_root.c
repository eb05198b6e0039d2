/*
 * Giving up root before the first socket, as memcached does with -u: the server, run
 * as root, drops its groups, group and user to nobody's (65534), then listens, accepts
 * one connection and echoes it to EOF.
 *
 * The server is the side under test (run as root). The client sends a message,
 * half-closes and reads the echo to EOF.
 */
#include "common.h"

#include <grp.h>

#define NOBODY 65534
#define MESSAGE "from a server that gave up root"

static void server(const struct args *a)
{
    int lfd, fd;

    printf("root at start: %s\n", yn(geteuid() == 0));
    CHECK(setgroups(0, NULL) == 0, "setgroups");
    CHECK(setgid(NOBODY) == 0, "setgid");
    CHECK(setuid(NOBODY) == 0, "setuid");
    printf("uid %u euid %u gid %u\n", (unsigned)getuid(), (unsigned)geteuid(),
           (unsigned)getgid());
    printf("setuid(0) back: %s\n", res(setuid(0)));
    lfd = listen_on(a->server_ip, a->port);
    fd = accept_one(lfd);
    echo_until_eof(fd);
    printf("echoed one connection to EOF\n");
    close(fd);
    close(lfd);
    printf("done\n");
}

static void client(const struct args *a)
{
    int fd = connect_to(a->server_ip, a->port);
    char buf[64];
    size_t n = strlen(MESSAGE);

    write_str(fd, MESSAGE);
    CHECK(shutdown(fd, SHUT_WR) == 0, "shutdown");
    read_full(fd, buf, n);
    CHECK(memcmp(buf, MESSAGE, n) == 0, "the echo differs");
    CHECK(read(fd, buf, 1) == 0, "more than the echo");
    close(fd);
    printf("got the echo\n");
}

RUN_ROLES(server, client)
