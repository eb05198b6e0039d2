/*
 * Code shared by the conformance programs. Each program runs one rule on whatever
 * sockets it is given (the kernel's, or Rusty's under rusty-run) and prints lines that
 * must come out the same either way: no timings, no descriptor numbers, no addresses
 * that differ between the two runs, errno by name.
 *
 * Command line of every program: PROG ROLE SERVER_IP PORT [SELF_IP [SERVER_IP6 SELF_IP6]]
 *   ROLE is "server" or "client"; a server binds SERVER_IP (its own address), a client
 *   connects to it; SELF_IP is the client's own address, for the checks of
 *   getsockname. The programs of an IPv6 link also get both sides' IPv6 addresses,
 *   in the same roles.
 *
 * stdout carries the lines compared; stderr carries diagnostics, each starting with
 * "# ", and the line "# listening" once a server can take connections.
 */
#ifndef RUSTY_CSUITE_COMMON_H
#define RUSTY_CSUITE_COMMON_H

#define _GNU_SOURCE

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

/* Every program ends within this many seconds whatever the stack does. */
#define WATCHDOG_SECONDS 20

static inline const char *errname(int e)
{
    switch (e) {
    case 0: return "0";
    case EAGAIN: return "EAGAIN";
    case EBADF: return "EBADF";
    case EPERM: return "EPERM";
    case EINTR: return "EINTR";
    case EINVAL: return "EINVAL";
    case EPIPE: return "EPIPE";
    case EINPROGRESS: return "EINPROGRESS";
    case EALREADY: return "EALREADY";
    case EISCONN: return "EISCONN";
    case ENOTCONN: return "ENOTCONN";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ECONNRESET: return "ECONNRESET";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EHOSTUNREACH: return "EHOSTUNREACH";
    case ENETUNREACH: return "ENETUNREACH";
    case EADDRINUSE: return "EADDRINUSE";
    case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
    case ENOPROTOOPT: return "ENOPROTOOPT";
    case ENOTSOCK: return "ENOTSOCK";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case EFAULT: return "EFAULT";
    case EMFILE: return "EMFILE";
    case ENOENT: return "ENOENT";
    case ESPIPE: return "ESPIPE";
    case ENOTTY: return "ENOTTY";
    case EAFNOSUPPORT: return "EAFNOSUPPORT";
    default: return "E?";
    }
}

/* Print a diagnostic (with errno's name) and fail. */
__attribute__((format(printf, 1, 2), noreturn)) static inline void die(const char *fmt, ...)
{
    int e = errno;
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "# FAIL: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (errno %s)\n", errname(e));
    exit(1);
}

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond))                                                                       \
            die(__VA_ARGS__);                                                              \
    } while (0)

/* One line per printf reaches the file before anything that follows it, so the output
 * of a process that forks, and its order with stderr, stay whole. */
static inline void setup_io(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
}

/* The common start: line-buffered output, SIGPIPE ignored (EPIPE is what the programs
 * check), and a watchdog alarm. */
static inline void setup(void)
{
    setup_io();
    alarm(WATCHDOG_SECONDS);
}

struct args {
    const char *role;
    const char *server_ip;
    int port;
    const char *self_ip;
    /* On an IPv6 link: the server's and this side's IPv6 addresses; NULL otherwise. */
    const char *server_ip6;
    const char *self_ip6;
};

static inline struct args parse_args(int argc, char **argv)
{
    struct args a;
    if (argc < 4 || (strcmp(argv[1], "server") != 0 && strcmp(argv[1], "client") != 0)) {
        fprintf(stderr, "usage: %s server|client SERVER_IP PORT [SELF_IP]\n", argv[0]);
        exit(2);
    }
    a.role = argv[1];
    a.server_ip = argv[2];
    a.port = atoi(argv[3]);
    a.self_ip = argc > 4 ? argv[4] : NULL;
    a.server_ip6 = argc > 6 ? argv[5] : NULL;
    a.self_ip6 = argc > 6 ? argv[6] : NULL;
    return a;
}

static inline int is_server(const struct args *a) { return strcmp(a->role, "server") == 0; }

