/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TLS files: checked at start (af_http_check_tls, so a bad file is one line and
 * exit 2), and reloaded while serving. The files are looked at every TLS_CHECK_US
 * from the event loop; a changed, complete and valid set becomes a new SSL_CTX that
 * new connections switch to in their ClientHello (open connections keep theirs); a
 * set that cannot be used is logged once and the old one stays.
 *
 * libwebsockets 4.1.6 cannot reload a vhost's certificate, so the reload hooks
 * into the SSL_CTX lws made (handed over in
 * LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS, connection.c): a
 * ClientHello callback moves each new connection to the newest context, which
 * offers ALPN http/1.1 only as lws's does, and keeps lws's SNI vhost switch from
 * moving it back. Tests: test_tls_certificate_is_reloaded_when_the_files_change,
 * test_client_ca_is_enforced_and_reloaded and
 * test_tls_startup_errors_exit_2_with_one_line (tests/check_http.c).
 */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "http/internal.h"
#include "accelfit/banned.h"

#define TLS_FILE_MAX (1u << 20)

/* What the three files hold, parsed. */
struct tls_material {
    X509 *cert;
    STACK_OF(X509) *chain;   /* the certificates after the first in --tls-cert-file */
    EVP_PKEY *key;
    X509_STORE *ca;          /* NULL without --client-ca-file */
};

static void tls_material_release(struct tls_material *m)
{
    X509_free(m->cert);
    sk_X509_pop_free(m->chain, X509_free);
    EVP_PKEY_free(m->key);
    X509_STORE_free(m->ca);
    memset(m, 0, sizeof(*m));
}

/* A passphrase prompt on the terminal would hang a daemon: encrypted keys are refused. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return -1;
}

/* Reads `path` into `b`; on failure says why in `why`, naming `flag`. */
static int read_pem(const char *flag, const char *path, struct af_buf *b, char *why, size_t whylen)
{
    FILE *f = fopen(path, "rb");
    char chunk[8192];
    size_t n;
    int rc = 0;

    if (!f) {
        snprintf(why, whylen, "cannot read %s '%s': %s", flag, path, strerror(errno));
        return AF_EINVAL;
    }
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0 && !rc)
        if (af_buf_add(b, chunk, n) != 0) {
            snprintf(why, whylen, "%s '%s' is larger than %u bytes", flag, path, TLS_FILE_MAX);
            rc = AF_EINVAL;
        }
    if (!rc && ferror(f)) {
        snprintf(why, whylen, "cannot read %s '%s': %s", flag, path, strerror(errno));
        rc = AF_EINVAL;
    }
    fclose(f);
    return rc;
}

/* Every PEM certificate in `b`, in order (a new stack, possibly empty). */
static STACK_OF(X509) *pem_certs(const struct af_buf *b)
{
    STACK_OF(X509) *sk = sk_X509_new_null();
    BIO *bio = BIO_new_mem_buf(b->buf ? b->buf : "", (int)b->len);
    X509 *x;

    while (sk && bio && (x = PEM_read_bio_X509(bio, NULL, no_passphrase, NULL)) != NULL)
        if (!sk_X509_push(sk, x))
            X509_free(x);
    BIO_free(bio);
    ERR_clear_error();   /* the end of the input reads as "no start line" */
    return sk;
}

static int load_cert(const struct af_http_options *opt, struct tls_material *m, char *why,
                     size_t whylen)
{
    struct af_buf b = AF_BUF_INIT(TLS_FILE_MAX);
    int rc = read_pem("--tls-cert-file", opt->tls_cert_file, &b, why, whylen);

    if (!rc) {
        m->chain = pem_certs(&b);
        if (!m->chain || sk_X509_num(m->chain) == 0) {
            snprintf(why, whylen,
                     "--tls-cert-file '%s' holds no PEM certificate "
                     "(-----BEGIN CERTIFICATE-----)", opt->tls_cert_file);
            rc = AF_EINVAL;
        } else {
            m->cert = sk_X509_shift(m->chain);
        }
    }
    af_buf_release(&b);
    return rc;
}

static int load_key(const struct af_http_options *opt, struct tls_material *m, char *why,
                    size_t whylen)
{
    struct af_buf b = AF_BUF_INIT(TLS_FILE_MAX);
    int rc = read_pem("--tls-private-key-file", opt->tls_key_file, &b, why, whylen);
    BIO *bio;

    if (rc)
        goto out;
    bio = BIO_new_mem_buf(b.buf ? b.buf : "", (int)b.len);
    m->key = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;
    BIO_free(bio);
    ERR_clear_error();
    if (!m->key) {
        bool enc = false;
        for (size_t i = 0; b.buf && i + 9 <= b.len && !enc; i++)
            enc = !memcmp(b.buf + i, "ENCRYPTED", 9);
        snprintf(why, whylen, "--tls-private-key-file '%s' %s", opt->tls_key_file,
                 enc ? "is encrypted; accelfit needs an unencrypted PEM key"
                     : "holds no PEM private key (-----BEGIN PRIVATE KEY-----)");
        rc = AF_EINVAL;
    } else if (X509_check_private_key(m->cert, m->key) != 1) {
        ERR_clear_error();
        snprintf(why, whylen, "--tls-private-key-file '%s' does not match the certificate in "
                 "--tls-cert-file '%s'", opt->tls_key_file, opt->tls_cert_file);
        rc = AF_EINVAL;
    }
out:
    af_buf_release(&b);
    return rc;
}

