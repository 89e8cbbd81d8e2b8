/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The benchmarks' floors: a minimal libwebsockets HTTP server, one context and one vhost on
 * 127.0.0.1, the lws version accelfit links, serving the caller's protocols until it is
 * killed. bench_load's floor answers accelfit's own answer bytes; bench_scheduler's null
 * extender answers every call as an extender that decides nothing.
 */
#ifndef AF_BENCH_FLOOR_H
#define AF_BENCH_FLOOR_H

#include <libwebsockets.h>
#include <string.h>
#include <unistd.h>

/* Serves `protocols` on 127.0.0.1:port; `rx` is lws's read buffer (0: its default).
 * Never returns; exits 1 when it cannot listen. */
static inline void bench_floor_serve(int port, const struct lws_protocols *protocols, size_t rx)
{
    struct lws_context_creation_info info;
    struct lws_context *ctx;

    lws_set_log_level(0, NULL);
    memset(&info, 0, sizeof(info));
    info.port = port;
    info.iface = "127.0.0.1";
    info.protocols = protocols;
    info.options = LWS_SERVER_OPTION_DISABLE_IPV6;
    info.pt_serv_buf_size = (unsigned int)rx;
    if (!(ctx = lws_create_context(&info)))
        _exit(1);
    for (;;)
        lws_service(ctx, 0);
}

#endif
