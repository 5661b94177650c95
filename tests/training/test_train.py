"""A run exported with its state goes on from its step on another machine: the schedule where it was, warmed up
again for the optimizer's new moments."""

import argparse
import json
import sys

import torch

from bench.harness.fixtures import tiny_config
from model.network.transformer import Seq2SeqTransformer
from training import export
from training.train import lr_at, start_from

SPM = "model/builtin/en-es/spm.model"


def test_an_exported_run_goes_on_from_its_step_and_place(tmp_path, monkeypatch):
    # catches: a run committed to go on elsewhere starting again at step 0 (the first warmup's full rate over trained
    # weights), its place in the epoch and log lost, or dropout left on in the exported model's config
    cfg = tiny_config(8002, dropout=0.1, activation_dropout=0.1)
    model = Seq2SeqTransformer(cfg).init_weights()
    state = {"step": 5000, "epoch": 1, "batch": 7, "tokens": 123, "seconds": 9.0, "log": [{"step": 5000}]}
    saved = {"model": model.state_dict(), "state": state, "config": cfg.to_dict(), "args": {"languages": "en,es"}}
    torch.save(saved, tmp_path / "last.pt")
    out = tmp_path / "out"
    argv = ["export", "--checkpoint", str(tmp_path / "last.pt"), "--out", str(out), "--spm", SPM, "--state"]
    monkeypatch.setattr(sys, "argv", argv)
    export.main()
    architecture = json.loads((out / "config.json").read_text())["architecture"]
    assert architecture["dropout"] == architecture["activation_dropout"] == 0.0
    fresh = Seq2SeqTransformer(cfg)
    went_on = start_from(fresh, out, {"step": 0})
    assert went_on == {**state, "rewarm": 5000}
    want = {k: v.half().float() for k, v in model.state_dict().items()}
    assert all(torch.equal(v, want[k]) for k, v in fresh.state_dict().items())  # the weights, at fp16's precision
    (out / "training.json").unlink()
    assert start_from(Seq2SeqTransformer(cfg), out, {"step": 0}) == {"step": 0}  # a plain export: a new run


def test_the_rate_warms_up_again_from_the_step_a_run_went_on_at():
    args = argparse.Namespace(lr=5e-4, warmup=200, cooldown="")
    assert lr_at(5000, args, rewarm=5000) == lr_at(5000, args) / 200
    assert lr_at(5199, args, rewarm=5000) == lr_at(5199, args)  # warmed up: the schedule's own rate
    assert lr_at(99, args) == 5e-4 * 100 / 200  # the first warmup as it was


def test_checkpoints_exported_together_are_averaged(tmp_path, monkeypatch):
    # catches: only the last checkpoint exported, or the state taken from another than the last
    cfg = tiny_config(8002)
    models = [Seq2SeqTransformer(cfg).init_weights() for _ in range(2)]
    for i, model in enumerate(models):
        state = {"step": 100 * (i + 1), "epoch": 0, "batch": i, "tokens": 1, "seconds": 1.0, "log": []}
        saved = {"model": model.state_dict(), "state": state, "config": cfg.to_dict(), "args": {"languages": "en,es"}}
        torch.save(saved, tmp_path / f"step{i}.pt")
    out = tmp_path / "out"
    paths = [str(tmp_path / f"step{i}.pt") for i in range(2)]
    monkeypatch.setattr(sys, "argv", ["export", "--checkpoint", *paths, "--out", str(out), "--spm", SPM, "--state"])
    export.main()
    fresh = Seq2SeqTransformer(cfg)
    assert start_from(fresh, out, {"step": 0})["step"] == 200
    a, b = (m.state_dict() for m in models)
    want = {k: ((a[k].float() + b[k].float()) / 2).half().float() for k in a}
    assert all(torch.allclose(v, want[k], atol=1e-3) for k, v in fresh.state_dict().items())
