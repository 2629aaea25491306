/* cmd_profile.c: `ergon profile`: make stage profiles (simulated GPU, client logs). */
#include "cli.h"
#include "ergon/client.h"
#include "ergon/gpu.h"
#include "ergon/profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage_profile(FILE *f)
{
    fprintf(f,
            "usage: ergon profile sim --gpu GPU --stages S [--model MODEL] [--microbatch-size B]\n"
            "                         [--min-freq MHZ] [--split-backward] -o profile.csv\n"
            "       ergon profile sim --info [--gpu GPU]\n"
            "       ergon profile logs DIR [--stages S] -o profile.csv\n"
            "       ergon profile run --gpu sim:GPU[:MODEL[:N]] [--stage S] [--iters N]\n"
            "                         [--min-freq MHZ] [--blocking-s SEC] -o profile.csv\n"
            "       ergon profile sparse --replay FULL.csv [--budget N] -o PRED.csv\n"
            "                         (see 'ergon profile sparse --help')\n"
            "\n"
            "sim   Write the stage profile (stage,instruction,frequency,time,energy) of MODEL\n"
            "      split into S pipeline stages on a simulated GPU, from ergon's DVFS model\n"
            "      (docs/sim-gpu.md): every supported clock from the maximum down to MHZ\n"
            "      (default: the GPU's usual profiling floor, 855 MHz on A100/A40), forward\n"
            "      and backward per stage, times in s and energies in J per microbatch.\n"
            "      The blocking (P2P wait) power the planner needs is printed to stderr.\n"
            "      --gpu      a100 | a40 | h100 | v100 (A100 and A40 are calibrated on the\n"
            "                 Perseus profiles; H100 and V100 are extrapolated)\n"
            "      --model    gpt3-xl (default) | gpt3-2.7b | gpt3-6.7b | bloom-3b | bert-large\n"
            "      --microbatch-size  sequences per microbatch (default: the model's)\n"
            "      --info     print the simulated GPU parameters (all GPUs, or --gpu) and exit\n"
            "      --split-backward  also write backward_input and backward_weight rows (the\n"
            "                 zero-bubble I and W halves of backward; model in docs/sim-gpu.md)\n"
            "\n"
            "logs  Turn the logs an ergon client wrote in DIR (instructions-<rank>.csv and\n"
            "      time-energy-<rank>.csv, one pair per rank = stage) into a stage profile.\n"
            "      Each record carries the SM clock that was active when it began and when\n"
            "      it ended; only records with the same clock at both ends count, labelled\n"
            "      with that clock (never with a hard-coded list). Rows are the mean time and\n"
            "      energy per (stage, instruction, clock) after dropping the first 10%% of\n"
            "      each group; energy comes from the cumulative energy samples, linearly\n"
            "      interpolated. The profile's energy_source column says where those samples\n"
            "      came from (counter, integrated: power integrated where the GPU's counter\n"
            "      was not trusted, model, or mixed; no column for logs that predate it).\n"
            "      Perseus-style logs (instruction,start,end plus a frequency\n"
            "      column; forward_microstep/backward_microstep) are accepted too.\n"
            "      --stages   expect exactly S ranks (default: every rank found in DIR)\n"
            "\n"
            "run   Profiling mode on the simulated GPU: sweep the SM clock from the highest\n"
            "      down to MHZ (default: the lowest supported) running N measured\n"
            "      iterations (one forward + one backward) per clock after one warm-up,\n"
            "      measuring with the energy counter, stop early after five energy\n"
            "      increases in a row past the first third, then measure the blocking\n"
            "      power for SEC seconds (default 1; printed to stderr). Real GPUs are\n"
            "      profiled the same way from the training loop (erg_client_profile).\n"
            "\n"
            "exit status: 0 success, 1 bad input (named), 2 usage error.\n");
}

