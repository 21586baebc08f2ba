/*
 * redact.c - Aho-Corasick redaction (see redact.h).
 *
 * States form a trie over every pattern; each state has a failure link (the
 * longest proper suffix that is also a trie path) and `out`, the longest
 * pattern ending here (its own, or one reached by failure links).  The root has
 * a dense 256-entry table (output that matches nothing stays there, one load per
 * byte); deeper states keep their children as a sibling list and a miss follows
 * failure links.  A dense table per state cost 1 KiB per pattern byte: a 64 KiB
 * secret (with its encodings) made a 500 MB automaton.
 *
 * Costs: a pattern goes into the trie as it is derived (a duplicate ends on a
 * state that already has a pattern of its length, and is dropped there), so
 * building is linear in the patterns' total length (times the sibling-list
 * length, at most 256) — it used to compare every pattern with every other,
 * quadratic in the number of secrets.  The patterns' bytes are not kept: the
 * trie spells them.  A stream keeps its held bytes as a window of a buffer
 * (drops from the front move an offset; the buffer is compacted when the dead
 * part outgrows the live one), so each byte costs amortised O(1).
 */
#include "redact.h"

#include <pthread.h>
#include <sodium.h>
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
    size_t len; /* without line breaks */
    int name;   /* index in names */
} pattern;

struct brig_redactor {
    int refs;
    bool dns;                /* a DNS twin: matches folded to lower case, dots are gaps */
    pthread_mutex_t lock;    /* builds dns_twin */
    brig_redactor *dns_twin; /* built at the first brig_redactor_dns; owned */
    state *states;
    int n_states, cap_states;
    int root[256]; /* the root's children (0: none) */
    pattern *pats;
    int n_pats, cap_pats;
    char **names; /* one per secret */
    int n_names;
    size_t max_len; /* the longest pattern */
};

static bool is_newline(uint8_t c)
{
    return c == '\n' || c == '\r';
}

/* Bytes ignored inside a match: line breaks, and dots between DNS labels. */
static bool is_gap(const brig_redactor *r, uint8_t c)
{
    return is_newline(c) || (r->dns && c == '.');
}

