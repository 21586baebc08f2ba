/*
 * redact.c - Aho-Corasick redaction (see redact.h).
 *
 * States form a trie over every pattern; each state has a failure link (the
 * longest proper suffix that is also a trie path) and `out`, the longest
 * pattern ending here (its own, or one reached by failure links).  The root has
 * a dense 256-entry table (output that matches nothing stays there, one load per
 * byte); deeper states keep their children as a sibling list and a miss follows
 * failure links.  A dense table per state cost 1 KiB per pattern byte: a 64 KiB
 * secret (with its encodings) made a 500 MB automaton for every exec.
 */
#include "redact.h"

#include <sodium.h>
#include <stdbool.h>
#include <string.h>

typedef struct state {
    int child;   /* first child (0: none; the root is never a child) */
    int sibling; /* next child of the same parent (0: none) */
    int fail;
    int depth; /* length of the path from the root */
    int out;   /* index of the longest pattern ending here, or -1 */
    uint8_t c; /* the byte that leads here */
} state;

typedef struct pattern {
    uint8_t *bytes;
    size_t len;
    char *name;
} pattern;

struct brig_redactor {
    state *states;
    int n_states, cap_states;
    int root[256]; /* the root's children (0: none) */
    pattern *pats;
    int n_pats;
    size_t max_len; /* the longest pattern */
};

static bool is_newline(uint8_t c)
{
    return c == '\n' || c == '\r';
}

/* Patterns are matched with line breaks ignored (base64 tools wrap lines, PEM
 * keys span several): they are stored without them. */
static void add_pattern(brig_redactor *r, const char *name, const uint8_t *raw, size_t rn)
{
    uint8_t *p = brig_xmalloc(rn ? rn : 1);
    size_t n = 0;
    for (size_t i = 0; i < rn; i++)
        if (!is_newline(raw[i]))
            p[n++] = raw[i];
    if (n == 0) {
        free(p);
        return;
    }
    for (int i = 0; i < r->n_pats; i++)
        if (r->pats[i].len == n && memcmp(r->pats[i].bytes, p, n) == 0) {
            sodium_memzero(p, n);
            free(p);
            return;
        }
    r->pats = brig_xrealloc(r->pats, (size_t)(r->n_pats + 1) * sizeof(pattern));
    pattern *pt = &r->pats[r->n_pats++];
    pt->bytes = p;
    pt->len = n;
    pt->name = brig_xstrdup(name);
    if (n > r->max_len)
        r->max_len = n;
}

/* The part of base64(pad_k bytes + v) that depends on v alone: what shows up
 * when v is base64-encoded inside a longer text at offset k (mod 3). */
static void add_base64(brig_redactor *r, const char *name, const uint8_t *v, size_t n, int variant)
{
    for (size_t k = 0; k < 3; k++) {
        size_t total = k + n;
        uint8_t *raw = brig_xcalloc(total, 1);
        memcpy(raw + k, v, n);
        size_t elen = sodium_base64_ENCODED_LEN(total, variant);
        char *enc = brig_xmalloc(elen);
        sodium_bin2base64(enc, elen, raw, total, variant);
        size_t from = (8 * k + 5) / 6, to = (8 * total) / 6;
        if (to > from && to - from >= 8)
            add_pattern(r, name, (const uint8_t *)enc + from, to - from);
        sodium_memzero(raw, total);
        sodium_memzero(enc, elen);
        free(raw);
        free(enc);
    }
}

static void add_urlencoded(brig_redactor *r, const char *name, const uint8_t *v, size_t n)
{
    for (int lower = 0; lower < 2; lower++) {
        static const char hex_u[] = "0123456789ABCDEF", hex_l[] = "0123456789abcdef";
        const char *hex = lower ? hex_l : hex_u;
        uint8_t *enc = brig_xmalloc(n * 3 + 1);
        size_t m = 0;
        bool changed = false;
        for (size_t i = 0; i < n; i++) {
            uint8_t c = v[i];
            if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                c == '-' || c == '_' || c == '.' || c == '~') {
                enc[m++] = c;
            } else {
                enc[m++] = '%';
                enc[m++] = (uint8_t)hex[c >> 4];
                enc[m++] = (uint8_t)hex[c & 15];
                changed = true;
            }
        }
        if (changed)
            add_pattern(r, name, enc, m);
        sodium_memzero(enc, n * 3 + 1);
        free(enc);
    }
}

static int new_state(brig_redactor *r, int depth, uint8_t c)
{
    if (r->n_states == r->cap_states) {
        r->cap_states = r->cap_states ? 2 * r->cap_states : 64;
        r->states = brig_xrealloc(r->states, (size_t)r->cap_states * sizeof(state));
    }
    r->states[r->n_states] = (state){.depth = depth, .out = -1, .c = c};
    return r->n_states++;
}

/* The child of s reached by c, or 0. */
static int child_of(const brig_redactor *r, int s, uint8_t c)
{
    if (s == 0)
        return r->root[c];
    for (int k = r->states[s].child; k; k = r->states[k].sibling)
        if (r->states[k].c == c)
            return k;
    return 0;
}

/* The state after reading c in state s (failure links on a miss). */
static int step(const brig_redactor *r, int s, uint8_t c)
{
    for (;;) {
        int k = child_of(r, s, c);
        if (k || s == 0)
            return k;
        s = r->states[s].fail;
    }
}

