"""`regulator init` leaves a workspace that is whole in git (D-89), and store.yaml is governed where
it exists (D-90): what an operator in a hurry, and the CI job after them, see."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers import REGULATOR, alice_key, clean_env, git, one_line

STORE = "regulator/policy/store.yaml"
GOVERNED = sorted(
    [f"regulator/identity/{n}" for n in ("invariants.md", "glossary.md", "boundaries.md")]
    + [f"regulator/policy/{n}" for n in ("routing.yaml", "interaction.yaml", "profiles.yaml")]
)


def regulator(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [REGULATOR, *args], cwd=cwd, env=env or clean_env(), capture_output=True, text=True, timeout=120
    )


def hand_write(path: Path, text: str) -> None:
    if path.exists():
        path.chmod(0o644)  # governed files are left read-only
    path.write_text(text)


def fresh_repo(tmp_path: Path, name: str = "repo") -> Path:
    """A new git repository on trunk `main`, with the identity the tests set (none is configured
    on a fresh machine) and no commit yet."""
    root = tmp_path / name
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    return root


def initialized(tmp_path: Path) -> Path:
    root = fresh_repo(tmp_path)
    key = alice_key()
    done = regulator(root, "init", "--owner", "alice", "--owner-key", f"{key}.pub", "--key", str(key))
    assert done.returncode == 0, done.stderr
    return root


def clone(root: Path, target: Path) -> Path:
    git(root.parent, "clone", "-q", f"file://{root}", str(target))
    return target


def paths_in(root: Path, rev: str) -> list[str]:
    return sorted(git(root, "show", "--name-only", "--format=", rev).split())


# ---- a fresh init is whole in git ---------------------------------------------------------------


def test_init_in_a_git_repository_leaves_it_clean_and_ci_passes_at_once(tmp_path: Path) -> None:
    root = initialized(tmp_path)
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""
    # the owner's signed baseline decision holds the governed files, as before; then the rest
    assert paths_in(root, "HEAD~1") == GOVERNED
    assert "Regulator-Decision: baseline" in git(root, "log", "-1", "--format=%B", "HEAD~1")
    rest = paths_in(root, "HEAD")
    assert {".gitignore", "FINDINGS.md", "INTAKE.md", "regulator/config.yaml"} <= set(rest)
    assert [p for p in rest if p.startswith("records/")] == sorted(
        f"records/{p.name}" for p in (root / "records").iterdir()
    )
    assert "Regulator-Decision" not in git(root, "log", "-1", "--format=%B", "HEAD")  # decides nothing
    assert len(git(root, "rev-list", "HEAD").split()) == 2
    for args in (
        ("controlroom", "--once", "--registers-only"),
        ("identity", "verify"),
        ("registry", "lint", "--require-history"),
        ("registry", "views", "--check"),
    ):
        done = regulator(root, *args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
    # a clone has the ignore rules, the trunk setting, the records and the views, and CI passes
    here = clone(root, tmp_path / "clone")
    assert ".regulator/" in (here / ".gitignore").read_text().split()
    assert (here / "regulator/config.yaml").read_text() == "trunk: main\n"
    assert sorted(p.name for p in (here / "records").iterdir()) == sorted(
        p.name for p in (root / "records").iterdir()
    )
    done = regulator(here, "controlroom", "--once", "--registers-only")
    assert done.returncode == 0, done.stdout
    assert "views: up to date" in done.stdout and "6 file(s) as decided (signed)" in done.stdout
    done = regulator(here, "identity", "verify", "--require-history", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["ok"] is True


def test_a_repository_on_another_branch_without_main_has_that_branch_as_trunk(tmp_path: Path) -> None:
    """An operator's review (D-311): init in a repository on `master` wrote `trunk: main`; every
    sensor then failed on a trunk that did not exist, and lint was `unchecked`. Without --trunk,
    the trunk is the branch the repository is on where it has no main, and init says so."""
    key = alice_key()
    for branch, made_main, trunk in (("master", False, "master"), ("work", True, "main")):
        root = tmp_path / branch
        root.mkdir()
        git(root, "init", "-q", "-b", branch)
        if made_main:  # a main exists: it stays the trunk, whatever branch init runs on
            git(root, "commit", "-q", "--allow-empty", "-m", "start")
            git(root, "branch", "main")
        done = regulator(root, "init", "--owner", "alice", "--owner-key", f"{key}.pub", "--key", str(key))
        assert done.returncode == 0, done.stderr
        assert (root / "regulator/config.yaml").read_text() == f"trunk: {trunk}\n"
        said = [line for line in done.stdout.splitlines() if line.startswith("trunk: ")]
        assert said == (
            [f"trunk: {branch} (the branch this repository is on, which has no main; --trunk names another)"]
            if trunk != "main"
            else []
        )
    # a repository on a feature branch: master where there is one, main where origin has it (re-check)
    root = tmp_path / "feat"
    root.mkdir()
    git(root, "init", "-q", "-b", "master")
    git(root, "commit", "-q", "--allow-empty", "-m", "start")
    git(root, "checkout", "-q", "-b", "feat")
    upstream = tmp_path / "upstream"
    git(tmp_path, "init", "-q", "-b", "main", str(upstream))
    git(upstream, "commit", "-q", "--allow-empty", "-m", "start")
    git(upstream, "branch", "feature-x")  # origin's HEAD stays main
    git(tmp_path, "clone", "-q", "-b", "feature-x", f"file://{upstream}", str(tmp_path / "cloned"))
    for place, trunk, on in ((root, "master", "feat"), (tmp_path / "cloned", "main", "feature-x")):
        done = regulator(place, "init", "--owner", "alice", "--owner-key", f"{key}.pub", "--key", str(key))
        assert done.returncode == 0, done.stderr
        assert (place / "regulator/config.yaml").read_text() == f"trunk: {trunk}\n", place
        assert done.stderr == (  # committed on a branch that is not trunk: said (a re-check)
            f"regulator: warning: this repository is on {on}, not trunk {trunk}: what init commits is on "
            f"{on} until it is merged into {trunk}\n"
        )
    lint = regulator(tmp_path / "master", "registry", "lint", "--require-history")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    # --trunk given is taken as given
    root = tmp_path / "given"
    root.mkdir()
    git(root, "init", "-q", "-b", "master")
    done = regulator(
        root, "init", "--owner", "alice", "--owner-key", f"{key}.pub", "--key", str(key), "--trunk", "main"
    )
    assert done.returncode == 0 and (root / "regulator/config.yaml").read_text() == "trunk: main\n"


def test_gits_identity_given_in_its_environment_is_the_owners_and_authors_her_commits(
    tmp_path: Path,
) -> None:
    """An operator's review: with git's identity only in its environment (GIT_AUTHOR_EMAIL and
    GIT_COMMITTER_EMAIL, as on CI or a fresh machine), init listed no email for the owner (lint's
    email check never on) and `registry resolve --commit` authored its signed commit as
    alice@regulator.invalid. git's own identity is kept where it is given: init lists it, and the
    person's commits carry it."""
    root = initialized(tmp_path)
    assert subprocess.run(["git", "config", "--get", "user.email"], cwd=root, env=clean_env()).returncode == 1
    policy = (root / "regulator/policy/interaction.yaml").read_text()
    assert "emails:\n    - alice@example.org" in policy
    (root / "findings").mkdir(exist_ok=True)
    (root / "findings/F-x.md").write_text(
        "---\nid: F-x\ndate: '2026-11-01'\ntitle: t\naffects: []\nack: ''\nresolved: false\n---\nbody\n"
    )
    assert regulator(root, "registry", "views").returncode == 0
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "file F-x")
    env = clean_env(REGULATOR_SIGNING_KEY=str(alice_key()))
    done = regulator(
        root, "registry", "resolve", "F-x", "--by", "alice", "--rationale", "done", "--commit", env=env
    )
    assert done.returncode == 0, done.stderr
    assert git(root, "log", "-1", "--format=%ae %ce").split() == ["alice@example.org"] * 2
    done = regulator(root, "registry", "lint", "--require-history")
    assert done.returncode == 0, done.stdout


