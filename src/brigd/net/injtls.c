/*
 * injtls.c - TLS of the egress proxy (OpenSSL): the brig CA (made once per brigd,
 * its key sealed by the vault like a secret: sandbox/injection.c), a leaf
 * certificate per server name minted from it and cached, the sandbox side's
 * handshake with it, the upstream side's verified against the host's CA store
 * (plus, for tests, the file of upstream_ca), and the reads and writes of either
 * side, plain or TLS.
 *
 * Only connections toward a host with a rule are intercepted; the server name
 * is peeked from the ClientHello without consuming it, so any other connection
 * is relayed byte for byte (injconn.c's passthrough).
 */
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "httpreq.h"
#include "injproxy.h"
#include "log.h"

#define LEAF_CACHE 128
#define LEAF_DAYS  7

struct brig_injtls {
    SSL_CTX *server, *client;
    X509 *ca;
    EVP_PKEY *ca_key, *leaf_key; /* one key for every leaf: minting is a signature only */
    pthread_mutex_t m;           /* the cache */
    struct {
        char host[256];
        X509 *cert;
        int64_t until_ms; /* replaced a day before it expires */
    } cache[LEAF_CACHE];
    size_t n, next;
};

/* ---- certificates ---------------------------------------------------------------------- */

static int add_ext(X509 *issuer, X509 *x, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (e == NULL)
        return -1;
    int ok = X509_add_ext(x, e, -1);
    X509_EXTENSION_free(e);
    return ok ? 0 : -1;
}

/* A certificate for key named cn, valid from an hour ago for days, signed by
 * (issuer, issuer_key) or by itself when issuer is NULL. */
static X509 *cert_new(EVP_PKEY *key, const char *cn, long days, X509 *issuer, EVP_PKEY *issuer_key)
{
    X509 *x = X509_new();
    unsigned char serial[16];
    RAND_bytes(serial, sizeof(serial));
    serial[0] &= 0x7f;
    BIGNUM *bn = BN_bin2bn(serial, sizeof(serial), NULL);
    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
    BN_free(bn);
    X509_set_version(x, 2);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), days * 86400);
    X509_set_pubkey(x, key);
    X509_NAME *nm = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(nm, "O", MBSTRING_ASC, (const unsigned char *)"brig", -1, -1, 0);
    X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : nm);
    X509 *by = issuer ? issuer : x;
    int bad = add_ext(by, x, NID_subject_key_identifier, "hash") |
              add_ext(by, x, NID_authority_key_identifier, "keyid:always");
    if (issuer == NULL) {
        bad |= add_ext(by, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") |
               add_ext(by, x, NID_key_usage, "critical,keyCertSign,cRLSign");
    } else {
        _cleanup_free_ char *san = brig_asprintf("DNS:%s", cn);
        bad |= add_ext(by, x, NID_basic_constraints, "critical,CA:FALSE") |
               add_ext(by, x, NID_key_usage, "critical,digitalSignature") |
               add_ext(by, x, NID_ext_key_usage, "serverAuth") |
               add_ext(by, x, NID_subject_alt_name, san);
    }
    if (bad || !X509_sign(x, issuer ? issuer_key : key, EVP_sha256())) {
        X509_free(x);
        return NULL;
    }
    return x;
}

static char *bio_text(BIO *b)
{
    char *p = NULL;
    long n = BIO_get_mem_data(b, &p);
    char *s = brig_xmalloc((size_t)n + 1);
    memcpy(s, p, (size_t)n);
    s[n] = 0;
    return s;
}

int brig_net_ca_make(char **cert_pem, char **key_pem, brig_error **err)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = key ? cert_new(key, "brig egress proxy CA", 3650, NULL, NULL) : NULL;
    BIO *c = BIO_new(BIO_s_mem()), *k = BIO_new(BIO_s_mem());
    int ok = x && PEM_write_bio_X509(c, x) && PEM_write_bio_PrivateKey(k, key, NULL, NULL, 0, 0, 0);
    if (ok) {
        *cert_pem = bio_text(c);
        *key_pem = bio_text(k);
    }
    X509_free(x);
    EVP_PKEY_free(key);
    BIO_free(c);
    BIO_free_all(k); /* the key's PEM: freed memory of a mem BIO is cleared by OpenSSL */
    return ok ? 0 : brig_error_set(err, BRIG_E_INTERNAL, 0, "egress proxy: cannot make a CA");
}

