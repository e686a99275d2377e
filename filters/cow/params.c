/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The filter's parameters (params.h). */

#include <config.h>

#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <nbdkit-filter.h>

#include "blk.h"
#include "ispowerof2.h"
#include "keptname.h"
#include "params.h"

#define MIN_BLOCK_SIZE 4096
#define MAX_BLOCK_SIZE (INT64_C (1) << 31)     /* as nbdkit's own filter */
#define DEFAULT_STRIPES 8   /* docs/performance.md */
#define DEFAULT_MAX_EXPORTS 128
#define MAX_MAX_EXPORTS 1000000
#define MAX_BASE_HANDLES 64
#define DEFAULT_FILL_REQUESTS 4
#define MAX_FILL_REQUESTS 64
#define MAX_FILL_RETRIES 30
#define MAX_GRACE_SECONDS 86400

const char params_help[] =
  "cow-base-handles=<N>  Read each export's base through N plugin handles\n"
  "                      its clients share (default 0: one per client).\n"
  "cow-block-size=<N>    Size of blocks in the overlay (default 64K).\n"
  "cow-changes-separator=<C>  Serve NAME<C> and NAME<C>CHECKPOINT as views\n"
  "                      of what changed in export NAME (read-only).\n"
  "cow-clone-separator=<C>  Serve NAME<C>TAG as a clone of export NAME.\n"
  "cow-control=<SOCKET>  Take checkpoint commands (nbdcow checkpoint) on\n"
  "                      the Unix socket SOCKET.\n"
  "cow-file=<PATH>       Keep the overlay in PATH across restarts.\n"
  "cow-fill=<BOOL>|/PATH  Copy the base's data into the overlays in the\n"
  "                      background (while PATH exists).\n"
  "cow-fill-rate=<SIZE>  Fill at most SIZE bytes a second (default: no cap).\n"
  "cow-fill-requests=<N>  Keep N reads of the fill in flight (default 4).\n"
  "cow-fill-retries=<N>  Try a failed read of the fill N times more, 1, 2,\n"
  "                      4... seconds apart, then stop (default: no limit).\n"
  "cow-lifetime=server|clients[:GRACE]  End an overlay GRACE seconds after\n"
  "                      its last client left (default: with the server).\n"
  "cow-max-exports=<N>   Make at most N overlays (default 128).\n"
  "cow-max-size=<SIZE>   Limit the overlays' disk space to SIZE.\n"
  "cow-on-cache=<BOOL>   Copy cache (prefetch) requests to the overlay.\n"
  "cow-on-read=<BOOL>|/PATH  Copy reads to the overlay (while PATH exists).\n"
  "cow-stats=<FILE>      Write statistics to FILE every second and at exit.\n"
  "cow-stripes=<N>       Stripe the overlay over N write locks (default 8),\n"
  "                      and throw-away ones over N shared files.\n"
  "cow-view-separator=<C>  Serve NAME<C>VIEW as point-in-time view VIEW of\n"
  "                      export NAME (read-only; nbdcow view).";

struct cow_params params = {
  .block_size = 65536,
  .max_size = UINT64_MAX,
  .stripes = DEFAULT_STRIPES,
  .max_exports = DEFAULT_MAX_EXPORTS,
  .fill_requests = DEFAULT_FILL_REQUESTS,
  .fill_retries = FILL_RETRIES_NO_LIMIT,
};

/* The size in key=value, or -1 after an error naming both. */
static int64_t
parse_size (const char *key, const char *value)
{
  int64_t r = nbdkit_parse_size (value);

  if (r == -1)
    nbdkit_error ("%s=%s: not a size", key, value);
  return r;
}

static int
parse_block_size (const char *key, const char *value)
{
  int64_t r = parse_size (key, value);

  if (r == -1)
    return -1;
  if (r < MIN_BLOCK_SIZE || r > MAX_BLOCK_SIZE || !is_power_of_2 (r)) {
    nbdkit_error ("%s=%s: must be a power of two from 4K to 2G", key, value);
    return -1;
  }
  params.block_size = r;
  return 0;
}

/* Sets *to to the size in key=value, or returns -1 after an error
 * naming both.
 */
static int
parse_bytes (const char *key, const char *value, uint64_t *to)
{
  int64_t r = parse_size (key, value);

  if (r == -1)
    return -1;
  *to = r;
  return 0;
}

static int
parse_max_size (const char *key, const char *value)
{
  params.max_size_arg = value;  /* argv outlives the server */
  return parse_bytes (key, value, &params.max_size);
}

