/*
 * user.c - the `user` of an exec: its passwd entry and supplementary groups, read from the
 * sandbox's own /etc/passwd and /etc/group.
 *
 * The agent is static glibc, where getpwnam() and friends would need NSS modules loaded with
 * dlopen (which a static binary cannot do reliably, and which would come from the sandbox's
 * file system).  fgetpwent()/fgetgrent() only parse a file stream in the classic format
 * (passwd(5), group(5)); nothing else is consulted, so users from LDAP and the like do not
 * exist here.  That is what the templates need: `root` and the unprivileged `user`.
 */
#include "agent.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

#define MAX_GROUPS 256 /* supplementary groups kept; more are ignored */

static const char *passwd_path = "/etc/passwd";
static const char *group_path = "/etc/group";

/* Adds g to u->groups unless it is there already. */
static void add_group(brig_user *u, gid_t g)
{
    for (size_t i = 0; i < u->ngroups; i++)
        if (u->groups[i] == g)
            return;
    if (u->ngroups < MAX_GROUPS)
        u->groups[u->ngroups++] = g;
}

int brig_agent_user_lookup(const char *name, brig_user *u, brig_error **err)
{
    memset(u, 0, sizeof(*u));
    FILE *f = fopen(passwd_path, "re");
    if (f == NULL)
        return brig_error_set(err, BRIG_E_INVALID, errno, "user %s: %s", name, passwd_path);
    struct passwd *pw;
    errno = 0;
    while ((pw = fgetpwent(f)) != NULL)
        if (strcmp(pw->pw_name, name) == 0)
            break;
    if (pw == NULL) {
        fclose(f);
        return brig_error_set(err, BRIG_E_INVALID, 0, "no user %.64s in %s", name, passwd_path);
    }
    u->name = brig_xstrdup(pw->pw_name);
    u->home = brig_xstrdup(pw->pw_dir[0] != '\0' ? pw->pw_dir : "/");
    u->uid = pw->pw_uid;
    u->gid = pw->pw_gid;
    fclose(f);

    u->groups = brig_xcalloc(MAX_GROUPS, sizeof(*u->groups));
    add_group(u, u->gid);
    /* A missing /etc/group only means no supplementary groups. */
    f = fopen(group_path, "re");
    if (f != NULL) {
        struct group *gr;
        while ((gr = fgetgrent(f)) != NULL)
            for (char **m = gr->gr_mem; m != NULL && *m != NULL; m++)
                if (strcmp(*m, u->name) == 0) {
                    add_group(u, gr->gr_gid);
                    break;
                }
        fclose(f);
    }
    return 0;
}

void brig_agent_user_dispose(brig_user *u)
{
    free(u->name);
    free(u->home);
    free(u->groups);
    memset(u, 0, sizeof(*u));
}
