/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A backing chain of qcow2 files read by cluster (chainread.h). */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chainread.h"
#include "fullio.h"
#include "kept.h"
#include "outfile.h"
#include "qcow2.h"

struct chain_file {
  int fd;
  char *path;
  uint64_t l1_offset;
  uint32_t l1_size;
};

/* Reads f's header: 1 with f's L1 table and *cluster_bits set if this
 * reader reads its clusters, 0 if not.
 */
static int
read_header (struct chain_file *f, unsigned *cluster_bits)
{
  uint8_t h[104];

  if (pread (f->fd, h, sizeof h, 0) != (ssize_t) sizeof h ||
      qcow2_be32 (h) != QCOW2_MAGIC || qcow2_be32 (h + 4) != QCOW2_VERSION ||
      qcow2_be32 (h + 32) != 0 ||                  /* encryption */
      qcow2_be64 (h + 72) != 0)                    /* incompatible features */
    return 0;
  *cluster_bits = qcow2_be32 (h + 20);
  f->l1_size = qcow2_be32 (h + 36);
  f->l1_offset = qcow2_be64 (h + 40);
  return *cluster_bits >= 9 && *cluster_bits <= 21;
}

/* Adds the file name names (from the file from) to the chain, and
 * reads the name of the one behind it into name.  Returns 1 if there
 * is one, 0 at the chain's end, 2 if this reader cannot read the file,
 * -1 after a message.
 */
static int
add_file (struct qcow2_chain *c, char *name, const char *from,
          enum backing_named named)
{
  struct chain_file *f = &c->file[c->files];
  unsigned bits;
  int has;

  f->path = NULL;
  f->fd = open_backing (name, from, NULL, &f->path, named);
  if (f->fd == -1)
    return -1;
  c->files++;
  if (read_header (f, &bits) == 0 || (c->files > 1 && bits != c->cluster_bits))
    return 2;
  c->cluster_bits = bits;
  has = qcow2_backing_name (f->fd, name);
  if (has == -1)
    nbdcow_error ("%s: the backing file's name in its header is damaged",
                  f->path);
  return has;
}

int
qcow2_chain_open (struct qcow2_chain *c, const char *base, const char *out,
                  enum backing_named named)
{
  char name[QCOW2_MAX_BACKING + 1];
  int r = 1;

  *c = (struct qcow2_chain) { .file = calloc (CHAIN_MAX, sizeof *c->file) };
  if (c->file == NULL) {
    nbdcow_error ("--base=%s: malloc: %m", base);
    return -1;
  }
  snprintf (name, sizeof name, "%s", base);
  while (r == 1 && c->files < CHAIN_MAX)
    r = c->files ? add_file (c, name, c->file[c->files - 1].path,
                             NAMED_BY_OUT)
                 : add_file (c, name, out, named);
  if (r == 1) {
    nbdcow_error ("--base=%s: a backing chain of more than %d files (a "
                  "loop?)", base, CHAIN_MAX);
    r = -1;
  }
  if (r != 0)
    qcow2_chain_close (c);
  return r == 0 ? 1 : r == 2 ? 0 : -1;
}

/* Where file f maps the cluster at offset: 1 with *host set, 3 with
 * *host its compressed L2 entry, 2 if it reads zeros, 0 if f leaves it
 * to the file behind it, -1 after a message.
 */