/* The words nbdkit_parse_bool takes: 1 or 0, or -1 for none, without
 * its message, which does not name the parameter (ours does).
 */
static int
bool_word (const char *value)
{
  static const char *const yes[] = { "1", "true", "t", "yes", "y", "on" };
  static const char *const no[] = { "0", "false", "f", "no", "n", "off" };
  size_t i;

  for (i = 0; i < sizeof yes / sizeof yes[0]; ++i) {
    if (strcasecmp (value, yes[i]) == 0)
      return 1;
    if (strcasecmp (value, no[i]) == 0)
      return 0;
  }
  return -1;
}

static int
parse_bool (const char *key, const char *value, bool *to)
{
  int r = bool_word (value);

  if (r == -1) {
    nbdkit_error ("%s=%s: must be true or false", key, value);
    return -1;
  }
  *to = r;
  return 0;
}

/* Sets *to to the whole number from min to max in key=value, or
 * returns -1 after an error naming both: digits only, since
 * nbdkit_parse_unsigned's messages do not name the value.
 */
static int
parse_count (const char *key, const char *value, unsigned min, unsigned max,
             unsigned *to)
{
  uint64_t r = 0;
  const char *p;

  for (p = value; *p >= '0' && *p <= '9' && r <= max; ++p)
    r = r * 10 + (*p - '0');
  if (p == value || *p != '\0' || r < min || r > max) {
    nbdkit_error ("%s=%s: must be a number from %u to %u", key, value, min,
                  max);
    return -1;
  }
  *to = r;
  return 0;
}

static int
parse_switch (const char *key, const char *value, struct path_switch *to)
{
  int r;

  to->arg = value;              /* argv outlives the server */
  if (value[0] == '/') {
    to->mode = SWITCH_PATH;
    to->path = value;           /* argv outlives the server */
    return 0;
  }
  if (strchr (value, '/') != NULL) {
    nbdkit_error ("%s=%s: a path must be absolute", key, value);
    return -1;
  }
  r = bool_word (value);
  if (r == -1) {
    nbdkit_error ("%s=%s: must be true, false or an absolute path", key,
                  value);
    return -1;
  }
  to->mode = r ? SWITCH_ON : SWITCH_OFF;
  return 0;
}


static int
parse_path (const char *key, const char *value, char **path)
{
  if (value[0] == '\0') {
    nbdkit_error ("%s=%s: must name a file", key, value);
    return -1;
  }
  free (*path);
  /* nbdkit may change directory when it becomes a daemon. */
  *path = nbdkit_absolute_path (value);
  return *path ? 0 : -1;
}

/* GRACE of cow-lifetime=clients:GRACE: seconds, with at most three
 * decimals, from 0 to MAX_GRACE_SECONDS.  Returns 0, or -1.
 */
static int
parse_grace (const char *grace, uint64_t *ns)
{
  uint64_t ms = 0;
  unsigned decimals = 0;
  const char *p;

  for (p = grace; *p >= '0' && *p <= '9' && ms <= MAX_GRACE_SECONDS; ++p)
    ms = ms * 10 + (*p - '0');
  if (p == grace)
    return -1;
  if (*p == '.')
    for (++p; *p >= '0' && *p <= '9' && decimals < 3; ++p, ++decimals)
      ms = ms * 10 + (*p - '0');
  for (; decimals < 3; ++decimals)
    ms *= 10;
  if (*p != '\0' || ms > MAX_GRACE_SECONDS * UINT64_C (1000))
    return -1;
  *ns = ms * 1000000;
  return 0;
}

/* cow-lifetime=server (as nbdkit's filter: overlays end with nbdkit),
 * or clients, or clients:GRACE (an overlay ends GRACE seconds after
 * its export's last connection closed, none having opened it since).
 */
static int
parse_lifetime (const char *key, const char *value)
{
  if (strcmp (value, "server") == 0) {
    params.lifetime_clients = false;
    return 0;
  }
  if (strncmp (value, "clients", 7) == 0 &&
      (value[7] == '\0' ||
       (value[7] == ':' && parse_grace (value + 8, &params.grace_ns) == 0))) {
    if (value[7] == '\0')
      params.grace_ns = 0;
    params.lifetime_clients = true;
    return 0;
  }
  nbdkit_error ("%s=%s: must be server, clients or clients:GRACE (seconds "
                "from 0 to %u, at most three decimals)", key, value,
                MAX_GRACE_SECONDS);
  return -1;
}

/* One printable character that is neither a letter, a digit nor a
 * space: it must not split names that name no clone or view.
 */
