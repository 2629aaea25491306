/* cli_fidelity.c: option helpers for the emulator's fidelity settings. */
#include "cli.h"

#include "ergon/emulate.h"

#include <string.h>

bool cli_parse_latency(const char *cmd, const char *s, double *out)
{
    if (s && (!strcmp(s, "default") || !strcmp(s, "published"))) {
        *out = ERG_SWITCH_LATENCY_DEFAULT_S;
        return true;
    }
    return cli_parse_double(cmd, "--switch-latency", s, 0, 1e3, out);
}
