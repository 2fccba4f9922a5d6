"""A storage message is about the path printed with it (rules/storage_subject)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from clusterdoctor.rules.storage_subject import error_path
from tests.conftest import diagnose_text


def _top(tmp_path, text):
    return diagnose_text(tmp_path, text)[0]


def test_stale_handle_names_the_mount_not_the_prompt_host(tmp_path):
    # corpus case stor-601 (github.com/Nexenta/edgefs, the paste as posted)
    text = (
        "[root@preprd-42 ~]# mount -t nfs 10.130.44.220:/ai-team/dataset /mnt/dataset/\n"
        "[root@preprd-42 ~]# ls /mnt/dataset/\n"
        "ls: cannot access /mnt/dataset/: Stale file handle\n"
    )
    f = _top(tmp_path, text)
    assert f.rule == "STOR117" and f.subject == "/mnt/dataset"


def test_two_paths_name_neither(tmp_path):
    text = "ls: cannot access /a: Stale file handle\nls: cannot access /b: Stale file handle\n"
    f = _top(tmp_path, text)
    assert f.rule == "STOR117" and f.subject not in ("/a", "/b")


def test_python_oserror_puts_the_path_after():
    t = "OSError: [Errno 116] Stale file handle: '/mnt/ckpt/step_100.pt'"
    assert error_path(t, t.index("Stale")) == "/mnt/ckpt/step_100.pt"


def test_quoted_coreutils_path():
    t = "cp: cannot create regular file '/ckpt/x.pt': No space left on device"
    assert error_path(t, t.index("No space")) == "/ckpt/x.pt"


@given(st.text(max_size=300), st.integers(min_value=0, max_value=300))
def test_error_path_never_fails_and_returns_an_absolute_path(text, at):
    p = error_path(text, min(at, len(text)))
    assert p is None or (p.startswith("/") and p in text)
