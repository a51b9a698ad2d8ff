"""``bench_suite.py``'s records as pages: one run's table (``markdown``), and the records
of a timed suite joined per task (``summary``, ``summary_markdown``, for ``--summary DIR``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from common import TOLERANCE, Refused, read_record


def within_tolerance(record: dict[str, Any]) -> bool:
    """Whether a record's sample scored alike with ``hf`` and ``hf-prefix``."""
    return record["max_abs_loglik_diff"] <= TOLERANCE and record["predictions_equal"]


def markdown(report: dict[str, Any]) -> str:
    rows = report["tasks"]
    lines = [
        f"# hf vs hf-prefix, {report['machine']['date']}",
        "",
        f"Machine: {report['machine']['cpu']}, {report['machine']['cpus']} CPUs, "
        f"{report['machine']['torch_threads']} torch threads; batch size {report['batch_size']}; "
        f"model {report['model']}.",
        "",
        "| task | docs | build s | encode s | hf tokens | per-context | hf-prefix | "
        "hf / hf-prefix | sample docs | hf s | hf-prefix s | speed-up | projected hf s | "
        "projected hf-prefix s | max abs dll | same picks |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    totals = {"hf": 0.0, "hf_prefix": 0.0, "build": 0.0, "encode": 0.0}
    tokens = {"hf": 0, "per_context": 0, "hf_prefix": 0}
    for row in rows:
        t, timing = row["tokens"], row.get("timing")
        for key in tokens:
            tokens[key] += t[key]
        totals["build"] += row["build_s"]
        totals["encode"] += row["encode_s"]
        cells = [
            row["task"],
            row["documents"],
            row["build_s"],
            row["encode_s"],
            f"{t['hf']:,}",
            f"{t['per_context']:,}",
            f"{t['hf_prefix']:,}",
            f"{t['hf'] / t['hf_prefix']:.2f}",
        ]
        if timing:
            hf, prefix = timing["hf"], timing["hf_prefix"]
            totals["hf"] += hf["projected_full_s"]
            totals["hf_prefix"] += prefix["projected_full_s"]
            cells += [
                row["sample_documents"],
                hf["wall_s"],
                prefix["wall_s"],
                f"{hf['wall_s'] / prefix['wall_s']:.2f}",
                f"{hf['projected_full_s']:,.0f}",
                f"{prefix['projected_full_s']:,.0f}",
                f"{row['max_abs_loglik_diff']:.1e}",
                "yes" if row["predictions_equal"] and row["is_greedy_equal"] else "**NO**",
            ]
        else:
            cells += [""] * 8
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines.append(
        f"| **all** | {sum(r['documents'] for r in rows):,} | {totals['build']:.0f} | "
        f"{totals['encode']:.0f} | {tokens['hf']:,} | {tokens['per_context']:,} | "
        f"{tokens['hf_prefix']:,} | {tokens['hf'] / max(1, tokens['hf_prefix']):.2f} | | | | | "
        f"{totals['hf'] / 3600:.2f} h | {totals['hf_prefix'] / 3600:.2f} h | | |"
    )
    return "\n".join(lines) + "\n"


def summary(folder: Path) -> dict[str, Any]:
    """The records of ``folder`` joined per task (parts summed when all are there)."""
    from lm_eval_dcpmi import _paper as paper

    by_task: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(folder.glob("*.json")):
        if path.name != "suite.json":
            fix = "move it out of the folder, or run --full again for its task"
            record = read_record(path, fix)
            if not isinstance(record, dict) or "task" not in record:
                raise Refused(f"{path}: not a bench_suite --full record (no task): {fix}")
            by_task.setdefault(record["task"], []).append(record | {"file": path.name})
    # A suite time adds up one machine's records only: by the CPU's name, and by its
    # vector extensions where recorded (older records lack them).
    by_cpu: dict[str, list[str]] = {}
    by_isa: dict[str, list[str]] = {}
    for r in (r for records in by_task.values() for r in records):
        cpu = r["machine"]["cpu"]
        by_cpu.setdefault(cpu, []).append(r["file"])
        if "isa" in r["machine"]:
            by_isa.setdefault(f"{cpu} ({' '.join(r['machine']['isa'])})", []).append(r["file"])
    machines = by_isa if len(by_isa) > 1 else by_cpu
    if len(machines) > 1:
        raise SystemExit(
            f"{folder}: records of {len(machines)} CPUs: "
            + "; ".join(f"{cpu}: {', '.join(names)}" for cpu, names in machines.items())
            + ". A suite time is one machine's: move the others to a folder of their own."
        )
    rows, missing = [], []
    for name in paper.paper_order():
        records = by_task.get(name, [])
        parts = {tuple(r["part"]) if r["part"] else (1, 1) for r in records}
        n = max((p[1] for p in parts), default=0)
        if not records or parts != {(k, n) for k in range(1, n + 1)}:
            missing.append(name)
            continue
        full = [r["full_split"] for r in records]
        total = {key: sum(f[key] for f in full) for key in (
            "wall_s", "seconds_at_peak", "hf_projected_s", "tree_tokens", "forwarded_positions",
            "useful_gflop", "scored_positions")}  # fmt: skip
        rows.append({
            "task": name, "documents": sum(r["documents"] for r in records), "parts": n,
            "dates": sorted({r["machine"]["date"] for r in records}),
            "load_before": [f["load_average_before"][0] for f in full],
            "load_after": [f["load_average_after"][0] for f in full],
            **{k: round(v, 1) for k, v in total.items()},
            "tokens_per_s": round(total["tree_tokens"] / total["wall_s"], 1),
            "efficiency": round(total["seconds_at_peak"] / total["wall_s"], 3),
            "hf_ratio": round(total["hf_projected_s"] / total["wall_s"], 2),
        })  # fmt: skip
    past = [  # samples where hf-prefix and hf differ by more than TOLERANCE (or pick apart)
        f"{r['file']}: {r['max_abs_loglik_diff']:.2e}"
        + ("" if r["predictions_equal"] else ", predictions differ")
        for records in by_task.values()
        for r in records
        if not within_tolerance(r)
    ]
    out: dict[str, Any] = {"tasks": rows, "missing": missing, "samples_past_tolerance": past}
    if rows and not missing:
        wall = sum(r["wall_s"] for r in rows)
        out["suite"] = {
            "wall_s": round(wall, 1),
            "wall_h": round(wall / 3600, 2),
            "efficiency": round(sum(r["seconds_at_peak"] for r in rows) / wall, 3),
            "hf_projected_h": round(sum(r["hf_projected_s"] for r in rows) / 3600, 2),
        }
    return out


def summary_markdown(joined: dict[str, Any]) -> str:
    lines = [
        "# The suite with hf-prefix, each task's full split timed",
        "",
        "| task | docs | runs | wall s | tree tokens | tokens/s | useful GFLOP/s | "
        "efficiency | hf (projected) / hf-prefix | load before |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in joined["tasks"]:
        lines.append(
            f"| {r['task']} | {r['documents']:,} | {r['parts']} | {r['wall_s']:,.0f} | "
            f"{r['tree_tokens']:,.0f} | {r['tokens_per_s']:.0f} | "
            f"{r['useful_gflop'] / r['wall_s']:.0f} | {r['efficiency']:.0%} | "
            f"{r['hf_ratio']:.2f} | {', '.join(f'{x:.2f}' for x in r['load_before'])} |"
        )
    if "suite" in joined:
        suite = joined["suite"]
        lines += [
            "",
            f"Suite: **{suite['wall_h']} h** measured, efficiency "
            f"{suite['efficiency']:.0%}; hf projected {suite['hf_projected_h']} h.",
        ]
    else:
        lines += ["", f"Not yet a suite time: {len(joined['missing'])} tasks not recorded "
                  f"whole ({', '.join(joined['missing'])})."]  # fmt: skip
    past = "; ".join(joined.get("samples_past_tolerance", [])) or "none"
    lines += ["", f"Samples where hf-prefix and hf differ by more than {TOLERANCE:g} "
              f"(log-likelihood) or in a prediction: {past}."]  # fmt: skip
    return "\n".join(lines) + "\n"
