/*
 * Duplicated sockets: dup, dup2 and dup3 of a socket keep the connection after the
 * original descriptor is closed; dup2 of a pipe onto a socket's number closes that
 * socket's connection; dup2 of one socket onto another's number closes the other's.
 *
 * The client is the side under test. The server echoes four connections, one after
 * the other, so the client sees that a connection was closed when the server turns to
 * the next one.
 */
#include "common.h"

#define CONNECTIONS 4
#define HIGH 40

static void echo_check(int fd, const char *label, const char *msg)
{
    write_str(fd, msg);
    expect_str(fd, msg);
    printf("%s: echo ok\n", label);
}

static int cloexec(int fd)
{
    int f = fcntl(fd, F_GETFD);
    CHECK(f >= 0, "F_GETFD");
    return (f & FD_CLOEXEC) != 0;
}

static int is_open(int fd) { return fcntl(fd, F_GETFD) >= 0; }

static void client(const struct args *a)
{
    int s, d, r, p[2];
    char c;

    printf("-- dup, dup2, dup3 of one connection\n");
    s = connect_to(a->server_ip, a->port);
    d = dup(s);
    CHECK(d >= 0, "dup");
    printf("dup: new number: %s, FD_CLOEXEC %d\n", yn(d != s), cloexec(d));
    CHECK(close(s) == 0, "close");
    echo_check(d, "dup after closing the original", "one");
    r = dup2(d, HIGH);
    printf("dup2 to a free number returns it: %s\n", yn(r == HIGH));
    CHECK(close(d) == 0, "close");
    echo_check(HIGH, "dup2 copy after closing the original", "two");
    r = dup2(HIGH, HIGH);
    printf("dup2 onto itself returns it: %s\n", yn(r == HIGH));
    r = dup3(HIGH, HIGH, 0);
    printf("dup3 onto itself: %d %s\n", r, r < 0 ? errname(errno) : "");
    r = dup3(HIGH, HIGH + 1, O_CLOEXEC);
    printf("dup3 with O_CLOEXEC returns the target: %s, FD_CLOEXEC %d, original's %d\n",
           yn(r == HIGH + 1), cloexec(HIGH + 1), cloexec(HIGH));
    CHECK(close(HIGH) == 0, "close");
    echo_check(HIGH + 1, "dup3 copy after closing the original", "three");
    {
        /* Closing the last copy ends the connection: the server reads EOF. */
        CHECK(close(HIGH + 1) == 0, "close");
        printf("closed the last copy\n");
    }

    printf("-- dup2 of a pipe onto a socket\n");
    s = connect_to(a->server_ip, a->port);
    echo_check(s, "second connection", "four");
    CHECK(pipe(p) == 0, "pipe");
    r = dup2(p[1], s);
    printf("dup2 returns the socket's number: %s\n", yn(r == s));
    CHECK(write(s, "p", 1) == 1, "write to the pipe through the socket's number");
    CHECK(read(p[0], &c, 1) == 1 && c == 'p', "read from the pipe");
    printf("the socket's number now writes to the pipe\n");
    close(s);
    close(p[0]);
    close(p[1]);

    printf("-- dup2 of a socket onto another socket\n");
    s = connect_to(a->server_ip, a->port);
    /* The server only turns to this connection once the second one has ended. */
    echo_check(s, "third connection (so the second one was closed)", "five");
    d = connect_to(a->server_ip, a->port);
    r = dup2(d, s);
    printf("dup2 returns the target: %s\n", yn(r == s));
    echo_check(s, "fourth connection through the target (so the third was closed)", "six");
    CHECK(close(d) == 0, "close");
    echo_check(s, "fourth connection after closing the source", "seven");
    CHECK(close(s) == 0, "close");
    printf("closed number is free: %s\n", yn(!is_open(s)));
    r = close(s);
    printf("close again: %d %s\n", r, r < 0 ? errname(errno) : "");
    r = dup2(s, HIGH);
    printf("dup2 from a closed number: %d %s\n", r, r < 0 ? errname(errno) : "");
    printf("done\n");
}

static void server(const struct args *a)
{
    int lfd = listen_on(a->server_ip, a->port);
    for (int i = 0; i < CONNECTIONS; i++) {
        int fd = accept_one(lfd);
        echo_until_eof(fd);
        close(fd);
    }
    close(lfd);
    printf("served %d connections\n", CONNECTIONS);
}

RUN_ROLES(server, client)
