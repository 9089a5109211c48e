"""Hostile tests, names: a file name that is not UTF-8 never breaks an output format (issue 10,
item 18). Every format writes valid UTF-8 (and valid JSON, SARIF, XML), and the name comes
back byte for byte: JSON escapes the undecodable bytes (`\\udcXX`, as Python's os.fsdecode
names them), SARIF percent-encodes them in the URI, the text formats and JUnit quote the
name the way git does (`"caf\\351.py"`). Runs with the results cache on and off.
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import unquote_to_bytes, urlparse

import pytest

from gpulint.output.display import quote_path
from tests.conftest import Gpulint

# MNIST yields CPU tensors: GPU101's fix is the safe one, so `fix --diff` has a diff to show
TRAIN = (b"import torch\nfrom torch.utils.data import DataLoader\nfrom torchvision.datasets import MNIST\n"
         b"loader = DataLoader(MNIST('data'))\nfor x, y in loader:\n    x = x.cuda()\n")
NAME = b"caf\xe9 \"x\"\\.py"  # latin-1 e-acute, a quote and a backslash: every escaping matters


def unquote_c(text: str) -> bytes:
    """The inverse of git's path quoting: `"caf\\351.py"` -> b"caf\\xe9.py"."""
    if not text.startswith('"'):
        return os.fsencode(text)
    assert text.endswith('"'), text
    body, out, i = text[1:-1], bytearray(), 0
    named = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
    while i < len(body):
        if body[i] == "\\":
            if body[i + 1] in named:
                out.append(named[body[i + 1]])
                i += 2
            else:
                out.append(int(body[i + 1:i + 4], 8))
                i += 4
        else:
            out += body[i].encode("utf-8")
            i += 1
    return bytes(out)


@pytest.fixture
def odd_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> bytes:
    monkeypatch.chdir(tmp_path)
    fd = os.open(NAME, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, TRAIN)
    os.close(fd)
    return os.path.join(os.fsencode(str(tmp_path)), NAME)


@pytest.mark.parametrize("fmt", ["concise", "full", "github", "junit", "json", "json-lines", "sarif"])
def test_every_format_writes_utf8_and_keeps_the_name(gl: Gpulint, odd_file: bytes, fmt: str) -> None:
    result = gl.check("--output-format", fmt, os.fsdecode(NAME))
    assert result.exit_code == 1, result.output
    text = result.stdout_bytes.decode("utf-8")  # valid UTF-8, whatever the name
    if fmt in ("concise", "full"):
        [line] = [line for line in text.splitlines() if "GPU101" in line and line.startswith('"')]
        quoted = re.match(r'("(?:[^"\\]|\\.)*")', line).group(1)
        assert unquote_c(quoted) == NAME
    elif fmt == "github":
        [line] = [line for line in text.splitlines() if "GPU101" in line]
        prop = re.search(r"file=([^,]*)", line).group(1)
        prop = prop.replace("%2C", ",").replace("%3A", ":").replace("%0A", "\n").replace("%0D", "\r")
        assert unquote_c(prop.replace("%25", "%")) == NAME
    elif fmt == "junit":
        root = ET.fromstring(text.split("\n", 1)[1])
        names = {suite.get("name") for suite in root.iter("testsuite")}
        assert [unquote_c(n) for n in names] == [NAME]
    elif fmt in ("json", "json-lines"):
        items = json.loads(text) if fmt == "json" else [json.loads(line) for line in text.splitlines()]
        assert {os.fsencode(item["filename"]) for item in items} == {odd_file}
    else:
        log = json.loads(text)
        uris = {loc["physicalLocation"]["artifactLocation"]["uri"]
                for result_ in log["runs"][0]["results"] for loc in result_["locations"]}
        assert [unquote_to_bytes(urlparse(u).path) if "://" in u else unquote_to_bytes(u) for u in uris] == [NAME]


@pytest.mark.parametrize("args", [("fix", "--diff"), ("check", "--statistics"), ("fix", "--show-fixes"),
                                  ("check", "--show-fixes")])
def test_other_outputs_with_the_name(gl: Gpulint, odd_file: bytes, args: tuple[str, ...]) -> None:
    result = gl(*args, os.fsdecode(NAME))
    assert result.exit_code in (0, 1), result.output
    result.stdout_bytes.decode("utf-8")
    result.stderr_bytes.decode("utf-8")
    if "--diff" in args:
        [header] = [line for line in result.stdout.splitlines() if line.startswith("--- ")]
        assert unquote_c(header[4:]) == b"a/" + NAME


def test_warnings_with_the_name_are_utf8(gl: Gpulint, odd_file: bytes) -> None:
    os.chmod(odd_file, 0o444)
    try:
        result = gl.fix(os.fsdecode(NAME))
    finally:
        os.chmod(odd_file, 0o644)
    result.stderr_bytes.decode("utf-8")
    assert os.geteuid() == 0 or "read-only" in result.stderr


def test_quote_path_only_quotes_what_needs_it() -> None:
    assert quote_path("src/train.py") == "src/train.py"
    assert quote_path("donn\u00e9es/train.py") == "donn\u00e9es/train.py"  # decodable names stay as they are
    assert quote_path(os.fsdecode(b"caf\xe9.py")) == '"caf\\351.py"'
    assert quote_path('a"b\\c\td.py') == '"a\\"b\\\\c\\td.py"'
