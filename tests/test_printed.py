"""What a pipe or a CI log gets (design §13): ids and names whole, where a terminal's room would cut
them to fit its width (an operator's review: `status` cut the second id it could not then copy,
and `controlroom --once` cut `sensor:osv-…` and `research-left-p…`)."""

from __future__ import annotations

from typing import Any

from tests.helpers import make_workspace, report_args


def test_status_and_once_print_ids_and_names_whole(tmp_path: Any) -> None:
    ws = make_workspace(tmp_path)
    ws.contract("research-left-pad-upstream", "research", "intelligence")
    long_id = "release-hardening-and-verification/manifest-signature-check"  # past 40 cells
    ws.contract(long_id, "implement", "implement")
    ws.commit("a unit with a long id", sign=False)
    for subject in ("first hold", "second hold"):
        ws.run(*report_args(subject=subject, affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    held_by = sorted(o["id"] for o in ws.json("obligations") if o["unit"] == "u1")
    assert len(held_by) == 2 and all(len(i) == 20 for i in held_by)
    line = next(li for li in ws.run("status").stdout.splitlines() if li.startswith("u1 "))
    assert ", ".join(sorted(held_by)) in line or ", ".join(reversed(held_by)) in line, line
    assert "…" not in line
    once = ws.run("controlroom", "--once").stdout
    row = next(li for li in once.splitlines() if li.startswith("research-left-pad-upstream "))
    assert "…" not in row.split()[0] and row.split()[1] == "research", row
    assert any(li.startswith(long_id + "  ") for li in once.splitlines()), once
    assert any(li.startswith(long_id + "  ") for li in ws.run("status").stdout.splitlines())
    header = next(li for li in once.splitlines() if li.startswith("id ") and "held by" in li)
    assert header.index("type") == row.index("research  ")  # the columns line up with the longest id
