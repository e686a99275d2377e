/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The layout of a kept overlay and its header's bytes
 * (docs/overlay-format.md).  Every field
 * is little-endian at a fixed offset, so the file moves between
 * machines and tools can read it without this code.
 */

#include <config.h>

#include <string.h>

#include "crc32c.h"
#include "divround.h"
#include "ispowerof2.h"
#include "internal.h"

static const char magic[8] = { 'n', 'b', 'd', 'k', 'C', 'O', 'W', '\n' };

enum {
  OFF_MAGIC = 0,
  OFF_VERSION = 8,
  OFF_HEADER_SIZE = 12,
  OFF_BLOCK_SIZE = 16,
  OFF_NAME_LENGTH = 20,
  OFF_BASE_SIZE = 24,
  OFF_STATES_OFFSET = 32,
  OFF_STATES_LENGTH = 40,
  OFF_DATA_OFFSET = 48,
  OFF_CRC = 56,
  OFF_FLAGS = 60,               /* version 2 on */
  OFF_RECOVERIES = 64,          /* version 2 on */
  OFF_FACTS = 68,               /* kept_facts: bit 0 known, 1 described */
  OFF_MINIMUM = 72,
  OFF_PREFERRED = 76,
  OFF_MAXIMUM = 80,
  OFF_CAN_CACHE = 84,
  OFF_ROTATIONAL = 88,
  OFF_DESCRIPTION_LENGTH = 92,
  OFF_DESCRIPTION = 96,         /* to 511 */
  OFF_NAME = 4096,
};

static uint64_t
round_up (uint64_t v, uint64_t to)
{
  return div_round_up (v, to) * to;
}

void
kept_layout (uint32_t version, uint32_t block_size, uint64_t base_size,
             struct kept_layout *layout)
{
  bool packed = version >= KEPT_PACKED_VERSION;
  bool history = version >= KEPT_HISTORY_VERSION;
  bool parts = version >= KEPT_PARTS_VERSION;
  bool places = version >= KEPT_PLACES_VERSION;
  /* A packed entry is 4 bytes (8 with the sub-blocks held, 16 with
   * the place-1 slot and the units there), an unpacked state 2 bits.
   */
  unsigned entry_size = places ? 16 : parts ? 8 : 4;
  uint64_t per_page = packed ? KEPT_STATE_PAGE / entry_size
                             : KEPT_STATE_PAGE * 4;
  struct blockgeom geom = blockgeom_make (block_size, base_size);
  uint64_t blocks = blockgeom_blocks (&geom);
  uint64_t pages = div_round_up (blocks, per_page);
  /* The data area is block- and page-aligned in the file, so that a
   * block's pages hold nothing else and a punch frees them whole; from
   * version 4 on, to 128 KiB at least, so that blocks written together
   * from slot 0 on lie on the file's 128 KiB boundaries, where the
   * filter cuts its writes (filters/cow/storeio.c).
   */
  uint64_t least = history ? 128 * 1024 : 4096;
  uint64_t align = block_size > least ? block_size : least;

  layout->geom = geom;
  layout->packed = packed;
  layout->history = history;
  layout->entry_size = packed ? entry_size : 0;
  layout->part_shift = parts && block_size >= KEPT_PARTS_MIN_BLOCK
                       ? blockgeom_sub_shift (&geom) : 0;
  layout->places = places;
  layout->blocks_per_page = per_page;
  layout->table_offset = history ? KEPT_HEADER_SIZE : 0;
  layout->states_offset = KEPT_HEADER_SIZE + (history ? 2 * KEPT_TABLE_SIZE
                                                      : 0);
  layout->states_length = pages * KEPT_STATE_PAGE;
  /* The marks: 4 bytes per block. */
  layout->marks_offset = history ? layout->states_offset
                                   + layout->states_length : 0;
  layout->marks_length = history ? div_round_up (blocks, KEPT_MARKS_PER_PAGE)
                                   * KEPT_STATE_PAGE : 0;
  /* The log: after the marks, before the data. */
  layout->log_offset = version >= KEPT_LOG_VERSION
                       ? layout->marks_offset + layout->marks_length : 0;
  layout->log_length = version >= KEPT_LOG_VERSION ? KEPT_LOG_SIZE : 0;
  layout->data_offset = round_up (kept_metadata_end (layout), align);
}

uint32_t
kept_crc_without (const uint8_t *buf, size_t size, size_t crc_at)
{
  static const uint8_t zero[4];
  uint32_t crc = crc32c (0, buf, crc_at);

  crc = crc32c (crc, zero, sizeof zero);
  return crc32c (crc, buf + crc_at + 4, size - crc_at - 4);
}

/* The checksum covers the whole header with the checksum field zero. */
static uint32_t
header_crc (const uint8_t *buf)
{
  return kept_crc_without (buf, KEPT_HEADER_SIZE, OFF_CRC);
}

static void
encode_facts (const struct kept_facts *f, uint8_t *buf)
{
  size_t len = f->has_description ? strlen (f->description) : 0;

  if (!f->known)
    return;
  kept_put_le (buf + OFF_FACTS, 1 | (f->has_description ? 2 : 0), 4);
  kept_put_le (buf + OFF_MINIMUM, f->answers.minimum, 4);
  kept_put_le (buf + OFF_PREFERRED, f->answers.preferred, 4);
  kept_put_le (buf + OFF_MAXIMUM, f->answers.maximum, 4);
  kept_put_le (buf + OFF_CAN_CACHE, (uint32_t) f->answers.can_cache, 4);
  kept_put_le (buf + OFF_ROTATIONAL, (uint32_t) f->answers.is_rotational, 4);
  kept_put_le (buf + OFF_DESCRIPTION_LENGTH, len, 4);
  memcpy (buf + OFF_DESCRIPTION, f->description, len);
}

