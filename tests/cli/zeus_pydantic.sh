#!/usr/bin/env bash
# zeus_pydantic.sh: checks against pydantic v1 itself (skips without pydantic; fails under CI=true): the dumps of a
# Zeus job parse with the Zeus models (RankInfo, FrequencySchedule, ProfilingResult lists, as
# Zeus's load_ranks/load_sched/load_prof parse them; models written from
# docs/zeus-protocol.md §2), and ergon serve accepts exactly the boolean spellings and
# variable-name cases that pydantic's BaseSettings accepts.
set -euo pipefail
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON:?}"
command -v curl >/dev/null || skip_or_fail "curl not installed"
# The first interpreter that has pydantic's v1 API (Debian's python3-pydantic is 1.10, installed
# by `make test`; a python3 earlier on PATH, e.g. pyenv's, may not see it).
PY3=""
for py in python3 /usr/bin/python3; do
  command -v "$py" >/dev/null || continue
  if "$py" -c "import pydantic.v1" 2>/dev/null || "$py" -c "import pydantic; assert pydantic.VERSION < '2'" 2>/dev/null; then
    PY3=$py; break
  fi
done
[ -n "$PY3" ] || skip_or_fail "pydantic (v1 API) not installed (Debian: python3-pydantic)"
work=$(mktemp -d)
pid=""
cleanup() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$work"
cat > freqs_pipeline_00000.py <<'PY'
[
[('forward', 1410), ('backward', 1395)],
[('forward', 1395), ('backward', 1410)],
]
PY
ZEUS_PFO_SCHEDULER_ARGS='{"solution_path": "freqs_pipeline_00000.py"}' \
  "$ERGON" serve --port 0 --db "$work/s.db" >"$work/out.txt" 2>"$work/log.txt" &
pid=$!
for _ in $(seq 600); do grep -q listening "$work/out.txt" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/out.txt")
u="http://127.0.0.1:$port"
job=$(curl -sf -X POST "$u/register_job" -d '{"job_id":"","pp_degree":2,"dp_degree":1,"tp_degree":1,"world_size":2,"job_metadata":null}')
job=${job//\"/}
for r in 0 1; do
  curl -sf -X POST "$u/register_rank/$job" -d "{\"rank\":$r,\"dp_rank\":0,\"pp_rank\":$r,\"tp_rank\":0,\"available_frequencies\":[1410,1395]}" >/dev/null
done
curl -s "$u/schedule/$job?rank=0" >/dev/null & c0=$!
curl -s "$u/schedule/$job?rank=1" >/dev/null & c1=$!
wait $c0 $c1
for r in 0 1; do
  curl -sf -X POST "$u/result/$job" -d "{\"rank\":$r,\"iter_time\":[1,1.5],\"iter_energy\":[10,12.25],\"time_breakdown\":{\"forward\":[[0.25],[0.5]]}}" >/dev/null
done
for _ in $(seq 50); do [ -f "dump/$job/0.prof.json" ] && break; sleep 0.1; done
"$PY3" - "dump/$job" <<'PY'
import sys
try:
    from pydantic.v1 import BaseModel, Field
except ImportError:
    from pydantic import BaseModel, Field
from typing import Dict, List, Tuple

class RankInfo(BaseModel):
    rank: int = Field(ge=0)
    dp_rank: int = Field(ge=0)
    pp_rank: int = Field(ge=0)
    tp_rank: int = Field(ge=0)
    available_frequencies: List[int]
class FrequencySchedule(BaseModel):
    rank: int = Field(ge=0)
    frequencies: List[Tuple[str, int]]
class ProfilingResult(BaseModel):
    rank: int = Field(ge=0)
    iter_time: List[float]
    iter_energy: List[float]
    time_breakdown: Dict[str, List[List[float]]] = {}
    energy_breakdown: Dict[str, List[List[float]]] = {}
class Ranks(BaseModel):
    __root__: List[RankInfo]
class Scheds(BaseModel):
    __root__: List[FrequencySchedule]
class Profs(BaseModel):
    __root__: List[ProfilingResult]

d = sys.argv[1]
ranks = Ranks.parse_file(d + "/ranks.json").__root__
assert [r.pp_rank for r in ranks] == [0, 1], ranks
scheds = Scheds.parse_file(d + "/0.sched.json").__root__
assert scheds[1].frequencies == [("forward", 1395), ("backward", 1410)], scheds
profs = Profs.parse_file(d + "/0.prof.json").__root__
assert profs[0].time_breakdown["forward"] == [[0.25], [0.5]] and profs[1].iter_energy[1] == 12.25
# and re-serialised by pydantic the files are byte-identical (ergon writes what Zeus writes)
for name, model in (("ranks.json", Ranks), ("0.sched.json", Scheds), ("0.prof.json", Profs)):
    text = open(d + "/" + name).read()
    assert model.parse_raw(text).json() == text, (name, text, model.parse_raw(text).json())
print("dumps ok")
PY
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""

# Boolean spellings and name cases: ergon serve against pydantic v1 BaseSettings.
"$PY3" - "$ERGON" <<'PY'
import os, subprocess, sys
try:
    from pydantic.v1 import BaseSettings, ValidationError
except ImportError:
    from pydantic import BaseSettings, ValidationError
class S(BaseSettings):
    dump_data: bool = True
    class Config:
        env_prefix = "zeus_pfo_"
values = ["1", "0", "on", "OFF", "t", "F", "true", "False", "y", "N", "yes", "NO", "TrUe",
          "", " yes", "2", "nope", "enable"]
base = {k: v for k, v in os.environ.items() if not k.lower().startswith(("zeus_pfo_", "perseus_"))}
# every spelling under the documented name, a few under other cases of it
cases = [("ZEUS_PFO_DUMP_DATA", v) for v in values]
cases += [(n, v) for n in ("zeus_pfo_dump_data", "Zeus_Pfo_Dump_Data") for v in ("YES", "off", "nope")]
for name, v in cases:
    if True:
        env = dict(base, **{name: v})
        old = dict(os.environ)
        os.environ.clear(); os.environ.update(env)
        try:
            ok = True
            want = S().dump_data
        except ValidationError:
            ok = False
        finally:
            os.environ.clear(); os.environ.update(old)
        # a bad boolean stops ergon serve before the (bad) port is looked at
        p = subprocess.run([sys.argv[1], "serve", "--port", "99999"], env=env,
                           capture_output=True, text=True)
        refused = "is not a boolean" in p.stderr
        assert refused == (not ok), (name, repr(v), ok, p.stderr)
print("booleans ok")
class T(BaseSettings):
    max_job_idle_time: int = 604800
    class Config:
        env_prefix = "zeus_pfo_"
for v in ["10", " 10 ", "+10", "1_000", "1__0", "1.5", "", "0x10"]:
    env = dict(base, ZEUS_PFO_MAX_JOB_IDLE_TIME=v)
    old = dict(os.environ)
    os.environ.clear(); os.environ.update(env)
    try:
        T(); ok = True
    except ValidationError:
        ok = False
    finally:
        os.environ.clear(); os.environ.update(old)
    # the idle time is read before --max-jobs, whose bad value stops it otherwise
    p = subprocess.run([sys.argv[1], "serve", "--max-jobs", "0"], env=env,
                       capture_output=True, text=True)
    assert p.returncode == 2, p.stderr
    refused = "ZEUS_PFO_MAX_JOB_IDLE_TIME" in p.stderr
    assert refused == (not ok), (repr(v), ok, p.stderr)
print("integers ok")
PY
echo ok