static int load_ca(const struct af_http_options *opt, struct tls_material *m, char *why,
                   size_t whylen)
{
    struct af_buf b = AF_BUF_INIT(TLS_FILE_MAX);
    STACK_OF(X509) *sk = NULL;
    int rc = read_pem("--client-ca-file", opt->client_ca_file, &b, why, whylen);

    if (!rc) {
        sk = pem_certs(&b);
        m->ca = X509_STORE_new();
        for (int i = 0; m->ca && sk && i < sk_X509_num(sk); i++)
            X509_STORE_add_cert(m->ca, sk_X509_value(sk, i));
        ERR_clear_error();   /* a certificate listed twice */
        if (!sk || sk_X509_num(sk) == 0 || !m->ca) {
            snprintf(why, whylen,
                     "--client-ca-file '%s' holds no PEM certificate "
                     "(-----BEGIN CERTIFICATE-----)", opt->client_ca_file);
            rc = AF_EINVAL;
        }
    }
    sk_X509_pop_free(sk, X509_free);
    af_buf_release(&b);
    return rc;
}

/* Loads and checks everything TLS needs. On failure `why` names the flag, the file, the problem. */
static int tls_material_load(const struct af_http_options *opt, struct tls_material *m, char *why,
                             size_t whylen)
{
    int rc;

    memset(m, 0, sizeof(*m));
    rc = load_cert(opt, m, why, whylen);
    if (!rc)
        rc = load_key(opt, m, why, whylen);
    if (!rc && opt->client_ca_file)
        rc = load_ca(opt, m, why, whylen);
    if (rc)
        tls_material_release(m);
    return rc;
}

int af_http_check_tls(const struct af_http_options *opt, char *why, size_t whylen)
{
    struct tls_material m;

    why[0] = '\0';
    if (!opt->tls_cert_file && !opt->tls_key_file) {
        if (!opt->client_ca_file)
            return 0;
        snprintf(why, whylen, "--client-ca-file needs --tls-cert-file and --tls-private-key-file");
        return AF_EINVAL;
    }
    if (!opt->tls_cert_file || !opt->tls_key_file) {
        snprintf(why, whylen, "--tls-cert-file and --tls-private-key-file go together");
        return AF_EINVAL;
    }
    if (tls_material_load(opt, &m, why, whylen) != 0)
        return AF_EINVAL;
    tls_material_release(&m);
    return 0;
}