static inline struct sockaddr_in addr_of(const char *ip, int port)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
        fprintf(stderr, "# bad address %s\n", ip);
        exit(2);
    }
    return sa;
}

/* An IPv6 socket address (scope 0). */
static inline struct sockaddr_in6 addr6_of(const char *ip, int port)
{
    struct sockaddr_in6 sa;
    memset(&sa, 0, sizeof sa);
    sa.sin6_family = AF_INET6;
    sa.sin6_port = htons((uint16_t)port);
    if (inet_pton(AF_INET6, ip, &sa.sin6_addr) != 1) {
        fprintf(stderr, "# bad address %s\n", ip);
        exit(2);
    }
    return sa;
}

/* The IPv4 address ip as an AF_INET6 socket names it: ::ffff:a.b.c.d. */
static inline struct sockaddr_in6 mapped_of(const char *ip, int port)
{
    char text[64];
    snprintf(text, sizeof text, "::ffff:%s", ip);
    return addr6_of(text, port);
}

/* Whether two sockaddr_in6 name the same address, scope and (with_port) port. */
static inline int same6(const struct sockaddr_in6 *a, const struct sockaddr_in6 *b, int with_port)
{
    return a->sin6_family == b->sin6_family &&
           memcmp(&a->sin6_addr, &b->sin6_addr, sizeof a->sin6_addr) == 0 &&
           a->sin6_scope_id == b->sin6_scope_id && (!with_port || a->sin6_port == b->sin6_port);
}

/* getsockname (name) or getpeername (peer) of an AF_INET6 socket, checked for its
 * family and length. */
static inline struct sockaddr_in6 name6(int fd, int peer)
{
    struct sockaddr_in6 sa;
    socklen_t len = sizeof sa;
    memset(&sa, 0, sizeof sa);
    int r = peer ? getpeername(fd, (struct sockaddr *)&sa, &len)
                 : getsockname(fd, (struct sockaddr *)&sa, &len);
    CHECK(r == 0, peer ? "getpeername" : "getsockname");
    CHECK(len == sizeof sa && sa.sin6_family == AF_INET6, "not a sockaddr_in6 (len %u)",
          (unsigned)len);
    return sa;
}

/* IPV6_V6ONLY of an AF_INET6 socket. */
static inline int v6only_of(int fd)
{
    int v = -1;
    socklen_t len = sizeof v;
    CHECK(getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v, &len) == 0, "get IPV6_V6ONLY");
    return v;
}

/* A listening AF_INET6 socket on sa, IPV6_V6ONLY as v6only; does not announce itself. */
static inline int listen6_quietly(struct sockaddr_in6 sa, int v6only)
{
    int one = 1;
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    CHECK(fd >= 0, "socket AF_INET6");
    CHECK(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0, "SO_REUSEADDR");
    CHECK(setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only) == 0,
          "IPV6_V6ONLY");
    CHECK(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "bind AF_INET6");
    CHECK(listen(fd, 16) == 0, "listen");
    return fd;
}

/* A blocking AF_INET6 connection to sa. */
static inline int connect6(struct sockaddr_in6 sa)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    CHECK(fd >= 0, "socket AF_INET6");
    CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect AF_INET6");
    return fd;
}

/* A listening socket on ip:port (SO_REUSEADDR, so that a run may follow another in the
 * same namespace); does not announce itself. */
static inline int listen_quietly(const char *ip, int port)
{
    struct sockaddr_in sa = addr_of(ip, port);
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0, "socket");
    CHECK(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0, "SO_REUSEADDR");
    CHECK(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "bind %s:%d", ip, port);
    CHECK(listen(fd, 16) == 0, "listen");
    return fd;
}

/* Tell whoever waits for this server that it takes connections now. */
static inline void announce_listening(void)
{
    fflush(stdout);
    fprintf(stderr, "# listening\n");
    fflush(stderr);
}

static inline int listen_on(const char *ip, int port)
{
    int fd = listen_quietly(ip, port);
    announce_listening();
    return fd;
}