static void print_info(const erg_sim_gpu_info *g)
{
    printf("%s (%s)%s\n", g->name, g->full_name, g->calibrated ? "" : " [extrapolated]");
    printf("  sm clocks          %d..%d MHz, step %d MHz (profile floor %d MHz)\n", g->min_freq_mhz,
           g->max_freq_mhz, g->step_mhz, g->profile_min_freq_mhz);
    printf("  memory clock       %d MHz\n", g->mem_freq_mhz);
    printf("  static power       %.2f W\n", g->static_power_w);
    printf("  dynamic power      %.2f W at max clock, voltage +%.0f%% from %.0f MHz\n",
           g->dynamic_power_w, g->voltage_rise * 100, g->knee_freq_mhz);
    printf("  memory power       %.2f W\n", g->memory_power_w);
    printf("  power cap          %.2f W\n", g->power_cap_w);
    printf("  blocking power     %.2f W\n", g->blocking_power_w);
    printf("  throughput         %.1f TFLOP/s at max clock, %.0f GB/s\n", g->tflops_at_max,
           g->mem_bandwidth_gbs);
}

static int profile_sim(int argc, char **argv)
{
    const char *gpu = NULL, *model = "gpt3-xl", *out = NULL;
    long stages = 0, mbs = 0, fmin = 0;
    bool info = false, split = false;
    static const cli_help help = {
        "usage: ergon profile sim --gpu GPU --stages S [--model MODEL] [--microbatch-size B]\n"
        "                         [--min-freq MHZ] [--split-backward] -o profile.csv\n"
        "       ergon profile sim --info [--gpu GPU]\n",
        "Write the stage profile (stage,instruction,frequency,time,energy) of MODEL split\n"
        "into S pipeline stages on a simulated GPU, from ergon's DVFS model\n"
        "(docs/sim-gpu.md): every supported clock from the maximum down to MHZ (default: the\n"
        "GPU's usual profiling floor, 855 MHz on A100/A40), forward and backward per stage,\n"
        "times in s and energies in J per microbatch. The blocking (P2P wait) power the\n"
        "planner needs is printed to stderr.\n",
        "exit status: 0 success, 1 bad input (named), 2 usage error.\n"};
    const cli_opt opts[] = {
        CLI_OPT_S("gpu", "GPU", &gpu,
                  "a100 | a40 | h100 | v100 (A100 and A40 are calibrated on the\n"
                  "Perseus profiles; H100 and V100 are extrapolated)"),
        CLI_OPT_STAGES(&stages, "pipeline stages the model is split into"),
        CLI_OPT_S("model", "MODEL", &model,
                  "gpt3-xl (default) | gpt3-2.7b | gpt3-6.7b | bloom-3b | bert-large"),
        CLI_OPT_L("microbatch-size", "B", &mbs, 1, 4096,
                  "sequences per microbatch (default: the model's)"),
        CLI_OPT_L("min-freq", "MHZ", &fmin, 1, 100000, "the lowest clock profiled"),
        CLI_OPT_B("split-backward", &split,
                  "also write backward_input and backward_weight rows (the\n"
                  "zero-bubble I and W halves of backward; model in docs/sim-gpu.md)"),
        CLI_OPT_B("info", &info,
                  "print the simulated GPU parameters (all GPUs, or --gpu) and exit"),
        {.name = "output",
         .short_name = 'o',
         .kind = CLI_OPT_STR,
         .arg = "FILE",
         .dest = &out,
         .help = "the profile CSV"},
        CLI_OPTS_END,
    };
    int prc = cli_opts_parse_all("profile sim", argc, argv, opts, &help);
    if (prc)
        return prc == CLI_HELP ? CLI_OK : prc;
    erg_error err;
    if (info) {
        if (gpu) {
            const erg_sim_gpu_info *g;
            if (erg_sim_gpu_find(gpu, &g, &err))
                return cli_report("profile sim", &err);
            print_info(g);
        } else
            for (size_t i = 0; i < erg_sim_gpu_count(); i++)
                print_info(erg_sim_gpu_at(i));
        return CLI_OK;
    }
    if (!gpu)
        return cli_usage_error("profile sim", "--gpu is required");
    if (!stages)
        return cli_usage_error("profile sim", "--stages is required");
    if (!out)
        return cli_usage_error("profile sim", "-o FILE is required");
    const erg_sim_gpu_info *g;
    if (erg_sim_gpu_find(gpu, &g, &err))
        return cli_report("profile sim", &err);
    erg_profile *p = NULL;
    if (erg_sim_profile_kinds(gpu, model, (int)stages, (int)mbs, (int)fmin, split, &p, &err))
        return cli_report("profile sim", &err);
    erg_status st = erg_profile_write_csv(p, out, &err);
    erg_profile_free(p);
    if (st)
        return cli_report("profile sim", &err);
    fprintf(stderr,
            "# simulated %s, %s, %ld stages: blocking power %.2f W (planner: "
            "--blocking-power %.2f)\n",
            g->name, model, stages, g->blocking_power_w, g->blocking_power_w);
    return CLI_OK;
}

