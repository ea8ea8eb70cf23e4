/*
 * write-floor: what one thread pays to write a small event to N loopback TCP sockets, with no
 * server around it: the kernel's floor under one fan-out of streams.sh MODE=fanout.
 *
 *   write-floor [--streams N] [--bytes B] [--rounds R] [--port P]
 *
 * Opens N connections to itself on 127.0.0.1:P (sources 127.0.0.1-4, as sse-load), then R times
 * writes B bytes to each accepted socket in one loop and prints the time; the client ends are
 * drained between rounds (nobody waits on them, so no reader is woken: a floor).
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    int n = 9000, bytes = 100, rounds = 5, port = 58190;
    static struct option opts[] = {{"streams", 1, 0, 'n'},
                                   {"bytes", 1, 0, 'b'},
                                   {"rounds", 1, 0, 'r'},
                                   {"port", 1, 0, 'p'},
                                   {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'n':
            n = atoi(optarg);
            break;
        case 'b':
            bytes = atoi(optarg);
            break;
        case 'r':
            rounds = atoi(optarg);
            break;
        case 'p':
            port = atoi(optarg);
            break;
        default:
            fprintf(stderr, "see the comment at the top of write_floor.c\n");
            return 2;
        }
    }
    if (n < 1 || bytes < 1 || bytes > 4096 || rounds < 1) return 2;
    /* Both ends live in this process: 2N descriptors. */
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(lfd, 4096) != 0) {
        perror("listen");
        return 1;
    }
    int *srv = calloc((size_t)n, sizeof(int)), *cli = calloc((size_t)n, sizeof(int));
    for (int i = 0; i < n; i++) {
        struct sockaddr_in src = {.sin_family = AF_INET};
        char ip[32];
        snprintf(ip, sizeof(ip), "127.0.0.%d", 1 + i % 4);
        inet_pton(AF_INET, ip, &src.sin_addr);
        cli[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (cli[i] < 0 || bind(cli[i], (struct sockaddr *)&src, sizeof(src)) != 0 ||
            connect(cli[i], (struct sockaddr *)&addr, sizeof(addr)) != 0 ||
            (srv[i] = accept(lfd, NULL, NULL)) < 0) {
            fprintf(stderr, "connection %d: ", i);
            perror("");
            return 1;
        }
    }
    char buf[4096], sink[8192];
    memset(buf, 'x', sizeof(buf));
    for (int r = 0; r < rounds; r++) {
        double t = now_s();
        for (int i = 0; i < n; i++) {
            if (write(srv[i], buf, (size_t)bytes) != bytes) {
                perror("write");
                return 1;
            }
        }
        double d = now_s() - t;
        printf("round %d: %d writes of %d bytes in %.1f ms, %.2f us each\n", r + 1, n, bytes,
               d * 1e3, d * 1e6 / n);
        fflush(stdout);
        for (int i = 0; i < n; i++)
            if (read(cli[i], sink, sizeof(sink)) < 0) perror("read");
    }
    return 0;
}
