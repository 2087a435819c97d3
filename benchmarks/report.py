"""The results table: values, ratios, the targets ("must reach") and PASS/MISS."""

from __future__ import annotations

from rich.table import Table

WIDE = 0.2  # (p90 - p10) / median above this is flagged

# metric -> (config it applies to or None for every config, "<=" or ">=", threshold)
TARGETS = {
    "forward": (None, "<=", 1.5),
    "train_small": ("small", "<=", 1.5),
    "train_medium": ("medium", "<=", 1.3),
    "gen_cached": (None, ">=", 1.0),
    "cache_speedup": (None, ">=", 4.0),
    "memory": ("medium", "<=", 1.2),
    "quality": (None, "<=", 0.05),
}


def _time(s: dict | None) -> str:
    if s is None:
        return "-"
    text = f"{s['median_ms']:.1f}"
    return f"{text} !{s['spread']:.0%}" if s["spread"] > WIDE else text


def _rate(s: dict | None) -> str:
    if s is None:
        return "-"
    text = f"{s['tokens_per_s']:.1f}"
    return f"{text} !{s['spread']:.0%}" if s["spread"] > WIDE else text


def _judge(key: str, config: str, value: float | None) -> tuple[str, str]:
    scope, op, limit = TARGETS[key]
    if scope is not None and scope != config:
        return "-", "-"
    if value is None:
        return f"{op} {limit}", "-"
    ok = value <= limit if op == "<=" else value >= limit
    return f"{op} {limit}", "[ok]PASS[/ok]" if ok else "[bad]MISS[/bad]"


def rows(results: dict) -> list[dict]:
    """One dict per table row (also written to the JSON as `table`)."""
    out = []

    def add(config, metric, ours, ref, ratio, key=None):
        target, status = _judge(key, config, ratio) if key else ("-", "-")
        out.append({"config": config, "metric": metric, "tinytorch": ours, "torch": ref,
                    "ratio": "-" if ratio is None else f"{ratio:.2f}", "target": target,
                    "status": status})  # fmt: skip

    for config, r in results["configs"].items():
        if "train_step" in r:
            fw, tr = r["forward"], r["train_step"]
            ratio = fw["tinytorch"]["median_ms"] / fw["torch"]["median_ms"]
            add(config, "forward ms (no grad)", _time(fw["tinytorch"]), _time(fw["torch"]), ratio,
                "forward")  # fmt: skip
            ratio = tr["tinytorch"]["median_ms"] / tr["torch"]["median_ms"]
            add(config, "train step ms", _time(tr["tinytorch"]), _time(tr["torch"]), ratio,
                f"train_{config}")  # fmt: skip
            tp = r["throughput"]
            ours, ref = tp["tinytorch"]["gflops"], tp["torch"]["gflops"]
            add(config, "train GFLOP/s", f"{ours:.1f}", f"{ref:.1f}", ours / ref)
            add(config, f"share of numpy matmul ({r['numpy_matmul_gflops']:.1f} GFLOP/s)",
                f"{tp['tinytorch']['share_of_numpy_matmul']:.0%}",
                f"{tp['torch']['share_of_numpy_matmul']:.0%}", None)  # fmt: skip
        if "generation" in r:
            g = r["generation"]
            for mode, key in (("cached", "gen_cached"), ("uncached", None)):
                ours, ref = g[f"tinytorch_{mode}"], g[f"torch_{mode}"]
                add(config, f"generate tokens/s, {mode.replace('un', 'no ')}", _rate(ours),
                    _rate(ref), ours["tokens_per_s"] / ref["tokens_per_s"], key)  # fmt: skip
            speed = g["tinytorch_cache_speedup"]
            add(config, f"KV cache speedup at {g['new_tokens']} tokens", f"{speed:.1f}x",
                f"{g['torch_cache_speedup']:.1f}x", speed, "cache_speedup")  # fmt: skip
            out[-1]["ratio"] = f"{speed:.2f} (tinytorch)"
        if "memory" in r:
            m = r["memory"]
            ours, ref = m["tinytorch"]["peak_mib"], m["torch"]["peak_mib"]
            add(config, f"peak train memory MiB ({m['steps']} steps)", f"{ours:.0f}",
                f"{ref:.0f}", ours / ref, "memory")  # fmt: skip
    q = results.get("quality")
    if q:
        gap = q["val_loss_gap"]
        add("small", f"final val loss ({q['steps']} steps)", f"{q['val_loss']['tinytorch']:.3f}",
            f"{q['val_loss']['torch']:.3f}", abs(gap), "quality")  # fmt: skip
        out[-1]["ratio"] = f"gap {gap:+.3f}"
        wall = q["wall_s"]
        add("small", "quality run wall time s", f"{wall['tinytorch']:.0f}", f"{wall['torch']:.0f}",
            wall["tinytorch"] / wall["torch"])  # fmt: skip
    return out