static uint8_t fold(const brig_redactor *r, uint8_t c)
{
    return r->dns && c >= 'A' && c <= 'Z' ? (uint8_t)(c + 32) : c;
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

/* Puts p[0..n) (no line breaks, n > 0) into the trie under secret `name`. */
static void insert(brig_redactor *r, int name, const uint8_t *p, size_t n)
{
    int cur = 0;
    for (size_t i = 0; i < n; i++) {
        int k = child_of(r, cur, p[i]);
        if (k == 0) {
            k = new_state(r, r->states[cur].depth + 1, p[i]); /* may move r->states */
            if (cur == 0) {
                r->root[p[i]] = k;
            } else {
                r->states[k].sibling = r->states[cur].child;
                r->states[cur].child = k;
            }
        }
        cur = k;
    }
    if (r->states[cur].out >= 0)
        return; /* the same bytes again (the first name stays) */
    if (r->n_pats == r->cap_pats) {
        r->cap_pats = r->cap_pats ? 2 * r->cap_pats : 16;
        r->pats = brig_xrealloc(r->pats, (size_t)r->cap_pats * sizeof(pattern));
    }
    r->pats[r->n_pats] = (pattern){.len = n, .name = name};
    r->states[cur].out = r->n_pats++;
    if (n > r->max_len)
        r->max_len = n;
}

/* Patterns are matched with line breaks ignored (base64 tools wrap lines, PEM
 * keys span several): they are stored without them. */
static void add_pattern(brig_redactor *r, int name, const uint8_t *raw, size_t rn)
{
    uint8_t *p = brig_xmalloc(rn ? rn : 1);
    size_t n = 0;
    for (size_t i = 0; i < rn; i++)
        if (!is_gap(r, raw[i]))
            p[n++] = fold(r, raw[i]);
    if (n > 0)
        insert(r, name, p, n);
    sodium_memzero(p, rn ? rn : 1);
    free(p);
}

/* The part of base64(pad_k bytes + v) that depends on v alone: what shows up
 * when v is base64-encoded inside a longer text at offset k (mod 3). */
static void add_base64(brig_redactor *r, int name, const uint8_t *v, size_t n, int variant)
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

static void add_urlencoded(brig_redactor *r, int name, const uint8_t *v, size_t n)
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

/* Failure links and outputs, breadth-first (a failure link points to a
 * shallower state, done before). */
static void link_failures(brig_redactor *r)
{
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
    /* The doubling left up to half unused. */
    r->states = brig_xrealloc(r->states, (size_t)r->n_states * sizeof(state));
    r->cap_states = r->n_states;
}

static brig_redactor *alloc_redactor(size_t n_names)
{
    brig_redactor *r = brig_xcalloc(1, sizeof(*r));
    r->refs = 1;
    pthread_mutex_init(&r->lock, NULL);
    r->names = brig_xcalloc(n_names ? n_names : 1, sizeof(char *));
    new_state(r, 0, 0);
    return r;
}

brig_redactor *brig_redactor_new(json_t *secrets)
{
    if (json_object_size(secrets) == 0)
        return NULL;
    brig_redactor *r = alloc_redactor(json_object_size(secrets));
    const char *name;
    json_t *v;
    json_object_foreach(secrets, name, v)
    {
        const uint8_t *val = (const uint8_t *)json_string_value(v);
        size_t n = json_string_length(v);
        if (val == NULL || n == 0)
            continue;
        int ni = r->n_names++;
        r->names[ni] = brig_xstrdup(name);
        add_pattern(r, ni, val, n);
        if (n >= 8) {
            add_base64(r, ni, val, n, sodium_base64_VARIANT_ORIGINAL);
            add_base64(r, ni, val, n, sodium_base64_VARIANT_URLSAFE);
            add_urlencoded(r, ni, val, n);
        }
    }
    link_failures(r);
    return r;
}

/* The twin of r for DNS names: every pattern of r (read back from its trie: a
 * state whose own pattern ends there has one as long as its depth), folded to
 * lower case and without dots. */
static brig_redactor *build_dns(const brig_redactor *r)
{
    brig_redactor *t = alloc_redactor((size_t)r->n_names);
    t->dns = true;
    for (int i = 0; i < r->n_names; i++)
        t->names[i] = brig_xstrdup(r->names[i]);
    t->n_names = r->n_names;
    size_t cap = r->max_len + 1;
    int *stack = brig_xmalloc(cap * sizeof(int));
    uint8_t *path = brig_xmalloc(cap), *folded = brig_xmalloc(cap);
    for (int c = 0; c < 256; c++) {
        if (r->root[c] == 0)
            continue;
        int top = 0;
        stack[0] = r->root[c];
        while (top >= 0) {
            const state *s = &r->states[stack[top]];
            path[s->depth - 1] = s->c;
            if (s->out >= 0 && r->pats[s->out].len == (size_t)s->depth) {
                size_t n = 0;
                for (int i = 0; i < s->depth; i++)
                    if (path[i] != '.')
                        folded[n++] = fold(t, path[i]);
                if (n > 0)
                    insert(t, r->pats[s->out].name, folded, n);
            }
            if (s->child) {
                stack[++top] = s->child;
                continue;
            }
            /* The next sibling here or on the way up (the root's children have none). */
            while (top >= 0 && r->states[stack[top]].sibling == 0)
                top--;
            if (top >= 0)
                stack[top] = r->states[stack[top]].sibling;
        }
    }
    sodium_memzero(path, cap);
    sodium_memzero(folded, cap);
    free(path);
    free(folded);
    free(stack);
    link_failures(t);
    return t;
}

brig_redactor *brig_redactor_dns(brig_redactor *r)
{
    if (r == NULL)
        return NULL;
    pthread_mutex_lock(&r->lock);
    if (r->dns_twin == NULL)
        r->dns_twin = build_dns(r);
    pthread_mutex_unlock(&r->lock);
    return r->dns_twin;
}

brig_redactor *brig_redactor_ref(brig_redactor *r)
{
    if (r)
        __atomic_add_fetch(&r->refs, 1, __ATOMIC_RELAXED);
    return r;
}

void brig_redactor_free(brig_redactor *r)
{
    if (r == NULL || __atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) > 0)
        return;
    brig_redactor_free(r->dns_twin);
    pthread_mutex_destroy(&r->lock);
    for (int i = 0; i < r->n_names; i++)
        free(r->names[i]);
    /* The trie spells the patterns. */
    sodium_memzero(r->states, (size_t)r->cap_states * sizeof(state));
    sodium_memzero(r->root, sizeof(r->root));
    free(r->states);
    free(r->pats);
    free(r->names);
    free(r);
}

size_t brig_redactor_size(const brig_redactor *r)
{
    if (r == NULL)
        return 0;
    return sizeof(*r) + (size_t)r->cap_states * sizeof(state) +
           (size_t)r->cap_pats * sizeof(pattern) + (size_t)r->n_names * (sizeof(char *) + 65);
}

/* ---- streams ---------------------------------------------------------------- */

void brig_redact_init(brig_redact_stream *s, const brig_redactor *r)
{
    memset(s, 0, sizeof(*s));
    s->r = r;
}

void brig_redact_init_mask(brig_redact_stream *s, const brig_redactor *r)
{
    brig_redact_init(s, r);
    s->mask = true;
}

size_t brig_redact_held(const brig_redact_stream *s, const uint8_t **p)
{
    if (p)
        *p = s->held.data ? (const uint8_t *)s->held.data + s->head : NULL;
    return s->held.len - s->head;
}

/* Forgets the held bytes (wiped: they may be part of a secret). */
static void held_clear(brig_redact_stream *s)
{
    if (s->held.data)
        sodium_memzero(s->held.data, s->held.len);
    s->held.len = s->head = s->solid = 0;
}

