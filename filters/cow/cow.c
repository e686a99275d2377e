/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* nbdkit-cow-filter: a writable copy-on-write view of any plugin.
 *
 * This file holds the parameters, the table of overlays (one per
 * export, at most cow-max-exports) and the NBD callbacks; the overlay
 * itself, the block states and the locking of requests live in the
 * block layer (blk.h).  The plugin is opened
 * read-only and never sees a write, zero or trim.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nbdkit-filter.h>

#include "baseio.h"
#include "blk.h"
#include "launch.h"
#include "ispowerof2.h"
#include "shardctr.h"
#include "space.h"
#include "stats.h"
#include "tempfiles.h"

#define MIN_BLOCK_SIZE 4096
#define MAX_BLOCK_SIZE (INT64_C (1) << 31)     /* as nbdkit's own filter */
#define DEFAULT_STRIPES 8   /* docs/performance.md */
#define DEFAULT_MAX_EXPORTS 128
#define MAX_MAX_EXPORTS 1000000

static uint32_t block_size = 65536;         /* cow-block-size */
static bool cow_on_cache;                   /* cow-on-cache */
static char *cow_file;                      /* cow-file, absolute, or NULL */
static char *stats_path;                    /* cow-stats, absolute, or NULL */
static uint64_t max_size = UINT64_MAX;      /* cow-max-size, or none */
static const char *max_size_arg;            /* as given, for messages */
static unsigned stripes = DEFAULT_STRIPES;  /* cow-stripes */
static unsigned max_exports = DEFAULT_MAX_EXPORTS;   /* cow-max-exports */

/* cow-on-read: off, on, or on while cow_on_read_path exists. */
static enum { COW_ON_READ_OFF, COW_ON_READ_ON, COW_ON_READ_PATH } cow_on_read;
static const char *cow_on_read_path;

/* The disk space of every overlay, counted against cow-max-size. */
static struct space space;

/* The files of the throw-away overlays, made by .get_ready; NULL with
 * cow-file.
 */
static struct temp_files *temp_files;

/* One overlay per export, created when a client first opens the export
 * and kept until nbdkit exits, so data never crosses exports and a
 * client reconnecting to an export sees its earlier writes.  Export
 * names reach .open canonical: nbdkit has already replaced "" by the
 * plugin's .default_export, which cow_default_export learns, so that
 * the default export's overlay is the one named "" by whatever name it
 * comes.  At most cow-max-exports of them, one of which is kept for
 * the default export: past that, a name not seen before is refused
 * (new_name_refused).
 */
struct overlay {
  char *exportname;
  struct blk *blk;
  struct shardctr requests;     /* count and bytes of each cow_request */
  struct overlay *next;         /* never changes once in the list */
};

/* Protects the list (not the overlays: each connection's handle points
 * to its overlay, which outlives every connection).  Taken only in
 * .open and by the statistics to read the head, never during requests.
 */
static pthread_mutex_t overlays_lock = PTHREAD_MUTEX_INITIALIZER;
static struct overlay *overlays;
static unsigned named_overlays;     /* those of names other than "" */
static uint64_t refused_names;      /* opens of new names refused */
/* The name nbdkit hands .open for the default export, from the first
 * client that asked for it; NULL before.
 */
static char *default_name;

/* The handle of a connection: its export's overlay, and what it must
 * respect of the plugin, learned by .prepare.
 */
struct conn {
  struct overlay *overlay;
  struct base_shape base;
};

/* The size in key=value, or -1 after an error naming both. */
static int64_t
parse_size_param (const char *key, const char *value)
{
  int64_t r = nbdkit_parse_size (value);

  if (r == -1)
    nbdkit_error ("%s=%s: not a size", key, value);
  return r;
}

static int
parse_block_size (const char *value)
{
  int64_t r = parse_size_param ("cow-block-size", value);

  if (r == -1)
    return -1;
  if (r < MIN_BLOCK_SIZE || r > MAX_BLOCK_SIZE || !is_power_of_2 (r)) {
    nbdkit_error ("cow-block-size=%s: must be a power of two from 4K to 2G",
                  value);
    return -1;
  }
  block_size = r;
  return 0;
}

