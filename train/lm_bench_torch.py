#!/usr/bin/python3
"""train/lm_bench_torch.py - the PyTorch side of the target-training speed
comparison (NOTES.md, "Training a target: speed"): the training step of
lm_oracle.py (its model: the oracle folder's transformers shim; its loss,
clipping and torch.optim.AdamW), timed step by step on one thread, on the
batches of an lm_oracle case file. Not part of CI; needs Debian's
python3-torch.

usage: train/lm_bench_torch.py ORACLE_DIR CASE.json [--threads N]

ORACLE_DIR is the folder holding lm_oracle.py (outside this repository).
train/lm_bench.sh runs it and train/lm_case on the same case, in one run.
"""
import argparse
import json
import os
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("oracle")
ap.add_argument("case")
ap.add_argument("--threads", type=int, default=1)
a = ap.parse_args()
sys.path.insert(0, os.path.join(a.oracle, "shim"))
sys.path.insert(0, a.oracle)
import torch  # noqa: E402
from torch import nn  # noqa: E402
import oracle  # noqa: E402
import lm_oracle  # noqa: E402

torch.set_num_threads(a.threads)
case = json.load(open(a.case))
base = os.path.dirname(os.path.abspath(a.case))
wdir = case["weights"] if os.path.isabs(case["weights"]) else os.path.join(base, case["weights"])
if not os.path.exists(os.path.join(wdir, "config.json")):
    wdir = os.path.join(wdir, "target")
model, cfg = oracle.load_dir(wdir, lm_oracle.model_class(wdir))
model.train()
hp = case.get("adamw") or {}
opt = torch.optim.AdamW(model.parameters(), lr=hp.get("lr", 1e-3), betas=tuple(hp.get("betas", (0.9, 0.999))),
                        eps=hp.get("eps", 1e-8), weight_decay=hp.get("weight_decay", 0.01))
V = model.lm_head.weight.shape[0]
n_params = sum(p.numel() for p in model.parameters())
for s, batch in enumerate(case["batches"], start=1):
    ids = torch.tensor(batch["input_ids"], dtype=torch.long)
    b, T = ids.shape
    t0, c0 = time.perf_counter(), time.process_time()
    out = model(ids, position_ids=torch.arange(T)[None].expand(b, -1), past_key_values=None, use_cache=False)
    labels = ids[:, 1:]
    loss = nn.functional.cross_entropy(out.logits[:, :-1].reshape(-1, V), labels.reshape(-1))
    opt.zero_grad(set_to_none=False)
    loss.backward()
    if hp.get("max_grad_norm") is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), hp["max_grad_norm"])
    opt.step()
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    flops = (6 * n_params + 12 * cfg.num_hidden_layers * cfg.hidden_size * T) * b * T
    print(f"torch step {s}: loss {loss.item():.6f}  wall {dt:.3f} s  cpu {cpu:.3f} s  {b * T / cpu:.1f} tokens/s  "
          f"{flops / cpu / 1e9:.2f} GFLOP/s (cpu)", flush=True)
