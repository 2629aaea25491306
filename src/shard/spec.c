/* spec.c: the spec algebra: a tensor's split per dim on the 2-D mesh (replicated, axis 0,
 * axis 1, both), its tile count, its text form, and whether it divides a shape. */
#include "shard/shard_internal.h"

#include <stdlib.h>
#include <string.h>

spec erg__shard_spec_rep(void)
{
    spec s;
    memset(s.d, (unsigned char)SP_R, sizeof s.d);
    return s;
}

int erg__shard_axis_size(const erg_shard *s, int code)
{
    return code == SP_BOTH ? s->mesh[0] * s->mesh[1] : code >= 0 ? s->mesh[code] : 1;
}

bool erg__shard_uses_axis(int8_t code, int a)
{
    return code == a || (code == SP_BOTH && a >= 0);
}

int erg__shard_tiles(const erg_shard *s, const spec *sp, int rank)
{
    int t = 1;
    for (int i = 0; i < rank; i++)
        if (sp->d[i] != SP_R)
            t *= erg__shard_axis_size(s, sp->d[i]);
    return t;
}

void erg__shard_spec_str(const spec *sp, int rank, char *buf, size_t size)
{
    size_t k = 0;
    buf[0] = '\0';
    if (rank == 0) {
        snprintf(buf, size, "R");
        return;
    }
    for (int i = 0; i < rank && k + 4 < size; i++) {
        const char *t = sp->d[i] == SP_R ? "R"
                        : sp->d[i] == 0  ? "S0"
                        : sp->d[i] == 1  ? "S1"
                                         : "S01";
        k += (size_t)snprintf(buf + k, size - k, "%s", t);
    }
}

bool erg__shard_spec_valid_for(const erg_shard *s, const hlo_shape *sh, const spec *sp)
{
    if (sh->kind != HLO_ARRAY)
        return true;
    int used[2] = {0, 0};
    for (int i = 0; i < sh->rank; i++) {
        int8_t c = sp->d[i];
        if (c == SP_R)
            continue;
        if (sh->dims[i] % erg__shard_axis_size(s, c))
            return false;
        for (int a = 0; a < 2; a++)
            if (erg__shard_uses_axis(c, a) && used[a]++)
                return false;
    }
    return true;
}