static int
parse_max_size (const char *value)
{
  int64_t r = parse_size_param ("cow-max-size", value);

  if (r == -1)
    return -1;
  max_size = r;
  max_size_arg = value;         /* argv outlives the server */
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
parse_cow_on_read (const char *value)
{
  int r;

  if (value[0] == '/') {
    cow_on_read = COW_ON_READ_PATH;
    cow_on_read_path = value;   /* argv outlives the server */
    return 0;
  }
  if (strchr (value, '/') != NULL) {
    nbdkit_error ("cow-on-read=%s: a path must be absolute", value);
    return -1;
  }
  r = nbdkit_parse_bool (value);
  if (r == -1) {
    nbdkit_error ("cow-on-read=%s: must be true, false or an absolute path",
                  value);
    return -1;
  }
  cow_on_read = r ? COW_ON_READ_ON : COW_ON_READ_OFF;
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

static int
cow_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
            const char *key, const char *value)
{
  if (strcmp (key, "cow-block-size") == 0)
    return parse_block_size (value);
  if (strcmp (key, "cow-on-read") == 0)
    return parse_cow_on_read (value);
  if (strcmp (key, "cow-on-cache") == 0) {
    int r = nbdkit_parse_bool (value);
    if (r == -1) {
      nbdkit_error ("cow-on-cache=%s: must be true or false", value);
      return -1;
    }
    cow_on_cache = r;
    return 0;
  }
  if (strcmp (key, "cow-file") == 0)
    return parse_path (key, value, &cow_file);
  if (strcmp (key, "cow-stats") == 0)
    return parse_path (key, value, &stats_path);
  if (strcmp (key, "cow-max-size") == 0)
    return parse_max_size (value);
  if (strcmp (key, "cow-stripes") == 0)
    return parse_count (key, value, 1, BLK_MAX_STRIPES, &stripes);
  if (strcmp (key, "cow-max-exports") == 0)
    return parse_count (key, value, 1, MAX_MAX_EXPORTS, &max_exports);
  return next (nxdata, key, value);
}

/* Checks what depends on several parameters. */
static int
cow_config_complete (nbdkit_next_config_complete *next, nbdkit_backend *nxdata)
{
  if (max_size < block_size) {
    nbdkit_error ("cow-max-size=%s: less than one block "
                  "(cow-block-size=%" PRIu32 ")", max_size_arg, block_size);
    return -1;
  }
  return next (nxdata);
}

#define cow_config_help \
  "cow-block-size=<N>    Size of blocks in the overlay (default 64K).\n" \
  "cow-file=<PATH>       Keep the overlay in PATH across restarts.\n" \
  "cow-max-exports=<N>   Make at most N overlays (default 128).\n" \
  "cow-max-size=<SIZE>   Limit the overlays' disk space to SIZE.\n" \
  "cow-on-cache=<BOOL>   Copy cache (prefetch) requests to the overlay.\n" \
  "cow-on-read=<BOOL>|/PATH  Copy reads to the overlay (while PATH exists).\n" \
  "cow-stats=<FILE>      Write statistics to FILE every second and at exit.\n" \
  "cow-stripes=<N>       Stripe the overlay over N write locks (default 8),\n" \
  "                      and throw-away ones over N shared files."

/* The kept overlay file of an export: PATH for the default export "",
 * PATH.NAME for the others, NAME with every byte but [A-Za-z0-9_-]
 * written %XX, so that no name a client sends can leave the directory
 * of PATH or make an invalid file name.  Names too long for a file
 * name become PATH.#HASH; the header holds the full name, so two names
 * with one hash cannot share a file (the second is refused).
 */
static char *
kept_path (const char *exportname)
{
  const char *base = strrchr (cow_file, '/') + 1;
  size_t len = strlen (cow_file), i;
  char *path, *p;

  if (exportname[0] == '\0')
    return strdup (cow_file);
  path = malloc (len + 20 + 3 * strlen (exportname));   /* 20: ".#" hash */
  if (path == NULL)
    return NULL;
  p = path + sprintf (path, "%s.", cow_file);
  for (i = 0; exportname[i]; ++i) {
    unsigned char c = exportname[i];
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
        (c >= '0' && c <= '9') || c == '_' || c == '-')
      *p++ = c;
    else
      p += sprintf (p, "%%%02X", c);
  }
  *p = '\0';
  if (strlen (base) + (p - (path + len)) > NAME_MAX) {
    uint64_t hash = UINT64_C (14695981039346656037);   /* FNV-1a */
    for (i = 0; exportname[i]; ++i)
      hash = (hash ^ (unsigned char) exportname[i]) * UINT64_C (1099511628211);
    sprintf (path + len, ".#%016" PRIx64, hash);
  }
  return path;
}

