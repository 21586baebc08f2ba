/*
 * fuzz_redact.c - libFuzzer target for the streaming secret redactor (src/brigd/vault/redact.c):
 * what stands between a secret's value and a command's stdout/stderr.
 *
 * Input:
 *   byte 0     sep: splits the secret block, and escapes secrets into the stream
 *   byte 1     flags: which derived secrets to add (a prefix of secret 0, secret 0 + 1, the
 *              tail of 0 joined to the head of 1, secret 0 with a line break inside)
 *   byte 2     the secret block's length (at most MAX_BLOCK); the block follows, split on sep
 *              into up to 6 values (empty ones included: the redactor must skip them)
 *   next byte  how many chunk-size bytes follow (0..15); the stream is fed in chunks of
 *              those sizes in turn (0: an empty feed; >= 0xC0: (b - 0xBF) * 128 bytes)
 *   the rest   the stream template: sep followed by j inserts secret j & 7 in form
 *              (j >> 3) & 3 (raw, wrapped with line breaks, base64 at an offset, URL-encoded),
 *              with j >> 5 as the form's parameter; any other byte is itself.
 * Inputs whose values make more than MAX_FORM_BYTES of patterns are skipped (see below).
 *
 * The stream is redacted four ways: in one feed, in the chunk sizes above, one byte at a time,
 * and with brig_redact_buf; and masked (downloads), also with the redactor's DNS twin.  What
 * redact.h and docs/secrets.md promise is checked, abort() on a violation:
 *   - the output does not depend on how the stream is cut into chunks;
 *   - no secret value appears in the output, nor (values of 8 bytes or more) its base64 forms
 *     at any alignment or its URL-encoded forms, also with line breaks inside the match; checked
 *     for forms that share no byte with the "[REDACTED:NAME]" markers (an occurrence could
 *     otherwise be spelled partly by a marker), and for streams with at most 256 line breaks
 *     (a stream lets go of a partial match once it holds over 2 * longest + 256 bytes, by
 *     design, which takes more line breaks than that);
 *   - a stream in which no form of any value occurs comes out unchanged;
 *   - masks keep the stream's length, and leave no form of a value either;
 *   - a stream holds back fewer non-line-break bytes than the longest form (only what could
 *     still become a match) and at most 2 * longest + 257 bytes in all.
 */
#include <jansson.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vault/redact.h"

#define MAX_SECRETS 10
#define MAX_BLOCK   48
#define MAX_STREAM  (1 << 18)
#define MAX_FORMS   (MAX_SECRETS * 9)
/* A bound on the patterns' total length, to keep every input fast; with redact.c's sparse
 * trie it is above what MAX_BLOCK bytes of values can make, so nothing is skipped. */
#define MAX_FORM_BYTES 4096

typedef struct bytes {
    uint8_t *p;
    size_t n;
} bytes;

typedef struct forms {
    bytes f[MAX_FORMS];
    int n;
    size_t longest, total;
} forms;

static const char names[MAX_SECRETS][2] = {"\x01", "\x02", "\x03", "\x04", "\x05",
                                           "\x06", "\x07", "\x08", "\x0b", "\x0c"};

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_redact: %s\n", what);
    abort();
}

static bool is_newline(uint8_t c)
{
    return c == '\n' || c == '\r';
}

static void push(bytes *b, const void *p, size_t n)
{
    b->p = realloc(b->p, b->n + n + 1);
    if (b->p == NULL)
        abort();
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
}

static bytes strip_newlines(const uint8_t *p, size_t n)
{
    bytes b = {malloc(n + 1), 0};
    if (b.p == NULL)
        abort();
    for (size_t i = 0; i < n; i++)
        if (!is_newline(p[i]))
            b.p[b.n++] = p[i];
    return b;
}

static bool contains(const bytes *hay, const bytes *needle)
{
    return needle->n > 0 && memmem(hay->p, hay->n, needle->p, needle->n) != NULL;
}

static bytes base64_of(const uint8_t *v, size_t n, size_t pad, int variant)
{
    uint8_t *raw = calloc(pad + n + 1, 1);
    size_t elen = sodium_base64_ENCODED_LEN(pad + n, variant);
    char *enc = malloc(elen);
    if (raw == NULL || enc == NULL)
        abort();
    memset(raw, 'x', pad);
    if (n)
        memcpy(raw + pad, v, n);
    sodium_bin2base64(enc, elen, raw, pad + n, variant);
    free(raw);
    return (bytes){(uint8_t *)enc, strlen(enc)};
}