/* A leaf for host (a new reference), from the cache or minted. */
static X509 *leaf_for(brig_injtls *t, const char *host)
{
    int64_t now = brig_now_real_ms();
    X509 *x = NULL;
    pthread_mutex_lock(&t->m);
    for (size_t i = 0; i < t->n && !x; i++)
        if (strcmp(t->cache[i].host, host) == 0 && t->cache[i].until_ms > now) {
            x = t->cache[i].cert;
            X509_up_ref(x);
        }
    pthread_mutex_unlock(&t->m);
    if (x)
        return x;
    x = cert_new(t->leaf_key, host, LEAF_DAYS, t->ca, t->ca_key);
    if (x == NULL)
        return NULL;
    pthread_mutex_lock(&t->m);
    size_t i = t->n < LEAF_CACHE ? t->n++ : t->next++ % LEAF_CACHE;
    X509_free(t->cache[i].cert);
    snprintf(t->cache[i].host, sizeof(t->cache[i].host), "%s", host);
    t->cache[i].cert = x;
    t->cache[i].until_ms = now + (LEAF_DAYS - 1) * 86400000LL;
    X509_up_ref(x);
    pthread_mutex_unlock(&t->m);
    return x;
}

/* ---- the proxy's TLS state ------------------------------------------------------------- */

void brig_injtls_free(brig_injtls *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->n; i++)
        X509_free(t->cache[i].cert);
    SSL_CTX_free(t->server);
    SSL_CTX_free(t->client);
    X509_free(t->ca);
    EVP_PKEY_free(t->ca_key);
    EVP_PKEY_free(t->leaf_key);
    pthread_mutex_destroy(&t->m);
    free(t);
}

int brig_injtls_new(const brig_net_config *cfg, brig_injtls **out, brig_error **err)
{
    *out = NULL;
    if (cfg->ca_cert_pem == NULL || cfg->ca_key_pem == NULL)
        return 0; /* no CA: HTTPS is relayed, never intercepted */
    brig_injtls *t = brig_xcalloc(1, sizeof(*t));
    pthread_mutex_init(&t->m, NULL);
    BIO *c = BIO_new_mem_buf(cfg->ca_cert_pem, -1), *k = BIO_new_mem_buf(cfg->ca_key_pem, -1);
    t->ca = PEM_read_bio_X509(c, NULL, NULL, NULL);
    t->ca_key = PEM_read_bio_PrivateKey(k, NULL, NULL, NULL);
    BIO_free(c);
    BIO_free(k);
    t->leaf_key = EVP_EC_gen("P-256");
    t->server = SSL_CTX_new(TLS_server_method());
    t->client = SSL_CTX_new(TLS_client_method());
    const char *what = NULL;
    if (!t->ca || !t->ca_key || !X509_check_private_key(t->ca, t->ca_key))
        what = "the CA does not load";
    else if (!t->leaf_key || !t->server || !t->client)
        what = "cannot make its keys and contexts";
    else if (!SSL_CTX_set_default_verify_paths(t->client))
        what = "cannot read the host's CA store";
    else if (cfg->upstream_ca && !SSL_CTX_load_verify_locations(t->client, cfg->upstream_ca, NULL))
        what = "cannot read upstream_ca";
    if (what) {
        brig_injtls_free(t);
        return brig_error_set(err, BRIG_E_INVALID, 0, "egress proxy TLS: %s", what);
    }
    for (int i = 0; i < 2; i++) {
        SSL_CTX *x = i ? t->client : t->server;
        SSL_CTX_set_min_proto_version(x, TLS1_2_VERSION);
        /* A read that met only a handshake record (a session ticket) returns, so the
         * relay's poll decides what to wait for next. */
        SSL_CTX_clear_mode(x, SSL_MODE_AUTO_RETRY);
    }
    SSL_CTX_set_verify(t->client, SSL_VERIFY_PEER, NULL);
    *out = t;
    return 0;
}