/* Releases held bytes from the front until `keep` non-line-break bytes are left
 * and the first of them leads (what tail_start computed, walking forward: each
 * byte is released once). */
static void release_to(brig_redact_stream *s, size_t keep, brig_buf *out)
{
    size_t i = s->head;
    const uint8_t *d = (const uint8_t *)s->held.data;
    while (i < s->held.len && (s->solid > keep || is_gap(s->r, d[i]))) {
        if (!is_gap(s->r, d[i]))
            s->solid--;
        i++;
    }
    if (i == s->head)
        return;
    brig_buf_append(out, d + s->head, i - s->head);
    s->head = i;
    if (s->head == s->held.len) {
        s->held.len = s->head = 0;
    } else if (s->head >= s->held.len - s->head) {
        /* Compact: the move costs no more than what was released since the last one. */
        size_t live = s->held.len - s->head;
        memmove(s->held.data, s->held.data + s->head, live);
        s->held.len = live;
        s->head = 0;
    }
}

/* The held bytes are one match of pattern pt: out gets its replacement. */
static void replace(brig_redact_stream *s, const pattern *pt, brig_buf *out)
{
    const char *name = s->r->names[pt->name];
    s->matches++;
    if (!s->mask) {
        brig_buf_append(out, "[REDACTED:", 10);
        brig_buf_append(out, name, strlen(name));
        brig_buf_append(out, "]", 1);
        return;
    }
    char label[80];
    int ln = snprintf(label, sizeof(label), "[REDACTED:%s]", name);
    size_t use = ln > 0 && (size_t)ln <= s->solid ? (size_t)ln : 0, k = 0;
    const uint8_t *d = (const uint8_t *)s->held.data;
    for (size_t i = s->head; i < s->held.len; i++) {
        uint8_t c = d[i];
        if (!is_gap(s->r, c))
            c = k < use ? (uint8_t)label[k++] : '*';
        brig_buf_append(out, &c, 1);
    }
}

/* Whether the held bytes passed the bound on a partial match (redact.h). */
static bool over_bound(const brig_redact_stream *s)
{
    return s->held.len - s->head > 2 * s->r->max_len + 256;
}

/* Everything held goes out as it is; the partial match is given up. */
static void let_go(brig_redact_stream *s, brig_buf *out)
{
    brig_buf_append(out, s->held.data + s->head, s->held.len - s->head);
    held_clear(s);
    s->state = 0;
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
        if (is_gap(r, p[i])) {
            /* Transparent inside a partial match; bounded, so a flood of line
             * breaks cannot make us hold output back forever. */
            if (s->state == 0 || over_bound(s))
                let_go(s, out);
            continue;
        }
        s->solid++;
        s->state = step(r, s->state, fold(r, p[i]));
        const state *st = &r->states[s->state];
        if (st->out >= 0) {
            const pattern *pt = &r->pats[st->out];
            release_to(s, pt->len, out);
            replace(s, pt, out);
            held_clear(s);
            s->state = 0;
            continue;
        }
        /* Only the last `depth` bytes can still become part of a match. */
        release_to(s, (size_t)st->depth, out);
        /* The same bound as at a line break: a partial match whose line breaks already
         * filled it is let go here too, or solid bytes after them would stretch it. */
        if (over_bound(s))
            let_go(s, out);
    }
}

void brig_redact_flush(brig_redact_stream *s, brig_buf *out)
{
    if (s->held.len > s->head)
        brig_buf_append(out, s->held.data + s->head, s->held.len - s->head);
    if (s->held.data)
        sodium_memzero(s->held.data, s->held.cap);
    s->held.len = s->head = s->solid = 0;
    s->state = 0;
}

void brig_redact_dispose(brig_redact_stream *s)
{
    if (s->held.data)
        sodium_memzero(s->held.data, s->held.cap);
    brig_buf_dispose(&s->held);
}

size_t brig_redact_count(const brig_redactor *r, const uint8_t *p, size_t n)
{
    size_t k = 0;
    int st = 0;
    for (size_t i = 0; r && i < n; i++) {
        if (is_gap(r, p[i]))
            continue;
        st = step(r, st, fold(r, p[i]));
        if (r->states[st].out >= 0) {
            k++;
            st = 0;
        }
    }
    return k;
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

void brig_redact_json(const brig_redactor *r, json_t *j)
{
    if (r == NULL || j == NULL)
        return;
    if (json_is_string(j)) {
        brig_buf b = {0};
        brig_buf_append(&b, json_string_value(j), json_string_length(j));
        brig_redact_buf(r, &b);
        /* Markers are ASCII and values valid UTF-8, so the text stays valid; if
         * not, nothing of it is shown rather than something unredacted. */
        if (json_string_setn(j, b.data ? b.data : "", b.len) < 0)
            json_string_set(j, "[REDACTED]");
        if (b.data)
            sodium_memzero(b.data, b.cap);
        brig_buf_dispose(&b);
    } else if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) brig_redact_json(r, v);
    } else if (json_is_array(j)) {
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) brig_redact_json(r, v);
    }
}