/* Facts that do not make sense are not known: they only save asking
 * the plugin, so the file is served as one without them.
 */
static void
decode_facts (const uint8_t *buf, struct kept_facts *f)
{
  uint64_t bits = kept_get_le (buf + OFF_FACTS, 4);
  uint64_t len = kept_get_le (buf + OFF_DESCRIPTION_LENGTH, 4);

  memset (f, 0, sizeof *f);
  if ((bits & 1) == 0 || (bits & ~UINT64_C (3)) != 0 ||
      len > KEPT_DESCRIPTION_MAX || (len > 0 && (bits & 2) == 0) ||
      memchr (buf + OFF_DESCRIPTION, '\0', len) != NULL)
    return;
  f->known = true;
  f->answers.minimum = kept_get_le (buf + OFF_MINIMUM, 4);
  f->answers.preferred = kept_get_le (buf + OFF_PREFERRED, 4);
  f->answers.maximum = kept_get_le (buf + OFF_MAXIMUM, 4);
  f->answers.can_cache = (int32_t) kept_get_le (buf + OFF_CAN_CACHE, 4);
  f->answers.is_rotational = (int32_t) kept_get_le (buf + OFF_ROTATIONAL, 4);
  f->has_description = (bits & 2) != 0;
  memcpy (f->description, buf + OFF_DESCRIPTION, len);
  f->description[len] = '\0';
}

void
kept_header_encode (const struct kept_header *header, uint8_t *buf)
{
  const struct kept_layout *layout = &header->layout;
  size_t len = strlen (header->name);

  memset (buf, 0, KEPT_HEADER_SIZE);
  memcpy (buf + OFF_MAGIC, magic, sizeof magic);
  kept_put_le (buf + OFF_VERSION, header->version, 4);
  kept_put_le (buf + OFF_HEADER_SIZE, KEPT_HEADER_SIZE, 4);
  kept_put_le (buf + OFF_BLOCK_SIZE, blockgeom_block_size (&layout->geom), 4);
  kept_put_le (buf + OFF_NAME_LENGTH, len, 4);
  kept_put_le (buf + OFF_BASE_SIZE, layout->geom.size, 8);
  kept_put_le (buf + OFF_STATES_OFFSET, layout->states_offset, 8);
  kept_put_le (buf + OFF_STATES_LENGTH, layout->states_length, 8);
  kept_put_le (buf + OFF_DATA_OFFSET, layout->data_offset, 8);
  kept_put_le (buf + OFF_FLAGS, header->flags |
               header->stale_count << KEPT_STALE_COUNT_SHIFT, 4);
  kept_put_le (buf + OFF_RECOVERIES, header->recoveries, 4);
  encode_facts (&header->facts, buf);
  memcpy (buf + OFF_NAME, header->name, len);
  kept_put_le (buf + OFF_CRC, header_crc (buf), 4);
}

enum kept_bad
kept_header_decode (const uint8_t *buf, struct kept_header *header,
                    const char **why)
{
  struct kept_layout *layout = &header->layout, expected;
  uint64_t block_size, base_size, name_length, version;

  *why = NULL;
  if (memcmp (buf + OFF_MAGIC, magic, sizeof magic) != 0) {
    *why = "not a cow overlay (bad magic)";
    return KEPT_FOREIGN;
  }
  version = kept_get_le (buf + OFF_VERSION, 4);
  if (version < 1 || version > KEPT_VERSION) {
    *why = "unsupported format version";
    return KEPT_FOREIGN;
  }
  if (kept_get_le (buf + OFF_CRC, 4) != header_crc (buf)) {
    *why = "corrupted header (checksum mismatch)";
    return KEPT_DAMAGED;
  }

  block_size = kept_get_le (buf + OFF_BLOCK_SIZE, 4);
  name_length = kept_get_le (buf + OFF_NAME_LENGTH, 4);
  base_size = kept_get_le (buf + OFF_BASE_SIZE, 8);
  header->version = version;
  layout->states_offset = kept_get_le (buf + OFF_STATES_OFFSET, 8);
  layout->states_length = kept_get_le (buf + OFF_STATES_LENGTH, 8);
  layout->data_offset = kept_get_le (buf + OFF_DATA_OFFSET, 8);
  /* Version 1 wrote zeros where version 2 keeps these. */
  header->flags = kept_get_le (buf + OFF_FLAGS, 4);
  header->stale_count = 0;
  if (version >= KEPT_STALE_COUNT_VERSION) {
    header->stale_count = header->flags >> KEPT_STALE_COUNT_SHIFT;
    header->flags &= (UINT32_C (1) << KEPT_STALE_COUNT_SHIFT) - 1;
  }
  header->recoveries = kept_get_le (buf + OFF_RECOVERIES, 4);
  decode_facts (buf, &header->facts);
  /* Every version has exactly the layout kept_layout computes. */
  if (!is_power_of_2 (block_size) ||
      kept_get_le (buf + OFF_HEADER_SIZE, 4) != KEPT_HEADER_SIZE ||
      name_length > KEPT_NAME_MAX || (header->flags & ~KEPT_FLAGS) != 0 ||
      ((header->flags & KEPT_MARKS_STALE) && version < KEPT_HISTORY_VERSION)) {
    *why = "inconsistent header";
    return KEPT_DAMAGED;
  }
  kept_layout (version, block_size, base_size, &expected);
  if (layout->states_offset != expected.states_offset ||
      layout->states_length != expected.states_length ||
      layout->data_offset != expected.data_offset) {
    *why = "inconsistent header";
    return KEPT_DAMAGED;
  }
  *layout = expected;
  memcpy (header->name, buf + OFF_NAME, name_length);
  header->name[name_length] = '\0';
  return KEPT_SOUND;
}
