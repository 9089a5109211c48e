"""bench/precision/run.py on a corpus this test writes: present repositories are linted, absent
ones skipped, findings joined with their verdicts, recall measured. Nothing is downloaded."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "bench" / "precision" / "run.py"


def test_run_scores_present_repositories_and_skips_absent_ones(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    repo = corpus / "demo+present"
    repo.mkdir(parents=True)
    (repo / "train.py").write_text(textwrap.dedent("""\
        import torch

        model = Net().cuda()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        sgd = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        adam = torch.optim.Adam(model.parameters(), lr=0.1)
        """), encoding="utf-8")
    (tmp_path / "repos.toml").write_text(
        '[[repo]]\nname = "demo/present"\ncommit = "0"\n\n[[repo]]\nname = "demo/absent"\ncommit = "0"\n',
        encoding="utf-8")
    (tmp_path / "labels.tsv").write_text(
        "demo+present\ttrain.py:4\tGPU201\tTP\t\ndemo+present\ttrain.py:5\tGPU201\tFP\ta reason\n"
        "demo+present\ttrain.py:6\tGPU201\tNP\ttrue, but pointless here\n", encoding="utf-8")
    (tmp_path / "recall.tsv").write_text(
        "demo+present\ttrain.py:4\tGPU201\tAdamW\ndemo+present\ttrain.py:9\tGPU201\tnot reported\n", encoding="utf-8")
    results = tmp_path / "RESULTS.md"
    out = subprocess.run(
        [sys.executable, str(RUN), "--corpus", str(corpus), "--repos", str(tmp_path / "repos.toml"),
         "--labels", str(tmp_path / "labels.tsv"), "--recall", str(tmp_path / "recall.tsv"),
         "--results", str(results), "--out", str(tmp_path / "out"), "--write", "--unlabelled"],
        capture_output=True, text=True, cwd=ROOT, check=True,
    ).stdout
    # strict counts the finding that cannot pay off (NP) as wrong, lenient as right
    assert "| GPU201 | stable | 3 | 1 | 1 | 1 | 33.3 % | 66.7 % | 1/2 (50 %) |" in out
    assert "demo/present" in out and "demo/absent" not in out
    assert "\t?\t" not in out  # every finding has its verdict
    text = results.read_text(encoding="utf-8")
    assert "<!-- SUMMARY:BEGIN -->" in text and "a reason" in text and "(NP): true, but pointless here" in text


def test_a_named_set_reads_its_own_files_and_writes_its_own_blocks(tmp_path: Path) -> None:
    """`--set NAME` takes NAME.toml, NAME-labels.tsv and NAME-recall.tsv together and writes NAME-* blocks,
    leaving the development corpus's blocks (and its timing) alone."""
    corpus = tmp_path / "corpus"
    repo = corpus / "demo+held"
    repo.mkdir(parents=True)
    (repo / "train.py").write_text(textwrap.dedent("""\
        import torch

        model = Net().cuda()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        """), encoding="utf-8")
    sets = tmp_path / "sets"
    sets.mkdir()
    (sets / "held3.toml").write_text('[[repo]]\nname = "demo/held"\ncommit = "0"\n', encoding="utf-8")
    (sets / "held3-labels.tsv").write_text("demo+held\ttrain.py:4\tGPU201\tNP\ttoy scale here\n", encoding="utf-8")
    (sets / "held3-recall.tsv").write_text("demo+held\ttrain.py:4\tGPU201\tAdamW\n", encoding="utf-8")
    results = tmp_path / "RESULTS.md"
    results.write_text("# results\n\n<!-- SUMMARY:BEGIN -->\nuntouched\n<!-- SUMMARY:END -->\n", encoding="utf-8")
    out = subprocess.run(
        [sys.executable, str(RUN), "--corpus", str(corpus), "--set", "held3", "--set-dir", str(sets),
         "--block-prefix", "HELD3-FIRST-", "--results", str(results), "--out", str(tmp_path / "out"), "--write"],
        capture_output=True, text=True, cwd=ROOT, check=True,
    ).stdout
    assert "| GPU201 | stable | 1 | 0 | 1 | 0 | 0.0 % | 100.0 % | 1/1 (100 %) |" in out
    text = results.read_text(encoding="utf-8")
    assert "<!-- HELD3-FIRST-SUMMARY:BEGIN -->" in text and "<!-- HELD3-FIRST-PER-REPOSITORY:BEGIN -->" in text
    assert "GPU201 `demo/held/train.py:4` (NP): toy scale here" in text
    assert "untouched" in text and "TIMING" not in text
    subprocess.run(
        [sys.executable, str(RUN), "--corpus", str(corpus), "--set", "held3", "--set-dir", str(sets),
         "--results", str(results), "--out", str(tmp_path / "out"), "--rescore", "--write"],
        capture_output=True, text=True, cwd=ROOT, check=True)
    assert "<!-- HELD3-SUMMARY:BEGIN -->" in results.read_text(encoding="utf-8")
