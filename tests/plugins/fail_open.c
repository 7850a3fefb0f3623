/* Fault injection for the tests, preloaded (LD_PRELOAD) into a child test process: after
 * fail_open_arm(n), the n-th call of open, open64, openat or openat64 made by the process's
 * own code fails with EMFILE, as if the process had run out of descriptors at exactly that
 * step; every other call is forwarded. The dynamic loader's own opens (dlopen's search) do not
 * go through these functions, so they are never failed. fail_open_left() says how many calls
 * remain before the failure (0 once it happened or when disarmed). */
#define _GNU_SOURCE
#undef _FORTIFY_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/types.h>

static int countdown;

void fail_open_arm(int n);
void fail_open_arm(int n) { __atomic_store_n(&countdown, n, __ATOMIC_SEQ_CST); }

int fail_open_left(void);
int fail_open_left(void) { return __atomic_load_n(&countdown, __ATOMIC_SEQ_CST); }

static int fails_now(void) {
    int left = __atomic_load_n(&countdown, __ATOMIC_SEQ_CST);
    while (left > 0) {
        if (__atomic_compare_exchange_n(&countdown, &left, left - 1, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
            return left == 1;
        }
    }
    return 0;
}

static mode_t mode_of(int flags, va_list args) {
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(args, mode_t) : 0;
}

#define FORWARD_OPEN(name)                                                                 \
    int name(const char *path, int flags, ...) {                                           \
        va_list args;                                                                      \
        va_start(args, flags);                                                             \
        mode_t mode = mode_of(flags, args);                                                \
        va_end(args);                                                                      \
        if (fails_now()) {                                                                 \
            errno = EMFILE;                                                                \
            return -1;                                                                     \
        }                                                                                  \
        int (*real)(const char *, int, ...) =                                              \
            (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, #name);                      \
        return real(path, flags, mode);                                                    \
    }

#define FORWARD_OPENAT(name)                                                               \
    int name(int dir, const char *path, int flags, ...) {                                  \
        va_list args;                                                                      \
        va_start(args, flags);                                                             \
        mode_t mode = mode_of(flags, args);                                                \
        va_end(args);                                                                      \
        if (fails_now()) {                                                                 \
            errno = EMFILE;                                                                \
            return -1;                                                                     \
        }                                                                                  \
        int (*real)(int, const char *, int, ...) =                                         \
            (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, #name);                 \
        return real(dir, path, flags, mode);                                               \
    }

FORWARD_OPEN(open)
FORWARD_OPEN(open64)
FORWARD_OPENAT(openat)
FORWARD_OPENAT(openat64)
