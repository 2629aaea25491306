/* fuzz_server_handlers.c: the control-plane server's request handlers on arbitrary requests (no
 * sockets). */
#include "ergon/server.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * Input: "METHOD PATH[?QUERY]\n" then the body. The token $J in the path or
 * body is replaced by the id of a job the harness registered (2 ranks), and
 * $Z by a Zeus PFO job's (PointSolution3D, 2 stages), so the fuzzer reaches
 * the rank, schedule and result handlers of both wires. The server
 * lives across inputs (state accumulates, like a real server) and is
 * rebuilt every 200 inputs to bound its memory.
 */
static erg_server *srv;
static char job_id[512], zeus_id[512];
static char plan[512]; /* the Zeus job's plan file, removed at exit */
static void remove_plan(void)
{
    unlink(plan);
}
static long count;

static void handle(const char *method, const char *path, const char *query, const char *body,
                   size_t len, int *status, char **resp)
{
    const char *ct;
    *resp = NULL;
    erg_server_handle(srv, method, path, query, body, len, 0, status, resp, &ct);
}

static void setup(void)
{
    if (srv && ++count % 200)
        return;
    erg_server_free(srv);
    srv = NULL;
    erg_server_opts o;
    erg_server_opts_init(&o);
    o.db_path = ":memory:";
    o.dump_data = false;
    /* One configuration serves both protocols: Perseus jobs run PointSolution on the Zeus
     * plan below (2 all-max windows, then the plan, then the end). */
    static char zargs[600];
    if (!plan[0])
        atexit(remove_plan);
    snprintf(plan, sizeof plan, "/tmp/ergon-fuzz-zeus-plan-%d.py", (int)getpid());
    FILE *f = fopen(plan, "w");
    if (!f)
        abort();
    fputs("[\n[('forward', 1410), ('backward', 1395)],\n[('forward', 1395), ('backward', "
          "1410)],\n]\n",
          f);
    fclose(f);
    snprintf(zargs, sizeof zargs, "{\"solution_path\": \"%s\"}", plan);
    o.zeus_scheduler = "PointSolution3D";
    o.zeus_scheduler_args = zargs;
    erg_error err;
    if (erg_server_new(&o, &srv, &err))
        abort();
    int st;
    char *resp;
    const char *job = "{\"job_id\":\"\",\"pp_degree\":2,\"dp_degree\":1,\"tp_degree\":1,"
                      "\"world_size\":2,\"framework\":\"f\",\"model_name\":\"m\","
                      "\"partition_method\":\"p\",\"microbatch_size\":1,\"num_microbatches\":1}";
    handle("POST", "/register_job", NULL, job, strlen(job), &st, &resp);
    if (st != 200 || !resp || strlen(resp) > sizeof job_id)
        abort();
    /* the answer is a JSON string: strip the quotes */
    snprintf(job_id, sizeof job_id, "%.*s", (int)strlen(resp) - 2, resp + 1);
    erg_free(resp);
    const char *zjob = "{\"job_id\":\"\",\"pp_degree\":2,\"dp_degree\":1,\"tp_degree\":1,"
                       "\"world_size\":2,\"job_metadata\":\"fz\"}";
    handle("POST", "/register_job", NULL, zjob, strlen(zjob), &st, &resp);
    if (st != 200 || !resp || strlen(resp) > sizeof zeus_id)
        abort();
    snprintf(zeus_id, sizeof zeus_id, "%.*s", (int)strlen(resp) - 2, resp + 1);
    erg_free(resp);
}

/* Replace every "$J" by the job id and "$Z" by the Zeus job's into a new
 * malloc'd string. */
static char *subst(const char *s, size_t n, size_t *out_len)
{
    size_t jl = strlen(job_id), zl = strlen(zeus_id), cap = n + 1, k = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (s[i] == '$' && (s[i + 1] == 'J' || s[i + 1] == 'Z'))
            cap += jl > zl ? jl : zl;
    char *o = malloc(cap);
    for (size_t i = 0; i < n; i++) {
        if (i + 1 < n && s[i] == '$' && (s[i + 1] == 'J' || s[i + 1] == 'Z')) {
            const char *id = s[i + 1] == 'J' ? job_id : zeus_id;
            size_t l = strlen(id);
            memcpy(o + k, id, l);
            k += l;
            i++;
        } else {
            o[k++] = s[i];
        }
    }
    o[k] = 0;
    *out_len = k;
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    const char *text = (const char *)data;
    const char *nl = memchr(text, '\n', size);
    size_t head = nl ? (size_t)(nl - text) : size;
    size_t hl;
    char *line = subst(text, head, &hl);
    size_t bl = 0;
    char *body = nl ? subst(nl + 1, size - head - 1, &bl) : NULL;
    char *sp = strchr(line, ' ');
    const char *method = "GET", *path = line;
    if (sp) {
        *sp = 0;
        method = line;
        path = sp + 1;
    }
    char *q = strchr(path, '?');
    if (q)
        *q++ = 0;
    int status;
    char *resp;
    handle(method, path, q, body, bl, &status, &resp);
    if (!resp || status < 200 || status > 599)
        abort();
    erg_free(resp);
    free(line);
    free(body);
    return 0;
}
