"""An advisory under several names (design §24, D-131, D-306): the records of one vulnerability
in one feed or two, which is raised, what a later record says, and a withdrawal, through the real
`regulator` command."""

from __future__ import annotations

import json
import zipfile
from typing import Any

from tests.test_world_osv import LOCKFILES, LODASH, declare, record, sensor_signals, sensors_yaml, write_feed


def test_an_alias_a_later_feed_and_a_withdrawal(ws: Any) -> None:
    """An advisory known under another id raises nothing, from this feed or a second sensor's zip;
    a withdrawn advisory gets one advisory-withdrawn event on its signal's lifecycle."""
    zipped = ws.root / "feeds" / "mirror.zip"
    lockfiles = "".join(f"      {path}: [{', '.join(units)}]\n" for path, units in LOCKFILES.items())
    mirror = f"  mirror:\n    kind: osv\n    feed: feeds/mirror.zip\n    lockfiles:\n{lockfiles}"
    declare(ws, mirror)
    write_feed(ws.root / "feeds" / "osv", [LODASH])
    ws.run("sensors", "run", "osv", check=True)
    (lodash,) = sensor_signals(ws)
    ws.run("signals", "route", check=True)

    # the same vulnerability under a new id that names the known one as an alias
    alias = record(
        "OSV-2026-77", "npm", "lodash", [{"introduced": "0"}, {"fixed": "4.17.21"}],
        aliases=["GHSA-35jh-r3h4-6jhm"], summary="lodash again",
    )  # fmt: skip
    write_feed(ws.root / "feeds" / "osv", [alias])
    with zipfile.ZipFile(zipped, "w") as archive:  # as OSV publishes each ecosystem: all.zip of records
        archive.writestr("OSV-2026-77.json", json.dumps(alias))
        archive.writestr("CVE-2021-23337.json", json.dumps({**LODASH, "id": "CVE-2021-23337", "aliases": []}))
    ws.run("sensors", "run", "osv", check=True)
    ws.run("sensors", "run", "mirror", check=True)
    assert sensor_signals(ws) == [lodash]

    # a withdrawn record in another sensor's feed withdraws nothing that sensor did not raise (an
    # adversarial review: a fake record naming the real advisory as an alias withdrew its signal)
    fake = {**LODASH, "id": "FAKE-W", "aliases": [LODASH["id"]], "withdrawn": "2026-11-28T00:00:00Z"}
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("FAKE-W.json", json.dumps(fake))
    ws.run("sensors", "run", "mirror", check=True)
    assert not [e for e in ws.events("signals") if e["kind"] == "advisory-withdrawn"]

    # withdrawn: one event, on the signal's obligations' lifecycle, and only one
    withdrawn = {**LODASH, "withdrawn": "2026-11-28T00:00:00Z", "modified": "2026-11-28T00:00:00Z"}
    write_feed(ws.root / "feeds" / "osv", [withdrawn])
    ws.run("sensors", "run", "osv", check=True)
    ws.run("sensors", "run", "osv", check=True)
    events = [e for e in ws.events("signals") if e["kind"] == "advisory-withdrawn"]
    assert len(events) == 1 and events[0]["signal"] == lodash["id"] and events[0]["advisory"] == LODASH["id"]
    assert sensor_signals(ws) == [lodash]
    ob = ws.json("obligations")[0]["id"]
    shown = ws.run("obligation", "show", ob, check=True).stdout
    assert "advisory GHSA-35jh-r3h4-6jhm withdrawn (2026-11-28T00:00:00Z)" in shown
    assert ws.json("obligations")[0]["status"] == "open"  # withdrawn is noted, never resolved
    assert next(s for s in ws.json("signals") if s["id"] == lodash["id"])["withdrawn"] is True
    # and said where an operator lists obligations, not only in `obligation show` (D-312)
    assert all(o["advisoryWithdrawn"] and not o["advisoryCleared"] for o in ws.json("obligations"))
    assert "(advisory withdrawn)" in ws.run("obligations", check=True).stdout
    # and in `signals`, as the room's Signals view marks it (an operator's review: it said nothing)
    listed = ws.run("signals", check=True).stdout
    assert "lodash 4.17.20: GHSA-35jh-r3h4-6jhm (advisory withdrawn)" in listed, listed


