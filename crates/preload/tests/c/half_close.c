/*
 * Half-close: the client sends a request and shuts down its sending side; the server
 * reads to EOF, then still sends its whole answer, which the client reads to EOF.
 *
 * Either side may be the one under test: both print only totals and checksums.
 */
#include "common.h"

#define REQUEST_BYTES 1000
#define ANSWER_BYTES 100000
#define ANSWER_CHUNK 10000

static unsigned char pattern(size_t i, unsigned seed) { return (unsigned char)(i * seed + (i >> 8)); }

static uint32_t pattern_fnv(size_t n, unsigned seed)
{
    uint32_t h = FNV_START;
    for (size_t i = 0; i < n; i++) {
        h ^= pattern(i, seed);
        h *= 16777619u;
    }
    return h;
}

static void send_pattern(int fd, size_t n, size_t chunk, unsigned seed)
{
    unsigned char buf[ANSWER_CHUNK];
    for (size_t off = 0; off < n; off += chunk) {
        size_t len = n - off < chunk ? n - off : chunk;
        for (size_t i = 0; i < len; i++)
            buf[i] = pattern(off + i, seed);
        write_full(fd, buf, len);
    }
}

static void client(const struct args *a)
{
    int fd = connect_to(a->server_ip, a->port);
    uint32_t sum = FNV_START;
    size_t n;
    char c;
    ssize_t w;

    send_pattern(fd, REQUEST_BYTES, REQUEST_BYTES, 7);
    printf("shutdown(SHUT_WR): %s\n", res(shutdown(fd, SHUT_WR)));
    w = write(fd, "x", 1);
    printf("write after shutdown: %zd %s\n", w, w < 0 ? errname(errno) : "");
    n = read_to_eof(fd, &sum);
    printf("answer: %zu bytes, checksum %s\n", n,
           sum == pattern_fnv(ANSWER_BYTES, 13) ? "matches" : "differs");
    printf("read after EOF: %zd\n", read(fd, &c, 1));
    close(fd);
    printf("done\n");
}

static void server(const struct args *a)
{
    int lfd = listen_on(a->server_ip, a->port);
    int fd = accept_one(lfd);
    uint32_t sum = FNV_START;
    size_t n = read_to_eof(fd, &sum);
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLOUT | POLLRDHUP};
    char c;

    printf("request: %zu bytes, checksum %s\n", n,
           sum == pattern_fnv(REQUEST_BYTES, 7) ? "matches" : "differs");
    printf("read after EOF: %zd\n", read(fd, &c, 1));
    printf("poll: %d\n", poll(&p, 1, 0));
    printf("revents:%s%s%s%s%s\n", p.revents & POLLIN ? " IN" : "",
           p.revents & POLLOUT ? " OUT" : "", p.revents & POLLRDHUP ? " RDHUP" : "",
           p.revents & POLLHUP ? " HUP" : "", p.revents & POLLERR ? " ERR" : "");
    send_pattern(fd, ANSWER_BYTES, ANSWER_CHUNK, 13);
    printf("sent the answer after EOF\n");
    close(fd);
    close(lfd);
    printf("done\n");
}

RUN_ROLES(server, client)