static inline int accept_one(int lfd)
{
    int fd = accept(lfd, NULL, NULL);
    CHECK(fd >= 0, "accept");
    return fd;
}

/* A blocking connection to ip:port. */
static inline int connect_to(const char *ip, int port)
{
    struct sockaddr_in sa = addr_of(ip, port);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0, "socket");
    CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect %s:%d", ip, port);
    return fd;
}

/* Wait (bounded) until fd is readable; 1 if it is. */
static inline int wait_readable(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = poll(&p, 1, ms);
    return n == 1;
}

/* Read exactly n bytes (the descriptor may be non-blocking: wait with poll). */
static inline void read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
            CHECK(wait_readable(fd, 10000), "nothing to read within 10 s");
            continue;
        }
        CHECK(r > 0, "read_full: got %zu of %zu, read returned %zd", got, n, r);
        got += (size_t)r;
    }
}

static inline void write_full(int fd, const void *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, (const char *)buf + done, n - done);
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            CHECK(poll(&p, 1, 10000) == 1, "not writable within 10 s");
            continue;
        }
        CHECK(w > 0, "write_full");
        done += (size_t)w;
    }
}

static inline void write_str(int fd, const char *s) { write_full(fd, s, strlen(s)); }

/* Read exactly strlen(want) bytes and check they are want. */
static inline void expect_str(int fd, const char *want)
{
    char buf[256];
    size_t n = strlen(want);
    CHECK(n < sizeof buf, "expect_str: too long");
    read_full(fd, buf, n);
    buf[n] = 0;
    CHECK(memcmp(buf, want, n) == 0, "expected \"%s\", got \"%s\"", want, buf);
}

/* Read to end of stream into buf, at most size - 1 bytes, and end it with a NUL; the
 * number of bytes read. */
static inline size_t read_str_to_eof(int fd, char *buf, size_t size)
{
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, size - 1 - n);
        CHECK(r >= 0, "read");
        if (r == 0)
            break;
        n += (size_t)r;
    }
    buf[n] = 0;
    return n;
}

/* Read to end of stream; the number of bytes read. */
static inline size_t read_to_eof(int fd, uint32_t *fnv)
{
    char buf[65536];
    size_t total = 0;
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
            CHECK(wait_readable(fd, 10000), "no EOF within 10 s");
            continue;
        }
        CHECK(r >= 0, "read_to_eof");
        if (r == 0)
            return total;
        if (fnv)
            for (ssize_t i = 0; i < r; i++) {
                *fnv ^= (uint8_t)buf[i];
                *fnv *= 16777619u;
            }
        total += (size_t)r;
    }
}

#define FNV_START 2166136261u

/* One echo connection: everything read is written back, until EOF. */
static inline void echo_until_eof(int fd)
{
    char buf[4096];
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        CHECK(r >= 0, "echo read");
        if (r == 0)
            return;
        write_full(fd, buf, (size_t)r);
    }
}

/* "yes"/"no" for printing a condition. */
static inline const char *yn(int c) { return c ? "yes" : "no"; }

/* The result of a call that returns -1 and sets errno: "ok" or the errno's name. */
static inline const char *res(int r) { return r < 0 ? errname(errno) : "ok"; }

/* The peer's side of a scripted exchange: read command bytes from `fd`, answering
 * `command` with `answer`, until 'q'. */
static inline void answer_commands(int fd, char command, const char *answer)
{
    for (;;) {
        char c;
        read_full(fd, &c, 1);
        if (c == command)
            write_str(fd, answer);
        else if (c == 'q')
            return;
        else
            die("unknown command %c", c);
    }
}

/* Every program's main: parse the arguments, set up, and run the role asked for. */
#define RUN_ROLES(server_fn, client_fn)                                                  \
    int main(int argc, char **argv)                                                      \
    {                                                                                    \
        struct args a = parse_args(argc, argv);                                          \
        setup();                                                                         \
        if (is_server(&a))                                                               \
            server_fn(&a);                                                               \
        else                                                                             \
            client_fn(&a);                                                               \
        return 0;                                                                        \
    }

#endif
