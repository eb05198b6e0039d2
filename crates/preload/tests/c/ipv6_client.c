/*
 * An AF_INET6 client on an IPv4 link: connects to an IPv4-mapped address (an IPv4
 * connection) blocking and non-blocking, with its names IPv4-mapped; options, epoll and
 * sendfile on it; IPV6_V6ONLY; a socket bound to its own IPv4-mapped address; the
 * socket addresses Linux refuses, and the errno it gives; binds across the families;
 * loopback ([::1], [::]), which stays the kernel's.
 *
 * The client is the side under test (give it its own address as SELF_IP); the server,
 * an AF_INET one, answers "pong" to each 'p' on three connections.
 */
#include "common.h"

#include <sys/epoll.h>
#include <sys/sendfile.h>

#define CONNECTIONS 3

static void intopt(int fd, int level, int name, int value, const char *label)
{
    int v = -1;
    socklen_t len = sizeof v;
    printf("%s: set %d %s", label, value, res(setsockopt(fd, level, name, &value, sizeof value)));
    int r = getsockopt(fd, level, name, &v, &len);
    printf(", get %s %d\n", res(r), v);
}

static void ping(int fd)
{
    write_str(fd, "p");
    expect_str(fd, "pong");
}

/* The names of connection fd to ::ffff:SERVER_IP:PORT from SELF_IP. */
static void print_names(int fd, const struct args *a)
{
    struct sockaddr_in6 want_peer = mapped_of(a->server_ip, a->port);
    struct sockaddr_in6 want_self = mapped_of(a->self_ip, 0);
    struct sockaddr_in6 got = name6(fd, 0);
    printf("getsockname is ::ffff:SELF_IP: %s, with a port %s\n",
           yn(same6(&got, &want_self, 0)), yn(got.sin6_port != 0));
    got = name6(fd, 1);
    printf("getpeername is ::ffff:SERVER_IP:PORT: %s\n", yn(same6(&got, &want_peer, 1)));
}

static const char *connect_raw(int fd, const void *sa, socklen_t len)
{
    return res(connect(fd, (const struct sockaddr *)sa, len));
}

static const char *bind_raw(int fd, const void *sa, socklen_t len)
{
    return res(bind(fd, (const struct sockaddr *)sa, len));
}

static int socket6(int v6only)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    CHECK(fd >= 0, "socket AF_INET6");
    if (v6only)
        CHECK(setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only) == 0, "V6ONLY");
    return fd;
}

static void fresh_socket(void)
{
    printf("-- a fresh AF_INET6 socket\n");
    int s = socket6(0);
    struct sockaddr_in6 any = addr6_of("::", 0), got = name6(s, 0);
    printf("getsockname is [::]:0: %s\n", yn(same6(&got, &any, 1)));
    socklen_t len = sizeof got;
    printf("getpeername: %s\n", res(getpeername(s, (struct sockaddr *)&got, &len)));
    printf("getsockname without a length: %s\n", res(getsockname(s, (struct sockaddr *)&got, NULL)));
    len = 0;
    int r = getsockname(s, (struct sockaddr *)&got, &len);
    printf("getsockname into no room: %s, length %u\n", res(r), (unsigned)len);
    struct sockaddr unspec = {.sa_family = AF_UNSPEC};
    printf("connect AF_UNSPEC: %s\n", connect_raw(s, &unspec, sizeof unspec));
    intopt(s, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
    intopt(s, SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT");
    intopt(s, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE");
    intopt(s, IPPROTO_TCP, TCP_KEEPIDLE, 30, "TCP_KEEPIDLE");
    intopt(s, IPPROTO_IPV6, IPV6_V6ONLY, 1, "IPV6_V6ONLY");
    intopt(s, IPPROTO_IPV6, IPV6_V6ONLY, 0, "IPV6_V6ONLY");
    int v = -1;
    len = sizeof v;
    CHECK(getsockopt(s, SOL_SOCKET, SO_DOMAIN, &v, &len) == 0, "SO_DOMAIN");
    printf("SO_DOMAIN AF_INET6: %s\n", yn(v == AF_INET6));
    close(s);
}

static void blocking(const struct args *a)
{
    printf("-- a blocking connect to ::ffff:SERVER_IP\n");
    struct sockaddr_in6 server = mapped_of(a->server_ip, a->port);
    int one = 1;
    int s = socket6(0);
    printf("connect: %s\n", connect_raw(s, &server, sizeof server));
    print_names(s, a);
    printf("IPV6_V6ONLY once connected: %s\n",
           res(setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one)));
    printf("connect again: %s\n", connect_raw(s, &server, sizeof server));
    ping(s);

    int ep = epoll_create1(0);
    CHECK(ep >= 0, "epoll_create1");
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = s};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) == 0, "epoll_ctl");
    write_str(s, "p");
    struct epoll_event got;
    int n = epoll_wait(ep, &got, 1, 10000);
    printf("epoll_wait: %d, EPOLLIN %s\n", n, yn(n == 1 && (got.events & EPOLLIN)));
    expect_str(s, "pong");
    close(ep);

    const char *tmp = getenv("TMPDIR");
    char pathbuf[512];
    snprintf(pathbuf, sizeof pathbuf, "%s/ipv6-sendfile-XXXXXX", tmp ? tmp : "/tmp");
    int f = mkstemp(pathbuf);
    CHECK(f >= 0, "mkstemp");
    unlink(pathbuf);
    write_str(f, "p");
    off_t off = 0;
    printf("sendfile: %zd\n", sendfile(s, f, &off, 1));
    expect_str(s, "pong");
    close(f);
    write_str(s, "q");
    close(s);
}

