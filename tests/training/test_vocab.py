"""The vocabulary grows by the characters it could not spell, and a model grown to it computes what it did before on
every old piece and language token."""

import sentencepiece as spm
import torch

from bench.harness.fixtures import EN, ES, corpus, tiny_config, train_spm
from model.loading.checkpoint import load, save_native
from model.network.transformer import Seq2SeqTransformer
from training.vocab import ALWAYS, ROW_MULTIPLE, grow_model, grow_spm


def test_a_model_grows_to_the_characters_it_could_not_spell(tmp_path):
    # catches: a character left as <unk> (vanishing from the output), old texts cut differently after growing, new
    # rows put where the language tokens were (every two-way request then asks for the wrong language), or old
    # rows moved (the grown model no longer computing what it was trained to)
    lines = corpus(EN, n=300) + corpus(ES, n=300, seed=1)
    spm_path = train_spm(tmp_path / "spm", lines, 80, byte_fallback=False, pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    text = tmp_path / "corpus.txt"
    text.write_text("\n".join(lines + ["Open /etc/hosts in XML at 50% → «sí»"] * 30) + "\n", encoding="utf-8")
    old = Seq2SeqTransformer(tiny_config(82)).init_weights()
    before = tmp_path / "before"
    save_native(old.half(), spm_path, before, "en", "es", {"en": 80, "es": 81}, casing={"en": "sentence"})
    old_sp = spm.SentencePieceProcessor(model_file=str(spm_path))
    assert old_sp.unk_id() in old_sp.encode("/X¡")
    grown_spm = tmp_path / "grown.model"
    grown_spm.write_bytes(spm_path.read_bytes())
    added = grow_spm(grown_spm, [text], languages=2)
    sp = spm.SentencePieceProcessor(model_file=str(grown_spm))
    assert sp.get_piece_size() == 80 + len(added) and sp.get_piece_size() + 2 <= 2 * ROW_MULTIPLE  # all fit in 128
    assert {"/", "X", "¡", "Á", "«", "»", "→"} <= set(added) and added[:2] == ["¡", "Á"]
    typed = [ch in ALWAYS for ch in added]
    assert typed == sorted(typed, reverse=True)  # what people type first, then the corpus's own
    assert sp.unk_id() not in sp.encode("¡Open /etc/hosts in XML at 50% → «sí»")
    assert sp.decode(sp.encode("a/b X")) == "a/b X"
    assert all(sp.encode(line) == old_sp.encode(line) for line in lines)  # old text: the same pieces

    after = tmp_path / "after"
    assert grow_model(before, grown_spm, after) == added
    was, now = load(before), load(after)
    assert now.casing == {"en": "sentence"} and now.languages.prefix("en", "es") == [sp.get_piece_size() + 1]
    src = torch.tensor([[81, *old_sp.encode("the cat sleeps"), 1]])  # the target's token first, as served
    tgt = torch.tensor([[0, *old_sp.encode("the dog")]])
    with torch.inference_mode():
        a = was.model(src, torch.ones_like(src, dtype=torch.bool), tgt)
        grown_src = src.clone()
        grown_src[0, 0] = now.languages.prefix("en", "es")[0]
        b = now.model(grown_src, torch.ones_like(src, dtype=torch.bool), tgt)
    assert b.shape[-1] == sp.get_piece_size() + 2
    torch.testing.assert_close(b[..., :80], a[..., :80])  # every old piece's logit
    torch.testing.assert_close(b[..., -2:], a[..., -2:])  # the language tokens', moved after the new pieces
