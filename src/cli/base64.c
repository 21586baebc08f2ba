/*
 * base64.c - RFC 4648 base64 decoding (see base64.h).
 */
#include "base64.h"

#include <stdbool.h>

static int sextet(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+')
        return 62;
    if (ch == '/')
        return 63;
    return -1;
}

int brig_base64_decode(const char *in, size_t len, brig_buf *out, brig_error **err)
{
    unsigned char chunk[3 * 1024];
    size_t filled = 0;
    unsigned int acc = 0;
    int bits = 0;
    bool padded = false;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)in[i];
        if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t')
            continue;
        if (ch == '=') {
            padded = true;
            continue;
        }
        int v = sextet(ch);
        if (v < 0 || padded) {
            if (filled > 0)
                brig_buf_append(out, chunk, filled);
            return brig_error_set(err, BRIG_E_PROTOCOL, 0, "invalid base64 at offset %zu", i);
        }
        acc = (acc << 6) | (unsigned int)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            chunk[filled++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
            if (filled == sizeof(chunk)) {
                brig_buf_append(out, chunk, filled);
                filled = 0;
            }
        }
    }
    if (filled > 0)
        brig_buf_append(out, chunk, filled);
    /* 6 leftover bits: one character that encodes no whole byte */
    if (bits >= 6)
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "truncated base64");
    return 0;
}

char *brig_base64_encode(const void *data, size_t n)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = data;
    char *out = brig_xmalloc(4 * ((n + 2) / 3) + 1);
    char *o = out;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        unsigned int v = (unsigned int)p[i] << 16 | (unsigned int)p[i + 1] << 8 | p[i + 2];
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = alphabet[(v >> 6) & 63];
        *o++ = alphabet[v & 63];
    }
    if (i < n) {
        unsigned int v = (unsigned int)p[i] << 16 | (i + 1 < n ? (unsigned int)p[i + 1] << 8 : 0);
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    *o = '\0';
    return out;
}
