/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The AWS client of src/aws (internal.h): the environment, the three kinds of
 * credentials EKS gives a pod, and one signed request with its retries.
 *
 * libcurl signs (CURLOPT_AWS_SIGV4, "aws:amz:REGION:SERVICE"): it adds X-Amz-Date, hashes
 * the POST body and signs Host, X-Amz-Date and every header given here (Content-Type,
 * X-Amz-Target, X-Amz-Security-Token), which is what AWS checks. STS
 * AssumeRoleWithWebIdentity is sent unsigned, as the SDKs send it: the web identity token
 * is the proof. A throttled answer (ThrottlingException, RequestLimitExceeded, HTTP 429 or
 * 5xx) is retried after a wait that doubles; an expired-credentials answer renews them and
 * retries once; anything else becomes one message, "WHAT: CODE: MESSAGE (HTTP n)".
 */
#include <ctype.h>
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "aws/internal.h"
#include "accelfit/banned.h"

#define MAX_TOKEN_FILE (64u << 10)
#define MAX_BACKOFF_S 30.0

/* ---- stop ------------------------------------------------------------------------------- */

void af__aws_stop_init(struct af__aws_stop *s)
{
    pthread_condattr_t ca;

    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cond, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&s->stop, false);
    s->kick = false;
}

void af__aws_stop_destroy(struct af__aws_stop *s)
{
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
}

bool af__aws_wait(struct af__aws_stop *s, double seconds, bool kick)
{
    struct timespec until;
    bool stopped;

    if (!s) {
        if (seconds > 0)
            nanosleep(&(struct timespec){(time_t)seconds,
                                         (long)((seconds - floor(seconds)) * 1e9)},
                      NULL);
        return true;
    }
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)seconds;
    until.tv_nsec += (long)((seconds - floor(seconds)) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->lock);
    while (!atomic_load(&s->stop) && !(kick && s->kick))
        if (pthread_cond_timedwait(&s->cond, &s->lock, &until) != 0)
            break;
    if (kick)
        s->kick = false;
    stopped = atomic_load(&s->stop);
    pthread_mutex_unlock(&s->lock);
    return !stopped;
}

/* ---- small helpers ------------------------------------------------------------------------ */

