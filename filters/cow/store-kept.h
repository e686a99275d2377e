/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The kept store's own state, shared by its two files and nothing
 * else: store-kept.c, its requests, flushes and close, and
 * store-kept-open.c, its opening and start.  Each lock says here what
 * it protects; docs/design.md has the lock order.
 */

#ifndef COW_STORE_KEPT_H
#define COW_STORE_KEPT_H

#include <stdbool.h>
#include <stdint.h>

#include <nbdkit-filter.h>

#include "changes.h"
#include "checks.h"
#include "kept.h"
#include "statemap.h"
#include "store.h"

_Static_assert ((int) BLK_NOT_ALLOCATED == (int) KEPT_NOT_ALLOCATED &&
                (int) BLK_ALLOCATED == (int) KEPT_ALLOCATED &&
                (int) BLK_ZERO == (int) KEPT_ZERO &&
                (int) BLK_PARTIAL == (int) KEPT_PARTIAL,
                "the block layer's states are the kept format's");

struct store_kept {
  struct store store;

  /* Set once, when the store is made or started.  The file's header's
   * geometry is the blocks' once it has one (kept_create or an existing
   * file); its flags and facts change under stale_lock, its slots
   * under slot_lock.  history: version 4, the block layer's
   * checkpoints (changes) and marks, which the store writes with its
   * pages.
   */
  struct kept_overlay kept;
  uint32_t block_size;          /* configured, for a new file's header */
  char *name;                   /* the export's */
  bool started;
  bool history;
  struct changes *changes;

  /* Under page_lock: the states, which state pages changed since
   * written, and whether the table did (it is written to its two
   * copies in turn; table_sequence is the last one's).  Held for one
   * change of states or one copy of pages, over no I/O; inside it only
   * slot lookups (lock-free) and, copying the table, the changes' lock.
   */
  mutex_t page_lock;
  /* enum kept_state of each block */
  struct statemap states FIELD_GUARDED_BY (page_lock);
  /* per state page: 1 if changed since written */
  struct statemap dirty_pages FIELD_GUARDED_BY (page_lock);
  bool table_dirty FIELD_GUARDED_BY (page_lock);
  uint64_t table_sequence FIELD_GUARDED_BY (page_lock);

  /* Under slot_lock: the slots' changes (taking, retiring; kept.slots)
   * and sized_slots, the slots the file's length spans.  Taken inside
   * the block layer's write locks of the blocks whose slots change;
   * nothing is taken inside it.
   */
  mutex_t slot_lock;
  uint64_t sized_slots FIELD_GUARDED_BY (slot_lock);

  /* Serializes the header's writes while requests run: MARKS_STALE set
   * and cleared, and the plugin's facts.  Held over a header write and
   * a sync; nothing is taken inside it.
   */
  mutex_t stale_lock;

  /* Version 7, under page_lock: the blocks whose entries changed since
   * a flush last took them, each with its entry as that flush took it
   * (changed, at most KEPT_LOG_ENTRIES of them, room for cap_changed);
   * past that, overflow: the next flush writes the pages.
   */
  struct kept_log_entry *changed FIELD_GUARDED_BY (page_lock);
  unsigned nr_changed FIELD_GUARDED_BY (page_lock);
  unsigned cap_changed FIELD_GUARDED_BY (page_lock);
  bool overflow FIELD_GUARDED_BY (page_lock);

  /* Version 7: log_lock serializes the log's writes (kept.log): a
   * flush's record and its sync, a confirming record, the log emptied.
   * Held over them; inside it only watch_lock.
   */
  mutex_t log_lock;

  /* Under watch_lock, held over no I/O: the units a write must not
   * change unseen (docs/design.md, "One sync a flush"): those the
   * last record checks, until a record after it is durable (written;
   * a write into one first makes one durable), and those of the record
   * a flush is taking (taking; a write into one taints it, and the
   * flush makes a record after it durable before it returns).  watched
   * counts both, atomic, so that a write with nothing to look at takes
   * no lock.
   */
  mutex_t watch_lock;
  struct kept_log_entry *written FIELD_GUARDED_BY (watch_lock);
  unsigned nr_written FIELD_GUARDED_BY (watch_lock);
  struct kept_log_entry *taking FIELD_GUARDED_BY (watch_lock);
  unsigned nr_taking FIELD_GUARDED_BY (watch_lock);
  bool tainted FIELD_GUARDED_BY (watch_lock);
  unsigned watched;

  /* Under the block layer's flush_lock, the flush in progress: what
   * ended was as it began, whether it took the table and how many
   * checkpoints that held, and the error of a take that could not mark
   * the file stale.
   */
  uint64_t ended_at_flush FIELD_GUARDED_BY (flush_lock);
  bool table_taken FIELD_GUARDED_BY (flush_lock);
  unsigned table_taken_count FIELD_GUARDED_BY (flush_lock);
  int flush_errno FIELD_GUARDED_BY (flush_lock);

  /* Atomic, with no lock.  dirty_marks: per marks page, a bit set when
   * a mark of its blocks was raised since a flush last took it (the
   * array set once).  table_kept: the file's table may hold a
   * checkpoint, so every change must find the file marked stale.
   * begun and ended count changes (change_begin, change_end): equal
   * when none is in flight.  stale: the file has MARKS_STALE, or is
   * being given it (set under stale_lock).  Version 8: taking_pages:
   * a flush is taking the pages (set by it alone), so that a change
   * begun meanwhile marks the file stale itself.
   */
  uint64_t *dirty_marks;
  bool table_kept;
  uint64_t begun, ended;
  bool stale;
  bool taking_pages;
};

static inline struct store_kept *
kept_of (struct store *st)
{
  return (struct store_kept *) st;
}

static inline const struct blockgeom *
geom_of (const struct store_kept *k)
{
  return &k->kept.header.layout.geom;
}

/* Reports the failure of a call of the kept library. */
static inline void
report (const struct store_kept *k)
{
  nbdkit_error ("cow-file=%s", k->kept.why);
}

/* The state pages of the file, and the marks pages that follow them. */
static inline uint64_t
state_pages (const struct store_kept *k)
{
  return k->kept.header.layout.states_length / KEPT_STATE_PAGE;
}

static inline uint64_t
marks_pages (const struct store_kept *k)
{
  return k->kept.header.layout.marks_length / KEPT_STATE_PAGE;
}

/* store-kept.c: the table of the store's operations, and the store
 * freed, its file closed as it is (no flush, no clean mark).
 */
extern const struct store_ops kept_store_ops;
extern void kept_free (struct store_kept *k);

/* Version 7, before any request: the state pages of the blocks the log
 * set written and the log emptied, durably, noting dropped (the blocks
 * of a record whose data a crash lost).  Returns 0, or -1 after
 * nbdkit_error.
 */
extern int kept_fold_log (struct store_kept *k, uint32_t dropped);

/* store-kept-open.c: the operations of the start, before any request:
 * no lock.  kept_start makes a new file's header or checks an existing
 * one against the base, and restores its history; kept_loaded_blocks
 * gives the block layer the records loaded when the file was opened.
 */
extern uint64_t kept_made_size (struct store *st);
extern int kept_check_size (struct store *st, uint64_t size);
extern const struct kept_facts *kept_facts (struct store *st);
extern int kept_start (struct store *st, uint64_t size, uint64_t *overhead);
extern int kept_loaded_blocks (struct store *st, store_found_blocks *found,
                               void *opaque);

#endif /* COW_STORE_KEPT_H */
