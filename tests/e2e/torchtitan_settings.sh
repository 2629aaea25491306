#!/usr/bin/env bash
# torchtitan_settings.sh: ergon.integration.torchtitan's switches and settings, without a
# training run: --ergon.KEY VALUE switches become one --override.imports entry (JSON) placed
# where torchtitan's parser takes it (before its other arguments, or beside an
# --override.imports the user already gave, in both of its forms; on the CPU the attention
# override too); every bad setting is refused with a message naming it (unknown key, wrong
# type, plan with clock, a server with a plan, a clock that is not max or MHz, a switch
# without its value); and torchtitan's own ConfigManager parses the result: the override
# entries it keeps are ergon's, with the settings as given.
source "$(dirname "$0")/../lib/venv_lib.bash"
need_venv torch torchtitan.trainer
export HF_HUB_OFFLINE=1
"$VPY" - <<'PY' || { echo "FAIL: switches or settings"; exit 1; }
import json
from ergon.integration import torchtitan as tt
s, rest = tt.parse_switches(["--ergon.gpu", "sim:a100:gpt3-xl:4", "--module", "llama3",
                             "--ergon.plan=p.json", "--ergon.pace", "--ergon.window_steps", "2",
                             "--config", "llama3_debugmodel"])
assert s == {"gpu": "sim:a100:gpt3-xl:4", "plan": "p.json", "pace": True,
             "window_steps": 2}, s
assert rest == ["--module", "llama3", "--config", "llama3_debugmodel"], rest
args = tt.with_override(rest, s, cpu=True)
assert args[:3] == ["--override.imports", tt.TARGET + "=" + json.dumps(s, separators=(",", ":")),
                    tt.CPU_TARGET] and args[3:] == rest, args
mine = ["--module", "m", "--override.imports", "a.b.f", "--config", "c"]
assert tt.with_override(mine, {}, False) == ["--module", "m", "--override.imports",
                                            tt.TARGET + "={}", "a.b.f", "--config", "c"]
assert tt.with_override(["--override.imports=a.b.f"], {}, False) == [
    "--override.imports", "a.b.f", tt.TARGET + "={}"]
bad = [({"gpus": "x"}, "unknown torchtitan setting 'gpus'"),
       ({"window_steps": "two"}, "invalid literal"),
       ({"pace": "maybe"}, "pace wants true or false"),
       ({"scheduler_args": "[1]"}, "scheduler_args wants a dict"),
       ({"plan": "p.json", "clock": "max"}, "plan or clock"),
       ({"server": "http://x", "plan": "p.json"}, "with server"),
       ({"clock": "fast"}, "clock wants max or a clock in MHz")]
for settings, want in bad:
    try:
        tt.check_settings(settings)
    except ValueError as e:
        assert want in str(e), (settings, str(e))
    else:
        raise SystemExit("accepted %r" % settings)
try:
    tt.parse_switches(["--module", "m", "--ergon.plan"])
except ValueError as e:
    assert "--ergon.plan needs a value" in str(e), e
else:
    raise SystemExit("accepted --ergon.plan without a value")
from torchtitan.config import ConfigManager
cfg = ConfigManager().parse_args(args + ["--training.disable_cuda_graphs"])
got = cfg.override.imports
assert got == [(tt.TARGET, s), tt.CPU_TARGET], got
print("switches -> %s; %d bad settings refused; torchtitan's parser keeps %s"
      % (args[:2], len(bad) + 1, [g if isinstance(g, str) else g[0] for g in got]))
PY
echo "PASS"
