/* baseline.c: the one baseline of every user-facing saving: all-max clocks
 * evaluated with the profile (emulated with the profiled values), shared by
 * `plan perseus`'s summary, `choose` and `show` so that they agree: thin names for the
 * library's erg_frontier_baseline (emulate.h), which also writes (erg_frontier_save_dir) and
 * reads a frontier directory's baseline. */
#include "cli.h"

#include "ergon/emulate.h"
#include "ergon/envpipe.h"
#include "ergon/planner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_baseline_init(cli_baseline *b)
{
    erg_frontier_baseline_init(b);
}

void cli_baseline_free(cli_baseline *b)
{
    erg_frontier_baseline_free(b);
}

/* The all-max baseline from an already read profile and DAG (not owned). */
int cli_baseline_set(cli_baseline *b, erg_profile *prof, erg_dag *dag, double power_w,
                     const erg_emulation *all_max)
{
    b->prof = prof;
    b->dag = dag;
    b->power_w = power_w;
    b->all_max = *all_max;
    b->have = true;
    b->own = false;
    return CLI_OK;
}

int cli_baseline_read_power(const char *dir, double *power_w)
{
    return erg_frontier_info_power(dir, power_w) ? 1 : 0;
}

int cli_baseline_open(const char *dir, const erg_frontier *f, cli_baseline *b, erg_error *err)
{
    return erg_frontier_baseline_open(dir, f, b, err) ? CLI_USER_ERROR : CLI_OK;
}

erg_status cli_baseline_pick(const cli_baseline *b, const erg_frontier *f, double deadline_s,
                             size_t *k, erg_emulation *em, erg_error *err)
{
    return erg_frontier_baseline_pick(b, f, deadline_s, k, em, err);
}
