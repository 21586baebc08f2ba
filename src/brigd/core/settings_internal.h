/*
 * settings_internal.h - the row type of brigd's settings table (core/ only: settings.c
 * reads the rows, settings_table.c declares them).
 */
#ifndef BRIG_SETTINGS_INTERNAL_H
#define BRIG_SETTINGS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "settings.h"

/* How a setting's value is written, and how brig_config keeps it. */
typedef enum setting_type {
    T_STRING,  /* any text but the empty one: char * */
    T_ENUM,    /* one of .choices ("on|off"): char * */
    T_LIST,    /* items separated by ',', checked once all is read: char * */
    T_INT,     /* an integer in [min, max]: int64_t */
    T_BYTES,   /* as T_INT, in bytes */
    T_MIB,     /* as T_INT, in MiB */
    T_SECONDS, /* whole seconds in [min, max]: int64_t milliseconds */
    T_RATIO,   /* 0 (no bound) or a number in [ratio_min, max]: double */
} setting_type;

typedef struct setting {
    const char *key;     /* in the [brigd] section */
    const char *flag;    /* "--listen", or NULL: the file only */
    const char *metavar; /* the flag's argument, for --help */
    setting_type type;
    const char *def; /* the default as the file writes it; NULL: none (NULL is kept) */
    int64_t min, max;
    double ratio_min;
    const char *choices; /* T_ENUM */
    size_t at;           /* offset in brig_config */
    const char *help;    /* one short line; docs/operations.md says more */
} setting;

/* A default that starts so is relative to the directory of brigd's executable. */
#define EXE_DIR "<brigd's dir>"

/* The most rows the table may grow to (the flags' getopt table is sized by it). */
#define BRIG_SETTINGS_MAX 192

extern const setting brig_settings[];
extern const size_t brig_settings_len;

#endif
