"""A decode batch's per-row and per-beam-group constants (sampling settings, length limits, beam knobs, penalties,
the rows' layout), kept on the device for as long as its requests and their widths do not change: built with one
upload when they do, read with none at every other step."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
from torch import Tensor

from model.runner.beams import Knobs
from model.runner.graphs import host_field
from model.runner.params import DecodeParams
from model.runner.processors import Penalties
from model.runner.search import Seq
from model.runner.transfer import upload, upload_parts


@dataclass
class Beams:
    """The beam groups' constants (G,) and where their rows lie: every beam row (Nb,) (None: every row is one), its
    place in the (G, W) candidate grid and its flat index (group * places + place) into the beam moves; the groups,
    the widest, the largest beam size and whether every group is the widest (the grid is the rows in order) on the
    host."""

    knobs: Knobs  # its `steps` unset: they come from the cache at each step
    rows: Tensor | None
    slots: Tensor
    flat: Tensor
    groups: int
    width: int
    size: int
    full: bool

    def knobs_at(self, steps: Tensor) -> Knobs:
        """The knobs of a step that every row launches `steps` (N,) positions in."""
        k = self.knobs
        return Knobs(k.beam, k.limit, steps.index_select(0, k.first), k.first, k.ranked, k.penalty, k.early, k.forced)


@dataclass
class RowTable:
    """The constants of one layout of a batch's groups: host lists and flags for the step's decisions, device tensors
    for its work: whether a row is a beam row (N,) (None unless beam and other rows mix), the sampled rows (S,)
    with their temperature, top-k and top-p (S, 3), each row's minimum new tokens (N,) (None when no row has one),
    the penalties, the rows that take one token where beam rows mix in and they record confidence signals (O,), and
    the beam groups' constants."""

    places: int  # the beam moves' places per group: the batch's widest beam state
    params: list[DecodeParams] = host_field()  # per row
    beams: list[tuple[int, int]] = host_field()  # per beam group: first row and width
    sampled: list[int] = host_field()  # rows that sample
    filtered: bool  # a sampled row keeps only its top-k or top-p
    scored: bool  # a row keeps log-probabilities
    one_row_scored: bool  # a greedy or sampled row keeps them (else only beam rows do)
    confident: bool  # a greedy or sampled row records its confidence signals
    beam_rows: int  # rows of beam groups
    forcing: list[tuple[int, DecodeParams]] = host_field()  # rows that may be forced a token (prefix, BOS, EOS)
    is_beam: Tensor | None
    sampled_at: Tensor | None
    warp: Tensor | None
    seeds: Tensor | None  # (S,) long: each sampled row's folded seed, -1 without one
    min_new: Tensor | None
    penalties: Penalties | None
    one_rows: Tensor | None
    beam: Beams | None

    @classmethod
    def of(cls, groups: list[Seq], places: int, vocab: int, device: torch.device) -> RowTable:
        """The table of `groups` in row order, whose beam moves hold `places` per group (one upload)."""
        of_row = groups_of_rows(groups)
        params = [g.params for g in of_row]
        firsts = list(itertools.accumulate((g.width for g in groups), initial=0))
        beams = [(first, g.width) for first, g in zip(firsts, groups, strict=False) if g.beam]
        sampled = [r for r, p in enumerate(params) if p.sampling]
        n_beam = sum(w for _, w in beams)
        parts: dict[str, list] = {}
        if 0 < n_beam < len(params):
            parts["is_beam"] = [p.beam_size > 1 for p in params]
        if sampled:
            parts["sampled_at"] = sampled
            parts["warp"] = [[params[r].temperature, params[r].top_k, params[r].top_p] for r in sampled]
            parts["seeds"] = [-1 if params[r].seed is None else fold(params[r].seed) for r in sampled]
        confident = any(p.confidence and p.beam_size == 1 for p in params)
        if confident and 0 < n_beam < len(params):
            parts["one_rows"] = [r for r, p in enumerate(params) if p.beam_size == 1]
        if any(p.min_new_tokens for p in params):
            parts["min_new"] = [p.min_new_tokens for p in params]
        if beams:
            parts.update(_beam_parts(groups, beams, places, vocab, n_beam < len(params)))
        t = dict(zip(parts, upload_parts(list(parts.values()), device), strict=True))
        get = lambda name, cast: cast(t[name]) if name in t else None  # noqa: E731
        return cls(
            places, params, beams, sampled,
            any(params[r].top_k > 0 or params[r].top_p < 1 for r in sampled),
            any(p.scored for p in params), any(p.scored and p.beam_size == 1 for p in params),
            confident, n_beam,
            [(r, p) for r, p in enumerate(params) if p.forced_bos_id is not None or p.forced_eos or p.prefix],
            get("is_beam", Tensor.bool), get("sampled_at", Tensor.long), get("warp", Tensor.float),
            get("seeds", Tensor.long), get("min_new", Tensor.long), Penalties.of(params, device),
            get("one_rows", Tensor.long), _beams(t, groups, beams) if beams else None,
        )  # fmt: skip

    def forced(self, steps: list[int], eos_id: int, device: torch.device) -> Tensor | None:
        """The token each row must take at this step (N,) (-1: any), after `steps` generated per row; None when no row
        must take one."""
        forced = [(r, t) for r, p in self.forcing if (t := p.forced_token(steps[r], eos_id)) is not None]
        if not forced:
            return None
        tokens = [-1] * len(steps)
        for r, t in forced:
            tokens[r] = t
        return upload(tokens, torch.long, device)


def fold(seed: int) -> int:
    """A request's seed (up to 63 bits) folded to the 32 that `choice.uniform` hashes (exact in the float64 upload)."""
    return (seed & 0xFFFFFFFF) ^ (seed >> 32)


def groups_of_rows(groups: list[Seq]) -> list[Seq]:
    """The group of every row, in row order."""
    return [g for g in groups for _ in range(g.width)]


def _beams(t: dict[str, Tensor], groups: list[Seq], beams: list[tuple[int, int]]) -> Beams:
    """The beam groups' part of the table of `groups` from its uploaded parts `t`."""
    cols = t["knobs"].T  # (7, G)
    size, limit, first, ranked = cols[:4].long()
    knobs = Knobs(size, limit, None, first, ranked, cols[4], cols[5] > 0, cols[6] > 0)
    rows = t["beam_rows"].long() if "beam_rows" in t else None
    width, most = max(w for _, w in beams), max(g.params.beam_size for g in groups if g.beam)
    full = all(w == width for _, w in beams)
    return Beams(knobs, rows, t["slots"].long(), t["flat"].long(), len(beams), width, most, full)


def _beam_parts(
    groups: list[Seq], beams: list[tuple[int, int]], places: int, vocab: int, mixed: bool
) -> dict[str, list]:
    """The host values of the beam groups' constants and row layout (see `Beams`)."""
    width = max(w for _, w in beams)
    knobs = [
        [g.params.beam_size, g.params.max_new_tokens, first, min(2 * g.params.beam_size, w * vocab)]
        + [g.params.length_penalty, g.params.early_stopping, g.params.forced_eos]
        for g, (first, w) in zip((g for g in groups if g.beam), beams, strict=True)
    ]
    parts = {
        "knobs": knobs,
        "slots": [b * width + j for b, (_, w) in enumerate(beams) for j in range(w)],
        "flat": [b * places + j for b, (_, w) in enumerate(beams) for j in range(w)],
    }
    if mixed:
        parts["beam_rows"] = [first + j for first, w in beams for j in range(w)]
    return parts