def test_of_records_naming_each_other_the_most_severe_is_raised(ws: Any) -> None:
    """Records that name each other are one advisory, and the one raised is the most severe the
    world has said (an adversarial review: the record read first was raised, so one at the
    sensor's `advisory` read before GHSA's HIGH kept the hold from being blocking). A record more
    severe than every one raised under its names is raised again, superseding the most severe; one
    no more severe raises nothing."""
    declare(ws)
    low = record(  # read first (feeds are read in name order), and no severity of its own
        "AAA-2021-1", "npm", "lodash", [{"introduced": "0"}, {"fixed": "4.17.21"}],
        aliases=[LODASH["id"]], summary="lodash, from a mirror",
    )  # fmt: skip
    write_feed(ws.root / "feeds" / "osv", [low, LODASH])
    ws.run("sensors", "run", "osv", check=True)
    (raised,) = sensor_signals(ws)
    assert (raised["osv"]["id"], raised["reportedSeverity"]) == (LODASH["id"], "blocking")
    assert "supersedes" not in raised

    # the world says more: a CRITICAL record naming it is raised, linked to it; then nothing again
    critical = record(
        "ZZZ-2021-9", "npm", "lodash", [{"introduced": "0"}, {"fixed": "4.17.21"}],
        aliases=["CVE-2021-23337"], summary="lodash, critical now",
        database_specific={"severity": "CRITICAL"},
    )  # fmt: skip
    high = {**LODASH, "id": "ZZZ-2021-8", "aliases": ["ZZZ-2021-9"]}  # names the critical one: nothing
    write_feed(ws.root / "feeds" / "osv", [critical, high])
    ws.run("sensors", "run", "osv", check=True)
    ws.run("sensors", "run", "osv", check=True)
    first, second = sensor_signals(ws)
    assert first == raised
    assert (second["osv"]["id"], second["reportedSeverity"]) == ("ZZZ-2021-9", "critical")
    assert second["supersedes"] == raised["id"]
    ws.run("signals", "route", check=True)
    shown = {s["id"]: s for s in ws.json("signals")}
    assert shown[raised["id"]]["supersededBy"] == [second["id"]]
    assert (
        sorted(o["severity"] for o in ws.json("obligations")) == ["blocking"] * 2 + ["critical"] * 2
    )  # u1, b1


def test_a_units_report_superseding_an_advisory_does_not_stand_for_the_world(ws: Any) -> None:
    """A unit may supersede a sensor's signal, at any severity it says, but what it says is no
    record of the world's: a later, more severe record is still raised (an adversarial review: a
    research unit's already-expired report at `critical`, superseding the sensor's signal, kept
    GHSA's HIGH record from being raised, so nothing held)."""
    declare(ws)
    low = record(
        "AAA-2021-1", "npm", "lodash", [{"introduced": "0"}, {"fixed": "4.17.21"}],
        aliases=[LODASH["id"]], summary="lodash, from a mirror",
    )  # fmt: skip
    write_feed(ws.root / "feeds" / "osv", [low])
    ws.run("sensors", "run", "osv", check=True)
    (raised,) = sensor_signals(ws)
    fields = {
        "subject": "lodash reviewed",
        "claim": "not reachable in our use",
        "observation": "template never called",
        "evidence": ["web"],
        "confidence": "high",
        "reportedSeverity": "critical",
        "affectedUnits": [],
        "observedAt": "2020-01-01T00:00:00Z",
        "expiresAt": "2020-01-02T00:00:00Z",
        "supersedes": raised["id"],
    }
    path = ws.root.parent / "review.json"
    path.write_text(json.dumps(fields))
    done = ws.run("signals", "report", "--json-input", str(path), cwd=ws.lease("r1"))
    assert done.returncode == 0, done.stderr

    write_feed(ws.root / "feeds" / "osv", [low, LODASH])
    ws.run("sensors", "run", "osv", check=True)
    first, second = sensor_signals(ws)
    assert (second["osv"]["id"], second["reportedSeverity"], second["supersedes"]) == (
        LODASH["id"],
        "blocking",
        raised["id"],
    )


