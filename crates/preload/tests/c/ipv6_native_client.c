/*
 * A client on an IPv6 link: an AF_INET6 connection to the server's IPv6 address,
 * blocking (its first, made as the stack starts) and non-blocking; one to the server's
 * link-local address, which needs the link's scope; one to its IPv4-mapped address;
 * and the errors a connect from a bound socket gets for the other family.
 *
 * The client is the side under test; the server, on [::] (IPV6_V6ONLY off), answers
 * "pong" to each 'p' on five connections. Needs both sides' IPv6 addresses.
 */
#include "common.h"

#include <ifaddrs.h>

/* The TAP of the test's namespace (see tests/common). */
#define LINK "csuite0"
#define CONNECTIONS 5

static void ping_and_quit(int fd)
{
    write_str(fd, "p");
    expect_str(fd, "pong");
    write_str(fd, "q");
    close(fd);
}

static void print_names(int fd, const char *self, struct sockaddr_in6 server)
{
    struct sockaddr_in6 want = addr6_of(self, 0), got = name6(fd, 0);
    printf("getsockname is SELF_IP6: %s, with a port %s, IPV6_V6ONLY %d\n",
           yn(same6(&got, &want, 0)), yn(got.sin6_port != 0), v6only_of(fd));
    got = name6(fd, 1);
    printf("getpeername is the server: %s\n", yn(same6(&got, &server, 1)));
}

/* The namespace kernel's link-local address on the TAP. */
static struct sockaddr_in6 kernel_link_local(int port)
{
    struct ifaddrs *all, *i;
    struct sockaddr_in6 found;
    int have = 0;
    CHECK(getifaddrs(&all) == 0, "getifaddrs");
    for (i = all; i && !have; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET6 || strcmp(i->ifa_name, LINK) != 0)
            continue;
        memcpy(&found, i->ifa_addr, sizeof found);
        have = IN6_IS_ADDR_LINKLOCAL(&found.sin6_addr);
    }
    freeifaddrs(all);
    CHECK(have, "no link-local address on %s", LINK);
    found.sin6_port = htons((uint16_t)port);
    found.sin6_scope_id = 0;
    return found;
}

static void client(const struct args *a)
{
    CHECK(a->server_ip6, "no IPv6 address given");
    struct sockaddr_in6 server = addr6_of(a->server_ip6, a->port);

    printf("-- IPv6, blocking\n");
    int s = socket(AF_INET6, SOCK_STREAM, 0);
    CHECK(s >= 0, "socket");
    printf("connect: %s\n", res(connect(s, (struct sockaddr *)&server, sizeof server)));
    print_names(s, a->self_ip6, server);
    ping_and_quit(s);

    printf("-- IPv6, non-blocking\n");
    s = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(s >= 0, "socket");
    printf("connect: %s\n", res(connect(s, (struct sockaddr *)&server, sizeof server)));
    struct pollfd p = {.fd = s, .events = POLLOUT};
    int n = poll(&p, 1, 10000);
    int err = -1;
    socklen_t len = sizeof err;
    CHECK(getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) == 0, "SO_ERROR");
    printf("poll: %d, POLLOUT %s, SO_ERROR %s\n", n, yn(p.revents & POLLOUT), errname(err));
    print_names(s, a->self_ip6, server);
    int flags = fcntl(s, F_GETFL);
    CHECK(fcntl(s, F_SETFL, flags & ~O_NONBLOCK) == 0, "F_SETFL");
    ping_and_quit(s);

    printf("-- the server's link-local address\n");
    struct sockaddr_in6 ll = kernel_link_local(a->port);
    s = socket(AF_INET6, SOCK_STREAM, 0);
    CHECK(s >= 0, "socket");
    printf("connect without a scope: %s\n", res(connect(s, (struct sockaddr *)&ll, sizeof ll)));
    ll.sin6_scope_id = if_nametoindex(LINK);
    printf("connect with the link's: %s\n", res(connect(s, (struct sockaddr *)&ll, sizeof ll)));
    struct sockaddr_in6 got = name6(s, 1);
    printf("getpeername is it, scope and all: %s\n", yn(same6(&got, &ll, 1)));
    got = name6(s, 0);
    printf("getsockname: link-local %s, the link's scope %s\n",
           yn(IN6_IS_ADDR_LINKLOCAL(&got.sin6_addr)), yn(got.sin6_scope_id == ll.sin6_scope_id));
    ping_and_quit(s);

    printf("-- ::ffff:SERVER_IP\n");
    struct sockaddr_in6 mapped = mapped_of(a->server_ip, a->port);
    s = connect6(mapped);
    got = name6(s, 1);
    printf("getpeername is it: %s\n", yn(same6(&got, &mapped, 1)));
    ping_and_quit(s);

    printf("-- bound sockets and the other family\n");
    struct sockaddr_in6 self4 = mapped_of(a->self_ip, 0), self6 = addr6_of(a->self_ip6, 0);
    s = socket(AF_INET6, SOCK_STREAM, 0);
    CHECK(s >= 0 && bind(s, (struct sockaddr *)&self4, sizeof self4) == 0, "bind mapped");
    printf("bound to ::ffff:SELF_IP, connect to the server's IPv6 address: %s\n",
           res(connect(s, (struct sockaddr *)&server, sizeof server)));
    close(s);
    s = socket(AF_INET6, SOCK_STREAM, 0);
    CHECK(s >= 0 && bind(s, (struct sockaddr *)&self6, sizeof self6) == 0, "bind SELF_IP6");
    printf("bound to SELF_IP6: IPV6_V6ONLY %d\n", v6only_of(s));
    printf("connect to ::ffff:SERVER_IP: %s\n",
           res(connect(s, (struct sockaddr *)&mapped, sizeof mapped)));
    printf("connect to the server's IPv6 address: %s\n",
           res(connect(s, (struct sockaddr *)&server, sizeof server)));
    print_names(s, a->self_ip6, server);
    ping_and_quit(s);
}

static void server(const struct args *a)
{
    CHECK(a->server_ip6, "no IPv6 address given");
    int l = listen6_quietly(addr6_of("::", a->port), 0);
    announce_listening();
    for (int i = 0; i < CONNECTIONS; i++) {
        int c = accept_one(l);
        answer_commands(c, 'p', "pong");
        close(c);
    }
    close(l);
}

RUN_ROLES(server, client)