static struct blk *
new_blk (const char *exportname)
{
  struct blk *blk;
  char *path;

  if (cow_file == NULL)
    blk = blk_new (block_size, temp_files, &space);
  else {
    path = kept_path (exportname);
    if (path == NULL) {
      nbdkit_error ("cow: %m");
      return NULL;
    }
    blk = blk_new_kept (block_size, path, exportname, stripes, &space);
    free (path);
  }
  return blk;
}

/* Whether a name with no overlay yet is refused, the server having
 * made all the overlays cow-max-exports allows; the first refusal is
 * logged as an error, the others only counted, so that a client
 * sending names cannot fill the log.  The default export "" always has
 * room.  Expects overlays_lock held.
 */
static bool
new_name_refused (const char *exportname)
{
  if (exportname[0] == '\0' || named_overlays < max_exports - 1)
    return false;
  if (refused_names++ == 0)
    nbdkit_error ("cow-max-exports=%u: a new export name is refused: the "
                  "server has made all the overlays it may (the default "
                  "export and names opened before are still served; "
                  "logged once, cow-stats counts the refusals)",
                  max_exports);
  else
    nbdkit_debug ("cow-max-exports=%u: a new export name is refused",
                  max_exports);
  return true;
}

static struct overlay *
find_overlay (const char *name)
{
  struct overlay *o;

  for (o = overlays; o; o = o->next)
    if (strcmp (o->exportname, name) == 0)
      return o;
  return NULL;
}

/* The overlay of exportname, made if it is new and not refused: that
 * of the default export, named "", for the default export's name but
 * where an overlay has that very name (opened by it before any client
 * asked for the default export).  Expects overlays_lock held, or no
 * connections yet.
 */
static struct overlay *
get_overlay (const char *exportname)
{
  struct overlay *o = find_overlay (exportname);

  if (o)
    return o;
  if (default_name && strcmp (exportname, default_name) == 0) {
    exportname = "";
    if ((o = find_overlay ("")) != NULL)
      return o;
  }
  if (new_name_refused (exportname))
    return NULL;

  o = calloc (1, sizeof *o);
  if (o == NULL || (o->exportname = strdup (exportname)) == NULL ||
      shardctr_init (&o->requests, STATS_REQUEST_COUNTERS) == -1) {
    nbdkit_error ("cow: %m");
    if (o)
      free (o->exportname);
    free (o);
    return NULL;
  }
  o->blk = new_blk (exportname);
  if (o->blk == NULL) {
    shardctr_free (&o->requests);
    free (o->exportname);
    free (o);
    return NULL;
  }
  o->next = overlays;
  overlays = o;
  if (exportname[0] != '\0')
    ++named_overlays;
  return o;
}

/* Learns the name of the default export from the first client asking
 * for it; a client that opened that name before keeps its overlay,
 * which is then the default export's until nbdkit restarts (said once,
 * for cow-file puts its data beside the default export's file).
 * Expects overlays_lock held.
 */
static void
learn_default_name (const char *name)
{
  if (default_name != NULL)
    return;
  default_name = strdup (name);
  if (default_name == NULL || name[0] == '\0' || !find_overlay (name))
    return;
  nbdkit_error ("cow: the default export is \"%s\", which a client opened "
                "by that name before any asked for the default export: its "
                "overlay of that name serves both until nbdkit restarts",
                name);
}

