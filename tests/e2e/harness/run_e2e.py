#!/usr/bin/python3
"""run_e2e.py: the whole story of `make e2e` on one machine, checked: profile the example's
training job (examples/pytorch_pipeline/train.py, run through this directory's trainer.py,
which paces it on the simulated GPU and records the GPU's accounting) under ergon, build the
stage profile, plan the Perseus frontier, choose the plan for a 1% slowdown budget, train with
all-max clocks and with the plan, and compare.

    python3 tests/e2e/harness/run_e2e.py [--ergon build/ergon] [--out e2e-out] [--stages 4]

Steps (each prints the command it runs):
  0. control plane: `ergon serve` when this build has it (see docs/e2e.md), else the client
     runs in local mode and the sweep below plays InstructionProfiler's part;
  1. profiling sweep: the trainer runs a few iterations at each clock of --sweep, the ergon
     client logs every instruction with the clock that was active (client logs);
  2. `ergon profile logs` -> profile.csv;
  3. `ergon plan perseus` -> frontier/;
  4. `ergon choose --slowdown 1.01` -> plan.json;
  5. train at all-max clocks, then with plan.json (same seed, same data);
  6. `ergon emulate` of both plans on the measured profile;
  7. the table: iteration time and energy (measured and emulated) and both loss curves.
Exit status 0 when every check holds, 1 when one fails. The checks never depend on how
loaded the machine is: losses bitwise identical step by step; on the simulated GPU, its own
accounting (Gpu.sim_account: each instruction's model time and energy at the clock it had
when it began, however long the host took) shows every instruction at its plan's clock, its
busy time and energy equal `ergon emulate` of the same plans on the simulated GPU's profile
(`ergon profile sim`) to rounding, and the planned run's accounted energy below all-max's; the
plan's promise, a slowdown within the budget on the profile it was chosen on (choose's own
numbers: circular by construction, said so where printed). Wall-clock time and energy, and
their agreement with the emulation on the measured profile, are printed and decide nothing.
"""
import argparse
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crosscheck  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
EXAMPLE = os.path.join(ROOT, "examples", "pytorch_pipeline")
PY = sys.executable


def run(cmd, **kw):
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def launch(args, nproc, train_args, timeout):
    cmd = [PY, os.path.join(EXAMPLE, "launch.py"), "--nproc", str(nproc), "--timeout", str(timeout),
           "--", args.trainer] + train_args
    run(cmd)


def load_results(d, S):
    return [json.load(open(os.path.join(d, "result-%d.json" % r))) for r in range(S)]


def note_pace(results, what):
    """Printed only: how many instructions the CPU took longer for than the simulated GPU
    (a loaded machine). No check depends on it: they use the simulated GPU's accounting."""
    over = sum(r.get("overruns", 0) for r in results)
    n = sum(r.get("instructions", 0) for r in results)
    if n and over:
        print("note: %s: %d of %d instructions ran longer on the CPU than on the simulated GPU "
              "(load average %.1f on %d CPUs): wall-clock numbers measure this machine's load "
              "too" % (what, over, n, os.getloadavg()[0], os.cpu_count() or 1))


