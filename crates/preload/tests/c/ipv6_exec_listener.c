/*
 * AF_INET6 listening sockets survive exec, each with its family, address and
 * IPV6_V6ONLY: the server listens on [::] (dual-stack), on its IPv4-mapped address
 * and on [::] with IPV6_V6ONLY, forks, and the child execs this program again
 * ("heir FD FD FD"), which finds the three under the same numbers, checks them and
 * serves an IPv4 client on the dual-stack one. The parent then serves a second client
 * on the IPv4-mapped one.
 *
 * The server is the side under test; the client connects to PORT, then to PORT+1.
 */
#include "common.h"

#include <sys/wait.h>

static void describe(const char *who, int fd, struct sockaddr_in6 want)
{
    int listening = 0, domain = 0;
    socklen_t len = sizeof listening;
    CHECK(getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0, "SO_ACCEPTCONN");
    len = sizeof domain;
    CHECK(getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0, "SO_DOMAIN");
    struct sockaddr_in6 got = name6(fd, 0);
    printf("%s: listens %s, AF_INET6 %s, its address %s, IPV6_V6ONLY %d\n", who, yn(listening),
           yn(domain == AF_INET6), yn(same6(&got, &want, 1)), v6only_of(fd));
}

/* Accept one connection on lfd, check its peer is IPv4-mapped, answer "hello". */
static void serve_one(int lfd, const char *who, const char *answer)
{
    struct sockaddr_in6 peer;
    socklen_t len = sizeof peer;
    int fd = accept(lfd, (struct sockaddr *)&peer, &len);
    CHECK(fd >= 0, "accept");
    expect_str(fd, "hello");
    write_str(fd, answer);
    close(fd);
    printf("%s: served one connection, from an IPv4-mapped peer %s\n", who,
           yn(IN6_IS_ADDR_V4MAPPED(&peer.sin6_addr)));
}

static void heir(int dual, int mapped, int only6, const char *own, int port)
{
    alarm(WATCHDOG_SECONDS);
    describe("heir [::]", dual, addr6_of("::", port));
    describe("heir ::ffff:SERVER_IP", mapped, mapped_of(own, port + 1));
    describe("heir [::] IPV6_V6ONLY", only6, addr6_of("::", port + 2));
    fflush(stdout);
    announce_listening();
    serve_one(dual, "heir", "from the new image");
}

static void server(const struct args *a, const char *self)
{
    int dual = listen6_quietly(addr6_of("::", a->port), 0);
    int mapped = listen6_quietly(mapped_of(a->server_ip, a->port + 1), 0);
    int only6 = listen6_quietly(addr6_of("::", a->port + 2), 1);
    char fds[3][16], port[16];
    int status;
    snprintf(fds[0], sizeof fds[0], "%d", dual);
    snprintf(fds[1], sizeof fds[1], "%d", mapped);
    snprintf(fds[2], sizeof fds[2], "%d", only6);
    snprintf(port, sizeof port, "%d", a->port);
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        execl(self, self, "heir", fds[0], fds[1], fds[2], a->server_ip, port, (char *)NULL);
        die("exec %s", self);
    }
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    printf("parent: the new image exited normally: %s, status %d\n", yn(WIFEXITED(status)),
           WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    serve_one(mapped, "parent", "from the parent");
    close(dual);
    close(mapped);
    close(only6);
}

static void ask(const char *ip, int port, const char *want)
{
    int fd = connect_to(ip, port);
    char buf[64];
    write_str(fd, "hello");
    read_str_to_eof(fd, buf, sizeof buf);
    CHECK(strcmp(buf, want) == 0, "answer \"%s\", not \"%s\"", buf, want);
    close(fd);
    printf("got \"%s\"\n", buf);
}

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[1], "heir") == 0) {
        setup_io();
        heir(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), argv[5], atoi(argv[6]));
        return 0;
    }
    struct args a = parse_args(argc, argv);
    setup();
    if (is_server(&a)) {
        server(&a, "/proc/self/exe");
    } else {
        ask(a.server_ip, a.port, "from the new image");
        ask(a.server_ip, a.port + 1, "from the parent");
    }
    return 0;
}
