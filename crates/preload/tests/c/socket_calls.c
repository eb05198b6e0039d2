/*
 * The everyday calls on a TCP socket: socket options (SO_REUSEADDR, SO_KEEPALIVE,
 * TCP_NODELAY, SO_RCVBUF, SO_SNDBUF, SO_TYPE, SO_ERROR), fcntl (O_NONBLOCK, FD_CLOEXEC,
 * F_DUPFD_CLOEXEC), ioctl (FIONBIO, FIONREAD), getsockname/getpeername, and the data
 * calls readv/writev/recvmsg/sendmsg/recv/send/recvfrom with MSG_PEEK, MSG_DONTWAIT and
 * MSG_WAITALL. Buffer sizes print only whether the call worked: their values differ.
 *
 * The client is the side under test (give it its own address as SELF_IP); the server
 * echoes one connection.
 */
#include "common.h"

#include <sys/ioctl.h>
#include <sys/uio.h>

static void boolopt(int fd, int level, int name, const char *label)
{
    int v = -1, one = 1;
    socklen_t len = sizeof v;
    int r = getsockopt(fd, level, name, &v, &len);
    printf("%s: get %s %d", label, res(r), v);
    r = setsockopt(fd, level, name, &one, sizeof one);
    printf(", set 1 %s", res(r));
    v = -1;
    len = sizeof v;
    r = getsockopt(fd, level, name, &v, &len);
    printf(", get %s %d (len %u)\n", res(r), v, (unsigned)len);
}

static void sizeopt(int fd, int name, const char *label)
{
    int v = 65536;
    socklen_t len = sizeof v;
    int r = setsockopt(fd, SOL_SOCKET, name, &v, sizeof v);
    printf("%s: set %s", label, res(r));
    v = 0;
    r = getsockopt(fd, SOL_SOCKET, name, &v, &len);
    printf(", get %s, positive %s\n", res(r), yn(v > 0));
}

static int flag(int fd, int cmd, int bit)
{
    int f = fcntl(fd, cmd);
    CHECK(f >= 0, "fcntl get");
    return (f & bit) != 0;
}

static int fionread(int fd)
{
    int n = -1;
    CHECK(ioctl(fd, FIONREAD, &n) == 0, "FIONREAD");
    return n;
}

/* Wait (bounded) until at least n bytes are queued for reading: what FIONREAD then
 * says does not depend on how the bytes were split into segments. */
static void wait_queued(int fd, int n)
{
    for (int i = 0; i < 5000 && fionread(fd) < n; i++) {
        wait_readable(fd, 10);
        usleep(1000);
    }
    CHECK(fionread(fd) >= n, "fewer than %d bytes queued", n);
}

