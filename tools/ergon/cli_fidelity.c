/* cli_fidelity.c: option helpers for the emulator's fidelity settings. */
#include "cli.h"

#include "ergon/emulate.h"

#include <stdio.h>
#include <string.h>

bool cli_parse_latency(const char *cmd, const char *s, double *out)
{
    if (s && (!strcmp(s, "default") || !strcmp(s, "published"))) {
        *out = ERG_SWITCH_LATENCY_DEFAULT_S;
        return true;
    }
    if (!cli_parse_double(cmd, "--switch-latency", s, 0, 1e3, out))
        return false;
    /* seconds: a clock switch takes milliseconds (docs/emulate.md), so 10 is most likely
     * "10 ms" written without its unit */
    if (*out >= 0.1)
        fprintf(stderr,
                "ergon %s: warning: --switch-latency %s is %g s per clock switch; switches take "
                "about %g ms ('default'); for %g ms write %g\n",
                cmd, s, *out, ERG_SWITCH_LATENCY_DEFAULT_S * 1e3, *out, *out / 1e3);
    return true;
}