int af__aws_fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;

    if (err && errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

const char *af__aws_default_region(const char *region)
{
    if (!region || !*region)
        region = getenv("AWS_REGION");
    if (!region || !*region)
        region = getenv("AWS_DEFAULT_REGION");
    return region && *region ? region : NULL;
}

static char *env_dup(const char *name)
{
    const char *v = getenv(name);

    return v && *v ? af_xstrdup(v) : NULL;
}

static void set_str(char **slot, const char *v)
{
    af_free(*slot);
    *slot = af_xstrdup(v);
}

/* ---- shared credentials files (as the AWS SDKs read them) ------------------------------------ */

static char *trim(char *s)
{
    char *e;

    while (*s == ' ' || *s == '\t')
        s++;
    e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
        *--e = '\0';
    return s;
}

/* One profile's keys from an INI file: in the credentials file its section is [NAME], in the
 * config file [profile NAME] (and [default]). True when the file holds the section. */
struct shared_profile {
    char *akid, *secret, *token;
    bool process, sso;        /* credential_process, sso_*: not run here */
};

static bool read_profile(const char *path, const char *name, bool config, struct shared_profile *out)
{
    FILE *f = path ? fopen(path, "r") : NULL;
    char line[2048], want[200];
    bool in = false, found = false;

    if (!f)
        return false;
    if (config && strcmp(name, "default"))
        snprintf(want, sizeof(want), "profile %s", name);
    else
        snprintf(want, sizeof(want), "%s", name);
    while (fgets(line, sizeof(line), f)) {
        char *s = trim(line), *eq, *k, *v;
        if (!*s || *s == '#' || *s == ';')
            continue;
        if (*s == '[') {
            char *close = strchr(s, ']');
            if (close)
                *close = '\0';
            in = !strcmp(trim(s + 1), want);
            found = found || in;
            continue;
        }
        if (!in || !(eq = strchr(s, '=')))
            continue;
        *eq = '\0';
        k = trim(s);
        v = trim(eq + 1);
        if (!strcmp(k, "aws_access_key_id") && *v && !out->akid)
            out->akid = af_xstrdup(v);
        else if (!strcmp(k, "aws_secret_access_key") && *v && !out->secret)
            out->secret = af_xstrdup(v);
        else if (!strcmp(k, "aws_session_token") && *v && !out->token)
            out->token = af_xstrdup(v);
        else if (!strcmp(k, "credential_process"))
            out->process = true;
        else if (!strncmp(k, "sso_", 4))
            out->sso = true;
    }
    fclose(f);
    return found;
}

/*
 * Static keys of profile $AWS_PROFILE (default "default") from $AWS_SHARED_CREDENTIALS_FILE
 * (default ~/.aws/credentials), then $AWS_CONFIG_FILE (default ~/.aws/config), as the AWS
 * SDKs find them on a workstation. credential_process and SSO profiles are not run: said in
 * c->creds_from. True with c->creds set.
 */
static bool shared_credentials(struct af__aws *c)
{
    const char *home = getenv("HOME"), *profile = getenv("AWS_PROFILE");
    char *files[2];
    struct shared_profile p;
    bool ok = false, any = false;

    memset(&p, 0, sizeof(p));
    if (!profile || !*profile)
        profile = "default";
    files[0] = env_dup("AWS_SHARED_CREDENTIALS_FILE");
    if (!files[0] && home && *home)
        files[0] = af_xasprintf("%s/.aws/credentials", home);
    files[1] = env_dup("AWS_CONFIG_FILE");
    if (!files[1] && home && *home)
        files[1] = af_xasprintf("%s/.aws/config", home);
    for (int i = 0; i < 2 && !ok; i++) {
        if (!read_profile(files[i], profile, i == 1, &p))
            continue;
        any = true;
        if (p.akid && p.secret) {
            c->mode = AF__CREDS_STATIC;
            c->creds.akid = p.akid;
            c->creds.secret = p.secret;
            c->creds.token = p.token;
            c->creds.valid = true;
            p.akid = p.secret = p.token = NULL;
            snprintf(c->creds_from, sizeof(c->creds_from), "profile %.60s of %.200s", profile,
                     files[i]);
            ok = true;
        }
    }
    if (!ok && any && (p.process || p.sso))
        snprintf(c->creds_from, sizeof(c->creds_from),
                 " (profile %.60s uses %s, which accelfit does not run; export its keys: aws "
                 "configure export-credentials --format env)",
                 profile, p.process ? "credential_process" : "SSO");
    else if (!ok && any)
        snprintf(c->creds_from, sizeof(c->creds_from),
                 " (profile %.60s has no aws_access_key_id and aws_secret_access_key)", profile);
    else if (!ok && getenv("AWS_PROFILE"))
        snprintf(c->creds_from, sizeof(c->creds_from), " (no profile %.60s in %.100s or %.100s)",
                 profile, files[0] ? files[0] : "~/.aws/credentials",
                 files[1] ? files[1] : "~/.aws/config");
    af_free(p.akid);
    af_free(p.secret);
    af_free(p.token);
    af_free(files[0]);
    af_free(files[1]);
    return ok;
}

/* ---- client ------------------------------------------------------------------------------- */

void af__aws_init(struct af__aws *c, const struct af_aws_options *opt, struct af__aws_stop *stop)
{
    static const char *const endpoint_env[] = {"AWS_ENDPOINT_URL_PRICING", "AWS_ENDPOINT_URL_EC2",
                                               "AWS_ENDPOINT_URL_STS"};
    const char *region = af__aws_default_region(opt->region);
    char *akid, *secret;

    memset(c, 0, sizeof(*c));
    c->stop = stop;
    c->timeout_s = opt->timeout_s > 0 ? opt->timeout_s : 30;
    c->backoff_s = opt->backoff_s > 0 ? opt->backoff_s : 1;
    c->max_retries = opt->max_retries > 0 ? opt->max_retries : 4;
    c->margin_s = opt->credentials_margin_s > 0 ? opt->credentials_margin_s : 300;
    if (region)
        snprintf(c->region, sizeof(c->region), "%s", region);
    for (size_t i = 0; i < AF_ARRAY_SIZE(endpoint_env); i++) {
        c->endpoint[i] = env_dup(endpoint_env[i]);
        if (!c->endpoint[i])
            c->endpoint[i] = env_dup("AWS_ENDPOINT_URL");
    }
    c->ca_bundle = env_dup("AWS_CA_BUNDLE");

    c->role_arn = env_dup("AWS_ROLE_ARN");
    c->token_file = env_dup("AWS_WEB_IDENTITY_TOKEN_FILE");
    c->container_uri = env_dup("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    akid = env_dup("AWS_ACCESS_KEY_ID");
    secret = env_dup("AWS_SECRET_ACCESS_KEY");
    if (c->role_arn && c->token_file) {
        c->mode = AF__CREDS_IRSA;
        c->session_name = env_dup("AWS_ROLE_SESSION_NAME");
        if (!c->session_name)
            c->session_name = af_xasprintf("accelfit-%ld", (long)time(NULL));
    } else if (c->container_uri) {
        c->mode = AF__CREDS_POD;
        c->container_token_file = env_dup("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
        c->container_token = env_dup("AWS_CONTAINER_AUTHORIZATION_TOKEN");
    } else if (akid && secret) {
        c->mode = AF__CREDS_STATIC;
        c->creds.akid = akid;
        c->creds.secret = secret;
        c->creds.token = env_dup("AWS_SESSION_TOKEN");
        c->creds.valid = true;
        akid = secret = NULL;
    } else {
        (void)shared_credentials(c);   /* a workstation's ~/.aws/credentials, AWS_PROFILE */
    }
    af_free(akid);
    af_free(secret);
    c->curl = curl_easy_init();
    af_assert(c->curl != NULL);
}

static void creds_clear(struct af__aws *c)
{
    af_free(c->creds.akid);
    af_free(c->creds.secret);
    af_free(c->creds.token);
    memset(&c->creds, 0, sizeof(c->creds));
}

void af__aws_release(struct af__aws *c)
{
    for (size_t i = 0; i < AF_ARRAY_SIZE(c->endpoint); i++)
        af_free(c->endpoint[i]);
    af_free(c->ca_bundle);
    af_free(c->role_arn);
    af_free(c->token_file);
    af_free(c->session_name);
    af_free(c->container_uri);
    af_free(c->container_token_file);
    af_free(c->container_token);
    creds_clear(c);
    if (c->curl)
        curl_easy_cleanup(c->curl);
    memset(c, 0, sizeof(*c));
}

char *af__aws_url(const struct af__aws *c, enum af__aws_service service, const char *region)
{
    const char *e = service < AF__AWS_POD ? c->endpoint[service] : NULL;

    if (e)
        return af_xasprintf("%s%s", e, e[strlen(e) - 1] == '/' ? "" : "/");
    switch (service) {
    case AF__AWS_PRICING:
        return af_xstrdup("https://api.pricing.us-east-1.amazonaws.com/");
    case AF__AWS_EC2:
        return af_xasprintf("https://ec2.%s.amazonaws.com/", region);
    case AF__AWS_STS:
        return region && *region ? af_xasprintf("https://sts.%s.amazonaws.com/", region)
                                 : af_xstrdup("https://sts.amazonaws.com/");
    default:
        return af_xstrdup(c->container_uri);
    }
}

/* ---- one HTTP exchange ----------------------------------------------------------------------- */

static size_t write_cb(char *data, size_t size, size_t n, void *ud)
{
    return af_buf_add(ud, data, size * n) < 0 ? 0 : size * n;
}

static int progress_cb(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    struct af__aws_stop *s = ud;

    (void)dt, (void)dn, (void)ut, (void)un;
    return s && atomic_load(&s->stop) ? 1 : 0;
}

/* One request; fills *status and `out`. Returns 0 or AF_ECONN/AF_ETOOBIG/AF_ECANCELED. */
static int perform(struct af__aws *c, const struct af__aws_req *rq, const char *authorization,
                   long *status, struct af_buf *out, char *err, size_t errlen)
{
    static const char *const service_name[] = {"pricing", "ec2", "sts", ""};
    CURL *h = c->curl;
    struct curl_slist *hdrs = NULL;
    char errbuf[CURL_ERROR_SIZE] = "", *line;
    CURLcode rc;
    int ret = 0;

    af_buf_reset(out);
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, rq->url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "accelfit/" AF_VERSION);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(c->timeout_s * 1000));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(fmin(c->timeout_s, 10) * 1000));
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, progress_cb);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, c->stop);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (c->ca_bundle)
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_bundle);
    if (rq->body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(rq->body));
        line = af_xasprintf("Content-Type: %s", rq->content_type);
        hdrs = curl_slist_append(hdrs, line);
        af_free(line);
    }
    if (rq->target) {
        line = af_xasprintf("X-Amz-Target: %s", rq->target);
        hdrs = curl_slist_append(hdrs, line);
        af_free(line);
    }
    if (authorization) {
        line = af_xasprintf("Authorization: %s", authorization);
        hdrs = curl_slist_append(hdrs, line);
        af_free(line);
    }
    if (rq->service == AF__AWS_PRICING || rq->service == AF__AWS_EC2) {
        char sigv4[96];

        snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:%s", rq->region, service_name[rq->service]);
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4);
        curl_easy_setopt(h, CURLOPT_USERNAME, c->creds.akid);
        curl_easy_setopt(h, CURLOPT_PASSWORD, c->creds.secret);
        if (c->creds.token) {
            line = af_xasprintf("X-Amz-Security-Token: %s", c->creds.token);
            hdrs = curl_slist_append(hdrs, line);
            af_free(line);
        }
    }
    /*
     * No "Expect:" header to turn off 100-continue: curl 7.88 signs the empty header it
     * then leaves out, and AWS refuses the signature. The bodies sent are far below the
     * 1 MiB from which curl asks for 100-continue.
     */
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    if (rc == CURLE_ABORTED_BY_CALLBACK)
        ret = af__aws_fail(err, errlen, AF_ECANCELED, "%s: stopped", rq->what);
    else if (rc == CURLE_WRITE_ERROR)
        ret = af__aws_fail(err, errlen, AF_ETOOBIG, "%s: answer larger than %u MiB", rq->what,
                           AF__AWS_MAX_BODY >> 20);
    else if (rc == CURLE_OPERATION_TIMEDOUT)
        ret = af__aws_fail(err, errlen, AF_ECONN, "%s: no answer from %s within %g s", rq->what,
                           rq->url, c->timeout_s);
    else if (rc != CURLE_OK)
        ret = af__aws_fail(err, errlen, AF_ECONN, "%s: cannot reach %s: %s", rq->what, rq->url,
                           errbuf[0] ? errbuf : curl_easy_strerror(rc));
    curl_slist_free_all(hdrs);
    return ret;
}

