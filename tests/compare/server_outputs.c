/* server_outputs.c: every scheduler class of the server (srv_sched_*: the internal API every
 * wire drives) and the plan-file loaders, run on deterministic synthetic results; prints each
 * window's schedule, every file a scheduler writes into the dump directory and every error, so
 * that two builds can be compared byte for byte (tools/same_server_outputs.sh builds and runs
 * it). Not a test: it has no expected output of its own. */
#include "server/server_internal.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static erg_status wf(void *u, const char *name, const char *data, size_t len, erg_error *err)
{
    (void)u, (void)err;
    printf("FILE %s %zu\n%.*s\n", name, len, (int)len, data);
    return ERG_OK;
}

static int STATES[] = {1410, 1305, 1200, 1095, 990, 885, 780};

static double tm(int stage, int kind, int f)
{
    return (0.01 + 0.003 * stage + 0.002 * kind) * 1410.0 / f + 0.0001 * (f % 7);
}
static double pw(int stage, int f)
{
    return 80 + 0.1 * f + 5 * stage;
}

static void results(const srv_sched_ctx *c, int **sched, srv_result *r, int w)
{
    for (int s = 0; s < c->num_stages; s++) {
        json_t *o = json_object(), *it = json_array(), *ie = json_array();
        json_t *tb = json_object(), *eb = json_object(), *wb = json_object();
        const char *names[] = {"forward", "backward"};
        int codes[] = {SRV_I_FORWARD, SRV_I_BACKWARD};
        for (int k = 0; k < 2; k++) {
            json_t *ta = json_array(), *ea = json_array(), *wa = json_array();
            for (int i = 0; i < 5; i++) {
                json_t *t1 = json_array(), *e1 = json_array(), *w1 = json_array();
                for (int j = 0; j < c->n_instrs[s]; j++)
                    if (c->instrs[s][j] == codes[k]) {
                        double t = tm(s, k, sched[s][j]) * (1 + 0.01 * ((i + w) % 3));
                        json_array_append_new(t1, json_real(t));
                        json_array_append_new(e1, json_real(t * pw(s, sched[s][j])));
                        json_array_append_new(w1, json_real(0.001 * ((j + s + w) % 4)));
                    }
                json_array_append_new(ta, t1);
                json_array_append_new(ea, e1);
                json_array_append_new(wa, w1);
            }
            json_object_set_new(tb, names[k], ta);
            json_object_set_new(eb, names[k], ea);
            json_object_set_new(wb, names[k], wa);
        }
        for (int i = 0; i < 5; i++) {
            double t = 0, e = 0;
            for (int j = 0; j < c->n_instrs[s]; j++) {
                int k = c->instrs[s][j] == SRV_I_BACKWARD;
                double x = tm(s, k, sched[s][j]) * (1 + 0.01 * ((i + w) % 3));
                t += x;
                e += x * pw(s, sched[s][j]);
            }
            json_array_append_new(it, json_real(t));
            json_array_append_new(ie, json_real(e));
        }
        json_object_set_new(o, "iter_time", it);
        json_object_set_new(o, "iter_energy", ie);
        json_object_set_new(o, "time_breakdown", tb);
        json_object_set_new(o, "energy_breakdown", eb);
        json_object_set_new(o, "wait_breakdown", wb);
        erg_error err;
        if (erg__srv_result_from_json(o, &r[s], &err))
            printf("RESULT ERROR %s\n", err.msg);
        json_decref(o);
    }
}