static void nonblocking(const struct args *a)
{
    printf("-- a non-blocking connect\n");
    struct sockaddr_in6 server = mapped_of(a->server_ip, a->port);
    int s = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(s >= 0, "socket");
    printf("connect: %s\n", connect_raw(s, &server, sizeof server));
    struct pollfd p = {.fd = s, .events = POLLOUT};
    int n = poll(&p, 1, 10000);
    printf("poll: %d, POLLOUT %s\n", n, yn(p.revents & POLLOUT));
    int err = -1;
    socklen_t len = sizeof err;
    CHECK(getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) == 0, "SO_ERROR");
    printf("SO_ERROR: %s\n", errname(err));
    print_names(s, a);
    ping(s);
    write_str(s, "q");
    close(s);
}

static void v6only_and_bound(const struct args *a)
{
    printf("-- IPV6_V6ONLY\n");
    struct sockaddr_in6 server = mapped_of(a->server_ip, a->port);
    struct sockaddr_in6 self = mapped_of(a->self_ip, 0);
    int s = socket6(1);
    printf("connect to ::ffff:SERVER_IP: %s\n", connect_raw(s, &server, sizeof server));
    printf("bind ::ffff:SELF_IP: %s\n", bind_raw(s, &self, sizeof self));
    close(s);

    printf("-- a socket bound to ::ffff:SELF_IP\n");
    s = socket6(0);
    printf("bind: %s\n", bind_raw(s, &self, sizeof self));
    struct sockaddr_in6 got = name6(s, 0);
    printf("getsockname is ::ffff:SELF_IP: %s, IPV6_V6ONLY %d\n", yn(same6(&got, &self, 0)),
           v6only_of(s));
    struct sockaddr_in6 six = addr6_of("2001:db8::1", a->port);
    printf("connect to an IPv6 address: %s\n", connect_raw(s, &six, sizeof six));
    printf("connect to ::ffff:SERVER_IP: %s\n", connect_raw(s, &server, sizeof server));
    print_names(s, a);
    ping(s);
    write_str(s, "q");
    close(s);
}

