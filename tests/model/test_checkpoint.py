"""Native checkpoints round-trip; strict loading names bad tensors; Marian import names its language pair."""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from model.loading.checkpoint import load, resolve
from model.runner.generate import generate
from model.runner.params import DecodeParams
from model.runner.search import Request


def test_native_round_trip(native_dir, tmp_path):
    ck = load(native_dir)
    assert (ck.name, ck.source_lang, ck.target_lang) == ("en-es", "en", "es")
    assert ck.model.src_embed is ck.model.tgt_embed  # shared embeddings survive the round trip
    ids = ck.tokenizer.encode("the red cat")
    first = generate(ck.model, [Request(0, ids, DecodeParams(max_new_tokens=8))])
    copy = tmp_path / "copy"
    shutil.copytree(native_dir, copy)
    again = load(copy)
    assert generate(again.model, [Request(0, ids, DecodeParams(max_new_tokens=8))])[0][0].tokens == first[0][0].tokens


def test_tied_output_survives_save_and_load(native_dir, tmp_path):
    from bench.harness.fixtures import tiny_config
    from model.loading.checkpoint import save_native
    from model.network.transformer import Seq2SeqTransformer

    model = Seq2SeqTransformer(tiny_config(320, tie_output=True))
    save_native(model, native_dir / "spm.model", tmp_path / "tied", "en", "es")
    loaded = load(tmp_path / "tied").model
    assert loaded.out_proj.weight is loaded.tgt_embed.weight
    assert torch.equal(loaded.out_proj.weight, model.out_proj.weight)


def test_a_two_way_native_checkpoint_serves_both_pairs_by_target_token(native_dir, tmp_path):
    from bench.harness.fixtures import tiny_config
    from model.loading.checkpoint import save_native
    from model.network.transformer import Seq2SeqTransformer

    pieces = load(native_dir).tokenizer.source.get_piece_size()
    model = Seq2SeqTransformer(tiny_config(pieces + 2, tie_output=True))
    save_native(model, native_dir / "spm.model", tmp_path / "two", "en", "es", {"en": pieces, "es": pieces + 1})
    ck = load(tmp_path / "two")
    langs = ck.languages
    assert sorted(langs.pairs()) == [("en", "es"), ("es", "en")] and not langs.serves("en", "en")
    assert (langs.sources[0], langs.targets[0]) == ("en", "es")  # its first pair first (python -m model's default)
    assert langs.prefix("en", "es") == [pieces + 1] and langs.prefix("es", "en") == [pieces]
    assert ck.tokenizer.decode([pieces, pieces + 1]) == ""  # the language tokens never reach the text


def test_strict_loading_names_missing_and_unexpected_tensors(native_dir, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(native_dir, bad)
    state = load_file(str(bad / "model.safetensors"))
    del state["decoder.0.ffn.fc1.weight"]
    state["encoder.9.extra"] = torch.zeros(1)
    save_file(state, str(bad / "model.safetensors"))
    with pytest.raises(ValueError, match=r"decoder\.0\.ffn\.fc1\.weight.*encoder\.9\.extra"):
        load(bad)


def test_unknown_formats_and_missing_paths_are_clear(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ValueError, match="model_type .bert. is not served"):
        load(tmp_path)
    with pytest.raises(FileNotFoundError, match="not found"):
        resolve("./does/not/exist")


def test_marian_import_reads_pair_from_name_and_loads_without_transformers(marian_dir, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "transformers", None)  # any import of transformers would fail
    ck = load(marian_dir)
    assert ck.name == "en-es"
    assert ck.model.cfg.pe_layout == "halves" and ck.model.cfg.activation == "swish"
    assert ck.model.final_logits_bias is not None


def test_marian_from_pytorch_bin(marian_dir, tmp_path):
    copy = tmp_path / "opus-mt-en-fr"
    shutil.copytree(marian_dir, copy)
    torch.save(load_file(str(copy / "model.safetensors")), copy / "pytorch_model.bin")
    (copy / "model.safetensors").unlink()
    ck = load(copy)
    assert ck.name == "en-fr"
    ref = load(marian_dir)
    assert torch.equal(ck.model.out_proj.weight, ref.model.out_proj.weight)


def test_marian_zero_logits_bias_is_dropped_without_changing_logits(marian_dir, tmp_path):
    copy = tmp_path / "opus-mt-en-de"
    shutil.copytree(marian_dir, copy)
    state = load_file(str(copy / "model.safetensors"))
    state["final_logits_bias"] = torch.zeros_like(state["final_logits_bias"])
    save_file(state, str(copy / "model.safetensors"))
    zeroed, ref = load(copy).model, load(marian_dir).model
    assert zeroed.final_logits_bias is None and not zeroed.cfg.final_logits_bias
    assert ref.final_logits_bias is not None  # a real bias is kept
    ref.final_logits_bias.zero_()
    src = torch.tensor([[5, 9, 12, 0]])
    mask, tgt = torch.ones_like(src, dtype=torch.bool), torch.tensor([[ref.cfg.decoder_start_id, 7, 3]])
    with torch.inference_mode():
        assert torch.equal(zeroed(src, mask, tgt), ref(src, mask, tgt))
