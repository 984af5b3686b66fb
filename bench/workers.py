"""How many ``serve`` workers on PostgreSQL: directly and through PgBouncer (issue 25).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test .venv/bin/python bench/workers.py

Starts ``serve --workers N`` for each N of ``--workers`` (default 1,2,4),
each on a database of its own, once on PostgreSQL directly and once through
a PgBouncer in transaction pooling (bench/pooler.py), all at once; then, in
``--rounds`` rounds, measures every server in turn (the order rotating from
round to round, so drift in the machine's load falls on each alike):

- ``kv``: single ``put`` calls at ``--concurrency`` connections (wrk, as
  bench/kv.py: ops/s);
- ``locks``: acquire + release cycles at ``--concurrency`` clients, each on
  its own lock (bench/locks.py: cycles/s).

Prints the medians per server, each against ``--workers 1`` of its kind,
with the 1-minute load average at each measurement (the box is shared).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import pooler

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _bench(name: str) -> Any:
    """bench/<name>.py, loaded by path (bench/ is no package)."""
    key = f"bench_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, Path(__file__).with_name(f"{name}.py"))
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="1,2,4", help="comma-separated serve --workers to compare")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0, help="measured seconds per server, work and round")
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    if not shutil.which("wrk"):
        print("bench/workers.py needs wrk (apt-get install -y wrk)", file=sys.stderr)
        return 2
    pooler.prepare()
    kv, locks = _bench("kv"), _bench("locks")
    locks.SECONDS = args.seconds
    from tests import conftest

    counts = [int(n) for n in args.workers.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="qa-bench-workers-"))
    bodies = tmp / "bodies.jsonl"
    bodies.write_text("\n".join(kv.call_body(c) for c in kv.make_calls(1, 2000, seed=1)) + "\n")
    results: dict[tuple[str, int], dict[str, list[float]]] = {}
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, tmp, True)
        stack.callback(conftest.drop_live_template)
        bouncer = stack.enter_context(pooler.bouncer())
        servers: dict[tuple[str, int], Any] = {}
        for n in counts:
            servers["direct", n] = stack.enter_context(conftest.run_server(workers=n))
            servers["pgbouncer", n] = stack.enter_context(pooler.pooled_server(bouncer, n))
        scripts = {}
        for key, live in servers.items():
            server = kv.Server(live.url, live.token, live.env["DATABASE_URL"], live.process, live.log_path)
            script = tmp / f"kv-{key[0]}-{key[1]}.lua"
            script.write_text(kv._LUA % {"bodies": bodies, "token": live.token})
            kv.server_check(server, bodies.read_text().splitlines()[0])
            scripts[key] = (server, script)
            locks.measure("http", 1, live.url, live.token)  # warm its connections
            results[key] = {"kv": [], "locks": [], "load": []}
        order = list(servers)
        for round_no in range(args.rounds):
            shift = round_no % len(order)
            for key in order[shift:] + order[:shift]:
                server, script = scripts[key]
                load = kv.loadavg()
                put = kv.wrk_run(server, script, args.concurrency, args.seconds)
                cycle = locks.measure("http", args.concurrency, server.url, server.token)
                results[key]["kv"].append(put.calls_per_s)
                results[key]["locks"].append(cycle["rate"])
                results[key]["load"].append(load)
                print(
                    f"round {round_no + 1} {key[0]:9} --workers {key[1]}: kv put {put.calls_per_s:7,.0f}/s"
                    f" (errors {put.errors}), locks {cycle['rate']:5,.0f} cycles/s (errors {cycle['errors']:.0f}),"
                    f" load {load:.2f}",
                    flush=True,
                )
    print(
        f"\nserve --workers N on {os.cpu_count()} CPUs, c{args.concurrency}, {args.rounds} rounds x "
        f"{args.seconds:g} s per work, medians; PgBouncer 1.18 transaction pooling (.ci/pgbouncer), "
        "DATABASE_LISTEN_URL direct\n"
    )
    print(
        "| database | --workers | kv put ops/s | vs 1 worker | locks cycles/s | vs 1 worker | runs kv; locks | load |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for kind in ("direct", "pgbouncer"):
        base = results[kind, counts[0]]
        for n in counts:
            r = results[kind, n]
            kv_med, locks_med = statistics.median(r["kv"]), statistics.median(r["locks"])
            print(
                f"| {kind} | {n} | {kv_med:,.0f} | {kv_med / statistics.median(base['kv']):.2f}x "
                f"| {locks_med:,.0f} | {locks_med / statistics.median(base['locks']):.2f}x "
                f"| {'/'.join(f'{v:.0f}' for v in r['kv'])}; {'/'.join(f'{v:.0f}' for v in r['locks'])} "
                f"| {'/'.join(f'{v:.1f}' for v in r['load'])} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
