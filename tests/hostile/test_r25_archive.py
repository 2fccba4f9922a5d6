"""Issue 25, deliver 1: a "sysfs snapshot" tarball whose links chain out of the extraction folder
(``b`` -> deep path, ``a`` -> ``b/../..``, ``b`` replaced by ``.``, then ``a/<absolute path>``) and
its variants (a climbing link, an absolute one, a link through a folder that becomes a link, a hard
link, the top folder a link, a link to /proc/self/environ) write nothing outside the folder, through
every command that extracts one: ``numa topology --from``, ``diagnose FILE``, ``diagnose DIR`` with
the tarball inside, and a bundle carrying it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.hostile import generators as g
from tests.hostile.harness import run_capped
from tests.hostile.r25_inputs import link_chain_tar, link_chain_variants

pytestmark = pytest.mark.hostile

VARIANTS = sorted(link_chain_variants(Path("/x")))


def _links_outside(root: Path) -> list[str]:
    real = os.path.realpath(root)
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            if os.path.islink(p):
                r = os.path.realpath(p)
                if r != real and not r.startswith(real + os.sep):
                    out.append(os.path.relpath(p, root))
    return out


@pytest.mark.parametrize("variant", VARIANTS)
def test_r25_link_chain_extracts_inside_the_folder(tmp_path, variant):
    """Each variant alone, extracted the way a sysfs snapshot is: nothing appears outside, no link
    left in the tree leads outside it, the readable part of the tree is still there, and each member
    left out is named in a warning."""
    from clusterdoctor.topology.build import safe_extract

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_text("untouched")
    tar = link_chain_tar(tmp_path / f"{variant}.tar.gz", outside, [variant])
    dest = tmp_path / "a" / "b" / "c" / "dest"
    dest.mkdir(parents=True)
    warnings = safe_extract(tar, dest)
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]
    assert (outside / "victim").read_text() == "untouched"
    assert not _links_outside(dest)
    assert (dest / "sys/devices/system/cpu/online").read_text() == "0-1\n"
    assert warnings and all("member left out" in w for w in warnings), warnings
    assert not list(tmp_path.rglob("*pwned*"))


def _runs(tmp_path: Path, tar: Path) -> list[tuple[str, ...]]:
    incident = tmp_path / "incident"
    incident.mkdir()
    (incident / "node.tar.gz").write_bytes(tar.read_bytes())
    bundle = g.bundle(tmp_path / "b.tar.zst", [("files/snap.tar.gz", tar.read_bytes())])
    return [
        ("numa", "topology", "--from", str(tar)),
        ("diagnose", str(tar), "--format", "json"),
        ("diagnose", str(incident), "--format", "json"),
        ("diagnose", str(bundle), "--format", "json"),
    ]


@pytest.mark.parametrize("compress", ["gz", ""])
def test_r25_link_chain_through_every_command(tmp_path, compress):
    """All variants in one tarball, through the real CLI under the memory cap: nothing is written
    outside the private temporary folder (TMPDIR is a folder of the test, so "outside" includes
    everything around it), the environment never reaches the report, and the run reads the tree."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_text("untouched")
    tar = link_chain_tar(tmp_path / ("snap.tar.gz" if compress else "snap.tar"), outside, compress=compress)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    marker = "R25-ENVIRON-MARKER-do-not-show"
    for args in _runs(tmp_path, tar):
        r = run_capped(*args, env={"TMPDIR": str(tmp), "R25_MARKER": marker}, timeout=120)
        assert "Traceback" not in r.err and r.code in (0, 1), (args, r.err[-2000:])
        assert sorted(p.name for p in outside.iterdir()) == ["victim"], args
        assert (outside / "victim").read_text() == "untouched"
        assert marker not in r.out + r.err, args
        assert not list(tmp_path.rglob("*pwned*")) and not [
            p for p in tmp.iterdir() if p.name.startswith("cd-")
        ]
        if args[0] == "diagnose":
            doc = json.loads(r.out)
            assert any("member left out" in w for w in doc["warnings"]), args
        else:
            assert "member left out" in r.err + r.out
