/*
 * A server on an IPv6 link: one AF_INET6 socket on [::] (IPV6_V6ONLY off) takes an
 * IPv4 client, shown IPv4-mapped, and an IPv6 one; an IPV6_V6ONLY listener refuses
 * IPv4 at once (ECONNREFUSED, which the client reports over its next connection) and
 * takes IPv6; a socket bound to the server's IPv6 address is IPv6-only.
 *
 * The server is the side under test; the client connects four times. Needs both
 * sides' IPv6 addresses (SERVER_IP6 SELF_IP6).
 */
#include "common.h"

/* Whether the address of a is in own's /64, and its last 16 bits: the client's address
 * differs between the runs, its host part does not. */
static void print_peer6(const struct sockaddr_in6 *a, const char *own)
{
    struct in6_addr mine;
    CHECK(inet_pton(AF_INET6, own, &mine) == 1, "own address");
    printf("peer: IPv4-mapped %s, in our /64 %s, host ::%x, scope %u\n",
           yn(IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)),
           yn(memcmp(&mine, &a->sin6_addr, 8) == 0),
           (a->sin6_addr.s6_addr[14] << 8) | a->sin6_addr.s6_addr[15],
           (unsigned)a->sin6_scope_id);
}

static void print_peer4(const struct sockaddr_in6 *a, const char *own)
{
    struct in_addr mine, peer;
    CHECK(inet_pton(AF_INET, own, &mine) == 1, "own address");
    memcpy(&peer, &a->sin6_addr.s6_addr[12], 4);
    printf("peer: IPv4-mapped %s, in our /24 %s, host .%u\n",
           yn(IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)),
           yn((ntohl(mine.s_addr) >> 8) == (ntohl(peer.s_addr) >> 8)), ntohl(peer.s_addr) & 0xff);
}

/* Accept one connection on l, expected at `own` (our address as the socket names it):
 * print what accept and the names say; the connection is returned. */
static int take(int l, const char *label, struct sockaddr_in6 own, const struct args *a)
{
    struct sockaddr_in6 peer;
    socklen_t len = sizeof peer;
    int c = accept(l, (struct sockaddr *)&peer, &len);
    CHECK(c >= 0, "accept");
    printf("-- %s\n", label);
    printf("accept: AF_INET6 %s, length %u\n", yn(peer.sin6_family == AF_INET6), (unsigned)len);
    if (IN6_IS_ADDR_V4MAPPED(&peer.sin6_addr))
        print_peer4(&peer, a->server_ip);
    else
        print_peer6(&peer, a->server_ip6);
    struct sockaddr_in6 got = name6(c, 1);
    printf("getpeername is accept's: %s\n", yn(same6(&got, &peer, 1)));
    got = name6(c, 0);
    printf("getsockname is ours: %s\n", yn(same6(&got, &own, 1)));
    return c;
}

static void hello(int c)
{
    expect_str(c, "hello");
    write_str(c, "world");
    close(c);
}

static void server(const struct args *a)
{
    CHECK(a->server_ip6, "no IPv6 address given");
    int dual = listen6_quietly(addr6_of("::", a->port), 0);
    int only6 = listen6_quietly(addr6_of("::", a->port + 1), 1);
    struct sockaddr_in6 own6 = addr6_of(a->server_ip6, a->port + 2);
    int spec = socket(AF_INET6, SOCK_STREAM, 0);
    CHECK(spec >= 0, "socket");
    printf("bind [SERVER_IP6]: %s\n", res(bind(spec, (struct sockaddr *)&own6, sizeof own6)));
    printf("IPV6_V6ONLY once bound to it: %d\n", v6only_of(spec));
    CHECK(listen(spec, 16) == 0, "listen");
    announce_listening();

    hello(take(dual, "[::]: an AF_INET client", mapped_of(a->server_ip, a->port), a));
    hello(take(dual, "[::]: an AF_INET6 client", addr6_of(a->server_ip6, a->port), a));
    int c = take(only6, "[::] IPV6_V6ONLY: an AF_INET6 client",
                 addr6_of(a->server_ip6, a->port + 1), a);
    char line[128];
    size_t n = 0;
    while (n < sizeof line - 1) {
        read_full(c, &line[n], 1);
        if (line[n++] == '\n')
            break;
    }
    line[n] = 0;
    printf("the client says: %s", line);
    hello(c);
    hello(take(spec, "[SERVER_IP6]: an AF_INET6 client", own6, a));
    close(dual);
    close(only6);
    close(spec);
}

static void say_hello(int fd)
{
    write_str(fd, "hello");
    expect_str(fd, "world");
    close(fd);
}

static void client(const struct args *a)
{
    CHECK(a->server_ip6, "no IPv6 address given");
    say_hello(connect_to(a->server_ip, a->port));
    say_hello(connect6(addr6_of(a->server_ip6, a->port)));
    struct sockaddr_in refused = addr_of(a->server_ip, a->port + 1);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(s >= 0, "socket");
    int r = connect(s, (struct sockaddr *)&refused, sizeof refused);
    char report[128];
    snprintf(report, sizeof report, "AF_INET to the IPv6-only port: %s\n", res(r));
    close(s);
    s = connect6(addr6_of(a->server_ip6, a->port + 1));
    write_str(s, report);
    say_hello(s);
    say_hello(connect6(addr6_of(a->server_ip6, a->port + 2)));
}

RUN_ROLES(server, client)