def test_gits_environment_comes_before_its_configuration_as_in_git(tmp_path: Path) -> None:
    """An operator's review: with user.email configured and GIT_AUTHOR_EMAIL in the environment,
    git authors with the environment's, and init listed the configuration's: the owner's own
    signed commits then failed lint's email check. The environment comes first, as in git."""
    root = fresh_repo(tmp_path)
    git(root, "config", "user.email", "desk@corp.example")
    key = alice_key()
    done = regulator(root, "init", "--owner", "alice", "--owner-key", f"{key}.pub", "--key", str(key))
    assert done.returncode == 0, done.stderr
    policy = (root / "regulator/policy/interaction.yaml").read_text()
    assert "alice@example.org" in policy and "desk@corp.example" not in policy
    assert git(root, "log", "-1", "--format=%ae").strip() == "alice@example.org"


def test_init_outside_git_commits_nothing_and_says_how_to(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    done = regulator(root, "init", "--owner", "alice", "--owner-key", f"{alice_key()}.pub")
    assert done.returncode == 0, done.stderr
    assert not (root / ".git").exists() and (root / ".regulator").is_dir()
    lines = done.stdout.splitlines()
    say = next(i for i, line in enumerate(lines) if line.startswith("not a git repository"))
    assert "nothing committed" in lines[say] and "`git init -b main`" in lines[say]
    commands = [line.strip() for line in lines[say + 1 :]]
    assert len(commands) == 2 and all(c.startswith("git add ") for c in commands)
    # the commands as printed make the workspace whole: the CI checks pass in a clone
    git(root, "init", "-q", "-b", "main")
    for command in commands:
        subprocess.run(["sh", "-c", command], cwd=root, env=clean_env(), check=True, capture_output=True)
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""
    assert paths_in(root, "HEAD~1") == GOVERNED
    here = clone(root, tmp_path / "clone")
    done = regulator(here, "controlroom", "--once", "--registers-only")
    assert done.returncode == 0, done.stdout
    assert "6 file(s) as decided (claimed)" in done.stdout


# ---- store.yaml is governed where it exists ------------------------------------------------------


def test_a_workspace_on_files_without_store_yaml_is_unaffected(tmp_path: Path) -> None:
    root = initialized(tmp_path)
    assert not (root / STORE).exists()
    data = json.loads(regulator(root, "identity", "verify", "--json").stdout)
    assert data["ok"] is True and sorted(f["file"] for f in data["files"]) == GOVERNED
    here = clone(root, tmp_path / "clone")
    data = json.loads(regulator(here, "identity", "verify", "--json").stdout)
    assert data["ok"] is True and sorted(f["file"] for f in data["files"]) == GOVERNED


def test_the_store_a_folder_selects_is_read_again_when_its_store_yaml_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process asks once per store.yaml: a workspace made again at the same path (the suite's
    folders of passed tests go at their end, D-338) or a store.yaml written since is read anew."""
    from engine.checkout.workspace import store_url

    monkeypatch.delenv("REGULATOR_STORE", raising=False)
    (tmp_path / "regulator/policy").mkdir(parents=True)
    assert store_url(tmp_path) is None
    (tmp_path / STORE).write_text("url: postgresql://regulator@/fleet?host=/run/pg\n")
    assert store_url(tmp_path) == "postgresql://regulator@/fleet?host=/run/pg"
    (tmp_path / STORE).unlink()
    assert store_url(tmp_path) is None
    monkeypatch.setenv("REGULATOR_STORE", "files")
    (tmp_path / STORE).write_text("url: postgresql://regulator@/fleet?host=/run/pg\n")
    assert store_url(tmp_path) is None  # this process's choice wins over the file


def test_a_store_yaml_swapped_in_and_out_never_selects_a_database_nobody_decided(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An adversarial review of D-338: store.yaml was read for its URL, then read again to judge
    it, and a file gone at the second read judged nothing, so a unit renaming an undecided
    store.yaml in and out won now and then, and the process connected to the server it named.
    The bytes the URL is read from are the bytes judged (every ask here as a fresh process's)."""
    import threading

    from engine.checkout import workspace
    from identity.errors import Refused

    monkeypatch.delenv("REGULATOR_STORE", raising=False)
    root = initialized(tmp_path)
    aside = root / "store.yaml.aside"
    aside.write_text("url: postgresql://regulator@/fleet?host=/tmp/elsewhere\n")
    stop = threading.Event()

    def toggle() -> None:
        while not stop.is_set():
            os.rename(aside, root / STORE)
            os.rename(root / STORE, aside)

    toggler = threading.Thread(target=toggle)
    toggler.start()
    answers: dict[str, int] = {}
    try:
        for _ in range(3000):
            workspace._URLS.clear()
            try:
                url = workspace.Workspace(root).url
            except Refused:
                url = "refused"
            answers[str(url)] = answers.get(str(url), 0) + 1
    finally:
        stop.set()
        toggler.join()
    assert set(answers) <= {"None", "refused"}, answers


def test_a_store_yaml_added_by_hand_fails_identity_verify_on_the_host_and_in_a_clone(tmp_path: Path) -> None:
    root = initialized(tmp_path)
    hand_write(root / STORE, "url: files\n")  # selects nothing new, but nobody decided it
    done = regulator(root, "identity", "verify")
    assert done.returncode == 1
    assert f"{STORE}: no decision records it" in done.stdout
    git(root, "add", STORE)
    git(root, "commit", "-q", "-m", "store: files")
    here = clone(root, tmp_path / "clone")
    done = regulator(here, "identity", "verify")
    assert done.returncode == 1
    assert f"{STORE}: its content matches no decision in git history" in done.stdout
    done = regulator(here, "controlroom", "--once", "--registers-only")
    assert done.returncode == 1 and f"identity verify: {STORE}" in done.stdout


def test_a_hand_written_store_yaml_naming_a_database_is_refused_before_connecting(tmp_path: Path) -> None:
    root = initialized(tmp_path)
    before = (root / ".regulator/identity.ndjson").read_bytes()
    hand_write(root / STORE, "url: postgresql://elsewhere.invalid/fleet\n")
    for args in (("status",), ("identity", "verify"), ("controlroom", "--once")):
        done = regulator(root, *args)
        assert done.returncode == 3, (args, done.stdout, done.stderr)
        line = one_line(done)
        assert f"{STORE} names postgresql://elsewhere.invalid/fleet" in line and "no decision" in line
        assert "cannot reach" not in line  # nothing connected to the server it names
    assert (root / ".regulator/identity.ndjson").read_bytes() == before


def test_store_yaml_changes_by_proposal_and_the_decision_is_committed(tmp_path: Path) -> None:
    root = initialized(tmp_path)
    key = alice_key()
    env = clean_env(REGULATOR_SIGNING_KEY=str(key))
    before = (root / ".regulator/identity.ndjson").read_bytes()
    for text, why in (
        ("url: mysql://db/fleet\n", "not a postgresql:// URL"),
        ("url: postgresql://alice:s3cret@db.example/fleet\n", "carries a password"),
    ):
        source = tmp_path / "store.yaml"
        source.write_text(text)
        done = regulator(
            root, "identity", "propose", "--file", STORE, "--content-from", str(source),
            "--rationale", "r", "--by", "alice", env=env,
        )  # fmt: skip
        assert done.returncode == 2 and why in one_line(done)
    assert (root / ".regulator/identity.ndjson").read_bytes() == before  # nothing written
    source = tmp_path / "store.yaml"
    source.write_text("url: files\n")
    done = regulator(
        root, "identity", "propose", "--file", STORE, "--content-from", str(source),
        "--rationale", "say it", "--by", "alice", "--json", env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    proposal = json.loads(done.stdout)["id"]
    done = regulator(root, "identity", "accept", proposal, "--by", "alice", "--rationale", "ok", env=env)
    assert done.returncode == 0, done.stderr
    assert (root / STORE).read_text() == "url: files\n"
    assert paths_in(root, "HEAD") == [STORE] and "Regulator-Decided-By: alice" in git(
        root, "log", "-1", "--format=%B"
    )
    data = json.loads(regulator(root, "identity", "verify", "--json").stdout)
    assert data["ok"] is True and STORE in [f["file"] for f in data["files"]]
    here = clone(root, tmp_path / "clone")
    done = regulator(here, "controlroom", "--once", "--registers-only")
    assert done.returncode == 0, done.stdout
    assert "7 file(s) as decided (signed)" in done.stdout
    # removing a decided store.yaml is a hand edit too
    (here / STORE).unlink()
    done = regulator(here, "identity", "verify")
    assert done.returncode == 1 and f"{STORE}: missing" in done.stdout


def test_a_proposal_names_store_yaml_among_the_governed_files(tmp_path: Path) -> None:
    root = initialized(tmp_path)
    source = tmp_path / "x"
    source.write_text("x")
    done = regulator(
        root, "identity", "propose", "--file", "README.md", "--content-from", str(source),
        "--rationale", "r", "--by", "alice",
    )  # fmt: skip
    assert done.returncode == 2 and STORE in one_line(done)
