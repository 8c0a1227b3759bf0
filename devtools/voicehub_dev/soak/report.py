"""The soak's figures as a table for people and as JSON for tools."""

from __future__ import annotations

import statistics
from typing import Any

from voicehub_dev.soak.run import SoakResult

__all__ = ["format_soak", "soak_json"]


def _spread(values: list[float]) -> dict[str, float | int]:
    if not values:
        return {"count": 0, "max": 0.0, "median": 0.0}
    return {
        "count": len(values),
        "max": round(max(values), 1),
        "median": round(statistics.median(values), 1),
    }


def _share(part: float, whole: float) -> float:
    return round(part / whole, 3) if whole > 0 else 0.0


def soak_json(result: SoakResult) -> dict[str, Any]:
    """The figures (see `voicehub soak --help` for what each means)."""
    tally, options = result.tally, result.options
    rss = [s.rss_mb for s in result.samples if s.rss_mb is not None]
    lag = [s.loop_lag_ms for s in result.samples if s.loop_lag_ms is not None]
    cores = [s.cpu_cores for s in result.samples if s.cpu_cores is not None]
    return {
        "settings": {
            "callers": options.calls,
            "minutes": options.minutes,
            "desk": options.desk,
            "seed": options.seed,
            "barge_in": options.barge_in,
            "hang_up": options.hang_up,
            "turn_pause": list(options.turn_pause),
            "follow_ups": list(options.follow_ups),
            "pause": list(options.pause),
            "ramp": options.ramp_seconds,
            "server": result.server,
            "stack": options.stack,
        },
        "provider_cpu_seconds": (
            round(result.provider_cpu_seconds, 1)
            if result.provider_cpu_seconds is not None
            else None
        ),
        "seconds": round(result.seconds, 1),
        "calls": tally.calls,
        "refused_busy": tally.refused_busy,
        "failed_calls": tally.failed_calls,
        "unanswered_calls": tally.unanswered_calls,
        "stuck_calls": result.stuck_calls,
        "turns": tally.turns,
        "caller_talk_share": _share(tally.caller_talk_seconds, tally.call_seconds),
        "agent_talk_share": _share(tally.agent_talk_seconds, tally.call_seconds),
        "barge_ins": tally.barge_ins,
        "hang_ups": tally.hang_ups,
        "delivery_attempts": tally.delivery_attempts,
        "deliveries": tally.deliveries,
        "results": tally.results,
        "results_lost": tally.results_lost,
        "results_held": tally.results_held,
        "results_spoken_twice": tally.results_spoken_twice,
        "results_unconfirmed": tally.results_unconfirmed,
        "talkover_ms": _spread(tally.talkover_ms),
        "yield_ms": _spread(tally.yield_ms),
        "server": {
            "rss_mb_first": round(rss[0], 1) if rss else None,
            "rss_mb_last": round(rss[-1], 1) if rss else None,
            "rss_mb_max": round(max(rss), 1) if rss else None,
            "loop_lag_ms_max": max(lag) if lag else None,
            "loop_lag_ms_median": round(statistics.median(lag), 1) if lag else None,
            # the server process's CPU (all threads), when the soak started it
            "cpu_cores_median": round(statistics.median(cores), 2) if cores else None,
            "cpu_cores_max": max(cores) if cores else None,
        },
        "samples": [
            {
                "at": s.at,
                "rss_mb": s.rss_mb and round(s.rss_mb, 1),
                "loop_lag_ms": s.loop_lag_ms,
                "calls": s.calls,
                "cpu_cores": s.cpu_cores,
            }
            for s in result.samples
        ],
        "failures": dict(tally.failures.most_common()),
        "lost": tally.lost,
        "held": tally.held,
        "spoken_twice": tally.twice,
    }


def format_soak(result: SoakResult) -> str:
    """A table of the figures, then the server's RSS and loop lag over time."""
    figures = soak_json(result)
    talk, yielded, server = figures["talkover_ms"], figures["yield_ms"], figures["server"]
    rows = [
        ("callers at once", figures["settings"]["callers"]),
        ("stack", figures["settings"]["stack"]),
        ("seconds", figures["seconds"]),
        ("calls (failed)", f"{figures['calls']} ({figures['failed_calls']})"),
        ("calls refused busy", str(figures["refused_busy"])),
        ("calls the agent never answered", figures["unanswered_calls"]),
        ("calls still live 2 min after the end", figures["stuck_calls"]),
        ("turns", figures["turns"]),
        (
            "talk share caller / agent",
            f"{figures['caller_talk_share']:.0%} / {figures['agent_talk_share']:.0%}",
        ),
        ("barge-ins / early hang-ups", f"{figures['barge_ins']} / {figures['hang_ups']}"),
        ("delivery attempts", figures["delivery_attempts"]),
        ("deliveries heard", figures["deliveries"]),
        ("results stored", figures["results"]),
        ("results lost", figures["results_lost"]),
        ("results held at the end (kept for the next call)", figures["results_held"]),
        ("results spoken twice", figures["results_spoken_twice"]),
        ("delivered, outcome unheard", figures["results_unconfirmed"]),
        ("talk-over ms (n, median, max)", f"{talk['count']}, {talk['median']}, {talk['max']}"),
        ("yield ms (n, median, max)", f"{yielded['count']}, {yielded['median']}, {yielded['max']}"),
        (
            "server RSS MB first / last / max",
            f"{server['rss_mb_first']} / {server['rss_mb_last']} / {server['rss_mb_max']}",
        ),
        (
            "loop lag ms median / max",
            f"{server['loop_lag_ms_median']} / {server['loop_lag_ms_max']}",
        ),
    ]
    if server["cpu_cores_median"] is not None:
        rows.append(
            (
                "server CPU cores median / max",
                f"{server['cpu_cores_median']} / {server['cpu_cores_max']}",
            )
        )
    if figures["provider_cpu_seconds"] is not None:
        seconds = figures["seconds"] or 1.0
        cpu = figures["provider_cpu_seconds"]
        rows.append(("fake Deepgram CPU s (% of a core)", f"{cpu} ({100 * cpu / seconds:.1f}%)"))
    lines = [f"{name:34s} {value}" for name, value in rows]
    lines += ["", "   time  calls  rss MB  loop lag ms  cores"]
    lines += [
        f"{s['at']:7.1f}  {s['calls']:5d}  {s['rss_mb'] or 0:6.1f}  {s['loop_lag_ms'] or 0:9.1f}"
        f"  {s['cpu_cores'] if s['cpu_cores'] is not None else '-':>5}"
        for s in figures["samples"]
    ]
    for error, count in figures["failures"].items():
        lines.append(f"FAILED CALLS ({count}): {error}")
    for problem in figures["lost"]:
        lines.append(f"LOST: {problem}")
    for problem in figures["spoken_twice"]:
        lines.append(f"SPOKEN TWICE: {problem}")
    return "\n".join(lines)