/* The statistics of every overlay, oldest first (stats_gather).  The
 * list is read without overlays_lock past its head: entries are only
 * ever added at the head, complete, under the lock, and not freed
 * before .unload.
 */
static int
gather_stats (struct export_stats **exports, size_t *n,
              uint64_t *refused)
{
  struct overlay *head, *o;
  size_t i;

  pthread_mutex_lock (&overlays_lock);
  head = overlays;
  *refused = refused_names;
  pthread_mutex_unlock (&overlays_lock);

  *n = 0;
  for (o = head; o; o = o->next)
    ++*n;
  *exports = calloc (*n ? *n : 1, sizeof **exports);
  if (*exports == NULL)
    return -1;
  for (o = head, i = *n; o; o = o->next) {
    struct export_stats *e = &(*exports)[--i];

    e->name = o->exportname;
    blk_get_stats (o->blk, &e->blk);
    stats_sum_requests (&o->requests, e);
  }
  return 0;
}

/*----------------------------------------------------------------------
 * Life cycle.
 */

/* The space cap, and what every overlay needs from the start: the
 * files of the throw-away ones, or the kept overlay of the default
 * export (locked, and kept).  So a bad $TMPDIR or cow-file stops
 * nbdkit at start, with the parameter named.
 */
static int
cow_get_ready (int thread_model)
{
  const char *tmpdir = getenv ("TMPDIR");

  launch_note_start ();
  space_init (&space, max_size);
  if (cow_file) {
    if (get_overlay ("") == NULL)
      return -1;
  }
  else {
    temp_files = temp_files_new (tmpdir ? tmpdir : "/var/tmp", stripes);
    if (temp_files == NULL)
      return -1;
  }
  /* A cow-stats file that cannot be written stops nbdkit here too. */
  return stats_path ? stats_init (stats_path, gather_stats) : 0;
}

/* Threads must start after nbdkit forks into the background.  Nothing
 * here opens the plugin: outside a connection nbdkit 1.32 gives
 * plugins that ask for the export name none (the file plugin's dir=
 * crashes on it, sh and eval log errors), so the kept file of the
 * default export meets its base at the first connection (cow_prepare).
 */
static int
cow_after_fork (nbdkit_backend *backend)
{
  return stats_path ? stats_start () : 0;
}

/* All connections are closed: the final statistics. */
static void
cow_cleanup (nbdkit_backend *backend)
{
  if (stats_path)
    stats_finish ();
}

static void
cow_unload (void)
{
  /* In case .cleanup was not reached (a start that failed after
   * .after_fork): the thread must not outlive the overlays it reads.
   */
  stats_stop ();
  while (overlays) {
    struct overlay *o = overlays;
    overlays = o->next;
    if (blk_free (o->blk) == -1)
      launch_fail ();
    shardctr_free (&o->requests);
    free (o->exportname);
    free (o);
  }
  temp_files_free (temp_files);
  free (default_name);
  free (cow_file);
  free (stats_path);
  launch_exit ();
}

/* nbdkit asks this when a client asks for the default export "", and
 * hands .open the name returned.
 */
static const char *
cow_default_export (nbdkit_next_default_export *next, nbdkit_backend *nxdata,
                    int readonly, int is_tls)
{
  const char *name = next (nxdata, readonly);

  if (name != NULL) {
    pthread_mutex_lock (&overlays_lock);
    learn_default_name (name);
    pthread_mutex_unlock (&overlays_lock);
  }
  return name;
}

static void *
cow_open (nbdkit_next_open *next, nbdkit_context *context,
          int readonly, const char *exportname, int is_tls)
{
  struct conn *c;

  /* The base is only ever read.  Opening it first lets the plugin
   * refuse exports it does not have before we make an overlay.
   */
  if (next (context, 1, exportname) == -1)
    return NULL;
  c = calloc (1, sizeof *c);
  if (c == NULL) {
    nbdkit_error ("cow: calloc: %m");
    return NULL;
  }
  pthread_mutex_lock (&overlays_lock);
  c->overlay = get_overlay (exportname);
  pthread_mutex_unlock (&overlays_lock);
  if (c->overlay == NULL) {
    free (c);
    return NULL;
  }
  return c;
}