static void build(brig_redactor *r)
{
    new_state(r, 0, 0);
    for (int p = 0; p < r->n_pats; p++) {
        int cur = 0;
        for (size_t i = 0; i < r->pats[p].len; i++) {
            uint8_t c = r->pats[p].bytes[i];
            int k = child_of(r, cur, c);
            if (k == 0) {
                k = new_state(r, r->states[cur].depth + 1, c); /* may move r->states */
                if (cur == 0) {
                    r->root[c] = k;
                } else {
                    r->states[k].sibling = r->states[cur].child;
                    r->states[cur].child = k;
                }
            }
            cur = k;
        }
        int o = r->states[cur].out;
        if (o < 0 || r->pats[o].len < r->pats[p].len)
            r->states[cur].out = p;
    }
    /* Breadth-first (a failure link points to a shallower state, done before). */
    int *queue = brig_xmalloc((size_t)r->n_states * sizeof(int));
    int qh = 0, qt = 0;
    for (int c = 0; c < 256; c++)
        if (r->root[c])
            queue[qt++] = r->root[c]; /* fail = 0 */
    while (qh < qt) {
        int s = queue[qh++];
        if (r->states[s].out < 0)
            r->states[s].out = r->states[r->states[s].fail].out;
        for (int k = r->states[s].child; k; k = r->states[k].sibling) {
            r->states[k].fail = step(r, r->states[s].fail, r->states[k].c);
            queue[qt++] = k;
        }
    }
    free(queue);
}

brig_redactor *brig_redactor_new(json_t *secrets)
{
    if (json_object_size(secrets) == 0)
        return NULL;
    brig_redactor *r = brig_xcalloc(1, sizeof(*r));
    const char *name;
    json_t *v;
    json_object_foreach(secrets, name, v)
    {
        const uint8_t *val = (const uint8_t *)json_string_value(v);
        size_t n = json_string_length(v);
        if (val == NULL || n == 0)
            continue;
        add_pattern(r, name, val, n);
        if (n >= 8) {
            add_base64(r, name, val, n, sodium_base64_VARIANT_ORIGINAL);
            add_base64(r, name, val, n, sodium_base64_VARIANT_URLSAFE);
            add_urlencoded(r, name, val, n);
        }
    }
    build(r);
    return r;
}

void brig_redactor_free(brig_redactor *r)
{
    if (r == NULL)
        return;
    for (int i = 0; i < r->n_pats; i++) {
        sodium_memzero(r->pats[i].bytes, r->pats[i].len);
        free(r->pats[i].bytes);
        free(r->pats[i].name);
    }
    /* The trie spells the patterns too. */
    sodium_memzero(r->states, (size_t)r->cap_states * sizeof(state));
    sodium_memzero(r->root, sizeof(r->root));
    free(r->states);
    free(r->pats);
    free(r);
}

void brig_redact_init(brig_redact_stream *s, const brig_redactor *r)
{
    memset(s, 0, sizeof(*s));
    s->r = r;
}

/* Index in held where its last `sig` non-newline bytes begin. */
static size_t tail_start(const brig_buf *held, size_t sig)
{
    size_t i = held->len;
    while (sig > 0 && i > 0) {
        i--;
        if (!is_newline((uint8_t)held->data[i]))
            sig--;
    }
    return i;
}

static void release(brig_redact_stream *s, size_t upto, brig_buf *out)
{
    brig_buf_append(out, s->held.data, upto);
    memmove(s->held.data, s->held.data + upto, s->held.len - upto);
    s->held.len -= upto;
}

void brig_redact_feed(brig_redact_stream *s, const uint8_t *p, size_t n, brig_buf *out)
{
    const brig_redactor *r = s->r;
    if (r == NULL) {
        brig_buf_append(out, p, n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        brig_buf_append(&s->held, &p[i], 1);
        if (is_newline(p[i])) {
            /* Transparent inside a partial match; bounded, so a flood of line
             * breaks cannot make us hold output back forever. */
            if (s->state == 0 || s->held.len > 2 * r->max_len + 256) {
                release(s, s->held.len, out);
                s->state = 0;
            }
            continue;
        }
        s->state = step(r, s->state, p[i]);
        const state *st = &r->states[s->state];
        if (st->out >= 0) {
            const pattern *pt = &r->pats[st->out];
            release(s, tail_start(&s->held, pt->len), out);
            brig_buf_append(out, "[REDACTED:", 10);
            brig_buf_append(out, pt->name, strlen(pt->name));
            brig_buf_append(out, "]", 1);
            sodium_memzero(s->held.data, s->held.len);
            s->held.len = 0;
            s->state = 0;
            continue;
        }
        /* Only the last `depth` bytes can still become part of a match. */
        size_t from = tail_start(&s->held, (size_t)st->depth);
        if (from > 0)
            release(s, from, out);
    }
}

void brig_redact_flush(brig_redact_stream *s, brig_buf *out)
{
    if (s->held.len)
        brig_buf_append(out, s->held.data, s->held.len);
    if (s->held.data)
        sodium_memzero(s->held.data, s->held.cap);
    s->held.len = 0;
    s->state = 0;
}

void brig_redact_dispose(brig_redact_stream *s)
{
    if (s->held.data)
        sodium_memzero(s->held.data, s->held.cap);
    brig_buf_dispose(&s->held);
}

void brig_redact_buf(const brig_redactor *r, brig_buf *b)
{
    if (r == NULL || b->len == 0)
        return;
    brig_redact_stream s;
    brig_redact_init(&s, r);
    brig_buf out = {0};
    brig_redact_feed(&s, (const uint8_t *)b->data, b->len, &out);
    brig_redact_flush(&s, &out);
    brig_redact_dispose(&s);
    sodium_memzero(b->data, b->cap);
    brig_buf_dispose(b);
    *b = out;
}