static int
parse_separator (const char *key, const char *value, char *to)
{
  unsigned char c = value[0];

  if (c == '\0' || value[1] != '\0' || c <= ' ' || c >= 0x7f ||
      (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')) {
    nbdkit_error ("%s=%s: must be one punctuation character, such as @",
                  key, value);
    return -1;
  }
  *to = c;
  return 0;
}

int
params_parse (const char *key, const char *value)
{
  if (strcmp (key, "cow-base-handles") == 0)
    return parse_count (key, value, 0, MAX_BASE_HANDLES,
                        &params.base_handles);
  if (strcmp (key, "cow-block-size") == 0)
    return parse_block_size (key, value);
  if (strcmp (key, "cow-changes-separator") == 0)
    return parse_separator (key, value, &params.changes_separator);
  if (strcmp (key, "cow-clone-separator") == 0)
    return parse_separator (key, value, &params.clone_separator);
  if (strcmp (key, "cow-view-separator") == 0)
    return parse_separator (key, value, &params.view_separator);
  if (strcmp (key, "cow-control") == 0)
    return parse_path (key, value, &params.control_path);
  if (strcmp (key, "cow-file") == 0)
    return parse_path (key, value, &params.cow_file);
  if (strcmp (key, "cow-fill") == 0)
    return parse_switch (key, value, &params.fill);
  if (strcmp (key, "cow-fill-rate") == 0)
    return parse_bytes (key, value, &params.fill_rate);
  if (strcmp (key, "cow-fill-requests") == 0)
    return parse_count (key, value, 1, MAX_FILL_REQUESTS,
                        &params.fill_requests);
  if (strcmp (key, "cow-fill-retries") == 0)
    return parse_count (key, value, 0, MAX_FILL_RETRIES,
                        &params.fill_retries);
  if (strcmp (key, "cow-lifetime") == 0)
    return parse_lifetime (key, value);
  if (strcmp (key, "cow-max-exports") == 0)
    return parse_count (key, value, 1, MAX_MAX_EXPORTS, &params.max_exports);
  if (strcmp (key, "cow-max-size") == 0)
    return parse_max_size (key, value);
  if (strcmp (key, "cow-on-cache") == 0)
    return parse_bool (key, value, &params.cow_on_cache);
  if (strcmp (key, "cow-on-read") == 0)
    return parse_switch (key, value, &params.cow_on_read);
  if (strcmp (key, "cow-stats") == 0)
    return parse_path (key, value, &params.stats_path);
  if (strcmp (key, "cow-stripes") == 0)
    return parse_count (key, value, 1, BLK_MAX_STRIPES, &params.stripes);
  return 1;
}

int
params_check (void)
{
  if (params.cow_file && !kept_file_names_fit (params.cow_file)) {
    nbdkit_error ("cow-file=%s: too long for the files of named exports "
                  "(PATH.NAME): its file name may have at most %d bytes "
                  "and its directory %d", params.cow_file,
                  NAME_MAX - KEPT_NAME_SUFFIX, PATH_MAX - NAME_MAX - 1);
    return -1;
  }
  if (params.changes_separator &&
      strchr ("_-.", params.changes_separator) != NULL) {
    nbdkit_error ("cow-changes-separator=%c: checkpoint names may hold "
                  "'_', '-' and '.': choose another, such as +",
                  params.changes_separator);
    return -1;
  }
  if (params.changes_separator &&
      params.changes_separator == params.clone_separator) {
    nbdkit_error ("cow-changes-separator=%c: the same as "
                  "cow-clone-separator: choose another",
                  params.changes_separator);
    return -1;
  }
  if (params.view_separator &&
      strchr ("_-.", params.view_separator) != NULL) {
    nbdkit_error ("cow-view-separator=%c: view names may hold '_', '-' "
                  "and '.': choose another, such as @",
                  params.view_separator);
    return -1;
  }
  if (params.view_separator &&
      (params.view_separator == params.clone_separator ||
       params.view_separator == params.changes_separator)) {
    nbdkit_error ("cow-view-separator=%c: the same as %s: choose another",
                  params.view_separator,
                  params.view_separator == params.clone_separator
                  ? "cow-clone-separator" : "cow-changes-separator");
    return -1;
  }
  if (params.max_size < params.block_size) {
    nbdkit_error ("cow-max-size=%s: less than one block "
                  "(cow-block-size=%" PRIu32 ")", params.max_size_arg,
                  params.block_size);
    return -1;
  }
  return 0;
}

void
params_free (void)
{
  free (params.cow_file);
  free (params.stats_path);
  free (params.control_path);
}

bool
params_switch_path_exists (const struct path_switch *s)
{
  return access (s->path, F_OK) == 0;
}