def test_a_record_rescored_a_second_sensors_units_and_a_regressed_pin_are_each_raised(ws: Any) -> None:
    """An operator's review (D-308): the sensor remembered (advisory, package, lockfile) for ever,
    so GHSA re-scoring a record in place, a second sensor serving more units with the same lockfile,
    and a pin regressing after its upgrade each raised nothing, and no hold came."""
    declare(ws)
    feed = ws.root / "feeds" / "osv"
    moderate = {**LODASH, "database_specific": {"github_reviewed": True, "severity": "MODERATE"}}
    write_feed(feed, [moderate])
    ws.run("sensors", "run", "osv", check=True)
    (first,) = sensor_signals(ws)
    assert (first["reportedSeverity"], first["affectedUnits"]) == ("advisory", ["u1", "b1"])

    # re-scored in place, under the same id: raised again, superseding the first; once
    write_feed(feed, [{**LODASH, "modified": "2026-11-30T00:00:00Z"}])
    ws.run("sensors", "run", "osv", check=True)
    ws.run("sensors", "run", "osv", check=True)
    rescored = sensor_signals(ws)[1:]
    assert [(s["reportedSeverity"], s["affectedUnits"], s.get("supersedes")) for s in rescored] == [
        ("blocking", ["u1", "b1"], first["id"])
    ]

    # a second sensor maps the same lockfile to another unit: that unit's signal, and only its own
    mirror = "  mirror:\n    kind: osv\n    feed: feeds/osv\n    lockfiles:\n      web/package-lock.json: [u1, u3]\n"
    ws.decide("regulator/policy/sensors.yaml", sensors_yaml(mirror))
    ws.run("sensors", "run", "mirror", check=True)
    ws.run("sensors", "run", "mirror", check=True)
    extra = sensor_signals(ws)[2:]
    assert [(s["sensor"], s["reportedSeverity"], s["affectedUnits"]) for s in extra] == [
        ("mirror", "blocking", ["u3"])
    ]
    assert "supersedes" not in extra[0]

    # upgraded on trunk: the run says the advisory no longer affects the pin, once; the obligation
    # stays open (a person dispositions it); the pin regressing raises it anew, once
    lock = ws.root / "web" / "package-lock.json"
    vulnerable = lock.read_text()
    ws.write("web/package-lock.json", vulnerable.replace('"version": "4.17.20"', '"version": "4.17.21"'))
    ws.commit("lodash 4.17.21")
    said = ws.run("sensors", "run", "osv", check=True).stdout
    assert said.rstrip().endswith("; 2 earlier signal(s) no longer affect their pin (cleared)"), said
    ws.run("sensors", "run", "osv", check=True)
    runs = [e for e in ws.events("signals") if e["kind"] == "sensor-run" and e["sensor"] == "osv"]
    assert runs[-2]["cleared"] == [first["id"], rescored[0]["id"]] and "cleared" not in runs[-1]
    ws.run("signals", "route", check=True)
    listed = {s["id"]: s for s in ws.json("signals")}
    assert listed[first["id"]]["cleared"] is True and listed[extra[0]["id"]]["cleared"] is False
    held = next(o for o in ws.json("obligations") if o["unit"] == "u1" and o["severity"] == "blocking")
    shown = ws.run("obligation", "show", held["id"], check=True).stdout
    assert "advisory no longer affects the pin: sensor osv's run at " in shown
    assert "found none in web/package-lock.json on trunk" in shown
    assert held["status"] == "open" and held["advisoryCleared"] and not held["advisoryWithdrawn"]
    assert "(pin no longer affected)" in ws.run("obligations", check=True).stdout
    assert "(pin no longer affected)" in ws.run("signals", check=True).stdout

    ws.write("web/package-lock.json", vulnerable)
    ws.commit("lodash back to 4.17.20")
    ws.run("sensors", "run", "osv", check=True)
    ws.run("sensors", "run", "osv", check=True)
    again = sensor_signals(ws)[3:]
    assert [(s["sensor"], s["reportedSeverity"], s["affectedUnits"]) for s in again] == [
        ("osv", "blocking", ["u1", "b1"])
    ]
    assert again[0]["id"] not in (first["id"], rescored[0]["id"])
    checked = ws.run("verify")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_nothing_is_cleared_while_a_record_naming_it_cannot_be_judged(ws: Any) -> None:
    """D-308: a run says an advisory no longer affects the pin only when every record naming it
    that the feed holds was judged; one whose range cannot be read leaves it standing."""
    declare(ws)
    write_feed(ws.root / "feeds" / "osv", [LODASH])
    ws.run("sensors", "run", "osv", check=True)
    (raised,) = sensor_signals(ws)
    unreadable = record(
        "ZZZ-2021-5", "npm", "lodash", [{"introduced": "0"}, {"fixed": "not.a.version"}],
        aliases=[LODASH["id"]], summary="lodash, a range that cannot be read",
    )  # fmt: skip
    write_feed(ws.root / "feeds" / "osv", [LODASH, unreadable])
    lock = ws.root / "web" / "package-lock.json"
    ws.write(
        "web/package-lock.json", lock.read_text().replace('"version": "4.17.20"', '"version": "4.17.21"')
    )
    ws.commit("lodash 4.17.21")
    done = ws.run("sensors", "run", "osv")
    assert done.returncode == 1 and "advisory ZZZ-2021-5" in done.stderr
    runs = [e for e in ws.events("signals") if e["kind"] == "sensor-run"]
    assert "cleared" not in runs[-1]
    # judged whole again: cleared
    write_feed(ws.root / "feeds" / "osv", [LODASH, {**unreadable, "affected": LODASH["affected"]}])
    ws.run("sensors", "run", "osv", check=True)
    runs = [e for e in ws.events("signals") if e["kind"] == "sensor-run"]
    assert runs[-1]["cleared"] == [raised["id"]]


