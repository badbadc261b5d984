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

static int opt_cb(int val, const char *optarg, int remote)
{
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