def accounting_checks(a, S, runs, blocking_w, p, backend):
    """The load-independent checks of each run (name, results, plan file): every instruction
    of every step ran at its plan's clock (the device's clock at its begin, in run order;
    rank order = plan order); on the simulated GPU also its accounted busy time and energy of
    every step equal `ergon emulate` of the plan on the simulated GPU's own profile within
    1e-6. Returns (checks, {name: (emulated time_s, accounted energy_j)})."""
    checks, acc = [], {}
    model_csv = p("profile-model.csv")
    if backend == "sim" and not os.path.exists(model_csv):
        run([a.ergon, "profile", "sim", "--gpu", a.sim_gpu, "--model", a.sim_model,
             "--stages", str(S), "-o", model_csv], stderr=subprocess.DEVNULL)
    for name, results, plan_file in runs:
        plan = json.load(open(plan_file))
        bad = []
        for r, res in enumerate(results):
            want = plan["stages"][r]["freq_mhz"]
            for row in res["steps"]:
                got = (row.get("sim") or {}).get("clocks")
                if got != want:
                    bad.append("rank %d step %d: %s" % (r, row["step"], [
                        (i, w, g) for i, (w, g) in enumerate(zip(want, got or [])) if w != g][:5]
                        or "ran %s instructions, the plan has %d" % (
                            len(got) if got is not None else "no accounted", len(want))))
        for b in bad[:5]:
            print("%s: instructions (index, planned, ran) at another clock: %s" % (name, b))
        checks.append(("%s: every instruction ran at its plan's clock (the GPU's clock at its "
                       "begin)" % name, not bad))
        if backend != "sim":
            continue
        q = dict(plan)  # the same clocks, emulated on the model's profile: no provenance
        for k in ("time_s", "energy_j", "provenance"):
            q.pop(k, None)
        q_file = p("%s-model.json" % name)
        json.dump(q, open(q_file, "w"))
        out = subprocess.run([a.ergon, "emulate", "--profile", model_csv, "--plan", q_file,
                              "--blocking-power", str(blocking_w), "--json"],
                             check=True, capture_output=True, text=True).stdout
        em = json.loads(out)
        T = em["time_s"]
        want_t = S * T - em["blocking_energy_j"] / blocking_w
        want_e = em["compute_energy_j"]
        steps = len(results[0]["steps"])
        bt = [sum(res["steps"][i]["sim"]["busy_time_s"] for res in results) for i in range(steps)]
        be = [sum(res["steps"][i]["sim"]["busy_energy_j"] for res in results)
              for i in range(steps)]
        wt = max(abs(x / want_t - 1) for x in bt)
        we = max(abs(x / want_e - 1) for x in be)
        acc[name] = (T, be[-1] + blocking_w * (S * T - bt[-1]))
        print("%s: accounted by the simulated GPU: busy %.6f s, %.4f J (emulated on its "
              "profile: %.6f s, %.4f J); iteration %.4f s, %.2f J"
              % (name, bt[-1], be[-1], want_t, want_e, T, acc[name][1]))
        checks.append(("%s: accounted busy time of every step = emulate's within 1e-6 (worst "
                       "%.1e)" % (name, wt), wt <= 1e-6))
        checks.append(("%s: accounted busy energy of every step = emulate's within 1e-6 "
                       "(worst %.1e)" % (name, we), we <= 1e-6))
    return checks, acc


def iteration_stats(results, skip):
    """Per step: time = slowest rank, energy = sum over ranks. Returns the minimum and the
    mean of time and energy over the steps after `skip`, and the last rank's losses. The
    minimum is what the checks use: on a shared machine other processes can only add time
    (and idle energy) to a step, never remove it."""
    n = len(results[0]["steps"])
    times = [max(r["steps"][i]["time_s"] for r in results) for i in range(n)]
    energies = [sum(r["steps"][i]["energy_j"] for r in results) for i in range(n)]
    k = min(skip, n - 1)
    t, e = times[k:], energies[k:]
    return (min(t), min(e), sum(t) / len(t), sum(e) / len(e),
            [(s["loss"], s["loss_hex"]) for s in results[-1]["steps"]])


def all_max_plan(plan_path, profile_csv, out_path):
    """The all-max plan for the chosen plan's pipeline: every instruction at its stage's
    highest profiled clock."""
    top = {}
    with open(profile_csv) as f:
        next(f)
        for line in f:
            st, _, fr = line.split(",")[:3]
            top[int(st)] = max(top.get(int(st), 0), int(fr))
    plan = json.load(open(plan_path))
    plan["method"] = "all-max"
    for st in plan["stages"]:
        st["freq_mhz"] = [top[st["stage"]]] * len(st["freq_mhz"])
    for k in ("time_s", "energy_j"):
        plan.pop(k, None)
    json.dump(plan, open(out_path, "w"), indent=1)