static void refused_addresses(const struct args *a)
{
    printf("-- addresses Linux refuses\n");
    struct sockaddr_in6 server = mapped_of(a->server_ip, a->port);
    struct sockaddr_in four = addr_of(a->server_ip, a->port);
    unsigned char four_long[sizeof(struct sockaddr_in6)] = {0};
    memcpy(four_long, &four, sizeof four);
    struct sockaddr_in6 ll = addr6_of("fe80::1", a->port);
    struct sockaddr_in6 group = addr6_of("ff02::1", a->port);
    unsigned char big[200] = {0};
    memcpy(big, &server, sizeof server);
    int s = socket6(0);
    printf("connect, 23 bytes: %s\n", connect_raw(s, &server, 23));
    printf("connect, a sockaddr_in: %s\n", connect_raw(s, &four, sizeof four));
    printf("connect, AF_INET in 28 bytes: %s\n", connect_raw(s, four_long, sizeof four_long));
    printf("connect, 200 bytes: %s\n", connect_raw(s, big, sizeof big));
    printf("connect, no address: %s\n", connect_raw(s, NULL, sizeof server));
    printf("connect, link-local without a scope: %s\n", connect_raw(s, &ll, sizeof ll));
    printf("bind, link-local without a scope: %s\n", bind_raw(s, &ll, sizeof ll));
    printf("bind, a group: %s\n", bind_raw(s, &group, sizeof group));
    printf("bind, 23 bytes: %s\n", bind_raw(s, &server, 23));
    printf("bind, AF_INET in 28 bytes: %s\n", bind_raw(s, four_long, sizeof four_long));
    close(s);
    s = socket6(0);
    printf("connect, a group: %s\n", connect_raw(s, &group, sizeof group));
    close(s);
    s = socket6(0);
    struct sockaddr_in6 unrouted = addr6_of("2001:db8::1", a->port);
    printf("connect, no route: %s\n", connect_raw(s, &unrouted, sizeof unrouted));
    close(s);
    int s4 = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(s4 >= 0, "socket");
    printf("AF_INET connect, a sockaddr_in6: %s\n", connect_raw(s4, &server, sizeof server));
    printf("AF_INET bind, a sockaddr_in6: %s\n", bind_raw(s4, &server, sizeof server));
    int one = 1, v;
    socklen_t len = sizeof v;
    printf("AF_INET IPV6_V6ONLY: set %s, get %s\n",
           res(setsockopt(s4, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one)),
           res(getsockopt(s4, IPPROTO_IPV6, IPV6_V6ONLY, &v, &len)));
    close(s4);
}

static void cross_family_binds(const struct args *a)
{
    printf("-- binds beside an AF_INET socket on SELF_IP\n");
    int port = a->port + 1;
    struct sockaddr_in own = addr_of(a->self_ip, port);
    int s4 = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(s4 >= 0, "socket");
    printf("AF_INET SELF_IP: %s\n", bind_raw(s4, &own, sizeof own));
    struct sockaddr_in6 any = addr6_of("::", port);
    struct sockaddr_in6 mine = mapped_of(a->self_ip, port);
    int s = socket6(0);
    printf("AF_INET6 [::]: %s\n", bind_raw(s, &any, sizeof any));
    close(s);
    s = socket6(0);
    printf("AF_INET6 ::ffff:SELF_IP: %s\n", bind_raw(s, &mine, sizeof mine));
    close(s);
    s = socket6(1);
    printf("AF_INET6 [::] IPV6_V6ONLY: %s\n", bind_raw(s, &any, sizeof any));
    close(s);
    close(s4);
}

static void loopback(const struct args *a)
{
    printf("-- loopback\n");
    int port = a->port + 2;
    struct sockaddr_in6 lo = addr6_of("::1", port), any = addr6_of("::", port);
    int l = listen6_quietly(lo, 0);
    for (int i = 0; i < 2; i++) {
        struct sockaddr_in6 *to = i == 0 ? &lo : &any;
        int c = socket6(0);
        printf("connect to %s: %s\n", i == 0 ? "[::1]" : "[::]", connect_raw(c, to, sizeof *to));
        struct sockaddr_in6 peer;
        socklen_t len = sizeof peer;
        int s = accept(l, (struct sockaddr *)&peer, &len);
        CHECK(s >= 0, "accept");
        struct sockaddr_in6 got = name6(c, 1), self = name6(c, 0);
        printf("peer is [::1]:PORT+2 %s, own address [::1] %s, accept's peer is it %s\n",
               yn(same6(&got, &lo, 1)), yn(same6(&self, &lo, 0)), yn(same6(&peer, &self, 1)));
        write_str(c, "x");
        expect_str(s, "x");
        close(s);
        close(c);
    }
    close(l);
}

static void client(const struct args *a)
{
    fresh_socket();
    blocking(a);
    nonblocking(a);
    v6only_and_bound(a);
    refused_addresses(a);
    cross_family_binds(a);
    loopback(a);
}

static void server(const struct args *a)
{
    int l = listen_on(a->server_ip, a->port);
    for (int i = 0; i < CONNECTIONS; i++) {
        int c = accept_one(l);
        answer_commands(c, 'p', "pong");
        close(c);
    }
    close(l);
}

RUN_ROLES(server, client)
