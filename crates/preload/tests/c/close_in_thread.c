/*
 * Closing a socket from another thread: a thread closes a connected socket the main
 * thread is not using; the number is then free, the server sees the connection end,
 * and the next socket takes the same number and works.
 *
 * The client is the side under test. The server echoes two connections, one after the
 * other.
 */
#include "common.h"

#include <pthread.h>

static void *closer(void *arg)
{
    int fd = *(int *)arg;
    static int result;
    result = close(fd) == 0 ? 0 : errno;
    return &result;
}

static void echo_check(int fd, const char *label, const char *msg)
{
    write_str(fd, msg);
    expect_str(fd, msg);
    printf("%s: echo ok\n", label);
}

static void client(const struct args *a)
{
    pthread_t t;
    void *ret;
    int s = connect_to(a->server_ip, a->port);
    int n, r;

    echo_check(s, "first connection", "one");
    CHECK(pthread_create(&t, NULL, closer, &s) == 0, "pthread_create");
    CHECK(pthread_join(t, &ret) == 0, "pthread_join");
    printf("close in the thread: %s\n", errname(*(int *)ret));
    r = fcntl(s, F_GETFD);
    printf("number after the close: %d %s\n", r, r < 0 ? errname(errno) : "");
    r = (int)write(s, "x", 1);
    printf("write to it: %d %s\n", r, r < 0 ? errname(errno) : "");

    n = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(n >= 0, "socket");
    printf("new socket takes the same number: %s\n", yn(n == s));
    {
        struct sockaddr_in sa = addr_of(a->server_ip, a->port);
        CHECK(connect(n, (struct sockaddr *)&sa, sizeof sa) == 0, "connect");
    }
    /* The server only answers here once the first connection has ended. */
    echo_check(n, "second connection on the reused number", "two");
    CHECK(close(n) == 0, "close");

    /* The same again with a socket that never connected. */
    s = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(s >= 0, "socket");
    CHECK(pthread_create(&t, NULL, closer, &s) == 0, "pthread_create");
    CHECK(pthread_join(t, &ret) == 0, "pthread_join");
    printf("close of an unconnected socket in the thread: %s\n", errname(*(int *)ret));
    n = socket(AF_INET, SOCK_STREAM, 0);
    printf("next socket takes the same number: %s\n", yn(n == s));
    close(n);
    printf("done\n");
}

static void server(const struct args *a)
{
    int lfd = listen_on(a->server_ip, a->port);
    for (int i = 0; i < 2; i++) {
        int fd = accept_one(lfd);
        echo_until_eof(fd);
        close(fd);
    }
    close(lfd);
    printf("served 2 connections\n");
}

RUN_ROLES(server, client)
