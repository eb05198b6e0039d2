/*
 * sendfile from a regular file to a socket: the whole file from the file position,
 * then a range at an explicit offset (which moves the offset, not the file position),
 * then nothing at end of file. The server checksums every byte it gets and sends the
 * count and checksum back once the client has shut down its sending side.
 *
 * The client is the side under test. It writes its file (300000 bytes of a known
 * pattern) in $TMPDIR, or /tmp, and unlinks it at once.
 */
#include "common.h"

#include <sys/sendfile.h>

#define FILE_BYTES 300000
#define RANGE_OFFSET 1000
#define RANGE_BYTES 5000

static unsigned char pattern(size_t i) { return (unsigned char)(i * 31 + (i >> 9) + 5); }

static void fnv_add(uint32_t *h, unsigned char b)
{
    *h ^= b;
    *h *= 16777619u;
}

static int make_file(void)
{
    const char *dir = getenv("TMPDIR");
    char path[4096];
    unsigned char buf[10000];
    int f;
    snprintf(path, sizeof path, "%s/rusty-sendfile-XXXXXX", dir && *dir ? dir : "/tmp");
    f = mkstemp(path);
    CHECK(f >= 0, "mkstemp %s", path);
    CHECK(unlink(path) == 0, "unlink");
    for (size_t off = 0; off < FILE_BYTES; off += sizeof buf) {
        for (size_t i = 0; i < sizeof buf; i++)
            buf[i] = pattern(off + i);
        write_full(f, buf, sizeof buf);
    }
    CHECK(lseek(f, 0, SEEK_SET) == 0, "lseek");
    return f;
}

static void client(const struct args *a)
{
    int f = make_file();
    int s = connect_to(a->server_ip, a->port);
    uint32_t want = FNV_START;
    size_t total = 0;
    off_t off;
    ssize_t r;
    char reply[128];

    while (total < FILE_BYTES) {
        r = sendfile(s, f, NULL, FILE_BYTES - total);
        CHECK(r > 0, "sendfile returned %zd after %zu bytes", r, total);
        total += (size_t)r;
    }
    printf("sendfile from the file position: %zu bytes\n", total);
    printf("file position after: %lld\n", (long long)lseek(f, 0, SEEK_CUR));

    off = RANGE_OFFSET;
    total = 0;
    while (total < RANGE_BYTES) {
        r = sendfile(s, f, &off, RANGE_BYTES - total);
        CHECK(r > 0, "sendfile at an offset returned %zd", r);
        total += (size_t)r;
    }
    printf("sendfile at offset %d: %zu bytes, offset now %lld, file position %lld\n",
           RANGE_OFFSET, total, (long long)off, (long long)lseek(f, 0, SEEK_CUR));
    r = sendfile(s, f, NULL, 100);
    printf("sendfile at end of file: %zd\n", r);
    CHECK(shutdown(s, SHUT_WR) == 0, "shutdown");

    read_str_to_eof(s, reply, sizeof reply);
    for (size_t i = 0; i < FILE_BYTES; i++)
        fnv_add(&want, pattern(i));
    for (size_t i = RANGE_OFFSET; i < RANGE_OFFSET + RANGE_BYTES; i++)
        fnv_add(&want, pattern(i));
    printf("server: %s", reply);
    {
        char expected[128];
        snprintf(expected, sizeof expected, "received %d bytes, fnv %08x\n",
                 FILE_BYTES + RANGE_BYTES, want);
        printf("server got every byte: %s\n", yn(strcmp(reply, expected) == 0));
    }
    close(s);
    close(f);
    printf("done\n");
}

static void server(const struct args *a)
{
    int lfd = listen_on(a->server_ip, a->port);
    int fd = accept_one(lfd);
    uint32_t sum = FNV_START;
    size_t n = read_to_eof(fd, &sum);
    char line[128];
    snprintf(line, sizeof line, "received %zu bytes, fnv %08x\n", n, sum);
    write_str(fd, line);
    close(fd);
    close(lfd);
    printf("%s", line);
}

RUN_ROLES(server, client)
