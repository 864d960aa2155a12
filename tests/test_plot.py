"""`rlcore plot`: constant metrics are listed, not drawn; runs appended to one file are drawn apart."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from rlcore.cli import main
from rlcore.logging import learning_curves, plot_run


def _write(run: Path, rows: list[dict[str, float]]) -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _rows(steps: range) -> list[dict[str, float]]:
    return [
        {
            "time/env_steps": s,
            "rollout/episodes": 10,  # the same count every iteration
            "rollout/length_mean": 50.0,  # FetchReach: every episode 50 steps
            "rollout/return_mean": -50.0 + s / 100,
            "rollout/success_rate": math.nan,  # not a goal env
            "train/critic_loss": 1.0 / s,
            "eval/return_mean": -40.0 + s / 50,
            "eval/length_mean": 50.0,
        }
        for s in steps
    ]


def test_constant_and_non_finite_metrics_are_listed_not_drawn(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _write(run, _rows(range(200, 2001, 200)))
    curves = {c.namespace: c for c in learning_curves(run)}
    assert set(curves["rollout"].drawn) == {"return_mean"}
    assert curves["rollout"].constant["episodes"] == 10 and curves["rollout"].constant["length_mean"] == 50
    assert math.isnan(curves["rollout"].constant["success_rate"])
    assert set(curves["eval"].drawn) == {"return_mean"} and set(curves["eval"].constant) == {"length_mean"}
    [part] = curves["train"].drawn["critic_loss"]
    assert [x for x, _ in part] == list(range(200, 2001, 200))
    paths = plot_run(run)
    assert sorted(p.name for p in paths) == ["eval.png", "rollout.png", "train.png"]


def test_a_namespace_with_only_constant_metrics_gets_no_png(tmp_path: Path) -> None:
    run = tmp_path / "run"
    rows = [{"time/env_steps": s, "rollout/episodes": 4, "train/loss": 1.0 / s} for s in (100, 200, 300)]
    _write(run, rows)
    assert [p.name for p in plot_run(run)] == ["train.png"]
    assert not (run / "rollout.png").exists()
    _write(run, [{"time/env_steps": s, "rollout/episodes": 4} for s in (100, 200)])
    with pytest.raises(ValueError, match=r"nothing to draw \(rollout/episodes = 4\)"):
        plot_run(run)


def test_runs_appended_to_one_file_are_separate_lines(tmp_path: Path) -> None:
    """The file a second `rlcore train` used to append to: the env steps go back from 2000 to 200.
    Each run is its own line, so no line runs from step 2000 back to 200."""
    run = tmp_path / "run"
    _write(run, _rows(range(200, 2001, 200)) + _rows(range(200, 2001, 200)))
    curves = {c.namespace: c for c in learning_curves(run)}
    parts = curves["rollout"].drawn["return_mean"]
    assert len(parts) == 2
    for part in parts:
        xs = [x for x, _ in part]
        assert xs == sorted(xs) and xs[0] == 200 and xs[-1] == 2000


def test_plot_command_says_in_one_line_when_nothing_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    _write(run, [{"time/env_steps": s, "eval/length_mean": 50.0} for s in (100, 200)])
    assert main(["plot", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlcore: error: ") and "nothing to draw" in err and err.count("\n") == 1


@pytest.mark.parametrize("last_env_steps", [2_000, 15_000, 150_000, 1_000_000])
def test_env_step_tick_labels_do_not_run_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, last_env_steps: int
) -> None:
    """Issue 43: on the eval plot of a 15k-step run matplotlib's default labels "10000", "12000",
    "14000" touched. Every panel's visible x tick labels keep a gap between them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep each figure to read its labels
    run = tmp_path / "run"
    every = last_env_steps // 15
    _write(run, _rows(range(every, last_env_steps + 1, every)))
    plot_run(run)
    assert len(figures) == 3
    checked = 0
    for fig in figures:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            if not ax.get_visible() or not ax.axison:
                continue
            low, high = ax.get_xlim()
            labels = [
                t
                for t, x in zip(ax.get_xticklabels(), ax.get_xticks(), strict=True)
                if low <= x <= high and t.get_text()
            ]
            assert len(labels) >= 3, [t.get_text() for t in labels]
            boxes = sorted((t.get_window_extent(renderer) for t in labels), key=lambda b: b.x0)
            gaps = [right.x0 - left.x1 for left, right in zip(boxes, boxes[1:], strict=False)]
            assert min(gaps) >= 5, (last_env_steps, [t.get_text() for t in labels], gaps)  # pixels at dpi 100
            checked += 1
        fig.clf()
    assert checked == 3  # rollout/return_mean, train/critic_loss, eval/return_mean


def test_several_runs_beside_a_published_curve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``rlcore plot RUN RUN --reference CSV``: the published mean and its ± std band are drawn
    (two more artists in the legend, labelled), and the runs' own table and CSV are unchanged."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from rlcore import results

    for seed in (0, 1):
        _write(tmp_path / "runs" / f"s{seed}", _rows(range(1000, 16000, 1000)))
    ref = tmp_path / "tianshou.csv"
    ref.write_text("env_step,mean,std\n0,0.0,1.0\n8000,100.0,20.0\n16000,250.0,30.0\n")
    drawn: list[list[str]] = []
    real_savefig = plt.Figure.savefig

    def spy(fig: plt.Figure, *a: object, **k: object) -> None:
        drawn.append([t.get_text() for t in fig.axes[0].get_legend().get_texts()])
        real_savefig(fig, *a, **k)

    plt.Figure.savefig = spy  # type: ignore[method-assign]
    try:
        argv = ["plot", str(tmp_path / "runs" / "s0"), str(tmp_path / "runs" / "s1")]
        assert main([*argv, "--reference", str(ref), "--reference-label", "Tianshou (10 seeds)"]) == 0
    finally:
        plt.Figure.savefig = real_savefig  # type: ignore[method-assign]
    assert "Tianshou (10 seeds): mean" in drawn[-1] and "Tianshou (10 seeds): mean ± std" in drawn[-1]
    assert "| mean ± std (2 runs) |" in capsys.readouterr().out
    step, mean, std = results.read_reference(ref)
    assert (
        step.tolist() == [0, 8000, 16000] and mean.tolist() == [0, 100, 250] and std.tolist() == [1, 20, 30]
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("step,rew\n0,1\n", "header env_step,mean,std"),
        ("env_step,mean,std\n0,1,x\n", "could not convert"),
        ("env_step,mean,std\n", "no rows"),
    ],
)
def test_a_malformed_reference_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    for seed in (0, 1):
        _write(tmp_path / f"s{seed}", _rows(range(1000, 4000, 1000)))
    (tmp_path / "ref.csv").write_text(text)
    argv = ["plot", str(tmp_path / "s0"), str(tmp_path / "s1"), "--reference", str(tmp_path / "ref.csv")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "eval_return_mean.png").exists()  # nothing drawn from a bad reference
    assert main(["plot", str(tmp_path / "s0"), "--reference", str(tmp_path / "ref.csv")]) == 2
    assert "give two or more RUN_DIRs" in capsys.readouterr().err
