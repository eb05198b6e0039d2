/*
 * A dual-stack server: an AF_INET6 socket on [::] with IPV6_V6ONLY off (Linux's
 * default) takes IPv4 clients, which accept, getpeername and getsockname show as
 * IPv4-mapped addresses (::ffff:a.b.c.d); binds of both families on its port conflict
 * as Linux decides; IPV6_V6ONLY cannot change once bound; a socket bound to an
 * IPv4-mapped address. Runs on an IPv4 link: no IPv6 packet is needed.
 *
 * The server is the side under test; the client connects twice, with an AF_INET
 * socket and with an AF_INET6 one to the server's IPv4-mapped address.
 */
#include "common.h"

static int domain_of(int fd)
{
    int v = -1;
    socklen_t len = sizeof v;
    CHECK(getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) == 0, "SO_DOMAIN");
    return v;
}

/* fd if its bind (r) worked; else -1 with bind's errno, fd closed. */
static int bound_or_closed(int fd, int r)
{
    if (r == 0)
        return fd;
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}

static int bind4(const char *ip, int port)
{
    struct sockaddr_in sa = addr_of(ip, port);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0, "socket");
    return bound_or_closed(fd, bind(fd, (struct sockaddr *)&sa, sizeof sa));
}

static int bind6(struct sockaddr_in6 sa, int v6only)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    CHECK(fd >= 0, "socket AF_INET6");
    CHECK(setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only) == 0, "V6ONLY");
    return bound_or_closed(fd, bind(fd, (struct sockaddr *)&sa, sizeof sa));
}

/* The result of a bind made by bind4/bind6 (closing what it made). */
static const char *bound(int fd)
{
    if (fd < 0)
        return errname(errno);
    close(fd);
    return "ok";
}

/* Whether the IPv4 address inside mapped address a is in ip's /24, and its last
 * octet: the client's address differs between the runs, its host part does not. */
static void print_mapped_peer(const char *label, const struct sockaddr_in6 *a, const char *ip)
{
    struct in_addr own, peer;
    CHECK(inet_pton(AF_INET, ip, &own) == 1, "own address");
    memcpy(&peer, &a->sin6_addr.s6_addr[12], 4);
    int same24 = (ntohl(own.s_addr) >> 8) == (ntohl(peer.s_addr) >> 8);
    printf("%s: IPv4-mapped %s, in our /24 %s, host .%u, flow info %u, scope %u\n", label,
           yn(IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)), yn(same24), ntohl(peer.s_addr) & 0xff,
           (unsigned)a->sin6_flowinfo, (unsigned)a->sin6_scope_id);
}

static void serve_one(int l, const struct args *a, const char *label)
{
    struct sockaddr_in6 peer;
    socklen_t len = sizeof peer;
    memset(&peer, 0, sizeof peer);
    int c = accept(l, (struct sockaddr *)&peer, &len);
    CHECK(c >= 0, "accept");
    printf("-- %s\n", label);
    printf("accept: family AF_INET6 %s, length %u\n", yn(peer.sin6_family == AF_INET6),
           (unsigned)len);
    print_mapped_peer("peer", &peer, a->server_ip);
    struct sockaddr_in6 got = name6(c, 1);
    printf("getpeername is accept's: %s\n", yn(same6(&got, &peer, 1)));
    struct sockaddr_in6 own = mapped_of(a->server_ip, a->port);
    got = name6(c, 0);
    printf("getsockname is ::ffff:SERVER_IP:PORT: %s\n", yn(same6(&got, &own, 1)));
    printf("SO_DOMAIN AF_INET6: %s, IPV6_V6ONLY %d\n", yn(domain_of(c) == AF_INET6),
           v6only_of(c));
    /* A buffer too short: cut, with the full length reported. */
    unsigned char cut[16];
    len = sizeof cut;
    CHECK(getpeername(c, (struct sockaddr *)cut, &len) == 0, "getpeername cut");
    printf("getpeername into 16 bytes: length %u, the start of it %s\n", (unsigned)len,
           yn(memcmp(cut, &peer, sizeof cut) == 0));
    expect_str(c, "hello");
    write_str(c, "world");
    close(c);
}

