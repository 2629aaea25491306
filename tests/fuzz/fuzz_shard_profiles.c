/* fuzz_shard_profiles.c: the per-segment cost file (`ergon shard search --profiles FILE`,
 * written by `profile --out-profiles` and tools/shard_measure.py) on arbitrary bytes, with
 * and without --profiles-only, on a fixed two-block module; then the DP search. What
 * erg_shard_profile_csv writes must read back (trap otherwise). */
#include "ergon/shard.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char module[] =
    "HloModule mlp_step, entry_computation_layout={(f32[8192,1024]{1,0}, f32[1024,4096]{1,0}, "
    "f32[4096,1024]{1,0}, f32[8192,1024]{1,0})->(f32[1024,4096]{1,0}, f32[4096,1024]{1,0}, "
    "f32[8192,1024]{1,0})}\n"
    "\n"
    "ENTRY %main (x: f32[8192,1024], w1: f32[1024,4096], w2: f32[4096,1024], dout: f32[8192,1024]) "
    "-> (f32[1024,4096], f32[4096,1024], f32[8192,1024]) {\n"
    "  %x     = f32[8192,1024]{1,0} parameter(0)\n"
    "  %w1    = f32[1024,4096]{1,0} parameter(1)\n"
    "  %w2    = f32[4096,1024]{1,0} parameter(2)\n"
    "  %dout  = f32[8192,1024]{1,0} parameter(3)\n"
    "  %h     = f32[8192,4096]{1,0} dot(%x, %w1), lhs_contracting_dims={1}, "
    "rhs_contracting_dims={0}\n"
    "  %zero  = f32[] constant(0)\n"
    "  %zeros = f32[8192,4096]{1,0} broadcast(%zero), dimensions={}\n"
    "  %a     = f32[8192,4096]{1,0} maximum(%h, %zeros)\n"
    "  %y     = f32[8192,1024]{1,0} dot(%a, %w2), lhs_contracting_dims={1}, "
    "rhs_contracting_dims={0}\n"
    "  %dw2   = f32[4096,1024]{1,0} dot(%a, %dout), lhs_contracting_dims={0}, "
    "rhs_contracting_dims={0}\n"
    "  %da    = f32[8192,4096]{1,0} dot(%dout, %w2), lhs_contracting_dims={1}, "
    "rhs_contracting_dims={1}\n"
    "  %mask  = pred[8192,4096]{1,0} compare(%h, %zeros), direction=GT\n"
    "  %dh    = f32[8192,4096]{1,0} select(%mask, %da, %zeros)\n"
    "  %dw1   = f32[1024,4096]{1,0} dot(%x, %dh), lhs_contracting_dims={0}, "
    "rhs_contracting_dims={0}\n"
    "  %dxm   = f32[8192,1024]{1,0} dot(%dh, %w1), lhs_contracting_dims={1}, "
    "rhs_contracting_dims={1}\n"
    "  %dx    = f32[8192,1024]{1,0} add(%dxm, %dout)\n"
    "  ROOT %r = (f32[1024,4096]{1,0}, f32[4096,1024]{1,0}, f32[8192,1024]{1,0}) tuple(%dw1, %dw2, "
    "%dx)\n"
    "}\n";

static int write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static erg_hlo_module *m;
    static erg_shard *s; /* analysed once; every input profiles it again */
    static char path[64], back[64];
    erg_error err;
    if (!m) {
        if (erg_hlo_parse(module, strlen(module), "mlp.hlo", &m, &err) != ERG_OK ||
            erg_shard_analyze(m, 1, 2, &s, &err) != ERG_OK)
            __builtin_trap();
        snprintf(path, sizeof path, "/tmp/ergon-fuzz-profiles-%ld.csv", (long)getpid());
        snprintf(back, sizeof back, "/tmp/ergon-fuzz-profiles-%ld.back.csv", (long)getpid());
    }
    if (write_file(path, data, size))
        return 0;
    for (int only = 0; only < 2; only++) {
        erg_shard_cost_options o;
        erg_shard_cost_options_init(&o);
        o.profiles_path = path;
        o.profiles_only = only;
        o.keep = 4;
        erg_shard_plan *p = NULL;
        if (erg_shard_profile(s, &o, NULL, NULL, &err) == ERG_OK) {
            if (erg_shard_search(s, ERG_SHARD_DP, 1, &p, &err) == ERG_OK)
                erg_shard_plan_free(p);
            /* the kept combinations, written as a cost file, read back */
            char *csv = NULL;
            if (erg_shard_profile_csv(s, &csv, &err) == ERG_OK) {
                if (write_file(back, csv, strlen(csv)))
                    __builtin_trap();
                erg_free(csv);
                o.profiles_path = back;
                if (erg_shard_profile(s, &o, NULL, NULL, &err) != ERG_OK)
                    __builtin_trap();
            }
        }
    }
    unlink(path);
    unlink(back);
    return 0;
}
