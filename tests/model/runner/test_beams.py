"""Beam search on the device against the host bookkeeping it replaced (kept here as the oracle): random candidate
pools with many ties, banned tokens, EOS and length limits, several groups of different beam sizes, length penalties
and early stopping stepped together; the same beams in the same rows, finished hypotheses, scores, reasons, stop step
and stable prefix."""

import random
from dataclasses import dataclass, field

import torch

from model.runner.beams import WINDOW, BeamState, HostMoves, Knobs, step
from model.runner.choice import pack
from model.runner.params import DecodeParams
from model.runner.search import Hypothesis

EOS, VOCAB, DEAD = 1, 6, -1.0e9


def knobs_of(rows: list[list[float]], device: torch.device) -> Knobs:
    """Knobs from one host row per group: (beam, limit, steps, first, ranked, penalty, early, forced)."""
    cols = torch.tensor(rows, dtype=torch.float64, device=device).T  # (8, G)
    beam, limit, steps, first, ranked = cols[:5].long()
    return Knobs(beam, limit, steps, first, ranked, cols[5], cols[6] > 0, cols[7] > 0)


@dataclass
class Reference:
    """The host beam search this project ran before (transformers' semantics), one group."""

    params: DecodeParams
    beams: list[list[int]] = field(default_factory=lambda: [[]])
    logps: list[list[float]] = field(default_factory=lambda: [[]])  # each beam's tokens' log-probabilities
    scores: list[float] = field(default_factory=lambda: [0.0])
    finished: list[Hypothesis] = field(default_factory=list)
    steps: int = 0
    emitted: int = 0

    def advance(self, pool: list[tuple[float, int, int]]) -> None:
        """One step from the group's candidates (cumulative score, parent, token), best first."""
        p, length = self.params, self.steps + 1
        chosen = []
        for rank, (score, parent, token) in enumerate(pool):
            if token == EOS or length >= p.max_new_tokens:
                if rank < p.beam_size and score > DEAD / 2:
                    reason = "eos" if token == EOS and not (p.forced_eos and length >= p.max_new_tokens) else "length"
                    tokens = self.beams[parent] + ([] if token == EOS else [token])
                    lp = self.logps[parent] + (
                        [_logp(score, self.scores[parent])] if token != EOS or reason == "eos" else []
                    )
                    self.finished.append(Hypothesis(tokens, score / length**p.length_penalty, reason, logprobs=lp))
            elif len(chosen) < p.beam_size:
                chosen.append((score, parent, token))
        self.finished = sorted(self.finished, key=lambda h: -h.score)[: p.beam_size]
        slots = _slots([parent for _, parent, _ in chosen])
        order = sorted(range(len(chosen)), key=slots.__getitem__)
        self.steps = length
        self.beams = [self.beams[chosen[i][1]] + [chosen[i][2]] for i in order]
        self.logps = [self.logps[chosen[i][1]] + [_logp(chosen[i][0], self.scores[chosen[i][1]])] for i in order]
        self.scores = [chosen[i][0] for i in order]
        if len(self.finished) == p.beam_size and chosen:
            best = chosen[0][0] / self.steps**p.length_penalty
            if p.early_stopping or not best > self.finished[-1].score:
                chosen = []
        if not chosen:
            self.beams, self.scores, self.logps = [], [], []

    def stable(self) -> list[int]:
        """The stable tokens new since the last call."""
        if not self.beams:
            return []
        best = max((h.score for h in self.finished), default=None)
        seqs = [*self.beams, *(h.tokens for h in self.finished if h.score == best)]
        n, shortest = self.emitted, min(len(s) for s in seqs)
        while n < shortest and all(s[n] == seqs[0][n] for s in seqs):
            n += 1
        new, self.emitted = self.beams[0][self.emitted : n], max(n, self.emitted)
        return new


def _logp(score: float, parent: float) -> float:
    """A token's log-probability as the device keeps it: its candidate's cumulative score less its parent's."""
    return (torch.tensor(score, dtype=torch.float32) - torch.tensor(parent, dtype=torch.float32)).item()


def _slots(parents: list[int]) -> list[int]:
    """Each new beam's row: its parent's when free and still in the group, else the free rows in order."""
    n, slots, taken = len(parents), [-1] * len(parents), set()
    for i, parent in enumerate(parents):
        if parent < n and parent not in taken:
            slots[i] = parent
            taken.add(parent)
    free = iter(r for r in range(n) if r not in taken)
    return [slot if slot >= 0 else next(free) for slot in slots]