static void server(const struct args *a)
{
    int one = 1;
    int l = socket(AF_INET6, SOCK_STREAM, 0);
    CHECK(l >= 0, "socket AF_INET6");
    printf("SO_DOMAIN AF_INET6: %s\n", yn(domain_of(l) == AF_INET6));
    printf("IPV6_V6ONLY at first: %d\n", v6only_of(l));
    struct sockaddr_in6 name = name6(l, 0);
    struct sockaddr_in6 any = addr6_of("::", 0);
    printf("unbound name is [::]:0: %s\n", yn(same6(&name, &any, 1)));
    CHECK(setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0, "SO_REUSEADDR");
    any = addr6_of("::", a->port);
    CHECK(bind(l, (struct sockaddr *)&any, sizeof any) == 0, "bind [::]");
    CHECK(listen(l, 16) == 0, "listen");
    name = name6(l, 0);
    printf("listener name is [::]:PORT: %s\n", yn(same6(&name, &any, 1)));
    printf("IPV6_V6ONLY once bound: set %s, still %d\n",
           res(setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one)), v6only_of(l));

    printf("-- binds on the dual-stack listener's port\n");
    printf("AF_INET 0.0.0.0: %s\n", bound(bind4("0.0.0.0", a->port)));
    printf("AF_INET SERVER_IP: %s\n", bound(bind4(a->server_ip, a->port)));
    printf("AF_INET6 [::] IPV6_V6ONLY: %s\n", bound(bind6(addr6_of("::", a->port), 1)));
    printf("AF_INET6 ::ffff:SERVER_IP: %s\n", bound(bind6(mapped_of(a->server_ip, a->port), 0)));

    printf("-- binds beside an AF_INET socket on 0.0.0.0\n");
    int port2 = a->port + 1;
    int s4 = bind4("0.0.0.0", port2);
    CHECK(s4 >= 0, "bind 0.0.0.0:%d", port2);
    printf("AF_INET6 [::]: %s\n", bound(bind6(addr6_of("::", port2), 0)));
    printf("AF_INET6 ::ffff:SERVER_IP: %s\n", bound(bind6(mapped_of(a->server_ip, port2), 0)));
    printf("AF_INET6 [::] IPV6_V6ONLY: %s\n", bound(bind6(addr6_of("::", port2), 1)));
    close(s4);

    printf("-- an IPv4-mapped address\n");
    int port3 = a->port + 2;
    struct sockaddr_in6 m = mapped_of(a->server_ip, port3);
    printf("bind with IPV6_V6ONLY: %s\n", bound(bind6(m, 1)));
    int s6 = bind6(m, 0);
    CHECK(s6 >= 0, "bind ::ffff:%s", a->server_ip);
    name = name6(s6, 0);
    printf("bound: name is ::ffff:SERVER_IP:PORT+2 %s, IPV6_V6ONLY %d\n", yn(same6(&name, &m, 1)),
           v6only_of(s6));
    printf("AF_INET SERVER_IP beside it: %s\n", bound(bind4(a->server_ip, port3)));
    printf("AF_INET6 [::] IPV6_V6ONLY beside it: %s\n", bound(bind6(addr6_of("::", port3), 1)));
    close(s6);

    announce_listening();
    serve_one(l, a, "an AF_INET client");
    serve_one(l, a, "an AF_INET6 client of ::ffff:SERVER_IP");
    close(l);
}

static void client(const struct args *a)
{
    int fd = connect_to(a->server_ip, a->port);
    write_str(fd, "hello");
    expect_str(fd, "world");
    close(fd);
    fd = connect6(mapped_of(a->server_ip, a->port));
    write_str(fd, "hello");
    expect_str(fd, "world");
    close(fd);
}

RUN_ROLES(server, client)
