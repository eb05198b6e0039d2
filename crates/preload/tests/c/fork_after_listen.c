/*
 * Fork after listen: the parent listens and forks; the child accepts the one
 * connection, serves it and exits; the parent waits for the child.
 *
 * The server is the side under test. The client sends "hello" and reads the answer;
 * then, while both processes run (on Rusty: two stacks sharing the link), it
 * connects to a port neither listens on, which must be refused; then it sends "bye"
 * and reads to EOF.
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
        expect_str(fd, "bye");
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
    struct sockaddr_in closed = addr_of(a->server_ip, a->port + 1);
    char buf[64];
    size_t n;
    int other, rc;

    write_str(fd, "hello");
    expect_str(fd, "from the child");
    other = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(other >= 0, "socket");
    rc = connect(other, (struct sockaddr *)&closed, sizeof closed);
    printf("connect to a port no process listens on: %s\n", res(rc));
    close(other);
    write_str(fd, "bye");
    n = read_str_to_eof(fd, buf, sizeof buf);
    CHECK(n == 0, "more after the answer: \"%s\"", buf);
    close(fd);
    printf("got the child's answer\n");
}

RUN_ROLES(server, client)
