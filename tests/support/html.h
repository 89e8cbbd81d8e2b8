/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The report pages (accelfit/page.h) as a test reads them: well formed and self-contained,
 * and the text of a table's cell. Shared by tests/check_simulate.c and tests/check_tenants.c.
 */
#ifndef AF_TEST_HTML_H
#define AF_TEST_HTML_H

/* Tags balance (HTML's void elements and self-closed SVG ones aside), no scripts, nothing
 * fetched (no src=, href=, http:// or https://). Fails the test otherwise. */
void af_test_html_well_formed(const char *html);

/*
 * The text of cell `col` (0: the row's <th>, 1: the first <td>, ...) of the row of table
 * `table_id` whose <th> reads `row` (as written, entities and all), tags left out. NULL when
 * there is no such table, row or cell. Caller frees.
 */
char *af_test_html_cell(const char *html, const char *table_id, const char *row, int col);

#endif
