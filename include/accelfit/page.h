/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Self-contained HTML report pages (`accelfit simulate --report`, `accelfit costs
 * --report`): text into a buffer with HTML escaping, one style sheet, a page head and
 * foot, and the axis step and bar of the inline SVG charts. No scripts, no fonts or
 * styles fetched: a page can be mailed and opened offline. Errors stick: after the
 * first failed append the page keeps `err` set and af_page_end reports it.
 */
#ifndef AF_PAGE_H
#define AF_PAGE_H

#include <stdarg.h>

#include "accelfit/util.h"

struct af_page {
    struct af_buf *b;
    int err;                 /* nonzero once an append failed */
};

void af_page_put(struct af_page *p, const char *s);
void af_page_putf(struct af_page *p, const char *fmt, ...) AF_PRINTF(2, 3);
void af_page_vputf(struct af_page *p, const char *fmt, va_list ap) AF_PRINTF(2, 0);
/* Text into HTML: & < > " escaped. */
void af_page_esc(struct af_page *p, const char *s);
/* A round step (1, 2 or 5 x a power of ten) for an axis up to `max` with about `ticks`. */
double af_page_nice_step(double max, int ticks);
/*
 * <!DOCTYPE html> to <body><h1>: the <title> is "heading: subtitle" (subtitle escaped; NULL
 * or "" for none), the style sheet inline, then <h1>heading</h1> and the subtitle as a
 * paragraph of class "meta".
 */
void af_page_begin(struct af_page *p, const char *heading, const char *subtitle);
/* A horizontal bar `w` pixels of `width` wide in `color`, with `label` (escaped) as its
 * tooltip, and a mark at `mark` pixels (a budget; < 0: none): an inline SVG for a cell. */
void af_page_bar(struct af_page *p, double w, double mark, int width, const char *color,
                 const char *label);
/* Closes the page. 0, or AF_ETOOBIG when an append failed on the way. */
int af_page_end(struct af_page *p);

#endif