static void
cow_close (void *handle)
{
  free (handle);
}

/* Runs before any request of the connection, so the overlay knows the
 * size before it is asked to do anything.  The kept file the command
 * line names (cow-file=PATH, the default export's) meets the base at
 * the first connection: if it cannot serve it (made for another size,
 * or too large a disk for its filesystem), nbdkit stops, as it would
 * at start, with status 1 (launch.h).
 */
static int
cow_prepare (nbdkit_next *next, void *handle, int readonly)
{
  struct conn *c = handle;
  struct blk *blk = c->overlay->blk;

  if (baseio_learn (next, &c->base) == -1)
    return -1;
  if (blk_set_size (blk, c->base.size) == 0)
    return 0;
  if (cow_file && c->overlay->exportname[0] == '\0' && !blk_is_sized (blk)) {
    nbdkit_error ("cow-file=%s: nbdkit stops: the file cannot serve the "
                  "default export", cow_file);
    launch_fail ();
    nbdkit_shutdown ();
  }
  return -1;
}

/* The plugin's minimum and maximum, which every request the filter
 * sends it respects (baseio.h), and a block preferred.
 */
static int
cow_block_size (nbdkit_next *next, void *handle,
                uint32_t *minimum, uint32_t *preferred, uint32_t *maximum)
{
  if (next->block_size (next, minimum, preferred, maximum) == -1)
    return -1;
  block_limits_advertise (block_size, minimum, preferred, maximum);
  return 0;
}

/* Writable whatever the plugin says: the writes land in the overlay. */
static int
cow_can_write (nbdkit_next *next, void *handle)
{
  return 1;
}

static int
cow_can_trim (nbdkit_next *next, void *handle)
{
  return 1;
}

/* Every connection sees the same overlay, and a flush makes every
 * completed write of every connection durable, so multiple connections
 * are consistent.
 */
static int
cow_can_multi_conn (nbdkit_next *next, void *handle)
{
  return 1;
}

static int
cow_can_extents (nbdkit_next *next, void *handle)
{
  return 1;
}

static int
cow_can_zero (nbdkit_next *next, void *handle)
{
  return NBDKIT_ZERO_NATIVE;
}

/* Zeroing only changes states, punches holes or writes zeros the same
 * way a write would, so it is never slower than writing: fast zero
 * requests always succeed.
 */
static int
cow_can_fast_zero (nbdkit_next *next, void *handle)
{
  return 1;
}

/* A throw-away overlay dies with nbdkit, so there is nothing a flush
 * or FUA could make more durable: both complete at once.  A kept one
 * is made durable by flush, and FUA by nbdkit calling flush after the
 * write.
 */
static int
cow_can_flush (nbdkit_next *next, void *handle)
{
  return 1;
}

static int
cow_can_fua (nbdkit_next *next, void *handle)
{
  return cow_file ? NBDKIT_FUA_EMULATE : NBDKIT_FUA_NATIVE;
}

static int
cow_can_cache (nbdkit_next *next, void *handle)
{
  if (cow_on_cache)
    return NBDKIT_CACHE_NATIVE;
  return next->can_cache (next);
}

static bool
cow_on_read_now (void)
{
  switch (cow_on_read) {
  case COW_ON_READ_ON:
    return true;
  case COW_ON_READ_PATH:
    /* Checked on every read so it can be switched while running. */
    return access (cow_on_read_path, F_OK) == 0;
  default:
    return false;
  }
}

static int
cow_pread (nbdkit_next *next, void *handle,
           void *buf, uint32_t count, uint64_t offset, uint32_t flags,
           int *err)
{
  struct conn *c = handle;
  struct overlay *o = c->overlay;
  struct base_io io = { next, &c->base };
  const struct blk_base base = baseio_blk_base (&io);

  stats_count_request (&o->requests, REQ_READ, count);
  return blk_read (o->blk, &base, buf, count, offset, cow_on_read_now (), err);
}