def emulate(ergon, profile, plan, blocking_w):
    out = subprocess.run([ergon, "emulate", "--profile", profile, "--plan", plan,
                          "--blocking-power", str(blocking_w), "--json"],
                         check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    return d["time_s"], d["energy_j"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ergon", default=os.path.join(ROOT, "build", "ergon"))
    ap.add_argument("--out", default=os.path.join(ROOT, "e2e-out"))
    ap.add_argument("--model", default="llama", choices=["llama", "resnet"])
    ap.add_argument("--stages", type=int, default=4)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--steps", type=int, default=6, help="iterations of each training run")
    ap.add_argument("--sweep", default=None,
                    help="profiling clocks HI:LO:STEP (default: the 38 highest clocks of the "
                         "--gpu device as `ergon gpu clocks` lists them, e.g. 1700:775:25 on "
                         "the fake AMD GPU; without a GPU library, the A100's 15 MHz grid from "
                         "1410 down to 855 MHz, the usual profiling floor)")
    ap.add_argument("--profile", default="sparse", choices=["sparse", "full"],
                    help="with the server: InstructionProfiler's sparse mode (default: measure "
                         "a few clocks per stage and instruction, predict the rest) or the full "
                         "sweep (every clock)")
    ap.add_argument("--allow-repeat-windows", action="store_true",
                    help="the >= 4x-fewer-windows check allows one extra window per repeated "
                         "measurement (the tests: other tests load the CPU)")
    ap.add_argument("--compare-full", action="store_true",
                    help="with --profile sparse and the server: also profile with the full sweep, "
                         "plan and train on that profile, and compare the savings")
    ap.add_argument("--window-steps", type=int, default=2)
    ap.add_argument("--sim-gpu", default="a100")
    ap.add_argument("--sim-model", default="gpt3-2.7b")
    ap.add_argument("--gpu", default="auto")
    ap.add_argument("--trainer", default=os.path.join(HERE, "trainer.py"),
                    help="the trainer each rank runs (default: this directory's trainer.py, "
                         "the example's train.py paced)")
    ap.add_argument("--slowdown", type=float, default=1.01)
    ap.add_argument("--timeout", type=float, default=300, help="per training run, seconds")
    ap.add_argument("--no-server", action="store_true",
                    help="do not use `ergon serve` even when this build has it (local mode)")
    a = ap.parse_args()
    if a.sweep is None:
        a.sweep = default_sweep(a.ergon, a.gpu)

    S, M = a.stages, a.microbatches
    if os.path.isdir(a.out):
        shutil.rmtree(a.out)
    os.makedirs(a.out)
    env_lib = os.path.join(os.path.dirname(os.path.abspath(a.ergon)), "libergon.so.0")
    if os.path.exists(env_lib):
        os.environ["ERGON_LIBRARY"] = env_lib
    # Only the fake vendor libraries (tests/fake_*) read it: their devices draw their clock's
    # power while a (fake) kernel runs and idle power between kernels, as a GPU does.
    os.environ.setdefault("FAKE_GPU_ACTIVITY", "1")
    for var in ("FAKE_NVML_DEVICES", "FAKE_AMDSMI_DEVICES"):  # one fake GPU per stage
        os.environ.setdefault(var, str(a.stages))
    common = ["--model", a.model, "--microbatches", str(M), "--gpu", a.gpu,
              "--sim-gpu", a.sim_gpu, "--sim-model", a.sim_model]
    p = lambda *x: os.path.join(a.out, *x)  # noqa: E731

    print("== 0. control plane", flush=True)
    server, url = None, None
    has_serve = subprocess.run([a.ergon, "serve", "--help"], capture_output=True).returncode == 0
    if has_serve and not a.no_server:
        server, url = start_server(a.ergon, p)
        print("ergon serve: %s (InstructionProfiler, dumps in %s)" % (url, p("dump")), flush=True)
    elif has_serve:
        print("--no-server: the client runs in local mode and the profiling sweep below takes "
              "InstructionProfiler's place", flush=True)
    else:
        print("`ergon serve` is not in this build: the client runs in local mode and the "
              "profiling sweep below takes InstructionProfiler's place", flush=True)
    try:
        return story(a, S, M, common, p, url)
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def start_server(ergon, p):
    srv = subprocess.Popen([ergon, "serve", "--port", "0", "--db", p("server.sqlite"),
                            "--dump", p("dump"), "--scheduler", "InstructionProfiler",
                            "--mode", "frequency", "--rank-timeout", "300",
                            # the Frontier job of step 5b names its frontier (under the output
                            # directory); clients may name files only inside --plans-dir
                            "--plans-dir", os.path.abspath(p())],
                           stdout=subprocess.PIPE, stderr=open(p("server.log"), "w"), text=True)
    line = srv.stdout.readline()
    if "listening on " not in line:
        srv.kill()
        raise SystemExit("ergon serve did not start: %r (see %s)" % (line, p("server.log")))
    return srv, line.split("listening on ")[1].strip()


def job_state(url, job):
    with urllib.request.urlopen("%s/v1/jobs/%s" % (url, urllib.parse.quote(job, safe="")),
                                timeout=10) as r:
        return json.load(r)


def profile_job(a, S, common, p, url, lo, sparse, tag):
    """Step 1 with the server: an InstructionProfiler job (sparse or full sweep)."""
    sargs = {"minimum_power_state": lo}
    if sparse:
        sargs["sparse"] = True
    launch(a, S, common + ["--server", url, "--scheduler", "InstructionProfiler",
                           "--scheduler-args", json.dumps(sargs),
                           "--power-states", a.sweep, "--window-steps", str(a.window_steps),
                           "--log-dir", p("logs" + tag), "--out", p("sweep" + tag),
                           "--job-file", p("job%s.txt" % tag)], a.timeout * 3)


def server_profile(a, p, url, tag):
    """Step 2 with the server: its CSV -> profile<tag>.csv, cross-checked with the client
    logs; returns the job id, the windows it took and the sparse summary (or None)."""
    run([a.ergon, "profile", "logs", p("logs" + tag), "-o", p("profile-logs%s.csv" % tag)])
    job = open(p("job%s.txt" % tag)).read().strip()
    csvs = glob.glob(os.path.join(p("dump"), glob.escape(job), "*.csv"))
    if len(csvs) != 1:
        raise SystemExit("expected one InstructionProfiler CSV in %s, found %s"
                         % (p("dump", job), csvs))
    shutil.copy(csvs[0], p("profile%s.csv" % tag))
    print("profile%s.csv = the server's InstructionProfiler output (%s)" % (tag, csvs[0]))
    sj = os.path.join(p("dump"), job, "InstructionProfiler-sparse.json")
    sparse = json.load(open(sj)) if os.path.exists(sj) else {}
    problems, info = crosscheck.crosscheck(os.path.join(p("dump"), job), p("logs" + tag),
                                           p("profile%s.csv" % tag),
                                           p("profile-logs%s.csv" % tag),
                                           sparse.get("warmup_windows", 2),
                                           bool(sparse.get("noisy_procedure")))
    print("cross-check with `ergon profile logs` on the client logs: %s" % info)
    for x in problems:
        print("cross-check: %s" % x)
    cross = ("the server's measured profile rows%s are consistent with their samples, the "
             "samples with the client logs, and `ergon profile logs` with the raw logs "
             "(crosscheck.py; %d problems)" % (tag, len(problems)), not problems)
    st = job_state(url, job)
    windows = st.get("window")
    print("server: job %s is %s after %s windows" % (job, st.get("state"), windows))
    info = None
    sj = os.path.join(p("dump"), job, "InstructionProfiler-sparse.json")
    if os.path.exists(sj):
        info = json.load(open(sj))
        print("sparse profiling: measured %d of %d (stage, instruction, clock) points (1/%.1f); "
              "%d windows after %d warm-up (%d times a (stage, instruction) measured its clock "
              "again, its samples not yet stable; %d clocks kept unconverged); the other rows are predicted (column "
              "`source`)" % (info["measured"], info["full_sweep"],
                             info["full_sweep"] / max(1, info["measured"]),
                             info["measure_windows"], info["warmup_windows"],
                             info["repeated_measurements"], info["unconverged_clocks"]))
    return job, windows, info, cross


def default_sweep(ergon_bin, gpu):
    """The 38 highest supported clocks of the --gpu device, as HI:LO:STEP; the A100 grid when
    the spec is a simulated GPU or no GPU library opens."""
    if gpu and not gpu.startswith("sim") and gpu != "none":
        r = subprocess.run([ergon_bin, "gpu", "clocks", "--gpu", gpu], capture_output=True,
                           text=True)
        clocks = [int(x) for x in r.stdout.split()] if r.returncode == 0 else []
        if len(clocks) >= 2:
            step = clocks[0] - clocks[1]
            lo = clocks[min(37, len(clocks) - 1)]
            if step > 0 and (clocks[0] - lo) % step == 0:
                return "%d:%d:%d" % (clocks[0], lo, step)
    return "1410:855:15"


def story(a, S, M, common, p, url):
    hi, lo, _ = (int(x) for x in a.sweep.split(":"))
    n_clocks = len(range(hi, lo - 1, -abs(int(a.sweep.split(":")[2]))))
    full_windows = 2 + n_clocks  # the full sweep: 2 warm-up windows, one per clock
    sparse = bool(url) and a.profile == "sparse"
    if url:
        print("\n== 1. profiling: InstructionProfiler job on the server, %s (clocks %s: %d; "
              "%d iterations per window)" % (
                  "sparse mode: a few clocks per stage and instruction measured, the others "
                  "predicted" if sparse else "full sweep: 2 warm-up windows, then every clock",
                  a.sweep, n_clocks, a.window_steps), flush=True)
        profile_job(a, S, common, p, url, lo, sparse, "")
    else:
        print("\n== 1. profiling sweep (clocks %s, %d+1 iterations each)"
              % (a.sweep, a.window_steps), flush=True)
        launch(a, S, common + ["--sweep", a.sweep, "--window-steps", str(a.window_steps),
                               "--log-dir", p("logs"), "--out", p("sweep")], a.timeout * 3)

    print("\n== 2. stage profile", flush=True)
    job, windows, sparse_info, crosscheck = None, None, None, None
    if url:
        job, windows, sparse_info, crosscheck = server_profile(a, p, url, "")
    else:
        run([a.ergon, "profile", "logs", p("logs"), "-o", p("profile-logs.csv")])
        shutil.copy(p("profile-logs.csv"), p("profile.csv"))
    sweep = load_results(p("sweep"), S)
    note_pace(sweep, "profiling")
    backend = sweep[0]["gpu"]
    blocking_w = 83.64
    if backend == "sim":
        info = subprocess.run([a.ergon, "profile", "sim", "--info", "--gpu", a.sim_gpu],
                              capture_output=True, text=True).stdout
        for line in info.splitlines():
            if "blocking" in line.lower():
                nums = [w for w in line.replace("W", " ").split() if _isfloat(w)]
                if nums:
                    blocking_w = float(nums[-1])
    elif sweep[0].get("paced"):
        # A fake GPU library (the trainer ran fake kernels): the blocking power is the idle
        # device's power, read as on a GPU (`ergon gpu list`: index, name, energy, power).
        out = subprocess.run([a.ergon, "gpu", "list", "--gpu", a.gpu], capture_output=True,
                             text=True, check=True).stdout
        mw = [ln.split("\t")[3] for ln in out.splitlines() if ln.startswith("0\t")]
        if mw and mw[0].endswith(" mW"):
            blocking_w = float(mw[0][:-3]) / 1000.0
        print("blocking power of the idle fake GPU 0 (ergon gpu list): %.2f W" % blocking_w)
    print("blocking power: %.2f W" % blocking_w)

    print("\n== 3. Perseus frontier", flush=True)
    run([a.ergon, "plan", "perseus", "--profile", p("profile.csv"), "--stages", str(S),
         "--microbatches", str(M), "--blocking-power", str(blocking_w), "--out", p("frontier"),
         "--formats", "csv,json"])

    print("\n== 4. plan for a %.0f%% slowdown budget" % ((a.slowdown - 1) * 100), flush=True)
    run([a.ergon, "choose", "--frontier", p("frontier"), "--slowdown", str(a.slowdown),
         "--out", p("plan.json")])
    all_max_plan(p("plan.json"), p("profile.csv"), p("all-max.json"))

    print("\n== 5. training: all-max clocks, then the plan", flush=True)
    launch(a, S, common + ["--steps", str(a.steps), "--clock", "max", "--out", p("all-max")],
           a.timeout)
    launch(a, S, common + ["--steps", str(a.steps), "--plan", p("plan.json"),
                           "--out", p("planned")], a.timeout)

    served = None
    if url:
        print("\n== 5b. the same choice served: a Frontier job (slowdown %.2f) on the server, "
              "one window of %d iterations" % (a.slowdown, a.steps), flush=True)
        launch(a, S, common + ["--server", url, "--scheduler", "Frontier", "--scheduler-args",
                               json.dumps({"frontier_dir": os.path.abspath(p("frontier")),
                                           "slowdown": a.slowdown}),
                               "--window-steps", str(a.steps), "--max-windows", "1",
                               "--job-file", p("job-frontier.txt"), "--out", p("served")],
               a.timeout)
        served = load_results(p("served"), S)
        note_pace(served, "served run")
        job2 = open(p("job-frontier.txt")).read().strip()
        st = job_state(url, job2)
        plan = json.load(open(p("plan.json")))
        same_clocks = all(r["power_states"][0] == plan["stages"][i]["freq_mhz"]
                          for i, r in enumerate(served))
        print("server: job %s is %s; Frontier choice %s; its clocks %s plan.json's"
              % (job2, st.get("state"), st.get("frontier_choice"),
                 "equal" if same_clocks else "DIFFER FROM"), flush=True)

    note_pace(load_results(p("all-max"), S), "all-max run")
    note_pace(load_results(p("planned"), S), "planned run")
    print("\n== 6. emulation on the measured profile", flush=True)
    em_max = emulate(a.ergon, p("profile.csv"), p("all-max.json"), blocking_w)
    em_plan = emulate(a.ergon, p("profile.csv"), p("plan.json"), blocking_w)

    t_max, e_max, tm_max, em_max_mean, loss_max = iteration_stats(load_results(p("all-max"), S), 1)
    t_plan, e_plan, tm_plan, em_plan_mean, loss_plan = iteration_stats(
        load_results(p("planned"), S), 1)
    over = sum(r["overruns"] for r in load_results(p("planned"), S) + load_results(p("all-max"), S))

    print("\n== 7. results: %s, S=%d, M=%d, GPU back-end %s%s" % (
        a.model, S, M, backend,
        " (simulated %s %s: clocks change time and energy through ergon's DVFS model; the "
        "math runs on the CPU)" % (a.sim_gpu, a.sim_model) if backend == "sim" else ""))
    print("iteration time (slowest rank) and energy (sum over ranks): the minimum over steps "
          "1..%d (step 0 is warm-up; the mean in parentheses)\n" % (a.steps - 1))
    print("%-9s %20s %22s %12s %12s %8s %8s" % ("run", "time_s (mean)", "energy_j (mean)",
                                               "emul time_s", "emul energy", "dt", "dE"))
    rows = [("all-max", t_max, e_max, tm_max, em_max_mean, em_max),
            ("planned", t_plan, e_plan, tm_plan, em_plan_mean, em_plan)]
    for name, t, e, tm, emn, (et, ee) in rows:
        print("%-9s %8.4f (%8.4f) %10.2f (%9.2f) %12.4f %12.2f %+7.2f%% %+7.2f%%"
              % (name, t, tm, e, emn, et, ee, 100 * (t / et - 1), 100 * (e / ee - 1)))
    print("(wall clock next to the emulation on the measured profile: printed only; a loaded "
          "machine adds to the one and measured the other)")
    print("\nplanned vs all-max: time %+.2f%%, energy %+.2f%% (emulated: time %+.2f%%, "
          "energy %+.2f%%)" % (100 * (t_plan / t_max - 1), 100 * (e_plan / e_max - 1),
                               100 * (em_plan[0] / em_max[0] - 1),
                               100 * (em_plan[1] / em_max[1] - 1)))
    # The verdict: the runs' own accounting on the simulated GPU (clocks, time and energy of
    # every instruction in simulated time), which does not depend on load.
    print()
    checks, acc = accounting_checks(a, S, [("all-max", load_results(p("all-max"), S),
                                            p("all-max.json")),
                                           ("planned", load_results(p("planned"), S),
                                            p("plan.json"))], blocking_w, p, backend)
    if acc:
        print("planned vs all-max, accounted by the simulated GPU: time %+.3f%%, energy %+.2f%% "
              "(the model's; the plan was chosen on the measured profile)"
              % (100 * (acc["planned"][0] / acc["all-max"][0] - 1),
                 100 * (acc["planned"][1] / acc["all-max"][1] - 1)))
    if over:
        print("note: %d instructions ran longer on the CPU than on the simulated GPU" % over)
    load = os.getloadavg()[0]
    if load > (os.cpu_count() or 1):
        print("note: load average %.1f on %d CPUs: other processes share this machine, "
              "wall-clock timings are noisy" % (load, os.cpu_count() or 1))
    print("\nloss curves (bitwise comparison of the float32 loss of every step):")
    print("%4s %12s %12s  %s" % ("step", "all-max", "planned", "bitwise"))
    same = len(loss_max) == len(loss_plan)
    for i, ((lm, hm), (lp, hp)) in enumerate(zip(loss_max, loss_plan)):
        print("%4d %12.6f %12.6f  %s" % (i, lm, lp, "identical" if hm == hp else "DIFFERENT"))
        same &= hm == hp
    checks.insert(0, ("losses bitwise identical step by step", same))
    if served is not None:
        t_srv, e_srv, _, _, loss_srv = iteration_stats(served, 1)
        print("\nserved by the Frontier job: time %.4f s (%+.2f%% vs all-max), energy %.2f J "
              "(%+.2f%%); losses %s"
              % (t_srv, 100 * (t_srv / t_max - 1), e_srv, 100 * (e_srv / e_max - 1),
                 "bitwise identical to all-max" if [h for _, h in loss_srv] ==
                 [h for _, h in loss_max] else "DIFFERENT"))
        checks.insert(1, ("Frontier job ran the chosen plan's clocks, same losses",
                          same_clocks and [h for _, h in loss_srv] == [h for _, h in loss_max]))
    if acc:
        checks.insert(1, ("planned run's accounted energy below all-max's",
                          acc["planned"][1] < acc["all-max"][1]))
    if crosscheck is not None:
        checks.append(crosscheck)
    if sparse and windows is not None:
        print("\nprofiling: %s windows with sparse profiling; a full sweep of the same %d clocks "
              "takes %d (%.1fx)" % (windows, n_clocks, full_windows,
                                    full_windows / max(1, windows)))
        if n_clocks >= 24:  # 4x fewer windows is possible from about 24 clocks (>= 4 per curve)
            extra = sparse_info["repeated_measurements"] if a.allow_repeat_windows else 0
            checks.append(("sparse profiling ran >= 4x fewer windows than a full sweep "
                           "(%s vs %d%s)" % (windows, full_windows,
                                             ", %d repeats allowed" % extra if extra else ""),
                           4 * (windows - extra) <= full_windows))
    cmp = None
    if a.compare_full and sparse:
        cmp = compare_full(a, S, M, common, p, url, lo, blocking_w, e_max, t_max, e_plan, t_plan,
                           windows)
        checks.extend(cmp.pop("checks"))
    # Circular by construction: choose's promise, on the profile the plan was chosen on.
    checks.insert(2, ("planned iteration time within %.0f%% of all-max, emulated on the "
                      "profile the plan was chosen on (choose's own promise)"
                      % ((a.slowdown - 1) * 100), em_plan[0] <= em_max[0] * a.slowdown + 1e-9))
    print()
    for what, ok in checks:
        print("%-4s %s" % ("ok" if ok else "FAIL", what))
    summary = {"backend": backend, "server": url, "job_id": job, "stages": S, "microbatches": M, "all_max": {
        "time_s": t_max, "energy_j": e_max, "emulated": em_max}, "planned": {
        "time_s": t_plan, "energy_j": e_plan, "emulated": em_plan},
        "losses_all_max": [x[1] for x in loss_max], "losses_planned": [x[1] for x in loss_plan],
        "profile": {"mode": "sparse" if sparse else ("full" if url else "local sweep"),
                    "windows": windows, "full_sweep_windows": full_windows,
                    "clocks": n_clocks, "sparse": sparse_info},
        "compare_full": cmp,
        "checks": {w: ok for w, ok in checks}}
    json.dump(summary, open(p("summary.json"), "w"), indent=1)
    print("\noutputs in %s/ (summary.json, profile.csv, frontier/, plan.json, logs/)" % a.out)
    return 0 if all(ok for _, ok in checks) else 1


def compare_full(a, S, M, common, p, url, lo, blocking_w, e_max, t_max, e_plan, t_plan, windows):
    """--compare-full: the full sweep's profile, its plan, a training run with it; the savings
    of both plans (measured and emulated on the full profile) side by side."""
    print("\n== 8. comparison: the full sweep (every clock of %s)" % a.sweep, flush=True)
    profile_job(a, S, common, p, url, lo, False, "-full")
    _, windows_full, _, cross_full = server_profile(a, p, url, "-full")
    run([a.ergon, "plan", "perseus", "--profile", p("profile-full.csv"), "--stages", str(S),
         "--microbatches", str(M), "--blocking-power", str(blocking_w), "--out",
         p("frontier-full"), "--formats", "csv,json"])
    run([a.ergon, "choose", "--frontier", p("frontier-full"), "--slowdown", str(a.slowdown),
         "--out", p("plan-full.json")])
    launch(a, S, common + ["--steps", str(a.steps), "--plan", p("plan-full.json"),
                           "--out", p("planned-full")], a.timeout)
    note_pace(load_results(p("planned-full"), S), "planned run (full-sweep plan)")
    t_full, e_full, _, _, _ = iteration_stats(load_results(p("planned-full"), S), 1)
    all_max_plan(p("plan-full.json"), p("profile-full.csv"), p("all-max-full.json"))
    em = {k: emulate(a.ergon, p("profile-full.csv"), p(f), blocking_w)
          for k, f in (("max", "all-max-full.json"), ("sparse", "plan.json"),
                       ("full", "plan-full.json"))}
    sav_sparse, sav_full = 100 * (1 - e_plan / e_max), 100 * (1 - e_full / e_max)
    em_sparse = 100 * (1 - em["sparse"][1] / em["max"][1])
    em_full = 100 * (1 - em["full"][1] / em["max"][1])
    print("\n%-22s %8s %14s %14s %18s" % ("profile", "windows", "time vs max", "energy saved",
                                          "emulated on full"))
    print("%-22s %8s %+13.2f%% %13.2f%% %17.2f%%" % ("sparse (the plan used)", windows,
                                                    100 * (t_plan / t_max - 1), sav_sparse,
                                                    em_sparse))
    print("%-22s %8s %+13.2f%% %13.2f%% %17.2f%%" % ("full sweep", windows_full,
                                                    100 * (t_full / t_max - 1), sav_full, em_full))
    print("difference in savings: %.2f points measured, %.2f points emulated on the full "
          "profile" % (sav_sparse - sav_full, em_sparse - em_full))
    checks = [cross_full, ("sparse and full-sweep plans save the same energy within 0.5 points "
               "(emulated on the full profile: %.2f vs %.2f %%)" % (em_sparse, em_full),
               abs(em_sparse - em_full) <= 0.5),
              ("sparse profiling ran >= 4x fewer windows than the full sweep (%s vs %s)"
               % (windows, windows_full), 4 * windows <= windows_full)]
    return {"windows_sparse": windows, "windows_full": windows_full,
            "saved_pct_sparse": sav_sparse, "saved_pct_full": sav_full,
            "emulated_saved_pct_sparse": em_sparse, "emulated_saved_pct_full": em_full,
            "planned_full": {"time_s": t_full, "energy_j": e_full}, "checks": checks}


def _isfloat(w):
    try:
        float(w)
        return True
    except ValueError:
        return False


if __name__ == "__main__":
    sys.exit(main())
