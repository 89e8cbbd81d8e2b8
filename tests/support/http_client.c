/* SPDX-License-Identifier: Apache-2.0 */
/* Child-process accelfit server and a libcurl client for the HTTP suites. */
#include "support/http_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "accelfit/util.h"
#include "support/support.h"

int af_test_free_port(void)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;

    ck_assert_int_ge(fd, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

char *af_test_server_log(const struct af_test_server *s)
{
    struct af_buf b = AF_BUF_INIT(16u << 20);

    if (af_buf_read_file(&b, s->log_path) != 0)
        return af_xstrdup("");
    return af_buf_detach(&b, NULL);
}

struct sink {
    struct af_buf body;
    char *ctype;
    size_t ctype_len;
    char *allow;
    size_t allow_len;
};

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
    struct sink *k = ud;

    if (af_buf_add(&k->body, p, sz * n) != 0)
        return 0;
    return sz * n;
}

static void header_value(const char *line, size_t n, const char *name, char *out, size_t outlen)
{
    size_t nl = strlen(name), v;

    if (n <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
        return;
    v = nl + 1;
    while (v < n && line[v] == ' ')
        v++;
    while (n > v && (line[n - 1] == '\r' || line[n - 1] == '\n'))
        n--;
    snprintf(out, outlen, "%.*s", (int)(n - v), line + v);
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
    struct af_test_resp *r = ud;

    header_value(p, sz * n, "content-type", r->content_type, sizeof(r->content_type));
    header_value(p, sz * n, "allow", r->allow, sizeof(r->allow));
    return sz * n;
}

int af_test_http(CURL *c, const char *method, const char *url, const char *body, size_t len,
                 const char *const *headers, struct af_test_resp *r)
{
    struct sink k;
    struct curl_slist *hl = NULL;

    memset(r, 0, sizeof(*r));
    memset(&k, 0, sizeof(k));
    af_buf_init(&k.body, 256u << 20);
    for (size_t i = 0; headers && headers[i]; i++)
        hl = curl_slist_append(hl, headers[i]);
    /* libcurl would wait for "100 Continue" on big bodies; kube-scheduler never sends Expect. */
    hl = curl_slist_append(hl, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &k);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (!method || !strcmp(method, "GET")) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, NULL);
    } else {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? len : 0));
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, strcmp(method, "POST") ? method : NULL);
    }
    r->curl_rc = (int)curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &r->connects);
    curl_easy_getinfo(c, CURLINFO_HTTP_VERSION, &r->http_version);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hl);
    r->body = af_buf_detach(&k.body, &r->len);
    if (!r->body)
        r->body = af_xstrdup("");
    return r->curl_rc;
}

void af_test_resp_free(struct af_test_resp *r)
{
    af_free(r->body);
    r->body = NULL;
}

static bool child_exited(pid_t pid, int *status)
{
    return waitpid(pid, status, WNOHANG) == pid;
}

void af_test_server_start(struct af_test_server *s, const char *const *args, bool tls,
                          const char *client_cert, const char *client_key)
{
    const char *argv[64];
    char listen[64];
    size_t n = 0;
    int status = 0;

    memset(s, 0, sizeof(s[0]));
    s->port = af_test_free_port();
    s->tls = tls;
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", s->port);
    snprintf(s->base, sizeof(s->base), "%s://127.0.0.1:%d", tls ? "https" : "http", s->port);
    snprintf(s->log_path, sizeof(s->log_path), "/tmp/af-test-server-%d-%d.log", (int)getpid(),
             s->port);
    argv[n++] = "accelfit";
    argv[n++] = "serve";
    argv[n++] = "--listen";
    argv[n++] = listen;
    for (size_t i = 0; args && args[i] && n < AF_ARRAY_SIZE(argv) - 1; i++)
        argv[n++] = args[i];
    argv[n] = NULL;

    s->pid = fork();
    ck_assert_int_ge(s->pid, 0);
    if (s->pid == 0) {
        int fd = open(s->log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 2);
            dup2(fd, 1);
            close(fd);
        }
        execv(AF_BINARY, (char *const *)argv);
        _exit(127);
    }
    for (int tries = 0; tries < 300; tries++) {
        CURL *c = curl_easy_init();
        struct af_test_resp r;
        char url[192];

        snprintf(url, sizeof(url), "%s/healthz", s->base);
        if (tls) {
            curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
            curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
            if (client_cert) {
                curl_easy_setopt(c, CURLOPT_SSLCERT, client_cert);
                curl_easy_setopt(c, CURLOPT_SSLKEY, client_key);
            }
        }
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 500L);
        af_test_http(c, NULL, url, NULL, 0, NULL, &r);
        curl_easy_cleanup(c);
        if (r.curl_rc == CURLE_OK && r.status == 200) {
            af_test_resp_free(&r);
            return;
        }
        af_test_resp_free(&r);
        if (child_exited(s->pid, &status)) {
            char *log = af_test_server_log(s);
            s->pid = 0;
            ck_abort_msg("accelfit serve exited (status %d) before answering: %s", status, log);
        }
        usleep(50000);
    }
    {
        char *log = af_test_server_log(s);
        ck_abort_msg("accelfit serve did not answer /healthz within 15 s: %s", log);
    }
}

int af_test_server_stop(struct af_test_server *s)
{
    int status = 0;

    if (s->pid <= 0)
        return -1;
    kill(s->pid, SIGTERM);
    for (int i = 0; i < 200; i++) {
        if (child_exited(s->pid, &status)) {
            s->pid = 0;
            if (WIFSIGNALED(status))
                return 128 + WTERMSIG(status);
            return WEXITSTATUS(status);
        }
        usleep(25000);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &status, 0);
    s->pid = 0;
    return 128 + SIGKILL;
}
