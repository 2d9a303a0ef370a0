"""A release file (an sdist) fetched from the package indexes pip is configured with, checked by its sha256.

`pip download` cannot fetch an sdist without building its metadata (for vLLM: its whole build toolchain), so
this reads the index list from pip itself, as scripts/get_ocloc.sh reads apt's sources: `pip config list`
(configuration files and PIP_* variables), and pip's own default index when none is set. No index is named
here. Each index's project page (the simple repository API, HTML) is searched for the file name; the first
index that has it serves it, and the download must match the pinned sha256.
"""
import hashlib
import html
import pathlib
import re
import shlex
import subprocess
import sys
import urllib.parse
import urllib.request

from release_envs import EnvUnavailable

ANCHOR = re.compile(r"<a\s[^>]*?href=\"([^\"]+)\"[^>]*>", re.IGNORECASE)
# The scopes whose settings `pip download` uses, the one that wins first (pip config list merges the files).
SECTIONS = (":env:", "download", "global")


def _pip_config():
    done = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    found = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        section, _, name = key.rpartition(".")
        if section in SECTIONS:
            found[(section, name)] = shlex.split(value)[0] if value.strip() else ""
    settings = {}
    for section in reversed(SECTIONS):  # a later (stronger) scope replaces what an earlier one set
        settings.update({name: value for (where, name), value in found.items() if where == section})
    return settings


def _default_index():
    done = subprocess.run([sys.executable, "-c", "from pip._internal.models.index import PyPI; print(PyPI.simple_url)"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise EnvUnavailable("pip's default index is unknown here: set index-url in pip's configuration")
    return done.stdout.strip()


def index_urls():
    """The indexes `pip download` would search, in its order: index-url (or pip's default), extra-index-url."""
    settings = _pip_config()
    if settings.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        return []
    main = settings.get("index-url") or _default_index()
    return list(dict.fromkeys([main, *settings.get("extra-index-url", "").split()]))


def _read(url, timeout):
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        path = pathlib.Path(urllib.request.url2pathname(parsed.path))
        return (path / "index.html").read_bytes() if path.is_dir() else path.read_bytes()
    request = urllib.request.Request(url, headers={"Accept": "text/html"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read()


def find_file(project, filename, timeout=60):
    """The URL of `filename` on the first configured index whose `project` page lists it."""
    tried = []
    for index in index_urls():
        page = index.rstrip("/") + f"/{project}/"
        try:
            text = _read(page, timeout).decode("utf-8", "replace")
        except OSError as error:
            tried.append(f"{page}: {error}")
            continue
        for href in ANCHOR.findall(text):
            url = urllib.parse.urljoin(page, html.unescape(href))
            if urllib.parse.unquote(urllib.parse.urlparse(url).path).rsplit("/", 1)[-1] == filename:
                return url.split("#", 1)[0]
        tried.append(f"{page}: no {filename}")
    raise EnvUnavailable(f"no configured pip index has {filename} ({'; '.join(tried) or 'pip has no-index set'})")


def download(project, filename, sha256, target, timeout=120):
    """`filename` of `project` from pip's indexes into `target`; raises EnvUnavailable on a wrong sha256."""
    url = find_file(project, filename)
    digest = hashlib.sha256()
    try:
        parsed = urllib.parse.urlparse(url)
        source = (open(urllib.request.url2pathname(parsed.path), "rb") if parsed.scheme == "file"
                  else urllib.request.urlopen(url, timeout=timeout))
        with source as response, open(target, "wb") as out:
            for chunk in iter(lambda: response.read(1 << 20), b""):
                digest.update(chunk)
                out.write(chunk)
    except OSError as error:
        raise EnvUnavailable(f"cannot download {filename} from {url}: {error}") from None
    if digest.hexdigest() != sha256:
        raise EnvUnavailable(f"{filename} from {url} has sha256 {digest.hexdigest()}, expected {sha256}")