static void run(const char *name, const char *args, int mode, int nst)
{
    /* 2 stages, M = 2, 1F1B orders: stage 0 F F B B, stage 1 F B F B; p2p between. */
    static int i0[] = {SRV_I_FORWARD,  SRV_I_P2P, SRV_I_FORWARD,
                       SRV_I_BACKWARD, SRV_I_P2P, SRV_I_BACKWARD};
    static int i1[] = {SRV_I_FORWARD, SRV_I_BACKWARD, SRV_I_P2P, SRV_I_FORWARD, SRV_I_BACKWARD};
    int n[2] = {6, 5};
    int *ins[2] = {i0, i1};
    srv_sched_ctx c = {0};
    c.num_stages = 2;
    c.n_instrs = n;
    c.instrs = ins;
    c.states = STATES;
    c.n_states = nst;
    c.mode = mode;
    c.job_dir = "/nonexistent-job-dir";
    c.profile_csv_name = "profile.csv";
    c.write_file = wf;
    printf("=== %s %s mode %d states %d\n", name, args, mode, nst);
    json_t *a = json_loads(args, 0, NULL);
    erg_error err = {0};
    erg_status st = erg__srv_sched_check_args(name, a, &err);
    printf("check: %d %s\n", st, st ? err.msg : "");
    const srv_sched_class *cls = erg__srv_sched_find(name);
    printf("class: %s %d\n", cls ? cls->name : "-", cls ? cls->fixed_mode : -9);
    srv_sched *s = NULL;
    st = erg__srv_sched_new(name, a, &c, &s, &err);
    json_decref(a);
    printf("new: %d %s\n", st, st ? err.msg : "");
    if (st)
        return;
    for (int w = 0; w < 40; w++) {
        int **per = NULL;
        bool done = false;
        st = erg__srv_sched_next(s, &per, &done, &err);
        printf("w%d next %d %s done %d choice %ld:", w, st, st ? err.msg : "", done,
               erg__srv_sched_choice(s));
        if (st || done) {
            printf("\n");
            if (st)
                break;
            /* done is sticky */
            st = erg__srv_sched_next(s, &per, &done, &err);
            printf("again %d done %d\n", st, done);
            break;
        }
        for (int g = 0; g < 2; g++) {
            printf(" [");
            for (int i = 0; i < n[g]; i++)
                printf("%d ", per[g][i]);
            printf("]");
        }
        printf("\n");
        if (w == 3)
            erg__srv_sched_set_target(s, 1, 1.2);
        srv_result r[2];
        results(&c, per, r, w);
        st = erg__srv_sched_observe(s, r, &err);
        erg__srv_result_free(&r[0]);
        erg__srv_result_free(&r[1]);
        if (st) {
            printf("observe %d %s\n", st, err.msg);
            break;
        }
    }
    erg__srv_sched_free(s);
}

static void load(const char *path)
{
    int **st = NULL, *len = NULL, n = 0;
    erg_error err = {0};
    erg_status r = erg__srv_plan_load(path, &st, &len, &n, &err);
    printf("=== load %s: %d %s\n", path, r, r ? err.msg : "");
    if (!r) {
        for (int g = 0; g < n; g++) {
            printf("  stage %d:", g);
            for (int i = 0; i < len[g]; i++)
                printf(" %d", st[g][i]);
            printf("\n");
        }
        erg__srv_plan_stages_free(st, len, n);
    }
    srv_plan_pairs pp;
    r = erg__srv_plan_load_pairs(path, 0, &pp, &err);
    printf("=== pairs %s: %d %s\n", path, r, r ? err.msg : "");
    if (!r) {
        for (int g = 0; g < pp.n_stages; g++) {
            printf("  stage %d:", g);
            for (int i = 0; i < pp.lens[g]; i++)
                printf(" %s=%d", pp.names[g][i], pp.freqs[g][i]);
            printf("\n");
        }
        erg__srv_plan_pairs_free(&pp);
    }
}

