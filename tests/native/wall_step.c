/* A wall-clock step for one process tree, for tests: LD_PRELOAD this and every read of the wall clock
 * (clock_gettime of CLOCK_REALTIME, gettimeofday, time) is moved by the whole seconds written in the file
 * named by WALL_STEP_FILE, read again at each call. The monotonic and boot clocks are left alone, as a real
 * step (`date -s`, an NTP step) leaves them. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static long long step_seconds(void) {
    const char *path = getenv("WALL_STEP_FILE");
    long long seconds = 0;
    if (path == NULL)
        return 0;
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return 0;
    if (fscanf(file, "%lld", &seconds) != 1)
        seconds = 0;
    fclose(file);
    return seconds;
}

int clock_gettime(clockid_t clock, struct timespec *now) {
    static int (*real)(clockid_t, struct timespec *) = NULL;
    if (real == NULL)
        real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int result = real(clock, now);
    if (result == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE))
        now->tv_sec += step_seconds();
    return result;
}

int gettimeofday(struct timeval *restrict now, void *restrict zone) {
    struct timespec spec;
    (void)zone;
    if (clock_gettime(CLOCK_REALTIME, &spec) != 0)
        return -1;
    now->tv_sec = spec.tv_sec;
    now->tv_usec = spec.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *now) {
    struct timespec spec;
    clock_gettime(CLOCK_REALTIME, &spec);
    if (now != NULL)
        *now = spec.tv_sec;
    return spec.tv_sec;
}
