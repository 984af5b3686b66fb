"""What a large request costs the server in memory (issue 13).

Measured from the server's peak resident set (``VmHWM``), so the test
holds whatever copy the request makes on its way in, however briefly.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from tests.conftest import run_server

pytestmark = pytest.mark.live

MIB = 1024 * 1024


def _memory_mib(pid: int) -> dict[str, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    return {name: int(re.search(rf"{name}:\s+(\d+)", status).group(1)) / 1024 for name in ("VmRSS", "VmHWM")}


def test_a_64_mib_kv_call_costs_about_three_times_its_size_at_peak():
    """A 64 MiB KV call (one value far over the value limit) is answered
    413 and raises the server's peak memory by at most 3.5 times its size:
    the body, its decoded text and the parsed string each exist once. It
    was 4 times (257 MiB): the value was serialised again and encoded to
    be measured."""
    with run_server() as server:
        headers = {"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"}
        before = _memory_mib(server.process.pid)
        value = "x" * (64 * MIB - 200)
        body = f'{{"operations":[{{"op":"put","ns":"big","key":"k","forever":true,"value":"{value}"}}]}}'.encode()
        del value
        response = httpx.post(f"{server.url}/api/v1/kv", content=body, headers=headers, timeout=120)
        assert response.status_code == 413
        assert response.json()["reason"] == "kv_value_too_large"
        after = _memory_mib(server.process.pid)
        growth = after["VmHWM"] - before["VmRSS"]
        print(
            f"\npeak growth for a {len(body) / MIB:.0f} MiB KV call: {growth:.0f} MiB ({growth * MIB / len(body):.2f}x)"
        )
        assert growth <= 3.5 * len(body) / MIB
