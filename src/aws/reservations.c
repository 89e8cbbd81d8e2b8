/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One page of an EC2 DescribeCapacityReservations answer (internal.h): each active
 * reservation (capacityReservationSet/item: capacityReservationId, instanceType,
 * availabilityZone, state, endDate, reservationType) goes into the book being built, so
 * that a prepaid node's reservation says when it ends (docs/pricing.md#capacity-blocks-end).
 */
#include <stdio.h>
#include <string.h>

#include "aws/internal.h"
#include "accelfit/banned.h"

struct resv_page {
    struct af_prices *book;
    const char *region;
    double now;
    struct af_reservation cur;
    char state[32];
    bool bad_end;
    size_t *n;
    char *next;
    char bad[160];
};

static void copy(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src);
}

static void on_element(void *ud, const char *path, const char *text)
{
    struct resv_page *p = ud;
    const char *leaf = strrchr(path, '/');
    static const char item[] = "/DescribeCapacityReservationsResponse/capacityReservationSet/item";

    if (!strcmp(path, "/DescribeCapacityReservationsResponse/nextToken")) {
        af_free(p->next);
        p->next = *text ? af_xstrdup(text) : NULL;
        return;
    }
    if (strncmp(path, item, sizeof(item) - 1) || !leaf)
        return;
    if (!path[sizeof(item) - 1]) {
        /* the item ends: an active reservation with an id and a zone is kept */
        int rc = 0;
        if (!strcmp(p->state, "active") && !p->bad_end && !p->bad[0]) {
            copy(p->cur.region, sizeof(p->cur.region), p->region);
            p->cur.as_of = p->now;
            rc = af_prices_set_reservation(p->book, &p->cur);
            if (rc == 0)
                (*p->n)++;
            else if (rc == AF_ETOOBIG)
                snprintf(p->bad, sizeof(p->bad), "more than %d reservations",
                         AF_RESERVATIONS_MAX);
            else
                snprintf(p->bad, sizeof(p->bad), "a reservation without an id or zone");
        }
        memset(&p->cur, 0, sizeof(p->cur));
        p->state[0] = '\0';
        p->bad_end = false;
        return;
    }
    if (path[sizeof(item) - 1] != '/' || strchr(path + sizeof(item), '/'))
        return;   /* a field of a field (tags): not read */
    leaf++;
    if (!strcmp(leaf, "capacityReservationId"))
        copy(p->cur.id, sizeof(p->cur.id), text);
    else if (!strcmp(leaf, "instanceType"))
        copy(p->cur.instance_type, sizeof(p->cur.instance_type), text);
    else if (!strcmp(leaf, "availabilityZone"))
        copy(p->cur.zone, sizeof(p->cur.zone), text);
    else if (!strcmp(leaf, "state"))
        copy(p->state, sizeof(p->state), text);
    else if (!strcmp(leaf, "reservationType"))
        p->cur.block = !strcmp(text, "capacity-block");
    else if (!strcmp(leaf, "endDate") && *text)
        p->bad_end = (p->cur.end = af_parse_rfc3339(text)) < 0;
}

int af__aws_reservations_page(const char *what, const char *doc, size_t len, const char *region,
                              struct af_prices *book, size_t *n, char **next, char *err,
                              size_t errlen)
{
    struct resv_page p = {.book = book, .region = region, .now = af_wall_time(), .n = n};
    int rc;

    *next = NULL;
    rc = af__xml_parse(doc, len, on_element, &p, err, errlen);
    if (rc) {
        char inner[256];
        snprintf(inner, sizeof(inner), "%s", err);
        af_free(p.next);
        return af__aws_fail(err, errlen, rc, "%s: %s", what, inner);
    }
    if (p.bad[0]) {
        af_free(p.next);
        return af__aws_fail(err, errlen, AF_EPARSE, "%s: %s", what, p.bad);
    }
    *next = p.next;
    return 0;
}
