"""Rich tables for the milestone summaries (the same numbers as the JSON)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TB"


def human_count(n: float) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:,.1f}{unit}"
    return f"{n:,.0f}"


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left")
    for i, name in enumerate(columns):
        table.add_column(name, justify="left" if i == 0 else "right")
    return table


def show_scaling(summary: dict, console: Console) -> None:
    params = summary["parameters"]
    table = _table("parameters by component", "component", "parameters", "share")
    for name, count in params["by_component"].items():
        table.add_row(name, f"{count:,}", f"{count / params['total']:.1%}")
    table.add_row("total", f"{params['total']:,}", "100%", style="bold")
    console.print(table)

    table = _table(
        "parameter scaling: the course formula 12·L·d² + V·d, the exact count, and the count "
        "of each model built here (built: its count equals the exact one)",
        "model", "L", "d", "course", "exact", "built", "off by",
    )  # fmt: skip
    for r in summary["parameter_scaling"]:
        built = r["built_count"]
        check = (
            "-" if built is None else ("yes" if built == r["exact_formula"] else f"NO {built:,}")
        )
        table.add_row(
            r["name"], str(r["num_layers"]), str(r["embed_dim"]), human_count(r["course_formula"]),
            f"{r['exact_formula']:,}", check, f"{r['course_error']:+.1%}",
        )  # fmt: skip
    console.print(table)

    table = _table(
        "attention matrix per layer (batch 1): B·H·T²·4 predicted vs last_attention.nbytes",
        "seq_len T", "predicted", "measured", "match",
    )  # fmt: skip
    for r in summary["attention_memory"]:
        same = "yes" if r["predicted_bytes"] == r["measured_bytes"] else "NO"
        table.add_row(
            str(r["seq_len"]), human_bytes(r["predicted_bytes"]), human_bytes(r["measured_bytes"]),
            same,
        )  # fmt: skip
    console.print(table)

    kv = summary["kv_cache_bytes_per_token"]
    table = _table("KV cache per token of one sequence: 2·L·d·4 bytes", "model", "per token")
    for name, size in kv["predicted"].items():
        table.add_row(name, human_bytes(size))
    console.print(table)
    console.print(
        f"KV cache of this model, measured: {kv['measured_this_model']:,} bytes per token "
        f"(predicted {kv['predicted']['this model']:,})"
    )

    mem = summary["training_memory"]
    table = _table("training memory of this model (float32)", "part", "measured", "predicted")
    for part in mem["measured"]:
        table.add_row(
            part.replace("_", " "),
            human_bytes(mem["measured"][part]),
            human_bytes(mem["predicted"][part]),
        )
    console.print(table)
    console.print(
        "activations: measured adds up every array the graph's operations made, counting "
        "again the reshape and permute views that share their input's memory, and each step of "
        "the LayerNorms and of the attention's scaling; predicted (estimate_memory) "
        "counts what a backward needs kept, about 10 (B, T, C) and 2 (B, T, 4C) arrays and 2 "
        "attention matrices per block, plus the embeddings and the logits",
        highlight=False,
    )

    speed = summary["generation_speed"]
    console.print(
        f"generation ({speed['new_tokens']} new tokens): "
        f"{speed['without_cache']:,.0f} tok/s without the KV cache, "
        f"{speed['with_cache']:,.0f} tok/s with it ({speed['speedup']:.1f}x"
        + ("; its steps in module 18's one numpy pass a token)" if speed.get("one_pass") else ")")
    )


def show_gpt(summary: dict, console: Console) -> None:
    t = summary["training"]
    console.print(
        f"validation loss {t['initial_val_loss']:.3f} -> {t['final_val_loss']:.3f} nats per token "
        f"({t['final_val_bits_per_char']:.3f} bits per character) in {t['steps']} steps "
        f"({t['seconds']:.1f} s of training this session)"
    )
    for s in summary["samples"]:
        label = "greedy" if s["greedy"] else f"temperature {s['temperature']}"
        label += f", top-k {s['top_k']}" if s.get("top_k") else ""
        label += f", top-p {s['top_p']}" if s.get("top_p") else ""
        penalty = s.get("repetition_penalty", 1.0)
        label += f", repetition penalty {penalty}" if penalty != 1.0 else ", no repetition penalty"
        console.print(f"[cyan]{label}[/cyan]", highlight=False)
        console.print(s["text"], markup=False, highlight=False)
    show_scaling(summary, console)
