/*
 * usertpl_reap.c - a dead brigd's build leftovers (see usertpl_reap.h).
 */
#include "usertpl_reap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "orchestrator.h"
#include "runtime/layer.h"
#include "util.h"

#define MARKS "utpl-builds" /* under the state dir */

void brig_utpl_build_mark(brigd *d, const char *id, bool on)
{
    _cleanup_free_ char *dir = brig_asprintf("%s/" MARKS, d->cfg.state_dir);
    _cleanup_free_ char *path = brig_asprintf("%s/%s", dir, id);
    if (!on) {
        unlink(path);
        return;
    }
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        brig_warn("template build in sandbox %s: mkdir %s: %s", id, dir, strerror(errno));
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) /* the build goes on: only a crash during it would leave its sandbox */
        brig_warn("template build in sandbox %s: mark %s: %s", id, path, strerror(errno));
    else
        close(fd);
}

/* The sandboxes marked: ended (the ones reconcile found dead are ended already). */
static void reap_sandboxes(brigd *d)
{
    _cleanup_free_ char *dir = brig_asprintf("%s/" MARKS, d->cfg.state_dir);
    DIR *dp = opendir(dir);
    if (dp == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(dp)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (brig_sandbox_stop(d, e->d_name, "lost_on_restart") == 0)
            brig_warn("template build in sandbox %s: brigd died during it; sandbox ended",
                      e->d_name);
        _cleanup_free_ char *path = brig_asprintf("%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(dp);
}

/* STATE/templates/ACCOUNT/.* : layers that were being published (snapshot, usertpl_build.c). */
static void reap_tmp_layers(brigd *d)
{
    _cleanup_free_ char *top = brig_asprintf("%s/templates", d->cfg.state_dir);
    DIR *accts = opendir(top);
    if (accts == NULL)
        return;
    struct dirent *a;
    while ((a = readdir(accts)) != NULL) {
        if (a->d_name[0] == '.')
            continue;
        _cleanup_free_ char *acct = brig_asprintf("%s/%s", top, a->d_name);
        DIR *dp = opendir(acct);
        struct dirent *e;
        while (dp && (e = readdir(dp)) != NULL) {
            if (e->d_name[0] != '.' || strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            _cleanup_free_ char *tmp = brig_asprintf("%s/%s", acct, e->d_name);
            brig_warn("template layer %s: left by a build brigd died during; removed", tmp);
            brig_layer_remove(tmp);
        }
        if (dp)
            closedir(dp);
    }
    closedir(accts);
}

void brig_utpl_builds_reap(brigd *d)
{
    reap_sandboxes(d);
    reap_tmp_layers(d);
}
