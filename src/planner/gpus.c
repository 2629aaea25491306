/* gpus.c: the GPU clock table (data/gpus.csv) reader. */
#include "core/internal.h"
#include "ergon/envpipe.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

#define ERG_MAX_GPU_TABLE_BYTES (1u << 20)

static const char *const gpu_cols[] = {
    "gpu",        "filter_max_mhz", "filter_min_mhz", "profile_step_mhz", "reconfig_step_mhz",
    "max_power_w"};

erg_status erg_gpu_table_parse(const char *text, size_t len, const char *name, erg_gpu_spec **out,
                               size_t *count, erg_error *err)
{
    *out = NULL;
    *count = 0;
    if (!name)
        name = "<gpu table>";
    erg__csv c;
    erg__csv_init(&c, text, len);
    erg_gpu_spec *v = NULL;
    size_t n = 0, cap = 0;
    int col[6];
    size_t ncols = 0;
    bool header = false;
    erg_status st = ERG_OK;
    int r;
    while ((r = erg__csv_next(&c)) > 0) {
        if (c.fields[0][0] == '#')
            continue;
        if (!header) {
            ncols = c.nfields;
            for (int k = 0; k < 6; k++) {
                col[k] = -1;
                for (size_t i = 0; i < c.nfields; i++)
                    if (!strcmp(c.fields[i], gpu_cols[k]))
                        col[k] = (int)i;
                if (col[k] < 0) {
                    st = erg_error_set(err, ERG_EPARSE, "%s:%ld: missing column '%s' in the header",
                                       name, c.line, gpu_cols[k]);
                    goto fail;
                }
            }
            header = true;
            continue;
        }
        if (c.nfields != ncols) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: expected %zu fields, found %zu", name,
                               c.line, ncols, c.nfields);
            goto fail;
        }
        erg_gpu_spec g;
        memset(&g, 0, sizeof g);
        const char *gn = c.fields[col[0]];
        size_t gl = strlen(gn);
        if (gl == 0 || gl >= sizeof g.name) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: GPU name '%s' is empty or too long", name,
                               c.line, gn);
            goto fail;
        }
        for (size_t i = 0; i < gl; i++)
            g.name[i] = (char)tolower((unsigned char)gn[i]);
        long iv[4];
        for (int k = 0; k < 4; k++) {
            const char *f = c.fields[col[k + 1]];
            if (!erg__parse_long(f, &iv[k]) || iv[k] <= 0 || iv[k] > 100000) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%ld: %s must be a positive integer (MHz), got '%s'", name,
                                   c.line, gpu_cols[k + 1], f);
                goto fail;
            }
        }
        double pw;
        if (!erg__parse_double(c.fields[col[5]], &pw) || !(pw > 0) || pw > 1e6) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: max_power_w must be positive, got '%s'",
                               name, c.line, c.fields[col[5]]);
            goto fail;
        }
        if (iv[1] > iv[0]) {
            st = erg_error_set(err, ERG_EPARSE,
                               "%s:%ld: filter_min_mhz %ld is above filter_max_mhz %ld", name,
                               c.line, iv[1], iv[0]);
            goto fail;
        }
        for (size_t i = 0; i < n; i++)
            if (!strcmp(v[i].name, g.name)) {
                st = erg_error_set(err, ERG_EPARSE, "%s:%ld: GPU '%s' listed twice", name, c.line,
                                   g.name);
                goto fail;
            }
        g.filter_max_mhz = (int)iv[0];
        g.filter_min_mhz = (int)iv[1];
        g.profile_step_mhz = (int)iv[2];
        g.reconfig_step_mhz = (int)iv[3];
        g.max_power_w = pw;
        if (!ERG__GROW(v, cap, n + 1, 8)) {
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            goto fail;
        }
        v[n++] = g;
    }
    if (r < 0) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto fail;
    }
    if (!header || n == 0) {
        st = erg_error_set(err, ERG_EPARSE, "%s: no GPU rows (expected a header %s,%s,%s,%s,%s,%s)",
                           name, gpu_cols[0], gpu_cols[1], gpu_cols[2], gpu_cols[3], gpu_cols[4],
                           gpu_cols[5]);
        goto fail;
    }
    erg__csv_free(&c);
    *out = v;
    *count = n;
    return ERG_OK;
fail:
    erg__csv_free(&c);
    erg__free(v);
    return st;
}

erg_status erg_gpu_table_read(const char *path, erg_gpu_spec **out, size_t *count, erg_error *err)
{
    char *text;
    size_t len;
    *out = NULL;
    *count = 0;
    erg_status st = erg__read_file(path, ERG_MAX_GPU_TABLE_BYTES, &text, &len, err);
    if (st)
        return st;
    st = erg_gpu_table_parse(text, len, path, out, count, err);
    erg__free(text);
    return st;
}

erg_status erg_gpu_table_find(const erg_gpu_spec *t, size_t n, const char *gpu,
                              const erg_gpu_spec **out, erg_error *err)
{
    *out = NULL;
    if (!gpu || !*gpu)
        return erg_error_set(err, ERG_EINVAL, "empty GPU name");
    char base[32];
    snprintf(base, sizeof base, "%s", gpu);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++)
            if (!strcasecmp(t[i].name, base)) {
                *out = &t[i];
                return ERG_OK;
            }
        /* "a100-sxm" / "A100_SXM" / "a100-pcie": try the part before the suffix. */
        char *cut = strpbrk(base, "-_ ");
        if (!cut)
            break;
        *cut = '\0';
    }
    char names[256] = "";
    size_t l = 0;
    for (size_t i = 0; i < n && l + 40 < sizeof names; i++)
        l += (size_t)snprintf(names + l, sizeof names - l, "%s%s", i ? ", " : "", t[i].name);
    return erg_error_set(err, ERG_ENOTFOUND, "unknown GPU '%s' (the table has %s)", gpu, names);
}
