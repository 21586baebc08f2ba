/*
 * endpoint.c - BRIG_URL and the API key (see endpoint.h).
 */
#include "endpoint.h"

#include <stdbool.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* A key file larger than this is not a key file. */
#define KEY_FILE_MAX 4096

const char *brig_config_url(void)
{
    const char *url = getenv("BRIG_URL");
    return url != NULL && *url ? url : BRIG_CONFIG_DEFAULT_URL;
}

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Sets *key to the trimmed content of path.  -1 with errno when unreadable;
 * *key NULL when the file holds only whitespace. */
static int read_key_file(const char *path, char **key)
{
    *key = NULL;
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -1;
    char buf[KEY_FILE_MAX + 1];
    ssize_t n = brig_read_full(fd, buf, sizeof(buf));
    if (n < 0)
        return -1;
    if (n > KEY_FILE_MAX) {
        errno = EFBIG;
        return -1;
    }
    size_t start = 0, end = (size_t)n;
    while (start < end && is_space(buf[start]))
        start++;
    while (end > start && is_space(buf[end - 1]))
        end--;
    if (end > start)
        *key = brig_xstrndup(buf + start, end - start);
    memset(buf, 0, sizeof(buf));
    return 0;
}

int brig_config_api_key(char **key, brig_error **err)
{
    return brig_config_api_key_from(key, "admin.key", err);
}

int brig_config_api_key_from(char **key, const char *file, brig_error **err)
{
    *key = NULL;
    const char *env = getenv("BRIG_API_KEY");
    if (env != NULL && *env) {
        *key = brig_xstrdup(env);
    } else {
        const char *dir = getenv("BRIG_STATE_DIR");
        if (dir == NULL || *dir == '\0')
            dir = BRIG_CONFIG_DEFAULT_STATE_DIR;
        _cleanup_free_ char *path = brig_asprintf("%s/%s", dir, file);
        if (read_key_file(path, key) < 0 || *key == NULL)
            return brig_error_set(err, BRIG_E_UNAUTHORIZED, 0,
                                  "no API key: set BRIG_API_KEY (or run as a user who can read "
                                  "%s)",
                                  path);
    }
    for (const char *p = *key; *p; p++) {
        if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f) {
            free(*key);
            *key = NULL;
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "the API key contains control characters");
        }
    }
    return 0;
}
