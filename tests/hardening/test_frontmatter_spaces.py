"""The fast frontmatter reader read `resolved: true` followed by a no-break space as True, where
`yaml.safe_load` reads the text "true\\u00a0" (issue 28; design §26). End to end, on a finding committed
to trunk by a signed, authorized commit: a Unicode space after `true` resolves nothing, so the finding
still holds its unit, in `status` and at dispatch. (The property over every Unicode space and line
break: tests/test_frontmatter.py.)"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.hardening.trunkfinding import FINDING, finding, refused


@pytest.mark.parametrize("space", ["\u00a0", "\u2003", "\u202f", "\u3000"])
def test_a_unicode_space_after_true_resolves_nothing_even_signed_on_trunk(ws: Any, space: Any) -> None:
    assert yaml.safe_load(f"resolved: true{space}") == {"resolved": f"true{space}"}  # text, to YAML
    ws.write(FINDING, finding())
    ws.commit("file F-x")
    ws.write(FINDING, finding(resolved="true" + space))
    ws.commit("resolve F-x\n\nAuthorized-by: alice")  # signed by alice, who holds the grant
    assert "F-x" in refused(ws, "unit", "dispatch", "u1")
    u1 = next(u for u in ws.json("status")["units"] if u["id"] == "u1")
    assert u1["held"] is True and u1["staleKnowledge"] == ["F-x"]
    done = ws.run("registry", "lint", "--json")
    assert done.returncode == 1 and json.loads(done.stdout)["errors"], done.stdout
