/* A no-op SPANK plugin that accepts pyxis' srun options (--container-image, --container-mounts,
 * ...) so that generated sbatch scripts using them run on a test Slurm without pyxis/enroot.
 * The command then runs on the host. In srun (local context) it appends one line per option,
 * "<job id> <option>=<value>", to $PYXIS_STUB_LOG when that is set.
 *
 * The few declarations a SPANK plugin needs are copied from Slurm's <slurm/spank.h>
 * (struct spank_option, the option callback type and what SPANK_PLUGIN() defines), so the
 * stub builds with gcc alone, without libslurm-dev. Slurm loads a plugin only when its
 * plugin_version equals its own SLURM_VERSION_NUMBER, (major << 16) | (minor << 8) | micro,
 * so the build passes it in (22.05.8 -> 0x160508):
 *   gcc -shared -fPIC -O2 -DSTUB_PLUGIN_VERSION=0x160508 -o pyxis_stub.so pyxis_stub.c
 * and name it in plugstack.conf: `required /abs/path/pyxis_stub.so`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*spank_opt_cb_f)(int val, const char *optarg, int remote);

struct spank_option {
    char *name;
    char *arginfo;
    char *usage;
    int has_arg;
    int val;
    spank_opt_cb_f cb;
};

#ifndef STUB_PLUGIN_VERSION
#error "build with -DSTUB_PLUGIN_VERSION=<the Slurm version number>"
#endif

/* SPANK_PLUGIN(pyxis_stub, SLURM_VERSION_NUMBER) */
const char plugin_name[] = "pyxis_stub";
const char plugin_type[] = "spank";
const unsigned int plugin_version = STUB_PLUGIN_VERSION;

static const char *const names[] = {
    "", "container-image", "container-mounts", "container-workdir", "container-name",
    "container-save", "container-env", "container-mount-home", "no-container-mount-home",
    "container-remap-root", "no-container-remap-root", "container-entrypoint",
    "no-container-entrypoint", "container-writable", "container-readonly",
};

/* In the remote context (slurmstepd), --container-mounts and --container-workdir are kept
 * so that each task starts where the container would start it: the host directory that is
 * mounted at the workdir (the command runs on the host, so the mount is emulated by its
 * source). A workdir that no mount provides fails the task, as a missing directory in the
 * container would. */
static char mounts[8192];
static char workdir[4096];

static int opt_cb(int val, const char *optarg, int remote)
{
    if (remote && optarg) {
        if (val == 2)
            snprintf(mounts, sizeof mounts, "%s", optarg);
        else if (val == 3)
            snprintf(workdir, sizeof workdir, "%s", optarg);
    }
    const char *log = getenv("PYXIS_STUB_LOG");
    const char *job = getenv("SLURM_JOB_ID");
    if (!remote && log && val > 0 && val < (int)(sizeof names / sizeof names[0])) {
        FILE *f = fopen(log, "a");
        if (f) {
            fprintf(f, "%s %s=%s\n", job ? job : "-", names[val], optarg ? optarg : "");
            fclose(f);
        }
    }
    return 0;
}

struct spank_option spank_options[] = {
    { "container-image", "[USER@][REGISTRY#]IMAGE[:TAG]|PATH", "stub", 1, 1, opt_cb },
    { "container-mounts", "SRC:DST[:FLAGS][,SRC:DST...]", "stub", 1, 2, opt_cb },
    { "container-workdir", "PATH", "stub", 1, 3, opt_cb },
    { "container-name", "NAME", "stub", 1, 4, opt_cb },
    { "container-save", "PATH", "stub", 1, 5, opt_cb },
    { "container-env", "NAME[,NAME...]", "stub", 1, 6, opt_cb },
    { "container-mount-home", NULL, "stub", 0, 7, opt_cb },
    { "no-container-mount-home", NULL, "stub", 0, 8, opt_cb },
    { "container-remap-root", NULL, "stub", 0, 9, opt_cb },
    { "no-container-remap-root", NULL, "stub", 0, 10, opt_cb },
    { "container-entrypoint", NULL, "stub", 0, 11, opt_cb },
    { "no-container-entrypoint", NULL, "stub", 0, 12, opt_cb },
    { "container-writable", NULL, "stub", 0, 13, opt_cb },
    { "container-readonly", NULL, "stub", 0, 14, opt_cb },
    { NULL, NULL, NULL, 0, 0, NULL },
};

int slurm_spank_init(void *sp, int ac, char **av)
{
    (void)sp;
    (void)ac;
    (void)av;
    return 0;
}

int slurm_spank_task_init(void *sp, int ac, char **av)
{
    (void)sp;
    (void)ac;
    (void)av;
    if (!workdir[0])
        return 0;
    char list[8192];
    snprintf(list, sizeof list, "%s", mounts);
    char *save = NULL;
    for (char *m = strtok_r(list, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
        char *dst = strchr(m, ':');
        if (!dst)
            continue;
        *dst++ = '\0';
        char *flags = strchr(dst, ':');
        if (flags)
            *flags = '\0';
        size_t n = strlen(dst);
        if (strncmp(workdir, dst, n) == 0 && (workdir[n] == '\0' || workdir[n] == '/')) {
            char host[8192];
            snprintf(host, sizeof host, "%s%s", m, workdir + n);
            if (chdir(host) != 0) {
                fprintf(stderr, "pyxis stub: cannot enter %s (mounted at %s)\n", host, workdir);
                return -1;
            }
            return 0;
        }
    }
    fprintf(stderr, "pyxis stub: --container-workdir=%s is not under any --container-mounts target\n", workdir);
    return -1;
}