int main(int argc, char **argv)
{
    const char *d = argc > 1 ? argv[1] : ".";
    char p[512];
    const char *files[] = {"kronos.py", "tuples.py",      "plan.json", "zb.py",        "bad1.py",
                           "bad2.py",   "empty_stage.py", "names.py",  "list_pairs.py"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p, sizeof p, "%s/%s", d, files[i]);
        load(p);
    }
    char a[1024];
    run("AllMax", "{\"num_iters\": 3}", SRV_MODE_POWER, 4);
    run("AllMaxFrequency3D", "{}", SRV_MODE_FREQUENCY, 4);
    run("AllMax", "{\"num_iters\": 0}", SRV_MODE_POWER, 4);
    run("AllMax", "{\"bogus\": 1}", SRV_MODE_POWER, 4);
    run("Nope", "{}", SRV_MODE_POWER, 4);
    run("TwoFrequencies", "{\"forward_freq\": 1305, \"backward_freq\": 1200}", SRV_MODE_FREQUENCY,
        4);
    run("TwoFrequencies", "{\"forward_freq\": 1306, \"backward_freq\": 1200}", SRV_MODE_FREQUENCY,
        4);
    run("TwoFrequencies", "{\"forward_freq\": 1306}", SRV_MODE_FREQUENCY, 4);
    run("InstructionProfiler", "{}", SRV_MODE_FREQUENCY, 7);
    run("InstructionProfiler", "{\"minimum_power_state\": 1000, \"energy_from_iterations\": true}",
        SRV_MODE_POWER, 7);
    run("InstructionProfiler", "{\"sparse\": true, \"budget\": 8}", SRV_MODE_FREQUENCY, 7);
    run("InstructionProfiler", "{\"schedule\": \"nope\"}", SRV_MODE_FREQUENCY, 7);
    run("zeus:InstructionProfiler", "{\"minimum_frequency\": 990}", SRV_MODE_FREQUENCY, 7);
    run("ZeusGlobalPowerLimit", "{}", SRV_MODE_POWER, 5);
    run("ZeusGlobalPowerLimit", "{\"deploy_optimum\": true, \"eta_knob\": 0.2}", SRV_MODE_POWER, 5);
    run("ZeusLocalPowerState", "{}", SRV_MODE_POWER, 7);
    run("ZeusLocalPowerState", "{\"balanced_phase\": \"backward\", \"deploy_optimum\": true}",
        SRV_MODE_POWER, 7);
    run("ZeusLocalPowerState", "{\"balanced_phase\": \"sideways\"}", SRV_MODE_POWER, 7);
    snprintf(a, sizeof a, "{\"solution_path\": \"%s/kronos.py\", \"warmup_iters\": 1}", d);
    run("PointSolution", a, SRV_MODE_FREQUENCY, 7);
    snprintf(a, sizeof a, "{\"solution_path\": \"%s/dir\", \"reverse\": true}", d);
    run("PointSolution", a, SRV_MODE_FREQUENCY, 7);
    snprintf(a, sizeof a, "{\"solution_path\": \"%s/tuples.py\"}", d);
    run("PointSolution", a, SRV_MODE_FREQUENCY, 7);
    run("PointSolution", "{\"solution_path\": \"/nonexistent\"}", SRV_MODE_FREQUENCY, 7);
    snprintf(a, sizeof a, "{\"solution_path\": \"%s/names.py\"}", d);
    run("zeus:PointSolution", a, SRV_MODE_FREQUENCY, 7);
    snprintf(a, sizeof a, "{\"solution_path\": \"%s/bad1.py\"}", d);
    run("zeus:PointSolution", a, SRV_MODE_FREQUENCY, 7);
    run("Frontier", "{\"frontier_dir\": \"/nonexistent\"}", SRV_MODE_FREQUENCY, 7);
    run("Frontier", "{}", SRV_MODE_FREQUENCY, 7);
    snprintf(a, sizeof a,
             "{\"frontier_dir\": \"%s/front\", \"warmup_iters\": 1, \"slowdown\": 1.05}", d);
    run("Frontier", a, SRV_MODE_FREQUENCY, 7);
    snprintf(a, sizeof a, "{\"frontier_dir\": \"%s/front\", \"deadline_s\": 0.0001}", d);
    run("Frontier3D", a, SRV_MODE_FREQUENCY, 7);
    snprintf(a, sizeof a, "{\"frontier_dir\": \"%s/front\", \"deadline_s\": 100}", d);
    run("Frontier3D", a, SRV_MODE_FREQUENCY, 7);
    run("EnvPipe",
        "{\"blocking_power_w\": 60, \"warmup_windows\": 1, \"finish_limit\": 1, \"final_windows\": "
        "2}",
        SRV_MODE_FREQUENCY, 7);
    run("EnvPipe", "{\"blocking_power_w\": 60, \"type\": \"uniform\", \"final_windows\": 1}",
        SRV_MODE_FREQUENCY, 7);
    run("EnvPipe", "{\"blocking_power_w\": -1}", SRV_MODE_FREQUENCY, 7);
    return 0;
}