static bytes urlencode(const uint8_t *v, size_t n, bool lower)
{
    const char *hex = lower ? "0123456789abcdef" : "0123456789ABCDEF";
    bytes b = {malloc(3 * n + 1), 0};
    if (b.p == NULL)
        abort();
    for (size_t i = 0; i < n; i++) {
        uint8_t c = v[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~') {
            b.p[b.n++] = c;
        } else {
            b.p[b.n++] = '%';
            b.p[b.n++] = (uint8_t)hex[c >> 4];
            b.p[b.n++] = (uint8_t)hex[c & 15];
        }
    }
    return b;
}

static void add_form(forms *fs, bytes b)
{
    bytes s = strip_newlines(b.p, b.n);
    free(b.p);
    if (s.n == 0 || fs->n == MAX_FORMS) {
        free(s.p);
        return;
    }
    if (s.n > fs->longest)
        fs->longest = s.n;
    fs->total += s.n;
    fs->f[fs->n++] = s;
}

/* What redact.h promises to catch for one value: the value (line breaks ignored) and, for
 * values of 8 bytes or more, the part of its base64 encodings (standard and URL-safe) that
 * depends on the value alone at each offset mod 3, and its URL-encoded forms. */
static void add_forms(forms *fs, const bytes *v)
{
    bytes raw = {malloc(v->n + 1), v->n};
    if (raw.p == NULL)
        abort();
    memcpy(raw.p, v->p, v->n);
    add_form(fs, raw);
    if (v->n < 8)
        return;
    static const int variants[] = {sodium_base64_VARIANT_ORIGINAL, sodium_base64_VARIANT_URLSAFE};
    for (int i = 0; i < 2; i++)
        for (size_t k = 0; k < 3; k++) {
            bytes e = base64_of(v->p, v->n, k, variants[i]);
            size_t from = (8 * k + 5) / 6, to = 8 * (k + v->n) / 6;
            memmove(e.p, e.p + from, to - from);
            e.n = to - from;
            add_form(fs, e);
        }
    add_form(fs, urlencode(v->p, v->n, false));
    add_form(fs, urlencode(v->p, v->n, true));
}

/* Secret j in form `form` with parameter `param`, appended to the stream. */
static void insert_secret(bytes *out, const bytes *v, int form, int param)
{
    bytes e;
    switch (form) {
    case 0:
        push(out, v->p, v->n);
        return;
    case 1: /* wrapped: a line break (CRLF when param is odd) every param + 1 bytes */
        for (size_t i = 0; i < v->n; i++) {
            push(out, &v->p[i], 1);
            if (i % (size_t)(param + 1) == (size_t)param)
                push(out, (param & 1) ? "\r\n" : "\n", (param & 1) ? 2 : 1);
        }
        return;
    case 2: /* base64 after param % 3 bytes, URL-safe when param & 4 */
        e = base64_of(v->p, v->n, (size_t)(param % 3),
                      (param & 4) ? sodium_base64_VARIANT_URLSAFE : sodium_base64_VARIANT_ORIGINAL);
        break;
    default:
        e = urlencode(v->p, v->n, param & 1);
        break;
    }
    push(out, e.p, e.n);
    free(e.p);
}

/* Feeds `in` in chunks of plan[0], plan[1], ... (cycling; NULL: one feed). */
static brig_buf redact(const brig_redactor *r, const bytes *in, const uint8_t *plan, size_t np,
                       const forms *fs)
{
    brig_redact_stream s;
    brig_redact_init(&s, r);
    brig_buf out = {0};
    size_t at = 0, step = 0;
    do {
        size_t n = in->n - at;
        if (plan != NULL) {
            uint8_t b = plan[step++ % np];
            size_t want = b >= 0xC0 ? (size_t)(b - 0xBF) * 128 : b;
            if (want == 0) {
                brig_redact_feed(&s, in->p + at, 0, &out);
                want = 1;
            }
            if (want < n)
                n = want;
        }
        brig_redact_feed(&s, in->p + at, n, &out);
        at += n;
        const uint8_t *held = NULL;
        size_t nheld = brig_redact_held(&s, &held), solid = 0;
        for (size_t i = 0; i < nheld; i++)
            solid += !is_newline(held[i]);
        if (solid != s.solid)
            fail("the count of held non-line-break bytes is off");
        if (r != NULL && solid > 0 && solid >= fs->longest)
            fail("holds back a whole form's worth of bytes");
        if (nheld > 2 * fs->longest + 257)
            fail("holds back more than 2 * longest + 257 bytes");
    } while (at < in->n);
    brig_redact_flush(&s, &out);
    if (brig_redact_held(&s, NULL) != 0)
        fail("flush left bytes held");
    brig_redact_dispose(&s);
    brig_buf_append(&out, "", 0);
    return out;
}

