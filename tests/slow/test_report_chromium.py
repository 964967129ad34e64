"""Slow tier: eval and report on a short run of the embedded model, then the report opened in headless Chromium.

Chromium (Debian's `chromium` package: `apt-get install -y chromium`) loads
report.html from disk with no network; a copy of the page with a few lines
of script appended reports, once the page has loaded, every image's
`naturalWidth` (0 for an image that failed to load) and the page's text,
which must show the run's own numbers. Skipped with the reason when
Chromium is not installed.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from grpokit.cli import main

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "recipes" / "smollm2-arithmetic.yaml"
SMALL = ["--set", "train.num_generations=4", "--set", "train.per_device_train_batch_size=4",
         "--set", "train.max_completion_length=24", "--set", "train.save_steps=1", "--set", "train.max_steps=2"]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Appended to a copy of the page: after load, write what the browser saw into the DOM for --dump-dom.
# It also types into the completions search box: a word no completion holds must hide every row.
PROBE = """<script>window.addEventListener('load', () => {
  const imgs = [...document.images].map(i => ({src: i.getAttribute('src'), w: i.naturalWidth, ok: i.complete}));
  const text = document.body.innerText;
  const box = document.getElementById('completions-search');
  box.value = 'zzqx-in-no-completion'; box.dispatchEvent(new Event('input'));
  const shown = [...document.querySelectorAll('#completions tbody tr')].filter(r => r.style.display !== 'none').length;
  const pre = document.createElement('pre'); pre.id = 'grpokit-probe';
  pre.textContent = JSON.stringify({imgs, text, shown, count: document.getElementById('completions-count').textContent});
  document.body.appendChild(pre);
});</script>"""


def open_in_chromium(report: Path) -> dict:
    """{imgs: [{src, w, ok}], text} as headless Chromium sees report.html (images resolved beside it)."""
    probe = report.with_name("_probe.html")
    probe.write_text(report.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        out = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
             "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
            capture_output=True, text=True, timeout=120)
    probe.unlink()
    m = re.search(r'<pre id="grpokit-probe">(.*?)</pre>', out.stdout, re.S)
    assert m, f"the page did not finish loading in Chromium: {out.stderr[-2000:]}"
    import html

    return json.loads(html.unescape(m.group(1)))


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium)")
def test_eval_and_report_of_an_embedded_run_in_chromium(tmp_path):
    run = tmp_path / "run"
    assert main(["train", str(DEMO), "--output-dir", str(run), "--skip-audit", *SMALL]) == 0
    assert main(["eval", str(run), "--max-rows", "8", "--max-new-tokens", "24", "--samples", "2"]) == 0
    results = json.loads((run / "eval" / "results.json").read_text())
    assert [e["step"] for e in results["checkpoints"]] == [0, 1, 2]
    assert all(e["perturbed"]["rows"] == 8 for e in results["checkpoints"])  # the arithmetic set is generated
    assert main(["report", str(run)]) == 0
    report = run / "report" / "report.html"

    seen = open_in_chromium(report)
    srcs = {i["src"] for i in seen["imgs"]}
    assert {"reward.png", "completion_length.png", "frac_reward_zero_std.png", "eval_accuracy.png"} <= srcs
    metrics = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
    # entropy comes from the policy pass, which skip_no_signal skips on steps whose groups all tied
    assert ("entropy.png" in srcs) == any("entropy" in m for m in metrics)
    broken = [i["src"] for i in seen["imgs"] if not (i["ok"] and i["w"] > 0)]
    assert not broken, f"images that did not load: {broken}"
    text = seen["text"]
    best = results["best"]
    # the accuracy with its 95% Wilson interval (grpokit.evaluation.intervals), as the terminal prints it
    assert f"Best checkpoint: step {best['step']} ({100 * best['accuracy']:.1f}% (" in text
    base = results["checkpoints"][0]["heldout"]
    assert f"{100 * base['accuracy']:.1f}%" in text
    last = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()][-1]
    assert f"{last['reward']:.3f}" in text  # the last logged reward, as the run wrote it
    assert "KL to the reference model: not logged (train.beta is 0" in text  # the demo recipe has beta 0
    assert {"loss.png", "learning_rate.png", "memory.png"} <= srcs  # logged by every run (memory: grpokit's logger)
    assert seen["shown"] == 0 and seen["count"].startswith("0 of ")  # the search box filtered in the browser
