/* Test plugin for the ELF structure check's table-level corruption tests: it needs versioned
 * symbols of the C library (DT_VERNEED), defines versions of its own (DT_VERDEF, with
 * tables.map), has a constructor and a destructor (init and fini arrays) and relocations
 * against symbols of its own and of the C library. */
#include <stdlib.h>
#include <string.h>

#include "dylease.h"

static int constructed;
static const char *greeting = "hello";

__attribute__((constructor)) static void construct(void) { constructed = 1; }
__attribute__((destructor)) static void destruct(void) { constructed = 0; }

/* Exported and versioned (tables.map): a symbol of its own that other objects could bind. */
int tables_length(const char *text) { return (int)strlen(text); }

static int length_of_greeting(void) { return tables_length(greeting) + constructed; }
static int parse(const char *text) { return atoi(text); }

DYLEASE_PLUGIN("tables", "1.0.0")
DYLEASE_PASS("length_of_greeting", length_of_greeting)
DYLEASE_PASS("parse", parse)