/* ---- AWS error documents ---------------------------------------------------------------------- */

struct aws_error {
    char code[128];
    char message[512];
};

static void error_xml_cb(void *ud, const char *path, const char *text)
{
    struct aws_error *e = ud;
    size_t n = strlen(path);

    if (n >= 11 && !strcmp(path + n - 11, "/Error/Code") && !e->code[0])
        snprintf(e->code, sizeof(e->code), "%s", text);
    else if (n >= 14 && !strcmp(path + n - 14, "/Error/Message") && !e->message[0])
        snprintf(e->message, sizeof(e->message), "%s", text);
}

/* The code and message of an AWS error document (JSON __type/message, or XML
 * Error/Code and Error/Message); empty when the body is neither. */
static void parse_error(const struct af_buf *body, struct aws_error *e)
{
    const char *s = body->buf ? body->buf : "";
    char ignored[64];

    memset(e, 0, sizeof(*e));
    while (isspace((unsigned char)*s))
        s++;
    if (*s == '{') {
        json_t *j = json_loadb(body->buf, body->len, 0, NULL);
        const char *type = json_string_value(json_object_get(j, "__type"));
        const char *msg = json_string_value(json_object_get(j, "message"));

        if (!type)
            type = json_string_value(json_object_get(j, "code"));
        if (!msg)
            msg = json_string_value(json_object_get(j, "Message"));
        if (type && strchr(type, '#'))
            type = strchr(type, '#') + 1;
        snprintf(e->code, sizeof(e->code), "%s", type ? type : "");
        snprintf(e->message, sizeof(e->message), "%s", msg ? msg : "");
        json_decref(j);
    } else if (*s == '<') {
        if (af__xml_parse(body->buf, body->len, error_xml_cb, e, ignored, sizeof(ignored)))
            memset(e, 0, sizeof(*e));
    }
    for (char *p = e->message; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

void af__aws_error_parse(const char *doc, size_t len, char *code, size_t code_len, char *msg,
                         size_t msg_len)
{
    struct af_buf b = {(char *)doc, len, len, len};
    struct aws_error e;

    parse_error(&b, &e);
    snprintf(code, code_len, "%s", e.code);
    snprintf(msg, msg_len, "%s", e.message);
}

static bool is_throttled(long status, const char *code)
{
    static const char *const codes[] = {"Throttling",       "ThrottlingException",
                                        "RequestLimitExceeded", "TooManyRequestsException",
                                        "RequestThrottled", "RequestThrottledException",
                                        "ServiceUnavailable", "InternalError",
                                        "InternalErrorException"};

    for (size_t i = 0; i < AF_ARRAY_SIZE(codes); i++)
        if (!strcmp(code, codes[i]))
            return true;
    return status == 429 || status >= 500;
}

static bool is_expired(long status, const struct aws_error *e)
{
    if (!strcmp(e->code, "ExpiredToken") || !strcmp(e->code, "ExpiredTokenException") ||
        !strcmp(e->code, "RequestExpired"))
        return true;
    return status == 403 && strcasestr(e->message, "expired") != NULL;
}

/* ---- credentials ---------------------------------------------------------------------------- */

static int read_token(const char *path, const char *what, char **out, char *err, size_t errlen)
{
    struct af_buf b = AF_BUF_INIT(MAX_TOKEN_FILE);
    int rc = af_buf_read_file(&b, path);

    if (rc) {
        af_buf_release(&b);
        return af__aws_fail(err, errlen, AF_EUNAUTH, "%s: cannot read token file '%s': %s", what,
                            path, af_strerror(rc));
    }
    while (b.len && isspace((unsigned char)b.buf[b.len - 1]))
        b.buf[--b.len] = '\0';
    *out = af_buf_detach(&b, NULL);
    return 0;
}

struct sts_answer {
    char *akid, *secret, *token, *expiration;
};

static void sts_xml_cb(void *ud, const char *path, const char *text)
{
    struct sts_answer *a = ud;
    const char *leaf = strrchr(path, '/');

    if (!strstr(path, "/Credentials/"))
        return;
    if (!strcmp(leaf, "/AccessKeyId"))
        set_str(&a->akid, text);
    else if (!strcmp(leaf, "/SecretAccessKey"))
        set_str(&a->secret, text);
    else if (!strcmp(leaf, "/SessionToken"))
        set_str(&a->token, text);
    else if (!strcmp(leaf, "/Expiration"))
        set_str(&a->expiration, text);
}

static int call(struct af__aws *c, const struct af__aws_req *rq, const char *auth,
                struct af_buf *out, char *err, size_t errlen);

static int take_credentials(struct af__aws *c, const char *what, struct sts_answer *a, char *err,
                            size_t errlen)
{
    double expires = 0;

    if (!a->akid || !*a->akid || !a->secret || !*a->secret || !a->token || !*a->token ||
        (expires = af_parse_rfc3339(a->expiration)) < 0)
        return af__aws_fail(err, errlen, AF_EPARSE,
                            "%s: answer without AccessKeyId, SecretAccessKey, session token "
                            "and Expiration",
                            what);
    creds_clear(c);
    c->creds.akid = a->akid;
    c->creds.secret = a->secret;
    c->creds.token = a->token;
    c->creds.expires = expires;
    c->creds.valid = true;
    a->akid = a->secret = a->token = NULL;
    return 0;
}

static void answer_free(struct sts_answer *a)
{
    af_free(a->akid);
    af_free(a->secret);
    af_free(a->token);
    af_free(a->expiration);
}

int af__aws_sts_take(struct af__aws *c, const char *what, const char *doc, size_t len, char *err,
                     size_t errlen)
{
    struct sts_answer a = {0};
    int rc = af__xml_parse(doc ? doc : "", doc ? len : 0, sts_xml_cb, &a, err, errlen);

    if (rc) {
        char why[256];
        snprintf(why, sizeof(why), "%s", err);
        rc = af__aws_fail(err, errlen, rc, "%s: %s", what, why);
    } else {
        rc = take_credentials(c, what, &a, err, errlen);
    }
    answer_free(&a);
    return rc;
}

static int fetch_irsa(struct af__aws *c, char *err, size_t errlen)
{
    struct af_buf body = AF_BUF_INIT(AF__AWS_MAX_BODY);
    char *what = af_xasprintf("sts AssumeRoleWithWebIdentity%s%s", c->region[0] ? " " : "",
                              c->region);
    char *token = NULL, *form = NULL, *url = af__aws_url(c, AF__AWS_STS, c->region);
    char *e_arn, *e_name, *e_token;
    int rc;

    rc = read_token(c->token_file, what, &token, err, errlen);
    if (rc)
        goto out;
    e_arn = curl_easy_escape(c->curl, c->role_arn, 0);
    e_name = curl_easy_escape(c->curl, c->session_name, 0);
    e_token = curl_easy_escape(c->curl, token, 0);
    form = af_xasprintf("Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=%s"
                        "&RoleSessionName=%s&WebIdentityToken=%s",
                        e_arn, e_name, e_token);
    curl_free(e_arn);
    curl_free(e_name);
    curl_free(e_token);
    rc = call(c,
                       &(struct af__aws_req){.what = what, .service = AF__AWS_STS,
                                             .url = url, .body = form,
                                             .content_type = "application/x-www-form-urlencoded"},
                       NULL, &body, err, errlen);
    if (rc)
        goto out;
    rc = af__aws_sts_take(c, what, body.buf, body.len, err, errlen);
out:
    af_buf_release(&body);
    af_free(form);
    af_free(token);
    af_free(url);
    af_free(what);
    return rc;
}

static int fetch_pod_identity(struct af__aws *c, char *err, size_t errlen)
{
    const char *what = "eks pod identity credentials";
    struct af_buf body = AF_BUF_INIT(AF__AWS_MAX_BODY);
    struct sts_answer a = {0};
    char *token = NULL;
    json_t *j = NULL;
    int rc = 0;

    if (c->container_token_file)
        rc = read_token(c->container_token_file, what, &token, err, errlen);
    else
        token = af_xstrdup(c->container_token);
    if (rc)
        goto out;
    rc = call(c,
                       &(struct af__aws_req){.what = what, .service = AF__AWS_POD,
                                             .url = c->container_uri},
                       token, &body, err, errlen);
    if (rc)
        goto out;
    j = json_loadb(body.buf, body.len, 0, NULL);
    if (!json_is_object(j)) {
        rc = af__aws_fail(err, errlen, AF_EPARSE, "%s: answer is not a JSON object", what);
        goto out;
    }
    a.akid = af_xstrdup(json_string_value(json_object_get(j, "AccessKeyId")));
    a.secret = af_xstrdup(json_string_value(json_object_get(j, "SecretAccessKey")));
    a.token = af_xstrdup(json_string_value(json_object_get(j, "Token")));
    a.expiration = af_xstrdup(json_string_value(json_object_get(j, "Expiration")));
    rc = take_credentials(c, what, &a, err, errlen);
out:
    json_decref(j);
    answer_free(&a);
    af_buf_release(&body);
    af_free(token);
    return rc;
}

/* Valid credentials in c->creds, renewed when `force` or within the margin of expiry. */
static int credentials(struct af__aws *c, bool force, char *err, size_t errlen)
{
    switch (c->mode) {
    case AF__CREDS_STATIC:
        return 0;
    case AF__CREDS_NONE:
        return af__aws_fail(err, errlen, AF_EUNAUTH,
                            "no AWS credentials%s: set AWS_ROLE_ARN and "
                            "AWS_WEB_IDENTITY_TOKEN_FILE (IRSA), "
                            "AWS_CONTAINER_CREDENTIALS_FULL_URI (EKS Pod Identity), "
                            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile with "
                            "keys in ~/.aws/credentials (AWS_PROFILE, "
                            "AWS_SHARED_CREDENTIALS_FILE)",
                            c->creds_from);
    default:
        break;
    }
    if (!force && c->creds.valid && af_wall_time() < c->creds.expires - c->margin_s)
        return 0;
    return c->mode == AF__CREDS_IRSA ? fetch_irsa(c, err, errlen)
                                     : fetch_pod_identity(c, err, errlen);
}

/* ---- the request loop ------------------------------------------------------------------------- */

static int call(struct af__aws *c, const struct af__aws_req *rq, const char *auth,
                struct af_buf *out, char *err, size_t errlen)
{
    bool sign = rq->service == AF__AWS_PRICING || rq->service == AF__AWS_EC2;
    bool renewed = false;
    int throttled = 0, rc;

    for (;;) {
        struct aws_error e;
        long status = 0;

        if (sign) {
            rc = credentials(c, false, err, errlen);
            if (rc)
                return rc;
        }
        rc = perform(c, rq, auth, &status, out, err, errlen);
        if (rc)
            return rc;
        if (status == 200)
            return 0;
        parse_error(out, &e);
        if (sign && !renewed && c->mode != AF__CREDS_STATIC && is_expired(status, &e)) {
            renewed = true;
            rc = credentials(c, true, err, errlen);
            if (rc)
                return rc;
            continue;
        }
        if (is_throttled(status, e.code) && throttled < c->max_retries) {
            double wait = fmin(c->backoff_s * ldexp(1, throttled), MAX_BACKOFF_S);

            throttled++;
            AF_LOG(AF_LOG_INFO, "aws request throttled, retrying", "what", rq->what, "code",
                   e.code, NULL);
            if (!af__aws_wait(c->stop, wait, false))
                return af__aws_fail(err, errlen, AF_ECANCELED, "%s: stopped", rq->what);
            continue;
        }
        if (e.code[0])
            return af__aws_fail(err, errlen, status == 403 || status == 401 ? AF_EUNAUTH : AF_EHTTP,
                                "%s: %s: %s (HTTP %ld)", rq->what, e.code,
                                e.message[0] ? e.message : "no message", status);
        return af__aws_fail(err, errlen, AF_EHTTP, "%s: HTTP %ld: %.200s", rq->what, status,
                            out->buf ? out->buf : "");
    }
}

int af__aws_call(struct af__aws *c, const struct af__aws_req *rq, struct af_buf *out, char *err,
                 size_t errlen)
{
    return call(c, rq, NULL, out, err, errlen);
}
