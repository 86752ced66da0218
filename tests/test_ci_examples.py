"""The CI examples run as written (docs/ci.md): the pre-commit entry of .pre-commit-hooks.yaml,
the plain git pre-push hook (through a real `git push`), and the GitHub Actions workflow's
shell steps (import a published memory file, check to SARIF and Markdown) on generated
repositories."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from gitutil import GIT_ENV, GitRepo
from validation_helpers import cite, index

from citegraph.graph.store import Home

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SRC = "def charge(amount):\n    return amount * 100\n\n\ndef refund(amount):\n    return -amount\n"


def env_for(home: Home) -> dict[str, str]:
    return {**os.environ, **GIT_ENV, "CITEGRAPH_HOME": str(home.root),
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def pushed_clone(tmp_path: Path, home: Home) -> GitRepo:
    """A clone of a bare origin, tracking origin/main, with a memory citing charge()."""
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(tmp_path / "origin.git")], check=True,
                   env={**os.environ, **GIT_ENV}, timeout=30)
    r = GitRepo(tmp_path / "work", remote=str(tmp_path / "origin.git"))
    r.write("pay/charge.py", SRC)
    r.write("pay/other.py", "def other():\n    return 0\n")
    r.commit("c1")
    r.git("push", "-q", "-u", "origin", "main")
    index(r, home)
    cite(home, r, "pay/charge.py::charge", text="Charges are in cents.", topic="cents")
    return r


def test_pre_commit_hook_entry_runs_on_a_generated_repo(tmp_path, home):
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    (hook,) = [h for h in hooks if h["id"] == "citegraph-check"]
    assert hook["language"] == "python" and hook["pass_filenames"] is False and hook["stages"] == ["pre-push"]
    cmd = shlex.split(hook["entry"]) + list(hook.get("args", []))
    assert cmd[:2] == ["citegraph", "check"]
    r = pushed_clone(tmp_path, home)

    def run() -> subprocess.CompletedProcess:
        return subprocess.run(cmd, cwd=r.root, env=env_for(home), capture_output=True, text=True, timeout=120)

    r.write("pay/other.py", "def other():\n    return 1\n")
    r.commit("unrelated")
    p = run()
    assert p.returncode == 0, p.stderr + p.stdout
    r.write("pay/charge.py", SRC.replace("amount * 100", "amount * 1000"))
    r.commit("breaks the claim")
    p = run()
    assert p.returncode == 1, p.stderr + p.stdout
    assert "pay/charge.py:2" in p.stdout and "changed" in p.stdout and "cgm_" in p.stdout
    r.git("branch", "--unset-upstream")  # no upstream: the check cannot know its base
    p = run()
    assert p.returncode == 2 and "Traceback" not in p.stderr and "@{upstream}" in p.stderr


def test_git_pre_push_hook_refuses_a_push_that_makes_a_memory_stale(tmp_path, home):
    r = pushed_clone(tmp_path, home)
    hook = r.root / ".git" / "hooks" / "pre-push"
    shutil.copy(ROOT / "examples" / "git-hooks" / "pre-push", hook)
    hook.chmod(0o755)
    env = env_for(home)

    def push() -> subprocess.CompletedProcess:
        return subprocess.run(["git", "push", "-q", "origin", "main"], cwd=r.root, env=env, capture_output=True,
                              text=True, timeout=120)

    def remote_head() -> str:
        return subprocess.run(["git", "rev-parse", "main"], cwd=tmp_path / "origin.git", capture_output=True,
                              text=True, check=True, timeout=30).stdout.strip()

    r.write("pay/other.py", "def other():\n    return 2\n")
    ok = r.commit("unrelated")
    p = push()
    assert p.returncode == 0, p.stderr
    assert remote_head() == ok
    r.write("pay/charge.py", SRC.replace("def charge(amount):\n    return amount * 100\n\n\n", ""))
    bad = r.commit("delete charge")
    p = push()
    assert p.returncode != 0 and "push refused" in p.stderr and "deleted" in p.stderr + p.stdout
    assert remote_head() == ok  # nothing of the stale change reached the remote
    p = subprocess.run(["git", "push", "-q", "--no-verify", "origin", "main"], cwd=r.root, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and remote_head() == bad


def test_github_actions_workflow_steps_run_as_written(tmp_path, make_repo):
    wf = yaml.safe_load((ROOT / "examples" / "github-actions" / "citegraph-check.yml").read_text())
    (job,) = wf["jobs"].values()
    steps = job["steps"]
    checkout = next(s for s in steps if s.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"]["fetch-depth"] == 0
    assert job["env"]["BASE"] == "${{ github.event.pull_request.base.sha }}"
    upload = next(s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif"))
    assert upload["with"]["sarif_file"] == "citegraph.sarif"
    assert wf["permissions"]["security-events"] == "write"

    # The developer's side: capture and publish (a remote identity: publishable), commit the file.
    dev_home = Home.open(tmp_path / "dev-home")
    r = make_repo("svc", remote="https://github.com/acme/svc.git")
    r.write("pay/charge.py", SRC)
    r.commit("c1")
    index(r, dev_home)
    cite(dev_home, r, "pay/charge.py::refund", text="Refunds are negative.", topic="refunds")
    (r.root / ".citegraph").mkdir()
    p = subprocess.run([str(BIN / "citegraph"), "--home", str(dev_home.root), "publish", "--out",
                        ".citegraph/memories.jsonl"], cwd=r.root, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    base = r.commit("publish memories")
    r.write("pay/charge.py", SRC.replace("return -amount", "return 0 - amount"))
    head = r.commit("pr")

    # CI's side: a fresh data home, the workflow's shell steps with its environment.
    ci_home = tmp_path / "ci-home"
    env = {**os.environ, **GIT_ENV, "CITEGRAPH_HOME": str(ci_home), "BASE": base, "HEAD": head,
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    codes = {}
    for s in steps:
        if "run" not in s or s.get("uses") or "gh pr comment" in s["run"] or s["run"].strip() == "exit 1" \
                or s["run"].startswith("pip install"):
            continue
        p = subprocess.run(["bash", "-c", s["run"]], cwd=r.root, env=env, capture_output=True, text=True, timeout=180)
        codes[s.get("name", s["run"])] = p.returncode
    assert list(codes.values()) == [0, 1, 0], codes  # import ok; the check finds the stale memory
    sarif = json.loads((r.root / "citegraph.sarif").read_text())
    (res,) = sarif["runs"][0]["results"]
    assert res["ruleId"] == "citegraph/changed" and "Refunds are negative." in res["message"]["text"]
    assert res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "pay/charge.py"
    assert "1 stale" in (r.root / "citegraph.md").read_text()


def test_checkpoint_workflow_steps_run_as_written_and_a_developer_starts_from_it(tmp_path, make_repo):
    """examples/github-actions/citegraph-checkpoint.yml: CI indexes and exports on the default
    branch; a developer's fresh clone and data home import the artifact and are ready."""
    wf = yaml.safe_load((ROOT / "examples" / "github-actions" / "citegraph-checkpoint.yml").read_text())
    (job,) = wf["jobs"].values()
    steps = job["steps"]
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["with"]["path"] == "citegraph-checkpoint.tar"
    assert wf[True]["push"]["branches"] == ["main"]  # YAML 1.1 reads `on` as true
    dev_home = Home.open(tmp_path / "dev-home")
    r = make_repo("svc", remote="https://github.com/acme/svc.git")
    r.write("pay/charge.py", SRC)
    r.commit("c1")
    index(r, dev_home)
    cite(dev_home, r, "pay/charge.py::refund", text="Refunds are negative.", topic="refunds")
    (r.root / ".citegraph").mkdir()
    p = subprocess.run([str(BIN / "citegraph"), "--home", str(dev_home.root), "publish", "--out",
                        ".citegraph/memories.jsonl"], cwd=r.root, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    r.commit("publish memories")
    ci_home = tmp_path / "ci-home"
    env = {**os.environ, **GIT_ENV, "CITEGRAPH_HOME": str(ci_home),
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    for s in steps:
        if "run" not in s or s.get("uses") or s["run"].startswith("pip install"):
            continue
        p = subprocess.run(["bash", "-c", s["run"]], cwd=r.root, env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, (s, p.stderr)
    artifact = r.root / "citegraph-checkpoint.tar"
    assert artifact.is_file()
    # The developer: a fresh clone and data home, the documented command.
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(r.root), str(clone)], check=True, env={**os.environ, **GIT_ENV})
    subprocess.run(["git", "remote", "set-url", "origin", "https://github.com/acme/svc.git"], cwd=clone, check=True)
    denv = {**env, "CITEGRAPH_HOME": str(tmp_path / "new-home")}
    p = subprocess.run([str(BIN / "citegraph"), "import", "--parquet", str(artifact)], cwd=clone, env=denv,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([str(BIN / "citegraph"), "status", "--check", "--no-service"], cwd=clone, env=denv,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run([str(BIN / "citegraph"), "validate", "--json", "--no-service"], cwd=clone, env=denv,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and json.loads(p.stdout)["freshness_summary"]["fresh"] == 1, p.stdout + p.stderr
