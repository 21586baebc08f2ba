/*
 * id.h - unguessable identifiers and API key material (libsodium randomness).
 */
#ifndef BRIG_ID_H
#define BRIG_ID_H

#include <stdbool.h>
#include <stddef.h>

/* Room for "<prefix>_" + 26 base32 characters (130 bits, 128 random) + NUL. */
#define BRIG_ID_MAX 40

/* Writes "<prefix>_" followed by 26 lowercase base32 characters of 128 random bits. */
void brig_id_new(const char *prefix, char out[BRIG_ID_MAX]);

/* True when s looks like an id with this prefix (cheap syntactic check). */
bool brig_id_valid(const char *prefix, const char *s);

/* A new API key "brig_" + 43 base64url characters (256 random bits); caller frees. */
char *brig_key_new(void);

/* Hex BLAKE2b-256 of a key: what the store keeps.  out must hold 65 bytes. */
void brig_key_hash(const char *key, char out[65]);

/* First 16 hex characters of SHA-256 over the given parts, concatenated. */
void brig_sha256_hex16(const void *const parts[], const size_t lens[], size_t n, char out[17]);

#endif
