// macros.c compiled as C++ (see there).
#include "macros.c"
