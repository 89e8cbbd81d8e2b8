/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jansson's allocator, with an arena for the trees that live for one object.
 *
 * A list item or a watch event is parsed, decoded into records that own their memory,
 * and freed: its tree lives for microseconds. Parsed with malloc, a 150,000-pod list is
 * several million mallocs and frees, a third of the sync's CPU (BENCHMARKS.md,
 * bench_live). Between af__codec_arena_enter and af__codec_arena_leave, jansson
 * allocates on the calling thread from the given arena, and its frees of what the arena
 * handed out do nothing; the arena is reset for the next item. Everything else (other
 * threads, other times, values made before entering) is malloc and free as before.
 *
 * Under AddressSanitizer the arena is bypassed, so a use after free in a decoder stays
 * visible to it.
 */
#include <jansson.h>

#include "accelfit/util.h"
#include "codec/internal.h"
#include "accelfit/banned.h"

static _Thread_local struct af_arena *tl_arena;

static void *codec_malloc(size_t n)
{
    if (tl_arena)
        return af_arena_alloc(tl_arena, n);
    return af_xmalloc(n);
}

static void codec_free(void *p)
{
    if (tl_arena && af_arena_owns(tl_arena, p))
        return;
    af_free(p);
}

/* Before main: jansson must not hand a pointer from one allocator to the other's free. */
__attribute__((constructor)) static void codec_alloc_init(void)
{
    json_set_alloc_funcs(codec_malloc, codec_free);
}

struct af_arena *af__codec_arena_enter(struct af_arena *a)
{
    struct af_arena *prev = tl_arena;

    if (!AF_SANITIZED)
        tl_arena = a;
    return prev;
}

void af__codec_arena_leave(struct af_arena *a, struct af_arena *prev)
{
    tl_arena = prev;
    af_arena_reset(a);
}