def pool(rng: random.Random, ref: Reference) -> list[tuple[float, int, int]]:
    """Candidates as the choice gives them: every (parent, token), scored cumulative + a log-prob from a few values
    (ties) or -inf (banned), best first, ties in candidate order; the first min(2B, width * V)."""
    cands = []
    for parent, cum in enumerate(ref.scores):
        for token in range(VOCAB):
            logp = rng.choice([-0.5, -1.0, -1.0, -2.0, float("-inf")] if token else [-0.5, -1.5])
            cands.append((float(torch.tensor(cum + logp, dtype=torch.float32)), parent, token))
    cands.sort(key=lambda c: -c[0])
    return cands[: min(2 * ref.params.beam_size, len(ref.beams) * VOCAB)]


def test_device_steps_equal_the_host_bookkeeping():
    rng = random.Random(0)
    for trial in range(60):
        params = [
            DecodeParams(
                beam_size=rng.choice([2, 3, 4]),
                max_new_tokens=rng.randint(1, WINDOW),
                length_penalty=rng.choice([-1.0, 0.0, 0.6, 1.0, 2.0]),
                early_stopping=rng.random() < 0.3,
                forced_eos=rng.random() < 0.2,
            )
            for _ in range(rng.randint(1, 4))
        ]
        refs = [Reference(p) for p in params]
        groups = [Beam(p, p.beam_size) for p in params]
        state = BeamState.start([p.beam_size for p in params], WINDOW + 1, torch.device("cpu"))
        streams, ref_streams = [[] for _ in params], [[] for _ in params]
        while any(g.width for g in groups):
            live = [i for i, g in enumerate(groups) if g.width]
            pools = {i: pool(rng, refs[i]) for i in live}
            state, host = _device_step(state, [groups[i] for i in live], [pools[i] for i in live])
            for b, i in enumerate(live):
                refs[i].advance(pools[i])
                streams[i] += host.stable(b)
                ref_streams[i] += refs[i].stable()
                assert groups[i].width == len(refs[i].beams), (trial, i)
            done = [b for b, i in enumerate(live) if not groups[i].width]
            ended = [live[b] for b in done]
            for i, hyps in zip(ended, state.hypotheses(done, [params[i].beam_size for i in ended]), strict=True):
                assert hyps == refs[i].finished, (trial, i)
            going = [b for b, i in enumerate(live) if groups[i].width]
            state = state.select(None, torch.tensor(going, dtype=torch.long))
            assert _beams(state, groups, live) == [refs[i].beams for i in live if groups[i].width], trial
        assert streams == ref_streams, trial


@dataclass
class Beam:
    """A beam request as the tests drive it: its parameters, live rows and steps taken."""

    params: DecodeParams
    width: int
    steps: int = 0


def take(host: HostMoves, g: Beam, b: int, first: int) -> list[tuple[int, int, int, int]]:
    """Beam request `g` (group b, first row `first`) takes its step, as the decode loop books it: its new rows as
    (parent row, flat index into the moves, token, position written), none once done."""
    g.steps += 1
    g.width = 0 if host.done[b] else host.n[b]
    places = len(host.parent[b])
    return [(first + host.parent[b][j], b * places + j, host.token[b][j], g.steps - 1) for j in range(g.width)]


def _device_step(state: BeamState, groups: list[Beam], pools: list[list]) -> tuple[BeamState, HostMoves]:
    """One device step of `groups` (rows in blocks, in order) from their pools, as the batch drives it."""
    width = max(len(p) for p in pools)
    pad = lambda p, i, v: [c[i] for c in p] + [v] * (width - len(p))  # noqa: E731
    score, parent, token = (
        torch.tensor([pad(p, i, v) for p in pools]) for i, v in ((0, float("-inf")), (1, 0), (2, 0))
    )
    knobs, first = [], 0
    for g, p in zip(groups, pools, strict=True):
        q = g.params
        knobs.append([q.beam_size, q.max_new_tokens, g.steps, first, len(p), q.length_penalty, q.early_stopping])
        knobs[-1].append(q.forced_eos)
        first += g.width
    state, moves = step(state, (score.float(), parent, token), knobs_of(knobs, score.device), EOS)
    host = HostMoves.read(pack(moves.packed()), len(groups), state.score.shape[1])
    first, rows = 0, []
    for b, g in enumerate(groups):
        width = g.width
        rows += take(host, g, b, first)
        first += width
    parents, source, tokens, at = torch.tensor(list(zip(*rows, strict=True)) or [[]] * 4, dtype=torch.long)
    return state.extend(parents, moves, source, tokens, at), host


def _beams(state: BeamState, groups: list[Beam], live: list[int]) -> list[list[list[int]]]:
    """The live groups' beams' tokens, in row order, from the device history."""
    history, out, row = state.history.tolist(), [], 0
    for i in live:
        g = groups[i]
        out.append([history[r][: g.steps] for r in range(row, row + g.width)])
        row += g.width
    return [b for b in out if b]