/* `in` through a masking stream of r, 7 bytes at a time. */
static brig_buf mask_feed(const brig_redactor *r, const bytes *in)
{
    brig_redact_stream s;
    brig_redact_init_mask(&s, r);
    brig_buf out = {0};
    for (size_t at = 0; at < in->n; at += 7)
        brig_redact_feed(&s, in->p + at, in->n - at < 7 ? in->n - at : 7, &out);
    brig_redact_flush(&s, &out);
    brig_redact_dispose(&s);
    brig_buf_append(&out, "", 0);
    return out;
}

static void free_values(bytes *vals, int nv, forms *fs)
{
    for (int i = 0; i < fs->n; i++)
        free(fs->f[i].p);
    for (int i = 0; i < nv; i++)
        free(vals[i].p);
}

static void same(const brig_buf *a, const brig_buf *b, const char *what)
{
    if (a->len != b->len || memcmp(a->data, b->data, a->len) != 0)
        fail(what);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (sodium_init() < 0)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4 || size > 65536)
        return 0;
    uint8_t sep = data[0], flags = data[1];
    size_t blen = data[2] % (MAX_BLOCK + 1), at = 3;
    if (at + blen > size)
        return 0;

    /* The values: the block split on sep, then the derived ones. */
    bytes vals[MAX_SECRETS];
    int nv = 0;
    const uint8_t *b = data + at, *end = data + at + blen;
    for (;;) {
        const uint8_t *e = memchr(b, sep, (size_t)(end - b));
        if (e == NULL)
            e = end;
        if (nv < 6) {
            vals[nv] = (bytes){malloc((size_t)(e - b) + 1), (size_t)(e - b)};
            if (vals[nv].p == NULL)
                abort();
            memcpy(vals[nv].p, b, vals[nv].n);
            nv++;
        }
        if (e == end)
            break;
        b = e + 1;
    }
    at += blen;
    bytes s0 = vals[0], s1 = nv > 1 ? vals[1] : vals[0];
    if (flags & 1) { /* a prefix of secret 0 */
        size_t n = s0.n / 2 + (flags >> 4) % 3;
        vals[nv] = (bytes){0};
        push(&vals[nv++], s0.p, n < s0.n ? n : s0.n);
    }
    if (flags & 2) { /* one containing both */
        vals[nv] = (bytes){0};
        push(&vals[nv], s0.p, s0.n);
        push(&vals[nv++], s1.p, s1.n);
    }
    if (flags & 4) { /* overlapping both */
        vals[nv] = (bytes){0};
        push(&vals[nv], s0.p + s0.n / 2, s0.n - s0.n / 2);
        push(&vals[nv++], s1.p, s1.n / 2);
    }
    if (flags & 8) { /* a line break inside */
        vals[nv] = (bytes){0};
        push(&vals[nv], s0.p, s0.n / 2);
        push(&vals[nv], (flags & 0x80) ? "\r\n" : "\n", (flags & 0x80) ? 2 : 1);
        push(&vals[nv++], s0.p + s0.n / 2, s0.n - s0.n / 2);
    }

    forms fs = {.n = 0, .longest = 0, .total = 0};
    for (int i = 0; i < nv; i++)
        add_forms(&fs, &vals[i]);
    if (fs.total > MAX_FORM_BYTES) {
        free_values(vals, nv, &fs);
        return 0;
    }
    json_t *secrets = json_object();
    for (int i = 0; i < nv; i++)
        json_object_set_new_nocheck(secrets, names[i],
                                    json_stringn_nocheck((const char *)vals[i].p, vals[i].n));
    brig_redactor *r = brig_redactor_new(secrets);
    json_decref(secrets);
    if (r == NULL && fs.n > 0)
        fail("no redactor for a set of secrets with something to redact");

    /* The chunk plan and the stream. */
    size_t np = at < size ? data[at++] % 16 : 0;
    if (at + np > size)
        np = size - at;
    static const uint8_t default_plan[] = {1, 2, 3, 7, 64};
    const uint8_t *plan = np ? data + at : default_plan;
    if (np == 0)
        np = sizeof(default_plan);
    else
        at += np;
    bytes in = {malloc(1), 0};
    if (in.p == NULL)
        abort();
    for (size_t i = at; i < size && in.n < MAX_STREAM; i++) {
        if (data[i] == sep && i + 1 < size && (data[i + 1] & 7) < nv) {
            uint8_t j = data[++i];
            insert_secret(&in, &vals[j & 7], (j >> 3) & 3, j >> 5);
        } else {
            push(&in, &data[i], 1);
        }
    }

    brig_buf whole = redact(r, &in, NULL, 0, &fs);
    brig_buf chunked = redact(r, &in, plan, np, &fs);
    static const uint8_t one[] = {1};
    brig_buf bytewise = redact(r, &in, one, 1, &fs);
    brig_buf buf = {0};
    brig_buf_append(&buf, in.p, in.n);
    brig_redact_buf(r, &buf);
    same(&whole, &chunked, "output depends on the chunk sizes");
    same(&whole, &bytewise, "output differs when fed one byte at a time");
    if (in.n > 0)
        same(&whole, &buf, "brig_redact_buf differs from the stream");

    /* No form of a value in the output (line breaks ignored). */
    size_t breaks = 0;
    for (size_t i = 0; i < in.n; i++)
        breaks += is_newline(in.p[i]);
    bytes flat = strip_newlines((const uint8_t *)whole.data, whole.len);
    if (breaks <= 256) {
        char marker[256] = "[REDACTED:]";
        for (int i = 0; i < nv; i++)
            strcat(marker, names[i]);
        for (int i = 0; i < fs.n; i++) {
            bool checkable = true;
            for (size_t k = 0; k < fs.f[i].n && checkable; k++)
                checkable = memchr(marker, fs.f[i].p[k], strlen(marker)) == NULL;
            if (checkable && contains(&flat, &fs.f[i]))
                fail("a secret's form is in the output");
        }
    }
    /* Nothing to redact: unchanged. */
    bytes flat_in = strip_newlines(in.p, in.n);
    bool any = false;
    for (int i = 0; i < fs.n && !any; i++)
        any = contains(&flat_in, &fs.f[i]);
    if (!any && (whole.len != in.n || memcmp(whole.data, in.p, in.n) != 0))
        fail("changed a stream that holds no secret");

    /* Masks (downloads): each replaces exactly the bytes it covers, so the length stays;
     * no value's form is left (one sharing a byte with a marker or '*' is not checked). */
    brig_buf masked = mask_feed(r, &in);
    if (masked.len != in.n)
        fail("a mask changed the length");
    bytes flat_m = strip_newlines((const uint8_t *)masked.data, masked.len);
    if (breaks <= 256) {
        char marker[256] = "[REDACTED:]*";
        for (int i = 0; i < nv; i++)
            strcat(marker, names[i]);
        for (int i = 0; i < fs.n; i++) {
            bool checkable = true;
            for (size_t k = 0; k < fs.f[i].n && checkable; k++)
                checkable = memchr(marker, fs.f[i].p[k], strlen(marker)) == NULL;
            if (checkable && contains(&flat_m, &fs.f[i]))
                fail("a secret's form is in the masked output");
        }
    }
    /* The DNS twin (case folded, dots ignored): built from the trie alone; masks keep the
     * length there too. */
    brig_buf masked_dns = mask_feed(brig_redactor_dns(r), &in);
    if (masked_dns.len != in.n)
        fail("a mask of the DNS twin changed the length");

    free(flat_m.p);
    brig_buf_dispose(&masked);
    brig_buf_dispose(&masked_dns);
    free(flat.p);
    free(flat_in.p);
    brig_buf_dispose(&whole);
    brig_buf_dispose(&chunked);
    brig_buf_dispose(&bytewise);
    brig_buf_dispose(&buf);
    free(in.p);
    free_values(vals, nv, &fs);
    brig_redactor_free(r);
    return 0;
}
