/*
 * A listening socket survives exec, as nginx's binary upgrade relies on: the server
 * listens, forks, and the child execs this program again ("heir FD"), which finds the
 * listening socket under the same number, accepts one connection and serves it. The
 * parent, still listening on its own descriptor of the same socket, then serves a
 * second connection.
 *
 * The server is the side under test. The client connects, sends "hello" and reads the
 * answer to EOF, twice.
 */
#include "common.h"

#include <sys/wait.h>

/* Accept one connection on lfd, answer its "hello" with `answer`, close both. */
static void serve_one(int lfd, const char *who, const char *answer)
{
    int fd = accept_one(lfd);
    expect_str(fd, "hello");
    write_str(fd, answer);
    close(fd);
    close(lfd);
    printf("%s: served one connection\n", who);
}

static void heir(int lfd)
{
    int listening = 0;
    socklen_t len = sizeof listening;
    struct sockaddr_in sa;
    socklen_t salen = sizeof sa;

    alarm(WATCHDOG_SECONDS);
    CHECK(getsockopt(lfd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0,
          "getsockopt SO_ACCEPTCONN on the inherited descriptor");
    CHECK(getsockname(lfd, (struct sockaddr *)&sa, &salen) == 0, "getsockname");
    printf("heir: the inherited descriptor listens: %s, on port %d\n", yn(listening),
           ntohs(sa.sin_port));
    fflush(stdout);
    announce_listening();
    serve_one(lfd, "heir", "from the new image");
}

static void server(const struct args *a, const char *self)
{
    int lfd = listen_quietly(a->server_ip, a->port);
    char number[16];
    int status;
    pid_t pid;

    snprintf(number, sizeof number, "%d", lfd);
    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        execl(self, self, "heir", number, (char *)NULL);
        die("exec %s", self);
    }
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    printf("parent: the new image exited normally: %s, status %d\n", yn(WIFEXITED(status)),
           WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    serve_one(lfd, "parent", "from the parent");
}

static void ask(const struct args *a, const char *want)
{
    int fd = connect_to(a->server_ip, a->port);
    char buf[64];

    write_str(fd, "hello");
    read_str_to_eof(fd, buf, sizeof buf);
    CHECK(strcmp(buf, want) == 0, "answer \"%s\", not \"%s\"", buf, want);
    close(fd);
    printf("got \"%s\"\n", buf);
}

static void client(const struct args *a)
{
    ask(a, "from the new image");
    ask(a, "from the parent");
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "heir") == 0) {
        setup_io();
        heir(atoi(argv[2]));
        return 0;
    }
    struct args a = parse_args(argc, argv);
    setup();
    if (is_server(&a))
        server(&a, "/proc/self/exe");
    else
        client(&a);
    return 0;
}
