/*
 * id.c - identifiers and key hashing.  IDs carry 128 random bits, well above the
 * 80 DESIGN.md asks for, so guessing another tenant's sandbox id is hopeless.
 */
#include "id.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

static const char b32[] = "abcdefghijklmnopqrstuvwxyz234567";

void brig_id_new(const char *prefix, char out[BRIG_ID_MAX])
{
    unsigned char rnd[16];
    randombytes_buf(rnd, sizeof(rnd));
    size_t n = (size_t)snprintf(out, BRIG_ID_MAX, "%s_", prefix);
    /* 128 bits -> 26 base32 digits (the last one carries 3 bits). */
    unsigned int acc = 0, bits = 0;
    for (size_t i = 0; i < sizeof(rnd); i++) {
        acc = (acc << 8) | rnd[i];
        bits += 8;
        while (bits >= 5) {
            out[n++] = b32[(acc >> (bits - 5)) & 31];
            bits -= 5;
        }
    }
    if (bits > 0)
        out[n++] = b32[(acc << (5 - bits)) & 31];
    out[n] = '\0';
}

bool brig_id_valid(const char *prefix, const char *s)
{
    size_t pl = strlen(prefix);
    if (s == NULL || strncmp(s, prefix, pl) != 0 || s[pl] != '_')
        return false;
    const char *p = s + pl + 1;
    size_t n = strlen(p);
    if (n != 26)
        return false;
    for (size_t i = 0; i < n; i++)
        if (strchr(b32, p[i]) == NULL || p[i] == '\0')
            return false;
    return true;
}

char *brig_key_new(void)
{
    unsigned char rnd[32];
    randombytes_buf(rnd, sizeof(rnd));
    size_t len = sodium_base64_ENCODED_LEN(sizeof(rnd), sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    char *b64 = brig_xmalloc(len);
    sodium_bin2base64(b64, len, rnd, sizeof(rnd), sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    char *key = brig_asprintf("brig_%s", b64);
    sodium_memzero(rnd, sizeof(rnd));
    sodium_memzero(b64, len);
    free(b64);
    return key;
}

void brig_key_hash(const char *key, char out[65])
{
    unsigned char h[32];
    crypto_generichash(h, sizeof(h), (const unsigned char *)key, strlen(key), NULL, 0);
    sodium_bin2hex(out, 65, h, sizeof(h));
}

void brig_sha256_hex16(const void *const parts[], const size_t lens[], size_t n, char out[17])
{
    crypto_hash_sha256_state st;
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_init(&st);
    for (size_t i = 0; i < n; i++)
        crypto_hash_sha256_update(&st, parts[i], lens[i]);
    crypto_hash_sha256_final(&st, h);
    char hex[65];
    sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
    memcpy(out, hex, 16);
    out[16] = '\0';
}
