"""scripts/get_ocloc.sh takes the Debian archive from the machine's own apt sources: the one-line format
(sources.list, sources.list.d/*.list) and deb822 stanzas (sources.list.d/*.sources), the entry for the
machine's own Debian release with component main. Where there is none it fails with one sentence. Run with
--archive, which prints the URL it would use and fetches nothing, against made-up apt configurations.
"""
import pathlib
import random
import subprocess

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "get_ocloc.sh"
BOOKWORM = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_CODENAME=bookworm\n'

# Entries that must never be taken: another suite of the same archive, source packages, other components,
# a third-party repository with a suite of its own, a disabled stanza.
DECOYS_ONE_LINE = """\
# deb http://commented.invalid/debian bookworm main
deb http://security.invalid/debian-security bookworm-security main
deb-src http://source.invalid/debian bookworm main
deb http://contrib.invalid/debian bookworm contrib non-free
deb [arch=amd64] https://vendor.invalid/apt nodistro main
"""
DECOYS_DEB822 = """\
Types: deb
URIs: http://updates.invalid/debian
Suites: bookworm-updates
Components: main

Types: deb-src
URIs: http://source.invalid/debian
Suites: bookworm
Components: main

Enabled: no
Types: deb
URIs: http://disabled.invalid/debian
Suites: bookworm
Components: main
"""


def fresh_url():
    """A made-up archive URL no other case uses, so a stale or hard-wired answer cannot pass."""
    return f"http://mirror-{random.randrange(1 << 32):08x}.invalid/debian"


def archive(tmp_path, sources_list=None, lists=(), stanzas=(), os_release=BOOKWORM):
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    if sources_list is not None:
        (etc / "sources.list").write_text(sources_list)
    for i, text in enumerate(lists):
        (etc / "sources.list.d" / f"{i}.list").write_text(text)
    for i, text in enumerate(stanzas):
        (etc / "sources.list.d" / f"{i}.sources").write_text(text)
    (tmp_path / "os-release").write_text(os_release)
    env = {"PATH": "/usr/bin:/bin", "APT_ETC": str(etc), "OS_RELEASE": str(tmp_path / "os-release")}
    return subprocess.run(["bash", str(SCRIPT), "--archive"], capture_output=True, text=True, env=env, timeout=60)


def test_the_one_line_format_in_sources_list(tmp_path):
    url = fresh_url()
    run = archive(tmp_path, sources_list=DECOYS_ONE_LINE + f"deb [signed-by=/k.gpg trusted=no] {url} bookworm main\n")
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"{url}\n"


def test_the_one_line_format_in_a_list_file(tmp_path):
    url = fresh_url()
    run = archive(tmp_path, sources_list=DECOYS_ONE_LINE, lists=[f"deb {url} bookworm contrib main\n"])
    assert (run.returncode, run.stdout) == (0, f"{url}\n"), run.stderr


def test_a_deb822_stanza(tmp_path):
    url = fresh_url()
    stanza = (f"Types: deb deb-src\n# a comment inside the stanza\nURIs: {url} http://second.invalid/debian\n"
              "Suites: bookworm bookworm-updates\nComponents: main contrib\n"
              "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
    run = archive(tmp_path, sources_list=DECOYS_ONE_LINE, stanzas=[DECOYS_DEB822, stanza])
    assert (run.returncode, run.stdout) == (0, f"{url}\n"), run.stderr


@pytest.mark.parametrize("case", ["only decoys", "no sources at all", "not Debian"])
def test_no_archive_fails_with_one_sentence(tmp_path, case):
    sources = {"only decoys": DECOYS_ONE_LINE, "no sources at all": None,
               "not Debian": f"deb {fresh_url()} noble main\n"}[case]
    os_release = 'ID=ubuntu\nID_LIKE=debian\nVERSION_CODENAME=noble\n' if case == "not Debian" else BOOKWORM
    run = archive(tmp_path, sources_list=sources, stanzas=[DECOYS_DEB822], os_release=os_release)
    assert run.returncode == 1 and run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("get_ocloc: found no Debian archive in this machine's apt sources")
    assert str(tmp_path / "apt" / "sources.list") in lines[0]