typedef struct sim_loop {
    erg_gpu *gpu;
    int dev;
} sim_loop;

/* One simulated training iteration: a forward and a backward of microbatch
 * 0, each keeping the simulated GPU busy for the model's time. */
static erg_status sim_iteration(void *user, erg_client *c)
{
    sim_loop *l = user;
    for (int k = 0; k < 2; k++) {
        erg_error err;
        double t = 0;
        erg_status st = erg_client_instruction_begin(c, (erg_instr_kind)k, 0);
        if (!st)
            st = erg_gpu_sim_set_activity(l->gpu, l->dev, true, (erg_instr_kind)k, &t, &err);
        if (st)
            return st;
        struct timespec ts = {(time_t)t, (long)((t - (double)(time_t)t) * 1e9)};
        while (nanosleep(&ts, &ts) != 0)
            ;
        if ((st = erg_gpu_sim_set_activity(l->gpu, l->dev, false, ERG_FORWARD, NULL, &err)) ||
            (st = erg_client_instruction_end(c, (erg_instr_kind)k, 0)))
            return st;
    }
    return ERG_OK;
}

static int profile_run(int argc, char **argv)
{
    const char *spec = NULL, *out = NULL;
    long stage = 0, iters = 3, fmin = 0;
    double blocking_s = 1.0;
    static const cli_help help = {
        "usage: ergon profile run --gpu sim:GPU[:MODEL[:N]] [--stage S] [--iters N]\n"
        "                         [--min-freq MHZ] [--blocking-s SEC] -o profile.csv\n",
        "Profiling mode on the simulated GPU: sweep the SM clock from the highest down to MHZ\n"
        "(default: the lowest supported) running N measured iterations (one forward + one\n"
        "backward) per clock after one warm-up, measuring with the energy counter, stop\n"
        "early after five energy increases in a row past the first third, then measure the\n"
        "blocking power for SEC seconds (default 1; printed to stderr). Real GPUs are\n"
        "profiled the same way from the training loop (erg_client_profile).\n",
        "exit status: 0 success, 1 bad input (named), 2 usage error.\n"};
    const cli_opt opts[] = {
        CLI_OPT_S("gpu", "sim:GPU[:MODEL[:N]]", &spec, "the simulated GPUs"),
        CLI_OPT_L("stage", "S", &stage, 0, CLI_MAX_STAGES - 1, "the stage profiled (default 0)"),
        CLI_OPT_L("iters", "N", &iters, 1, 10000, "measured iterations per clock (default 3)"),
        CLI_OPT_L("min-freq", "MHZ", &fmin, 1, 100000, "the lowest clock profiled"),
        CLI_OPT_D("blocking-s", "SEC", &blocking_s, 0, 600,
                  "seconds of blocking-power measurement (default 1)"),
        {.name = "output",
         .short_name = 'o',
         .kind = CLI_OPT_STR,
         .arg = "FILE",
         .dest = &out,
         .help = "the profile CSV"},
        CLI_OPTS_END,
    };
    int prc = cli_opts_parse_all("profile run", argc, argv, opts, &help);
    if (prc)
        return prc == CLI_HELP ? CLI_OK : prc;
    if (!spec || strncmp(spec, "sim", 3))
        return cli_usage_error("profile run", "--gpu sim:GPU[:MODEL[:N]] is required (a real "
                                              "GPU is profiled from the training loop, see "
                                              "docs/runtime.md)");
    if (!out)
        return cli_usage_error("profile run", "-o FILE is required");
    erg_error err;
    erg_gpu *g = NULL;
    if (erg_gpu_open(spec, &g, &err))
        return cli_report("profile run", &err);
    int nstages = erg_gpu_count(g);
    if (stage >= nstages) {
        erg_gpu_close(g);
        return cli_usage_error("profile run",
                               "--stage %ld: stage %ld out of range 0..%d (the spec "
                               "has %d stage(s))",
                               stage, stage, nstages - 1, nstages);
    }
    int rc = CLI_OK;
    erg_client *c = NULL;
    erg_profile *p = NULL;
    double pb = 0;
    sim_loop loop = {g, (int)stage};
    if (erg_client_new(g, (int)stage, (int)stage, NULL, ERG_CLIENT_NO_SIGNALS, &c, &err) ||
        erg_client_profile(c, (int)stage, (int)fmin, (int)iters, sim_iteration, &loop, blocking_s,
                           &p, &pb, &err) ||
        erg_profile_write_csv(p, out, &err))
        rc = cli_report("profile run", &err);
    else if (blocking_s > 0)
        fprintf(stderr, "# measured blocking power of stage %ld: %.2f W\n", stage, pb);
    erg_profile_free(p);
    erg_client_close(c, NULL);
    erg_gpu_close(g);
    return rc;
}