/* ---- the server name -------------------------------------------------------------------- */

int brig_injtls_sni(int fd, char out[256])
{
    uint8_t b[5 + 16384];
    size_t want = 5, got = 0;
    for (;;) {
        int lowat = (int)want;
        setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat));
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, BRIG_INJ_IO_TIMEOUT) <= 0)
            return -1;
        ssize_t r = recv(fd, b, sizeof(b), MSG_PEEK);
        if (r <= 0)
            return -1;
        got = (size_t)r;
        if (want == 5 && r >= 5) {
            if (b[0] != 0x16)
                break;
            want = 5 + ((size_t)b[3] << 8 | b[4]);
        }
        if ((size_t)r >= want || (size_t)r == sizeof(b))
            break;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
    return brig_tls_sni_parse(b, got < want ? got : want, out);
}

/* ---- handshakes ------------------------------------------------------------------------- */

int brig_injtls_accept(brig_inj_conn *c, const char *host)
{
    brig_injtls *t = c->tls_state;
    X509 *leaf = leaf_for(t, host);
    SSL *s = leaf ? SSL_new(t->server) : NULL;
    int ok = s && SSL_use_certificate(s, leaf) && SSL_use_PrivateKey(s, t->leaf_key) &&
             SSL_set_fd(s, c->fd) && SSL_accept(s) == 1;
    X509_free(leaf);
    if (s)
        c->ssl[0] = s;
    ERR_clear_error();
    return ok ? 0 : -1;
}

int brig_injtls_connect(brig_inj_conn *c, const char *host, char **why)
{
    SSL *s = SSL_new(((brig_injtls *)c->tls_state)->client);
    c->ssl[1] = s;
    if (s == NULL || !SSL_set_tlsext_host_name(s, host) || !SSL_set1_host(s, host) ||
        !SSL_set_fd(s, c->up)) {
        *why = brig_asprintf("TLS toward %s cannot be set up", host);
        return -1;
    }
    if (SSL_connect(s) != 1) {
        long v = SSL_get_verify_result(s);
        *why = v != X509_V_OK ? brig_asprintf("the certificate of %s does not verify: %s", host,
                                              X509_verify_cert_error_string(v))
                              : brig_asprintf("the TLS handshake with %s failed", host);
        ERR_clear_error();
        return -1;
    }
    return 0;
}

void brig_injtls_close_side(brig_inj_conn *c, int side)
{
    if (c->ssl[side]) {
        SSL_free(c->ssl[side]);
        c->ssl[side] = NULL;
    }
    ERR_clear_error();
}

void brig_injtls_close(brig_inj_conn *c)
{
    brig_injtls_close_side(c, 0);
    brig_injtls_close_side(c, 1);
}

/* ---- reads and writes of either side ----------------------------------------------------- */

ssize_t brig_injio_read(brig_inj_conn *c, int side, void *b, size_t n)
{
    SSL *s = c->ssl[side];
    if (s == NULL)
        return recv(side ? c->up : c->fd, b, n, 0);
    int r = SSL_read(s, b, (int)(n > INT32_MAX ? INT32_MAX : n));
    if (r > 0)
        return r;
    int e = SSL_get_error(s, r);
    ERR_clear_error();
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return errno == EAGAIN || errno == EWOULDBLOCK ? -1 : -2; /* timed out / nothing yet */
    return e == SSL_ERROR_ZERO_RETURN ? 0 : -1;
}

int brig_injio_write(brig_inj_conn *c, int side, const void *b, size_t n)
{
    SSL *s = c->ssl[side];
    int fd = side ? c->up : c->fd;
    const char *p = b;
    while (n > 0) {
        ssize_t w;
        if (s) {
            int r = SSL_write(s, p, (int)(n > 65536 ? 65536 : n));
            w = r > 0 ? r : -1;
            ERR_clear_error();
        } else {
            w = send(fd, p, n, MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR)
                continue;
        }
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

bool brig_injio_pending(brig_inj_conn *c, int side)
{
    return c->ssl[side] && SSL_pending(c->ssl[side]) > 0;
}