def test_a_withdrawal_lifts_nothing_another_feed_holds_and_only_a_whole_run_clears(ws: Any) -> None:
    """Re-checks of D-308: one feed's withdrawal lifted the hold another feed still asked for; a
    run that could not read a record's file cleared what the record had raised; and a package no
    longer pinned (moved to an included file) read as upgraded."""
    mirror = "  mirror:\n    kind: osv\n    feed: feeds/mirror\n    lockfiles:\n      web/package-lock.json: [u1]\n"
    declare(ws, mirror)
    write_feed(ws.root / "feeds" / "osv", [LODASH])
    write_feed(ws.root / "feeds" / "mirror", [LODASH])
    ws.run("sensors", "run", "osv", check=True)
    ws.run("sensors", "run", "mirror", check=True)
    (first,) = sensor_signals(ws)  # the mirror's u1 is covered by osv's signal
    write_feed(ws.root / "feeds" / "osv", [{**LODASH, "withdrawn": "2026-11-28T00:00:00Z"}])
    ws.run("sensors", "run", "osv", check=True)
    ws.run("sensors", "run", "mirror", check=True)
    ws.run("sensors", "run", "mirror", check=True)
    again = sensor_signals(ws)[1:]
    assert [(s["sensor"], s["affectedUnits"], s["supersedes"]) for s in again] == [
        ("mirror", ["u1"], first["id"])
    ]

    # a record's file that does not parse: the run is in error, and clears nothing
    lock = ws.root / "web" / "package-lock.json"
    ws.write(
        "web/package-lock.json", lock.read_text().replace('"version": "4.17.20"', '"version": "4.17.21"')
    )
    ws.commit("lodash 4.17.21")
    feed = ws.root / "feeds" / "mirror" / f"{LODASH['id']}.json"
    whole = feed.read_text()
    feed.write_text(whole[:100])
    write_feed(ws.root / "feeds" / "mirror", [{**LODASH, "id": "ZZZ-2021-7", "aliases": [LODASH["id"]]}])
    assert ws.run("sensors", "run", "mirror").returncode == 1
    runs = [e for e in ws.events("signals") if e["kind"] == "sensor-run" and e["sensor"] == "mirror"]
    assert runs[-1]["outcome"] == "error" and "cleared" not in runs[-1]
    # whole again: the upgraded pin clears the mirror's signal
    feed.write_text(whole)
    ws.run("sensors", "run", "mirror", check=True)
    runs = [e for e in ws.events("signals") if e["kind"] == "sensor-run" and e["sensor"] == "mirror"]
    assert runs[-1]["cleared"] == [again[0]["id"]]