static int profile_logs(int argc, char **argv)
{
    const char *dir = NULL, *out = NULL;
    long stages = 0;
    static const cli_help help = {
        "usage: ergon profile logs DIR [--stages S] -o profile.csv\n",
        "Turn the logs an ergon client wrote in DIR (instructions-<rank>.csv and\n"
        "time-energy-<rank>.csv, one pair per rank = stage) into a stage profile. Each record\n"
        "carries the SM clock that was active when it began and when it ended; only records\n"
        "with the same clock at both ends count, labelled with that clock. Rows are the mean\n"
        "time and energy per (stage, instruction, clock) after dropping the first 10% of each\n"
        "group; energy comes from the cumulative energy samples, linearly interpolated\n"
        "(docs/runtime.md). Perseus-style logs are accepted too.\n",
        "exit status: 0 success, 1 bad input (named), 2 usage error.\n"};
    const cli_opt opts[] = {
        CLI_OPT_STAGES(&stages, "expect exactly S ranks (default: every rank found in DIR)"),
        {.name = "output",
         .short_name = 'o',
         .kind = CLI_OPT_STR,
         .arg = "FILE",
         .dest = &out,
         .help = "the profile CSV"},
        CLI_OPTS_END,
    };
    int first = 0, prc = cli_opts_parse("profile logs", argc, argv, opts, &help, &first);
    if (prc)
        return prc == CLI_HELP ? CLI_OK : prc;
    if (argc - first > 1)
        return cli_usage_error("profile logs", "one directory only ('%s')", argv[first + 1]);
    dir = first < argc ? argv[first] : NULL;
    if (!dir)
        return cli_usage_error("profile logs", "the log directory is required");
    if (!out)
        return cli_usage_error("profile logs", "-o FILE is required");
    erg_error err;
    erg_profile *p = NULL;
    if (erg_profile_from_logs(dir, (int)stages, &p, &err))
        return cli_report("profile logs", &err);
    erg_status st = erg_profile_write_csv(p, out, &err);
    erg_profile_free(p);
    if (st)
        return cli_report("profile logs", &err);
    return CLI_OK;
}

int profile_sparse(int argc, char **argv); /* cmd_profile_sparse.c */

int cmd_profile(int argc, char **argv)
{
    if (argc < 2) {
        usage_profile(stderr);
        return CLI_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage_profile(stdout);
        return CLI_OK;
    }
    if (!strcmp(argv[1], "sim"))
        return profile_sim(argc - 1, argv + 1);
    if (!strcmp(argv[1], "logs"))
        return profile_logs(argc - 1, argv + 1);
    if (!strcmp(argv[1], "run"))
        return profile_run(argc - 1, argv + 1);
    if (!strcmp(argv[1], "sparse"))
        return profile_sparse(argc - 1, argv + 1);
    return cli_usage_error("profile", "unknown subcommand '%s' (sim, logs, run, sparse)", argv[1]);
}
