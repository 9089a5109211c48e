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
        sgd = torch.optim.SGD(model.parameters(), lr=0.1)
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
