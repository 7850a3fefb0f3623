/* Test library that plugins link against (DT_NEEDED), found through their run path.
 *   -DDEP_VALUE=n       what dep_value() returns (default 1)
 *   -DMARK_CONSTRUCTOR  a constructor creates the file "<this library's path>.ran": proof that
 *                       this library's code ran (a planted copy must never run) */
#ifdef MARK_CONSTRUCTOR
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

__attribute__((constructor)) static void mark(void) {
    Dl_info self;
    char path[4096];
    if (dladdr((void *)mark, &self) && self.dli_fname) {
        snprintf(path, sizeof path, "%s.ran", self.dli_fname);
        FILE *f = fopen(path, "w");
        if (f) fclose(f);
    }
}
#endif

#ifndef DEP_VALUE
#define DEP_VALUE 1
#endif

int dep_value(void);
int dep_value(void) { return DEP_VALUE; }
