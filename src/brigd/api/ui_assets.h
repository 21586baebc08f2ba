/*
 * ui_assets.h - the dashboard's files, embedded in brigd at build time by scripts/embed_ui.py
 * from ui/ (docs/dashboard.md).  The table ends with a NULL name.
 */
#ifndef BRIG_UI_ASSETS_H
#define BRIG_UI_ASSETS_H

typedef struct brig_ui_asset {
    const char *name;          /* "index.html": the file's base name, the URL's last segment */
    const char *content_type;  /* with its charset for text */
    const char *etag;          /* "\"<hex of the content's SHA-256>\"" */
    const unsigned char *data; /* NUL-terminated */
    unsigned long len;
} brig_ui_asset;

extern const brig_ui_asset brig_ui_assets[];

#endif
