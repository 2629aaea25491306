#!/usr/bin/env bash
# e2e_bitwise_resnet.sh: clocks never change the math, on the torchvision ResNet: the losses of
# the one-process reference and of the 3-rank pipelined all-max run are bitwise identical step
# by step. torchvision is not in requirements.txt, so this runs on Debian's python3-torch
# 1.13 + python3-torchvision (make e2e-deps), i.e. the example's own loop (torch 1.13 has no
# torch.distributed.pipelining); the Llama model on PyTorch's runtime: e2e_bitwise.sh.
source "$(dirname "$0")/e2e_lib.bash"
need_deb_torchvision
PY=$DEB_PY
S=3 M=4 STEPS=3
common=(--model resnet --microbatches $M --steps $STEPS)
"$PY" "$EX/train.py" --stages $S "${common[@]}" --out "$tmp/ref" >/dev/null || fail "reference"
launch $S 90 "${common[@]}" --clock max --out "$tmp/max" >/dev/null 2>&1 || fail "all-max run"
losses "$tmp/ref/reference.json" >"$tmp/ref.txt"
[ "$(wc -l <"$tmp/ref.txt")" -eq $STEPS ] || fail "reference has no $STEPS losses"
losses "$tmp/max/result-$((S - 1)).json" >"$tmp/max.txt"
cmp -s "$tmp/ref.txt" "$tmp/max.txt" || {
  paste "$tmp/ref.txt" "$tmp/max.txt"; fail "pipeline losses differ from the reference"; }
echo "resnet: reference == pipelined all-max: $(tr '\n' ' ' <"$tmp/ref.txt")"
echo "PASS"
