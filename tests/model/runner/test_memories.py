"""Sources of requests still decoding are kept (`Memories`): what the encoder gives, each source kept encoded once
until it is forgotten."""

import torch

from model.runner.loop import pad_batch
from model.runner.memories import Memories
from tests.model.runner.test_decoding import _src


def test_a_kept_source_is_not_encoded_again(model):
    # catches: a kept memory put at another row or with another length, the encoder run again on a kept source, a
    # source kept that was not asked to be or once forgotten (a repeated text then skips its encoder: benchmarks
    # that repeat their texts would read it as speed), a budget never enforced
    seen = []

    def encoder(src, mask):
        seen.append(int(mask.sum()))
        return model.encode(src, mask)

    memories, device = Memories(), torch.device("cpu")
    first, second = [_src(i) for i in range(4)], [_src(i) for i in (2, 7, 0, 9)]
    with torch.inference_mode():
        for batch in (first, second):
            src, mask = pad_batch(batch, model.cfg.pad_id, device)
            got = memories.encode(encoder, src, mask, [i != 1 for i in range(len(batch))])
            torch.testing.assert_close(got, model.encode(src, mask), rtol=1e-5, atol=1e-5)
        assert seen == [sum(map(len, first)), len(_src(7)) + len(_src(9))]  # _src(2) and _src(0) kept
        memories.forget(_src(2))
        memories.encode(encoder, *pad_batch([_src(2), _src(1), _src(0)], model.cfg.pad_id, device))
        assert seen[2:] == [len(_src(2)) + len(_src(1))]  # forgotten, and never kept
        small = Memories(budget=1)
        for batch in (first[:1], first[1:2], first[:1]):
            small.encode(encoder, *pad_batch(batch, model.cfg.pad_id, device), [True])
        assert seen[3:] == [len(first[0]), len(first[1]), len(first[0])] and len(small.kept) == 1