static int
cow_pwrite (nbdkit_next *next, void *handle,
            const void *buf, uint32_t count, uint64_t offset, uint32_t flags,
            int *err)
{
  struct conn *c = handle;
  struct overlay *o = c->overlay;
  struct base_io io = { next, &c->base };
  const struct blk_base base = baseio_blk_base (&io);

  stats_count_request (&o->requests, REQ_WRITE, count);
  return blk_write (o->blk, &base, buf, count, offset, err);
}

static int
cow_zero (nbdkit_next *next, void *handle,
          uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  struct conn *c = handle;
  struct overlay *o = c->overlay;
  struct base_io io = { next, &c->base };
  const struct blk_base base = baseio_blk_base (&io);

  stats_count_request (&o->requests, REQ_ZERO, count);
  return blk_zero (o->blk, &base, count, offset,
                   (flags & NBDKIT_FLAG_MAY_TRIM) != 0, err);
}

static int
cow_trim (nbdkit_next *next, void *handle,
          uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  struct overlay *o = ((struct conn *) handle)->overlay;

  stats_count_request (&o->requests, REQ_TRIM, count);
  return blk_trim (o->blk, count, offset, err);
}

static int
cow_flush (nbdkit_next *next, void *handle, uint32_t flags, int *err)
{
  struct overlay *o = ((struct conn *) handle)->overlay;

  stats_count_request (&o->requests, REQ_FLUSH, 0);
  return blk_flush (o->blk, err);
}

static int
cow_cache (nbdkit_next *next, void *handle,
           uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  struct conn *c = handle;
  struct overlay *o = c->overlay;
  struct base_io io = { next, &c->base };
  const struct blk_base base = baseio_blk_base (&io);

  stats_count_request (&o->requests, REQ_CACHE, count);
  if (cow_on_cache)
    return blk_copy_up (o->blk, &base, count, offset, err);
  return baseio_cache (&io, count, offset, flags, err);
}

static int
cow_extents (nbdkit_next *next, void *handle,
             uint32_t count, uint64_t offset, uint32_t flags,
             struct nbdkit_extents *extents, int *err)
{
  struct conn *c = handle;
  struct overlay *o = c->overlay;
  struct base_io io = { next, &c->base };
  uint64_t end = offset + count;

  stats_count_request (&o->requests, REQ_EXTENTS, count);
  while (offset < end) {
    enum blk_state state;
    uint64_t run_end = blk_state_run (o->blk, offset, end, &state);
    uint32_t n = run_end - offset;

    if (state == BLK_NOT_ALLOCATED) {
      if (baseio_extents (&io, n, offset, flags, extents, err) == -1)
        return -1;
    }
    else if (nbdkit_add_extent (extents, offset, n,
                                state == BLK_ZERO
                                ? NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO
                                : 0) == -1) {
      *err = errno;
      return -1;
    }
    if (flags & NBDKIT_FLAG_REQ_ONE)
      return 0;
    offset = run_end;
  }
  return 0;
}

static struct nbdkit_filter filter = {
  .name              = "cow",
  .longname          = "nbdkit copy-on-write (COW) filter",
  .config            = cow_config,
  .config_help       = cow_config_help,
  .config_complete   = cow_config_complete,
  .get_ready         = cow_get_ready,
  .after_fork        = cow_after_fork,
  .cleanup           = cow_cleanup,
  .unload            = cow_unload,
  .default_export    = cow_default_export,
  .open              = cow_open,
  .close             = cow_close,
  .prepare           = cow_prepare,
  .block_size        = cow_block_size,
  .can_write         = cow_can_write,
  .can_flush         = cow_can_flush,
  .can_trim          = cow_can_trim,
  .can_extents       = cow_can_extents,
  .can_fua           = cow_can_fua,
  .can_zero          = cow_can_zero,
  .can_fast_zero     = cow_can_fast_zero,
  .can_cache         = cow_can_cache,
  .can_multi_conn    = cow_can_multi_conn,
  .pread             = cow_pread,
  .pwrite            = cow_pwrite,
  .zero              = cow_zero,
  .trim              = cow_trim,
  .flush             = cow_flush,
  .cache             = cow_cache,
  .extents           = cow_extents,
};

NBDKIT_REGISTER_FILTER (filter)