static void client(const struct args *a)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    int v, r, d;
    char buf[64], b1[8], b2[8];
    ssize_t n;

    CHECK(s >= 0, "socket");
    printf("-- options\n");
    boolopt(s, SOL_SOCKET, SO_REUSEADDR, "SO_REUSEADDR");
    boolopt(s, SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE");
    boolopt(s, IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY");
    sizeopt(s, SO_RCVBUF, "SO_RCVBUF");
    sizeopt(s, SO_SNDBUF, "SO_SNDBUF");
    {
        socklen_t len = sizeof v;
        r = getsockopt(s, SOL_SOCKET, SO_TYPE, &v, &len);
        printf("SO_TYPE: %s %s\n", res(r), v == SOCK_STREAM ? "SOCK_STREAM" : "other");
        len = sizeof v;
        r = getsockopt(s, SOL_SOCKET, SO_ERROR, &v, &len);
        printf("SO_ERROR: %s %s\n", res(r), errname(v));
        len = sizeof v;
        r = getsockopt(s, SOL_SOCKET, 12345, &v, &len);
        printf("unknown option: %s\n", res(r));
    }

    printf("-- fcntl and ioctl\n");
    printf("O_NONBLOCK: %d", flag(s, F_GETFL, O_NONBLOCK));
    r = fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK);
    printf(", set %s, now %d", res(r), flag(s, F_GETFL, O_NONBLOCK));
    r = fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK);
    printf(", cleared %s, now %d\n", res(r), flag(s, F_GETFL, O_NONBLOCK));
    printf("O_RDWR: %s\n", yn((fcntl(s, F_GETFL) & O_ACCMODE) == O_RDWR));
    printf("FD_CLOEXEC: %d", flag(s, F_GETFD, FD_CLOEXEC));
    r = fcntl(s, F_SETFD, FD_CLOEXEC);
    printf(", set %s, now %d\n", res(r), flag(s, F_GETFD, FD_CLOEXEC));
    v = 1;
    r = ioctl(s, FIONBIO, &v);
    printf("FIONBIO 1: %s, O_NONBLOCK %d", res(r), flag(s, F_GETFL, O_NONBLOCK));
    v = 0;
    r = ioctl(s, FIONBIO, &v);
    printf("; FIONBIO 0: %s, O_NONBLOCK %d\n", res(r), flag(s, F_GETFL, O_NONBLOCK));
    {
        struct sockaddr_in sa;
        socklen_t len = sizeof sa;
        r = getpeername(s, (struct sockaddr *)&sa, &len);
        printf("getpeername before connect: %s\n", res(r));
        n = recv(s, buf, 1, MSG_DONTWAIT);
        printf("recv before connect: %zd %s\n", n, n < 0 ? errname(errno) : "");
    }

    printf("-- connected\n");
    {
        struct sockaddr_in sa = addr_of(a->server_ip, a->port);
        struct sockaddr_in me, peer;
        socklen_t len = sizeof me;
        CHECK(connect(s, (struct sockaddr *)&sa, sizeof sa) == 0, "connect");
        r = getsockname(s, (struct sockaddr *)&me, &len);
        printf("getsockname: %s, len %u, AF_INET %s, port set %s", res(r), (unsigned)len,
               yn(me.sin_family == AF_INET), yn(me.sin_port != 0));
        if (a->self_ip) {
            struct sockaddr_in self = addr_of(a->self_ip, 0);
            printf(", own address %s", yn(me.sin_addr.s_addr == self.sin_addr.s_addr));
        }
        printf("\n");
        len = sizeof peer;
        r = getpeername(s, (struct sockaddr *)&peer, &len);
        printf("getpeername: %s, len %u, AF_INET %s, server's address %s, port %s\n", res(r),
               (unsigned)len, yn(peer.sin_family == AF_INET),
               yn(peer.sin_addr.s_addr == sa.sin_addr.s_addr), yn(peer.sin_port == sa.sin_port));
        len = sizeof v;
        r = getsockopt(s, IPPROTO_TCP, TCP_NODELAY, &v, &len);
        printf("TCP_NODELAY still %d\n", v);
    }

    printf("-- data\n");
    printf("FIONREAD idle: %d\n", fionread(s));
    n = recv(s, buf, sizeof buf, MSG_DONTWAIT);
    printf("recv MSG_DONTWAIT idle: %zd %s\n", n, n < 0 ? errname(errno) : "");
    {
        struct iovec iov[3] = {{"ab", 2}, {"cde", 3}, {"fgh", 3}};
        n = writev(s, iov, 3);
        printf("writev: %zd\n", n);
    }
    wait_queued(s, 8);
    printf("FIONREAD: %d\n", fionread(s));
    n = recv(s, buf, 3, MSG_PEEK);
    printf("recv MSG_PEEK 3: %zd \"%.*s\"\n", n, (int)(n > 0 ? n : 0), buf);
    n = recv(s, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
    printf("recv MSG_PEEK|MSG_DONTWAIT: %zd \"%.*s\"\n", n, (int)(n > 0 ? n : 0), buf);
    printf("FIONREAD after peeking: %d\n", fionread(s));
    {
        struct iovec iov[2] = {{b1, 2}, {b2, 6}};
        n = readv(s, iov, 2);
        printf("readv: %zd \"%.2s\" \"%.6s\"\n", n, b1, b2);
    }
    printf("FIONREAD after reading: %d\n", fionread(s));
    n = recv(s, buf, sizeof buf, MSG_DONTWAIT);
    printf("recv MSG_DONTWAIT drained: %zd %s\n", n, n < 0 ? errname(errno) : "");

    {
        struct iovec iov[2] = {{"hello ", 6}, {"world", 5}};
        struct msghdr m;
        memset(&m, 0, sizeof m);
        m.msg_iov = iov;
        m.msg_iovlen = 2;
        n = sendmsg(s, &m, MSG_NOSIGNAL);
        printf("sendmsg: %zd\n", n);
    }
    wait_queued(s, 11);
    {
        struct iovec iov[2] = {{b1, 5}, {b2, 6}};
        struct msghdr m;
        memset(&m, 0, sizeof m);
        m.msg_iov = iov;
        m.msg_iovlen = 2;
        n = recvmsg(s, &m, 0);
        printf("recvmsg: %zd \"%.5s\" \"%.6s\" flags %d namelen %u\n", n, b1, b2, m.msg_flags,
               (unsigned)m.msg_namelen);
    }

    n = send(s, "xyz", 3, MSG_DONTWAIT);
    printf("send MSG_DONTWAIT: %zd\n", n);
    n = recv(s, buf, 3, MSG_WAITALL);
    printf("recv MSG_WAITALL: %zd \"%.3s\"\n", n, buf);
    n = send(s, "uvw", 3, 0);
    printf("send: %zd\n", n);
    {
        struct sockaddr_in from;
        socklen_t len = sizeof from;
        n = recvfrom(s, buf, 3, MSG_WAITALL, (struct sockaddr *)&from, &len);
        printf("recvfrom: %zd \"%.3s\" addrlen %u\n", n, buf, (unsigned)len);
    }

    d = fcntl(s, F_DUPFD_CLOEXEC, 0);
    printf("F_DUPFD_CLOEXEC: %s, FD_CLOEXEC %d\n", res(d), flag(d, F_GETFD, FD_CLOEXEC));
    n = send(d, "dup", 3, 0);
    n = n == 3 ? recv(s, buf, 3, MSG_WAITALL) : n;
    printf("through the F_DUPFD_CLOEXEC copy: %zd \"%.3s\"\n", n, buf);
    close(d);

    printf("-- end\n");
    printf("shutdown(SHUT_WR): %s\n", res(shutdown(s, SHUT_WR)));
    CHECK(wait_readable(s, 10000), "EOF");
    n = recv(s, buf, sizeof buf, 0);
    printf("recv at EOF: %zd\n", n);
    printf("FIONREAD at EOF: %d\n", fionread(s));
    CHECK(close(s) == 0, "close");
    v = 0;
    {
        socklen_t len = sizeof v;
        r = getsockopt(s, SOL_SOCKET, SO_ERROR, &v, &len);
        printf("getsockopt after close: %s\n", res(r));
    }
    printf("done\n");
}

static void server(const struct args *a)
{
    int lfd = listen_on(a->server_ip, a->port);
    int fd = accept_one(lfd);
    echo_until_eof(fd);
    close(fd);
    close(lfd);
    printf("served\n");
}

RUN_ROLES(server, client)
