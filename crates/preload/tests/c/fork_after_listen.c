/*
 * Fork after listen: the parent listens and forks; the child accepts the one
 * connection, serves it and exits; the parent waits for the child.
 *
 * The server is the side under test. The client sends "hello" and reads the answer to
 * EOF.
 */
#include "common.h"

#include <sys/wait.h>

static void server(const struct args *a)
{
    int lfd = listen_on(a->server_ip, a->port);
    int status;
    pid_t pid;

    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        /* A pending alarm does not survive fork: the child sets its own. */
        alarm(WATCHDOG_SECONDS);
        int fd = accept_one(lfd);
        expect_str(fd, "hello");
        write_str(fd, "from the child");
        close(fd);
        close(lfd);
        printf("child: accepted and served one connection\n");
        fflush(stdout);
        _exit(0);
    }
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    printf("parent: child exited normally: %s, status %d\n", yn(WIFEXITED(status)),
           WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    close(lfd);
    printf("done\n");
}

static void client(const struct args *a)
{
    int fd = connect_to(a->server_ip, a->port);
    char buf[64];
    size_t n;

    write_str(fd, "hello");
    n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
        CHECK(r >= 0, "read");
        if (r == 0)
            break;
        n += (size_t)r;
    }
    buf[n] = 0;
    CHECK(strcmp(buf, "from the child") == 0, "answer \"%s\"", buf);
    close(fd);
    printf("got the child's answer\n");
}

RUN_ROLES(server, client)
