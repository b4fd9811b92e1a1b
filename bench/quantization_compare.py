"""Compare the quantization outputs of two workdirs of the same config (e.g. before/after a refactor):
python bench/quantization_compare.py BEFORE_DIR AFTER_DIR (prints every difference; 0 = no result changed)."""
import hashlib, json, sys
from pathlib import Path

A, B = Path(sys.argv[1]), Path(sys.argv[2])
def sha(p):
    b = p.read_bytes()
    if p.suffix == ".safetensors":  # header JSON parsed (its __metadata__ key order varies run to run) + data bytes
        import struct
        n = struct.unpack("<Q", b[:8])[0]
        return (json.loads(b[8:8 + n]), hashlib.sha256(b[8 + n:]).hexdigest())
    return hashlib.sha256(b).hexdigest()
def j(p): return json.loads(p.read_text())
bad = []
ma, mb = j(A / "results/quantization/metrics.json"), j(B / "results/quantization/metrics.json")
# runs
for ra, rb in zip(ma["runs"], mb["runs"]):
    for k in ("seed", "method", "act", "ppl", "nll", "test_tokens", "avg_act_bits", "block_bits", "bpw_linear"):
        if ra[k] != rb[k]: bad.append(("run", ra["method"], ra["act"], k, ra[k], rb[k]))
print("runs compared:", len(ma["runs"]), "vs", len(mb["runs"]))
for k in ("test_ppl_mean", "bpw_linear", "kotms", "sens", "model", "corpus"):
    if ma.get(k) != mb.get(k): bad.append((k, ma.get(k), mb.get(k)))
ca, cb = ma.get("cross_unlearning"), mb.get("cross_unlearning")
if ca:
    rows_b = {(r["model"], r["scheme"]): r for r in cb["rows"]}
    for r in ca["rows"]:
        s = rows_b[(r["model"], r["scheme"])]
        for k in ("leak_fp", "leak_q", "leak1_fp", "leak1_q", "bin_agreement", "rel_update", "greedy_forget_q", "greedy_retain_q"):
            if [r[k]] != s[k]: bad.append(("cross", r["model"], r["scheme"], k, r[k], s[k]))
        if "recovery" in r and [r["recovery"]] != s.get("recovery"): bad.append(("rho", r["model"], r["scheme"], r["recovery"], s.get("recovery")))
    print("cross rows compared:", len(ca["rows"]))
# byte-identical artefacts
files = ["data/quantization/tokens.safetensors", "models/quantization/kotms.safetensors", "models/quantization/kotms_log.json",
         "results/quantization/sens.json"]
files += [str(p.relative_to(A)) for p in A.glob("models/quantization/s*/*/quantized.safetensors")]
files += [str(p.relative_to(A)) for p in A.glob("results/quantization/s*/lac/*.json") if not p.name.endswith(".manifest.json")]
files += [str(p.relative_to(A)) for p in A.glob("models/quantization/unlearning/**/model.safetensors")]
files += [str(p.relative_to(A)) for p in A.glob("results/quantization/unlearning/**/samples.jsonl")]
for f in files:
    if sha(A / f) != sha(B / f): bad.append(("bytes differ", f))
print("byte-compared files:", len(files))
# eval jsons: every key of before equal in after
for p in [q for q in A.glob("results/quantization/s*/eval/*/*.json") if not q.name.endswith(".manifest.json")]:
    a, b = j(p), j(B / p.relative_to(A))
    for k, v in a.items():
        if k == "memory":
            for mk in ("bpw_linear", "n_linear_weights", "n_other_params", "total_bytes_fp32", "total_bytes_fp16"):
                if v.get(mk) != b[k].get(mk): bad.append(("memory", str(p), mk))
        elif k == "test":
            if {kk: vv for kk, vv in b[k].items() if kk != "window_nll"} != v: bad.append(("test", str(p)))
        elif b.get(k) != v: bad.append(("eval", str(p), k))
for p in A.glob("results/quantization/unlearning/**/metrics.json"):
    a, b = j(p), j(B / p.relative_to(A))
    if a != b: bad.append(("ul eval metrics differ", str(p)))
print("DIFFERENCES:", len(bad))
for x in bad: print("  ", x)