def table(results: dict) -> Table:
    t = Table(title="tinytorch vs PyTorch (CPU, float32, 2 threads)", title_justify="left")
    for name, justify in (("config", "left"), ("metric", "left"), ("tinytorch", "right"),
                          ("torch", "right"), ("ratio", "right"), ("must reach", "right"),
                          ("status", "left")):  # fmt: skip
        t.add_column(name, justify=justify)
    for row in rows(results):
        t.add_row(row["config"], row["metric"], row["tinytorch"], row["torch"], row["ratio"],
                  row["target"], row["status"])  # fmt: skip
    return t


NOTES = (
    "ratio = tinytorch / torch (time, memory, GFLOP/s, tokens/s); times are medians, "
    f"'!NN%' marks a wide spread, (p90 - p10) / median > {WIDE:.0%}.",
    "GFLOP/s = matmul FLOPs of forward + backward, 6*P*B*T + 12*L*B*T^2*C with P = 12*L*C^2 + C*V, "
    "over the step's median time; share = that / numpy's own matmul rate on the step's shapes.",
    "peak memory = peak RSS (VmHWM; ru_maxrss off Linux) of a child running the training steps "
    "minus that of the same child importing the libraries only.",
)


def markdown(results: dict) -> str:
    """RESULTS.md from a results JSON: date, machine, BLAS, the table and the notes."""
    m, blas = results["machine"], results["machine"]["numpy_blas"]
    lines = [
        "# tinytorch vs PyTorch on the CPU",
        "",
        f"Measured {results['date']} with `python -m benchmarks.run` "
        f"({'quick' if results['quick'] else 'full'} plan, {results['seconds']:.0f} s).",
        f"Machine: {m['cpu']}, {m['cores']} cores; Python {m['python']}, numpy {m['numpy']}, "
        f"torch {m['torch']} (BLAS: {m['torch_blas']}); float32, 2 threads each.",
        f"numpy BLAS: {blas['internal_api']} {blas['version']}, kernel {blas['kernel']}; "
        f"OPENBLAS_CORETYPE {blas['OPENBLAS_CORETYPE']}.",
        f"Load average (1 min) before / after: {results['load_before'][0]:.1f} / "
        f"{results['load_after'][0]:.1f}.",
        "",
        "| config | metric | tinytorch | torch | ratio | must reach | status |",
        "|---|---|--:|--:|--:|--:|---|",
    ]
    for r in results["table"]:
        status = r["status"].replace("[ok]", "").replace("[/ok]", "")
        status = status.replace("[bad]", "").replace("[/bad]", "")
        lines.append(f"| {r['config']} | {r['metric']} | {r['tinytorch']} | {r['torch']} | "
                     f"{r['ratio']} | {r['target']} | {status} |")  # fmt: skip
    return "\n".join([*lines, "", *(f"- {note}" for note in NOTES), ""])


if __name__ == "__main__":  # python -m benchmarks.report results.json > benchmarks/RESULTS.md
    import json
    import sys
    from pathlib import Path

    print(markdown(json.loads(Path(sys.argv[1]).read_text())), end="")