static int
map_cluster (const struct qcow2_chain *c, const struct chain_file *f,
             uint64_t offset, uint64_t *host)
{
  uint64_t cluster = offset >> c->cluster_bits;
  uint64_t per_l2 = UINT64_C (1) << (c->cluster_bits - 3);
  uint8_t entry[8];
  uint64_t l1, l2;

  if (cluster / per_l2 >= f->l1_size)
    return 0;
  if (pread_full (f->fd, entry, 8, f->l1_offset + cluster / per_l2 * 8) == -1)
    goto fail;
  l1 = qcow2_be64 (entry) & QCOW2_OFFSET_MASK;
  if (l1 == 0)
    return 0;
  if (pread_full (f->fd, entry, 8, l1 + cluster % per_l2 * 8) == -1)
    goto fail;
  l2 = qcow2_be64 (entry);
  if (l2 & QCOW2_OFLAG_COMPRESSED) {
    *host = l2;
    return 3;
  }
  if (l2 & QCOW2_OFLAG_ZERO)
    return 2;
  *host = l2 & QCOW2_OFFSET_MASK;
  return *host != 0;
 fail:
  nbdcow_error ("%s: read: %m", f->path);
  return -1;
}

/* Reads the len bytes at within of f's compressed cluster of L2 entry
 * entry into buf.  Returns 0, or -1 after a message.
 */
static int
read_compressed (const struct qcow2_chain *c, const struct chain_file *f,
                 uint64_t entry, char *buf, uint32_t len, uint64_t within)
{
  char *cluster = malloc (UINT64_C (1) << c->cluster_bits);
  int r = cluster ? qcow2_read_compressed (f->fd, c->cluster_bits, entry,
                                           cluster) : -1;

  uint64_t at, bytes;

  qcow2_compressed_place (c->cluster_bits, entry, &at, &bytes);
  if (r == -1)
    nbdcow_error ("%s: read at %" PRIu64 ": %m", f->path, at);
  else if (r == 1)
    nbdcow_error ("%s: the compressed cluster at %" PRIu64 " does not "
                  "inflate to a cluster: the file is damaged", f->path, at);
  else
    memcpy (buf, cluster + within, len);
  free (cluster);
  return r == 0 ? 0 : -1;
}

/* qcow2_chain_read of bytes within one cluster of the chain. */
static int
read_in_cluster (const struct qcow2_chain *c, char *buf, uint32_t len,
                 uint64_t offset)
{
  uint64_t within = offset & ((UINT64_C (1) << c->cluster_bits) - 1), host;
  unsigned i;

  for (i = 0; i < c->files; ++i) {
    const struct chain_file *f = &c->file[i];
    int r = map_cluster (c, f, offset, &host);

    if (r == -1)
      return -1;
    if (r == 2)
      break;
    if (r == 3)
      return read_compressed (c, f, host, buf, len, within);
    if (r == 1) {
      if (pread_full (f->fd, buf, len, host + within) == 0)
        return 0;
      nbdcow_error ("%s: read: %m", f->path);
      return -1;
    }
  }
  memset (buf, 0, len);
  return 0;
}

int
qcow2_chain_read (const struct qcow2_chain *c, void *buf, uint32_t len,
                  uint64_t offset)
{
  uint64_t cluster_size = UINT64_C (1) << c->cluster_bits;
  char *p = buf;

  while (len > 0) {
    uint64_t n = cluster_size - (offset & (cluster_size - 1));

    if (n > len)
      n = len;
    if (read_in_cluster (c, p, n, offset) == -1)
      return -1;
    p += n;
    offset += n;
    len -= n;
  }
  return 0;
}

int
qcow2_chain_state (const struct qcow2_chain *c, uint64_t offset)
{
  uint64_t host;
  unsigned i;

  for (i = 0; i < c->files; ++i)
    switch (map_cluster (c, &c->file[i], offset, &host)) {
    case -1: return -1;
    case 1: case 3: return KEPT_ALLOCATED;
    case 2: return KEPT_ZERO;
    }
  return KEPT_NOT_ALLOCATED;
}

const char *
qcow2_chain_path (const struct qcow2_chain *c, unsigned i)
{
  return c->file[i].path;
}

void
qcow2_chain_close (struct qcow2_chain *c)
{
  unsigned i;

  for (i = 0; i < c->files; ++i) {
    close (c->file[i].fd);
    free (c->file[i].path);
  }
  free (c->file);
  *c = (struct qcow2_chain) { .files = 0 };
}
