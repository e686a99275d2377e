/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The filter's parameters (cow-*): each parsed, checked together, and
 * the help text nbdkit --help shows.  Adding a parameter is a line in
 * struct cow_params, its parsing and its help line in params.c,
 * then the man page and the README's table, which
 * tests/test-params-documented.sh holds to the same list.
 *
 * The values are set while nbdkit configures the filter and only read
 * afterwards, by any thread.
 */

#ifndef COW_PARAMS_H
#define COW_PARAMS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

/* A parameter that is true, false, or true while a path exists
 * (cow-on-read, cow-fill).
 */
struct path_switch {
  enum { SWITCH_OFF, SWITCH_ON, SWITCH_PATH } mode;
  const char *path;             /* SWITCH_PATH: this path exists */
  const char *arg;              /* as given, for messages */
};

struct cow_params {
  uint32_t block_size;          /* cow-block-size */
  bool cow_on_cache;            /* cow-on-cache */
  struct path_switch cow_on_read;       /* cow-on-read */
  struct path_switch fill;      /* cow-fill */
  uint64_t fill_rate;           /* cow-fill-rate, bytes a second; 0: none */
  unsigned fill_requests;       /* cow-fill-requests */
  unsigned fill_retries;        /* cow-fill-retries, or: */
#define FILL_RETRIES_NO_LIMIT UINT_MAX
  char *cow_file;               /* cow-file, absolute, or NULL */
  char *stats_path;             /* cow-stats, absolute, or NULL */
  uint64_t max_size;            /* cow-max-size, or UINT64_MAX */
  const char *max_size_arg;     /*   as given, for messages */
  unsigned stripes;             /* cow-stripes */
  unsigned max_exports;         /* cow-max-exports */
  unsigned base_handles;        /* cow-base-handles: 0, one per client */
  bool lifetime_clients;        /* cow-lifetime=clients[:GRACE] */
  uint64_t grace_ns;            /*   GRACE, in nanoseconds */
  char clone_separator;         /* cow-clone-separator, or '\0' */
  char changes_separator;       /* cow-changes-separator, or '\0' */
  char view_separator;          /* cow-view-separator, or '\0' */
  char *control_path;           /* cow-control, absolute, or NULL */
};

extern struct cow_params params;

/* The help text of the parameters, as nbdkit --help shows it. */
extern const char params_help[];

/* Parses key=value if key is one of ours: returns 0, or -1 after an
 * error naming both, or 1 if key is not ours.
 */
extern int params_parse (const char *key, const char *value);

/* Checks what depends on several parameters.  Returns 0, or -1 after
 * nbdkit_error.
 */
extern int params_check (void);

extern void params_free (void);

/* Whether the path of a switch exists now. */
extern bool params_switch_path_exists (const struct path_switch *s);

/* Whether switch s is on now: one with a path is checked every time,
 * so that it can be switched while nbdkit runs.  Inline: every read
 * asks of cow-on-read.
 */
static inline bool
params_switch_on (const struct path_switch *s)
{
  if (s->mode == SWITCH_PATH)
    return params_switch_path_exists (s);
  return s->mode == SWITCH_ON;
}

#endif /* COW_PARAMS_H */
