/*
 * Several processes of one program as clients on one link: the client forks its
 * children before making any socket, and each child connects to the server, sends a
 * line and reads it back. On Rusty each child runs a stack of its own on its own queue
 * of the link, and each must reach the server, whichever queue the kernel steers the
 * replies to its address resolution to.
 *
 * The client is the side under test; the server echoes one line on each of CHILDREN
 * connections, one after another.
 */
#include "common.h"

#include <sys/wait.h>

#define CHILDREN 3

static void server(const struct args *a)
{
    int lfd = listen_on(a->server_ip, a->port);
    for (int i = 0; i < CHILDREN; i++) {
        int fd = accept_one(lfd);
        char line[64];
        size_t n = 0;
        while (n < sizeof line - 1) {
            read_full(fd, line + n, 1);
            if (line[n++] == '\n')
                break;
        }
        write_full(fd, line, n);
        close(fd);
    }
    close(lfd);
    printf("served %d\n", CHILDREN);
}

static int child(const struct args *a, int i)
{
    char line[32];
    char back[32];
    int n = snprintf(line, sizeof line, "child %d\n", i);
    int fd = connect_to(a->server_ip, a->port);
    write_full(fd, line, (size_t)n);
    read_full(fd, back, (size_t)n);
    close(fd);
    return memcmp(line, back, (size_t)n) == 0 ? 0 : 1;
}

static void client(const struct args *a)
{
    pid_t pids[CHILDREN];
    /* All children at once, each on its own queue of the link while the others are
     * there too; the output follows the children's order whatever order they finish. */
    for (int i = 0; i < CHILDREN; i++) {
        pids[i] = fork();
        CHECK(pids[i] >= 0, "fork");
        if (pids[i] == 0) {
            fflush(stdout);
            _exit(child(a, i));
        }
    }
    for (int i = 0; i < CHILDREN; i++) {
        int status;
        CHECK(waitpid(pids[i], &status, 0) == pids[i], "waitpid");
        printf("child %d: %s\n", i,
               WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "echoed" : "failed");
    }
    printf("done\n");
}

RUN_ROLES(server, client)