/* Offers http/1.1 only, as the lws context does (see make_vhost, server.c). */
static int alpn_http11(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    static const unsigned char ours[] = "\x08http/1.1";
    unsigned char *sel = NULL;

    (void)ssl;
    (void)arg;
    if (SSL_select_next_proto(&sel, outlen, ours, sizeof(ours) - 1, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

/* Keeps lws's SNI vhost switch (on the session context) from undoing the reload. */
static int servername_keep(SSL *ssl, int *al, void *arg)
{
    (void)ssl;
    (void)al;
    (void)arg;
    return SSL_TLSEXT_ERR_OK;
}

/*
 * An SSL_CTX serving `m`: what new connections switch to. Connection settings
 * lws fixed at SSL_new (protocol versions, verify mode, its verify callback)
 * stay with each connection; certificate, key, chain, client CA store, ALPN
 * and SNI are read from this context. Steals m->ca. NULL on failure.
 */
static SSL_CTX *tls_ctx_new(struct tls_material *m)
{
    SSL_CTX *c = SSL_CTX_new(TLS_server_method());
    bool ok = c != NULL;

    if (ok)
        ok = SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION) == 1 &&
             SSL_CTX_use_certificate(c, m->cert) == 1 && SSL_CTX_use_PrivateKey(c, m->key) == 1 &&
             SSL_CTX_check_private_key(c) == 1 &&
             SSL_CTX_set_session_id_context(c, (const unsigned char *)"accelfit", 8) == 1;
    for (int i = 0; ok && i < sk_X509_num(m->chain); i++)
        ok = SSL_CTX_add1_chain_cert(c, sk_X509_value(m->chain, i)) == 1;
    if (ok && m->ca) {
        SSL_CTX_set_cert_store(c, m->ca);
        m->ca = NULL;
        SSL_CTX_set_verify(c, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
    if (ok) {
        SSL_CTX_set_alpn_select_cb(c, alpn_http11, NULL);
        SSL_CTX_set_tlsext_servername_callback(c, servername_keep);
    }
    if (!ok) {
        ERR_clear_error();
        SSL_CTX_free(c);
        c = NULL;
    }
    return c;
}

/* Every new TLS connection on the API vhost: serve the newest files. */
static int client_hello(SSL *ssl, int *al, void *arg)
{
    struct server *s = arg;

    (void)al;
    if (s->tls_ctx && SSL_get_SSL_CTX(ssl) != s->tls_ctx)
        SSL_set_SSL_CTX(ssl, s->tls_ctx);
    return SSL_CLIENT_HELLO_SUCCESS;
}

void af__http_tls_hook(struct server *s, SSL_CTX *lws_ctx)
{
    s->lws_ssl_ctx = lws_ctx;
    SSL_CTX_set_client_hello_cb(lws_ctx, client_hello, s);
}

static void file_sig_read(const char *path, struct file_sig *f)
{
    struct stat st;

    memset(f, 0, sizeof(*f));
    if (!path)
        return;
    if (stat(path, &st) != 0) {
        f->err = errno;
        return;
    }
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    f->size = st.st_size;
    f->mtime = st.st_mtim;
}

void af__http_tls_sig_read(const struct af_http_options *opt, struct tls_sig *t)
{
    file_sig_read(opt->tls_cert_file, &t->f[0]);
    file_sig_read(opt->tls_key_file, &t->f[1]);
    file_sig_read(opt->client_ca_file, &t->f[2]);
}

static bool tls_sig_eq(const struct tls_sig *a, const struct tls_sig *b)
{
    for (int i = 0; i < 3; i++) {
        const struct file_sig *x = &a->f[i], *y = &b->f[i];
        if (x->err != y->err || x->dev != y->dev || x->ino != y->ino || x->size != y->size ||
            x->mtime.tv_sec != y->mtime.tv_sec || x->mtime.tv_nsec != y->mtime.tv_nsec)
            return false;
    }
    return true;
}

/* The certificate's subject and expiry, for the log line that says what is served now. */
static void cert_describe(X509 *x, char *subject, size_t sublen, char *until, size_t untillen)
{
    BIO *bio = BIO_new(BIO_s_mem());
    int n;

    subject[0] = until[0] = '\0';
    X509_NAME_oneline(X509_get_subject_name(x), subject, (int)sublen);
    if (bio && ASN1_TIME_print(bio, X509_get0_notAfter(x)) == 1) {
        n = BIO_read(bio, until, (int)untillen - 1);
        until[n > 0 ? n : 0] = '\0';
    }
    BIO_free(bio);
}

static void tls_reload(struct server *s)
{
    const struct af_http_options *opt = s->opt;
    struct tls_material m;
    char why[600], subject[256], until[64];
    SSL_CTX *c;

    if (tls_material_load(opt, &m, why, sizeof(why)) != 0) {
        AF_LOG(AF_LOG_ERROR, "TLS files changed but cannot be used; still serving the previous "
               "certificate", "why", why, NULL);
        return;
    }
    cert_describe(m.cert, subject, sizeof(subject), until, sizeof(until));
    c = tls_ctx_new(&m);
    tls_material_release(&m);
    if (!c) {
        AF_LOG(AF_LOG_ERROR, "TLS files changed but cannot be used; still serving the previous "
               "certificate", "why", "OpenSSL refused the certificate or key", NULL);
        return;
    }
    SSL_CTX_free(s->tls_ctx);   /* connections made with it hold their own reference */
    s->tls_ctx = c;
    AF_LOG(AF_LOG_INFO, "reloaded TLS files: new connections get the new certificate", "cert",
           opt->tls_cert_file, "subject", subject, "not_after", until, "client_ca",
           opt->client_ca_file ? opt->client_ca_file : "", NULL);
}

/*
 * Every TLS_CHECK_US: when the files differ from the loaded ones and have not
 * changed since the previous look (a writer may be half way through, e.g.
 * the certificate written but not yet its key), load them once. Whatever the
 * outcome, those files are not tried again until they change again, so a
 * bad set is reported once.
 */
void af__http_tls_check(lws_sorted_usec_list_t *sul)
{
    struct server *s = lws_container_of(sul, struct server, tls_sul);
    struct tls_sig now;

    af__http_tls_sig_read(s->opt, &now);
    if (!tls_sig_eq(&now, &s->tls_loaded) && tls_sig_eq(&now, &s->tls_seen)) {
        s->tls_loaded = now;
        if (s->lws_ssl_ctx)
            tls_reload(s);
        else
            AF_LOG(AF_LOG_ERROR, "TLS files changed, but libwebsockets did not hand over its "
                   "TLS context; restart to serve them", NULL);
    }
    s->tls_seen = now;
    lws_sul_schedule(s->ctx, 0, &s->tls_sul, af__http_tls_check, TLS_CHECK_US);
}