def test_a_package_no_longer_pinned_is_not_cleared(ws: Any) -> None:
    declare(ws)
    from tests.test_world_osv import DJANGO

    write_feed(ws.root / "feeds" / "osv", [DJANGO])
    ws.run("sensors", "run", "osv", check=True)
    assert len(sensor_signals(ws)) == 1
    requirements = ws.root / "services" / "api" / "requirements.txt"
    ws.write(
        "services/api/requirements.txt", requirements.read_text().replace("Django==3.2.0", "-r base.txt")
    )
    ws.write("services/api/base.txt", "Django==3.2.0\n")
    ws.commit("django moved to an included file")
    ws.run("sensors", "run", "osv", check=True)
    runs = [e for e in ws.events("signals") if e["kind"] == "sensor-run"]
    assert "cleared" not in runs[-1]


def test_another_packages_record_sharing_a_cve_neither_withdraws_nor_clears(ws: Any) -> None:
    """An adversarial re-check: a withdrawn record for another package, sharing the CVE alias, marked
    this package's obligation `(advisory withdrawn)`; and, once this package's record left the feed,
    the other package's record cleared it. Each is about its own packages only."""
    from tests.test_world_osv import DJANGO

    declare(ws)
    other = record(
        "GHSA-othr-othr-othr", "PyPI", "otherpkg", [{"introduced": "0"}, {"fixed": "9.0"}],
        aliases=["CVE-2022-34265"], summary="another package, the same CVE",
    )  # fmt: skip
    npm = record(  # the same name in another ecosystem (a re-check: it withdrew and cleared PyPI's)
        "GHSA-npmd-npmd-npmd", "npm", "django", [{"introduced": "0"}, {"fixed": "9.0.0"}],
        aliases=["CVE-2022-34265"], summary="an npm package named django",
    )  # fmt: skip
    withdrawn = "2026-11-28T00:00:00Z"
    write_feed(
        ws.root / "feeds" / "osv",
        [
            DJANGO,
            {**other, "withdrawn": withdrawn},
            {**npm, "id": "GHSA-npmw-npmw-npmw", "withdrawn": withdrawn},
        ],
    )
    ws.run("sensors", "run", "osv", check=True)
    ws.run("sensors", "run", "osv", check=True)
    (django,) = sensor_signals(ws)
    assert not [e for e in ws.events("signals") if e["kind"] == "advisory-withdrawn"]
    (ws.root / "feeds" / "osv" / f"{DJANGO['id']}.json").unlink()
    write_feed(ws.root / "feeds" / "osv", [other, npm])
    ws.run("sensors", "run", "osv", check=True)
    runs = [e for e in ws.events("signals") if e["kind"] == "sensor-run"]
    assert "cleared" not in runs[-1]
    ws.run("signals", "route", check=True)
    listed = ws.json("obligations")
    assert listed and not any(o["advisoryWithdrawn"] or o["advisoryCleared"] for o in listed)
    assert sensor_signals(ws) == [django]
