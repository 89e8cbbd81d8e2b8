/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTML report pages' common parts (accelfit/page.h): escaping, the style sheet,
 * the head and foot of a page.
 */
#include "accelfit/page.h"

#include <math.h>
#include <stdio.h>
#include "accelfit/banned.h"

void af_page_put(struct af_page *p, const char *s)
{
    p->err |= af_buf_puts(p->b, s);
}

void af_page_vputf(struct af_page *p, const char *fmt, va_list ap)
{
    char tmp[2048];
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);

    if (n > 0)
        p->err |= af_buf_add(p->b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

void af_page_putf(struct af_page *p, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    af_page_vputf(p, fmt, ap);
    va_end(ap);
}

void af_page_esc(struct af_page *p, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': af_page_put(p, "&amp;"); break;
        case '<': af_page_put(p, "&lt;"); break;
        case '>': af_page_put(p, "&gt;"); break;
        case '"': af_page_put(p, "&quot;"); break;
        default: p->err |= af_buf_add(p->b, s, 1);
        }
    }
}

double af_page_nice_step(double max, int ticks)
{
    double raw = max / ticks, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

static const char style[] =
    "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;color:#222;margin:24px;"
    "max-width:1150px}h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}"
    ".meta{color:#555;margin:0 0 4px}.summary{font-size:16px;background:#f3f7ee;border-left:4px "
    "solid #31a354;padding:8px 12px;margin:14px 0}table{border-collapse:collapse}"
    "th,td{padding:3px 12px;border-bottom:1px solid #e3e3e3;text-align:right;white-space:nowrap}"
    "th:first-child{text-align:left;font-weight:normal}thead th{font-weight:600}"
    "tr.sub th{padding-left:26px;color:#555}figure{display:inline-block;margin:0 16px 12px 0}"
    "figcaption{margin-bottom:2px}.row{display:flex;gap:40px;align-items:flex-start}"
    "h2.first{margin-top:0}.grid{stroke:#eee}.axis{stroke:#999}"
    ".yl{font-size:11px;text-anchor:end;fill:#555}.xl{font-size:11px;text-anchor:middle;"
    "fill:#555}.v{font-size:10px;fill:#333}.target{stroke:#555;stroke-dasharray:5 4}"
    ".legend span{margin-right:14px;white-space:nowrap}.legend i{display:inline-block;"
    "width:11px;height:11px;margin-right:4px;vertical-align:-1px}"
    ".note{color:#555;font-size:12px;max-width:900px}tr.over td{color:#b2182b}"
    "td.bar{text-align:left}";

void af_page_begin(struct af_page *p, const char *heading, const char *subtitle)
{
    bool sub = subtitle && *subtitle;

    af_page_put(p, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                   "<meta name=\"viewport\" content=\"width=device-width\"><title>");
    af_page_esc(p, heading);
    if (sub) {
        af_page_put(p, ": ");
        af_page_esc(p, subtitle);
    }
    af_page_putf(p, "</title><style>%s</style></head>\n<body>\n<h1>", style);
    af_page_esc(p, heading);
    af_page_put(p, "</h1>\n");
    if (sub) {
        af_page_put(p, "<p class=\"meta\">");
        af_page_esc(p, subtitle);
        af_page_put(p, "</p>\n");
    }
}

void af_page_bar(struct af_page *p, double w, double mark, int width, const char *color,
                 const char *label)
{
    if (!(w >= 0))
        w = 0;
    if (w > width)
        w = width;
    af_page_putf(p,
                 "<svg viewBox=\"0 0 %d 12\" width=\"%d\" height=\"12\" role=\"img\">"
                 "<rect x=\"0\" y=\"1\" width=\"%.1f\" height=\"10\" fill=\"%s\"><title>",
                 width, width, w, color);
    af_page_esc(p, label);
    af_page_put(p, "</title></rect>");
    if (mark >= 0 && mark <= width)
        af_page_putf(p, "<line x1=\"%.1f\" y1=\"0\" x2=\"%.1f\" y2=\"12\" class=\"target\"/>",
                     mark, mark);
    af_page_put(p, "</svg>");
}

int af_page_end(struct af_page *p)
{
    af_page_put(p, "</body></html>\n");
    return p->err ? AF_ETOOBIG : 0;
}
