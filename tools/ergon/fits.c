/* fits.c: read fixed cost-model coefficients for `ergon plan perseus --fits`. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CSV with header columns stage,instruction,a,b,c (others ignored; if
 * `case_name` is set, a `case` column selects the rows). */
int cli_read_fits(const char *path, const char *case_name, int S, double **out)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "ergon: %s: cannot open\n", path);
        return CLI_USER_ERROR;
    }
    double *v = calloc((size_t)S * 6, sizeof(double));
    char *seen = calloc((size_t)S * 2, 1);
    char line[4096];
    int col[6] = {-1, -1, -1, -1, -1, -1}; /* case, stage, instruction, a, b, c */
    static const char *names[] = {"case", "stage", "instruction", "a", "b", "c"};
    long ln = 0;
    int rc = CLI_OK;
    while (fgets(line, sizeof line, f)) {
        ln++;
        line[strcspn(line, "\r\n")] = '\0';
        char *fields[64];
        int nf = 0;
        for (char *p = line; nf < 64;) {
            fields[nf++] = p;
            char *c = strchr(p, ',');
            if (!c)
                break;
            *c = '\0';
            p = c + 1;
        }
        if (ln == 1) {
            for (int i = 0; i < nf; i++)
                for (int k = 0; k < 6; k++)
                    if (!strcmp(fields[i], names[k]))
                        col[k] = i;
            for (int k = 1; k < 6; k++)
                if (col[k] < 0) {
                    fprintf(stderr, "ergon: %s:1: missing column '%s'\n", path, names[k]);
                    rc = CLI_USER_ERROR;
                }
            if (case_name && col[0] < 0) {
                fprintf(stderr, "ergon: %s:1: no 'case' column for --fits-case\n", path);
                rc = CLI_USER_ERROR;
            }
            if (rc)
                break;
            continue;
        }
        int need = 0;
        for (int k = 0; k < 6; k++)
            if (col[k] + 1 > need)
                need = col[k] + 1;
        if (nf < need) {
            fprintf(stderr, "ergon: %s:%ld: expected at least %d fields\n", path, ln, need);
            rc = CLI_USER_ERROR;
            break;
        }
        if (case_name && strcmp(fields[col[0]], case_name))
            continue;
        char *end;
        long s = strtol(fields[col[1]], &end, 10);
        int kind = !strcmp(fields[col[2]], "forward")    ? 0
                   : !strcmp(fields[col[2]], "backward") ? 1
                                                         : -1;
        if (*end || s < 0 || kind < 0) {
            fprintf(stderr, "ergon: %s:%ld: bad stage '%s' or instruction '%s'\n", path, ln,
                    fields[col[1]], fields[col[2]]);
            rc = CLI_USER_ERROR;
            break;
        }
        if (s >= S)
            continue;
        for (int k = 0; k < 3; k++) {
            v[(2 * s + kind) * 3 + k] = strtod(fields[col[3 + k]], &end);
            if (*end) {
                fprintf(stderr, "ergon: %s:%ld: '%s' is not a number\n", path, ln,
                        fields[col[3 + k]]);
                rc = CLI_USER_ERROR;
            }
        }
        seen[2 * s + kind] = 1;
    }
    fclose(f);
    for (int i = 0; i < 2 * S && !rc; i++)
        if (!seen[i]) {
            fprintf(stderr, "ergon: %s: no fit for stage %d %s%s%s\n", path, i / 2,
                    i % 2 ? "backward" : "forward", case_name ? " in case " : "",
                    case_name ? case_name : "");
            rc = CLI_USER_ERROR;
        }
    free(seen);
    if (rc) {
        free(v);
        return rc;
    }
    *out = v;
    return CLI_OK;
}
