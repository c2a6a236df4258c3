"""Continuous batching inside the search: one running greedy or beam search that sources join at any step and leave
as soon as they are done (iteration-level scheduling, as LLM servers do it, here for an encoder-decoder).

A batch searched offline (mt/decode/search.py) runs until its last sentence ends, and a source that comes one step
after it began waits for all of it. Here the search never has to end: `admit` encodes new sources and adds their
rows to the running ones, `step` feeds every row one token and returns the sources that are done, whose rows leave
at once.

Each source is searched as offline: the same ranking of candidates (best_continuations), the same rules for a
finished hypothesis and for a finished source, the same scores; only its neighbours differ, and masks keep them
apart. The rows began at different steps, so the decoder's keys and values are kept by step of the running search
(a slot per step, RunningCache), a row's first slot being its BOS's: a row attends to its own slots only (a mask
hides the ones before its BOS), and its position in the position table is its own count of steps. The sources'
memories are padded to the longest running one and masked, as in any batch.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from mt.data.batching import pad_ids
from mt.data.tokenizer import BOS, EOS, PAD
from mt.decode.engine import Hypothesis
from mt.decode.search import best_continuations, extend_hypotheses, length_penalty, search_done
from mt.decode.steps import Ensemble, block_repeated_ngrams
from mt.model.transformer import DecoderLayer, Transformer, make_pad_mask


@dataclass
class Source:
    """A source in the running search: its rows are `beams` consecutive ones, in the order sources joined."""

    key: Any        # the caller's name for it, given back with its outputs
    limit: int      # the most tokens an output may have
    start: int      # the step of the running search that fed its BOS
    tokens: int     # its length in source tokens (the running search's budget counts them)
    finished: list[Hypothesis] = field(default_factory=list)


class RunningSearch:
    """A greedy (beam_size 1) or beam search whose sources come and go between steps. `products` gives the context
    that every model computation runs in (the searcher's packed weights, Searcher.products): it is entered when the
    first source joins and left when the last one leaves (or at `close`), not at every step, which it would cost
    more than a millisecond."""

    def __init__(self, model: Transformer | Ensemble, beam_size: int = 1, nbest: int = 1, alpha: float = 0.0,
                 min_len: int = 0, no_repeat_ngram_size: int = 0,
                 products: Callable[[], AbstractContextManager] = nullcontext):
        ensemble = Ensemble.of(model)
        self.models, self.weights, self.products = ensemble.models, ensemble.weights, products
        self.held = ExitStack()  # the products' context while sources run
        self.k, self.nbest, self.alpha = beam_size, nbest, alpha
        self.min_len, self.no_repeat_ngram_size = min_len, no_repeat_ngram_size
        self.device = next(self.models[0].parameters()).device
        self.caches = [RunningCache(m, beam_size) for m in self.models]
        self.sources: list[Source] = []
        self.now = 0                  # the step the next token is fed at
        self.first = 0                # the step of the first column of ys and lps
        self.ys = torch.empty(0, 1, dtype=torch.long, device=self.device)  # [N, L]: each row's tokens by step
        self.lps = torch.empty(0, 1, device=self.device)  # [N, L]: the log-probability of each token of ys
        self.scores = torch.empty(0, beam_size, device=self.device)      # [B, K]: each hypothesis's so far

    def __len__(self) -> int:
        return len(self.sources)

    @property
    def tokens(self) -> int:
        """Source tokens of the running sources."""
        return sum(source.tokens for source in self.sources)

    @torch.inference_mode()
    def admit(self, keys: list[Any], src_ids: list[list[int]], limits: list[int]) -> None:
        """Sources (ids, EOS last) join the search, each with its key and its output limit: their BOS is fed at the
        next step."""
        src = pad_ids(src_ids).to(self.device)                                                    # [b, S]
        src_mask = make_pad_mask(src, PAD)                                                        # [b,1,1,S]
        if not self.sources:
            self.held.enter_context(self.products())
        for model, cache in zip(self.models, self.caches):
            cache.admit(model.encode(src, src_mask), src_mask, self.now)
        rows = len(src_ids) * self.k
        self.ys = torch.cat([self.ys, torch.full((rows, self.ys.size(1)), PAD, device=self.device)])
        self.ys[-rows:, -1] = BOS
        self.lps = torch.cat([self.lps, self.lps.new_zeros(rows, self.lps.size(1))])
        scores = torch.full((len(src_ids), self.k), float("-inf"), device=self.device)
        scores[:, 0] = 0.0                                                            # one live beam at first
        self.scores = torch.cat([self.scores, scores])
        self.sources += [Source(key, limit, self.now, len(ids)) for key, ids, limit in zip(keys, src_ids, limits)]

    @torch.inference_mode()
    def step(self) -> list[tuple[Any, list[Hypothesis]]]:
        """Feed every row its newest token; → the sources that are done, each (key, its n-best outputs, best
        first), in the order they joined. Their rows leave the search."""
        starts = torch.tensor([s.start for s in self.sources], device=self.device).repeat_interleave(self.k)  # [N]
        log_probs = self._log_probs(starts)                                                       # [N, V]
        keep, tokens, token_lps, done = self._search(log_probs) if self.k > 1 else self._greedy(log_probs)
        index = self._long(keep)
        self.ys = torch.cat([self.ys[index], self._long(tokens)[:, None]], dim=1)
        self.lps = torch.cat([self.lps[index], torch.tensor(token_lps, device=self.device)[:, None]], dim=1)
        finished = {id(source) for source in done}
        still = [n for n, source in enumerate(self.sources) if id(source) not in finished]
        memory_rows = None if len(still) == len(self.sources) else self._long(still)
        for cache in self.caches:
            cache.select(index, memory_rows, self.now + 1)
        self.sources = [self.sources[n] for n in still]
        self.now += 1
        self._forget_old_steps()
        if not self.sources:
            self.close()
        return [(source.key, sorted(source.finished, key=lambda h: -h.score)[:self.nbest]) for source in done]

    def close(self) -> None:
        """Leave the products' context (the search may be dropped with sources running: after a failure)."""
        self.held.close()

    def _long(self, values: list[int]) -> Tensor:
        return torch.tensor(values, dtype=torch.long, device=self.device)  # an empty list too

    def _log_probs(self, starts: Tensor) -> Tensor:
        """The next token's log-probabilities for every row [N, V], with the search's constraints applied."""
        tokens, positions = self.ys[:, -1:], self.now - starts                                   # [N,1], [N]
        # a row attends to the slots from its own BOS to now: [N,1,1,L] over the steps first … now
        steps = torch.arange(self.first, self.now + 1, device=self.device)
        mask = (steps[None, :] >= starts[:, None])[:, None, None, :]
        log_probs = [cache.log_probs(tokens, positions, mask, self.now) for cache in self.caches]
        log_probs = log_probs[0] if len(log_probs) == 1 else sum(w * lp for w, lp in zip(self.weights, log_probs))
        log_probs[:, [PAD, BOS]] = float("-inf")
        if self.min_len:  # rows with fewer than min_len tokens so far may not end
            log_probs[positions < self.min_len, EOS] = float("-inf")
        if self.no_repeat_ngram_size:  # each row's tokens so far, after PAD where it began later
            block_repeated_ngrams(log_probs, self.ys.masked_fill(self.ys == BOS, PAD), self.no_repeat_ngram_size)
        return log_probs

    def _search(self, log_probs: Tensor) -> tuple[list[int], list[int], list[float], list[Source]]:
        """A beam search step (as beam_search's): → the rows kept, their new tokens, those tokens' log-probabilities,
        and the sources done."""
        ranked = zip(*best_continuations(log_probs, self.scores))
        keep, done = [], []  # (row, token, score, lp) of the open hypotheses kept
        for source, (top_scores, top_rows, top_tokens, top_lps) in zip(self.sources, ranked):
            column = source.start - self.first  # the source's BOS
            at_limit = self.now - source.start + 1 >= source.limit
            kept = extend_hypotheses(zip(top_scores, top_rows, top_tokens, top_lps), self.ys[:, column:],
                                     self.lps[:, column + 1:], self.k, at_limit, self.alpha, source.finished)
            if kept and not search_done(source.finished, kept[0][2], self.nbest, source.limit, self.alpha):
                keep += kept + [(kept[0][0], PAD, float("-inf"), 0.0)] * (self.k - len(kept))  # dead rows: -inf
            else:
                done.append(source)
        rows, tokens, scores, lps = zip(*keep) if keep else ((), (), (), ())
        self.scores = torch.tensor(scores, device=self.device).view(-1, self.k)
        return list(rows), list(tokens), list(lps), done

    def _greedy(self, log_probs: Tensor) -> tuple[list[int], list[int], list[float], list[Source]]:
        """A greedy step (as greedy_search's): each row's most likely token; a row ends with EOS or at its limit."""
        choice = log_probs.argmax(dim=-1)                                                         # [N]
        chosen = log_probs.gather(-1, choice[:, None]).squeeze(-1)                               # [N]
        # the sum of each row's log-probabilities, in float32 as greedy_search adds them
        self.scores = self.scores + chosen[:, None]
        keep, tokens, lps, done = [], [], [], []
        for row, (source, token, lp) in enumerate(zip(self.sources, choice.tolist(), chosen.tolist())):
            column = source.start - self.first
            if token == EOS or self.now - source.start + 1 >= source.limit:
                output = self.ys[row, column + 1:].tolist() + ([] if token == EOS else [token])
                length = len(output) + (token == EOS)
                score = self.scores[row, 0].item() / length_penalty(length, self.alpha)
                source.finished.append(Hypothesis(output, score, self.lps[row, column + 1:].tolist() + [lp]))
                done.append(source)
            else:
                keep.append(row)
                tokens.append(token)
                lps.append(lp)
        self.scores = self.scores[keep]
        return keep, tokens, lps, done

    def _forget_old_steps(self) -> None:
        """Drop the columns of ys and lps before the oldest running source's BOS."""
        first = min((s.start for s in self.sources), default=self.now)
        if first > self.first:
            self.ys, self.lps = self.ys[:, first - self.first:], self.lps[:, first - self.first:]
            self.first = first
        for cache in self.caches:
            cache.forget_before(first)


class RunningCache:
    """One model's decoder state for the running search: each layer's self-attention keys and values by step of the
    search (StepSlots; slot c holds step `origin` + c), and the sources' memory keys and values [B, H, S, d_k] with
    their mask [B,1,1,S], the running sources' padded to the longest. A source's `beams` rows share its memory row."""

    def __init__(self, model: Transformer, beams: int):
        self.model, self.beams = model, beams
        self.layers: list[DecoderLayer] = list(model.decoder.layers)
        self.cross: list[tuple[Tensor, Tensor]] | None = None  # per layer: k, v [B, H, S, d_k]
        self.src_mask: Tensor | None = None                    # [B,1,1,S]
        self.slots: list[StepSlots] = []                       # per layer
        self.origin = 0                                        # the step of slot 0
        self.first = 0                                         # the step of the oldest running row's BOS

    def admit(self, memory: Tensor, src_mask: Tensor, now: int) -> None:
        """New sources' memory [b, S', D] and mask [b,1,1,S']: their rows join at step `now`, no keys kept yet."""
        cross = [layer.cross_attn.keys_values(memory, memory) for layer in self.layers]          # [b,H,S',d_k]
        if not self.slots or not self.slots[0].rows:  # none running: the memory is theirs, the slots start at `now`
            self.cross, self.src_mask = cross, src_mask
            like = cross[0][0]
            self.slots = [StepSlots(like.new_zeros(0, 64, like.size(1), like.size(-1))) for _ in self.layers]
            self.origin = self.first = now
        else:
            width = max(self.src_mask.size(-1), src_mask.size(-1))
            self.cross = [(_cat_padded(k0, k1, width, 2), _cat_padded(v0, v1, width, 2))
                          for (k0, v0), (k1, v1) in zip(self.cross, cross)]
            self.src_mask = _cat_padded(self.src_mask, src_mask, width, -1)
        for slots in self.slots:
            slots.add(memory.size(0) * self.beams)

    def log_probs(self, tokens: Tensor, positions: Tensor, mask: Tensor, now: int) -> Tensor:
        """Each row's newest token [N,1], its position [N] and the steps it attends to, mask [N,1,1,L] over the steps
        of the oldest row's BOS … `now` → the model's log-probabilities of the next token [N, V]."""
        self._make_room(now)
        slot, used = now - self.origin, self._used(now + 1)
        x = self.model.tgt_embed(tokens)                                                          # [N,1,D]
        x = self.model.positions.dropout(x + self.model.positions.table[positions][:, None])    # own positions
        for layer, slots, (cross_k, cross_v) in zip(self.layers, self.slots, self.cross):
            def self_attention(y: Tensor) -> Tensor:
                slots.write(slot, *layer.self_attn.keys_values(y, y))
                return layer.self_attn.attend(y, *slots.read(used), mask)[0]

            def cross_attention(y: Tensor) -> Tensor:  # a source's beams [B·K,1,D] as K queries [B,K,D]
                queries = y.reshape(cross_k.size(0), self.beams, y.size(-1))
                return layer.cross_attn.attend(queries, cross_k, cross_v, self.src_mask)[0].view(y.shape)

            x = layer.add_norm_self(x, self_attention)
            x = layer.add_norm_cross(x, cross_attention)
            x = layer.add_norm_ff(x, layer.feed_forward)
        hidden = self.model.decoder.final_norm(x)
        return self.model.generator(hidden[:, -1]).float().log_softmax(dim=-1)

    def _used(self, end: int) -> slice:
        """The slots of the steps from the oldest running row's BOS to `end` (excluded)."""
        return slice(self.first - self.origin, end - self.origin)

    def _make_room(self, now: int) -> None:
        """Room for step `now`'s slot: the steps before the oldest row's BOS are dropped, else the slots doubled."""
        capacity = self.slots[0].k.size(1)
        if now - self.origin < capacity:
            return
        dropped = self.first - self.origin
        for slots in self.slots:
            slots.move(self._used(now), capacity if dropped > capacity // 2 else 2 * capacity)
        self.origin = self.first

    def select(self, rows: Tensor, memory_rows: Tensor | None, now: int) -> None:
        """Keep decoder rows `rows` [N'] in that order, and memory rows `memory_rows` (None: all, as they are); the
        slots up to step `now` (excluded) are kept."""
        for slots in self.slots:
            slots.select(rows, self._used(now))
        if memory_rows is not None:  # … and as many source positions as the longest of theirs has
            self.src_mask = self.src_mask.index_select(0, memory_rows)
            real = self.src_mask.flatten(1).any(0).nonzero()                                       # [S', 1]
            width = int(real.max()) + 1 if len(real) else 0
            self.src_mask = self.src_mask[..., :width]
            self.cross = [(k.index_select(0, memory_rows)[:, :, :width], v.index_select(0, memory_rows)[:, :, :width])
                          for k, v in self.cross]

    def forget_before(self, first: int) -> None:
        """The oldest running row's BOS is at step `first`: no row attends to the slots before it."""
        self.first = first


class StepSlots:
    """One decoder layer's self-attention keys and values by step: buffers [R, C, H, d_k] with room for R rows and C
    steps, of which the first `rows` rows are running. Only the slots in use are copied when rows are kept or
    reordered, into a spare pair of buffers that then takes the place of the first. Every buffer starts as zeros and
    is only written with keys and values, so the slots before a row's BOS (masked) hold finite numbers: a NaN there
    would still make 0 × NaN."""

    def __init__(self, k: Tensor):
        self.k, self.v, self.rows = k, k.clone(), 0
        self.spare: tuple[Tensor, Tensor] | None = None

    def write(self, slot: int, k: Tensor, v: Tensor) -> None:
        """The newest step's keys and values k, v [N,H,1,d_k] into `slot`."""
        self.k[:self.rows, slot], self.v[:self.rows, slot] = k[:, :, 0], v[:, :, 0]

    def read(self, used: slice) -> tuple[Tensor, Tensor]:
        """The keys and values of the slots `used`, [N,H,L,d_k] each (views)."""
        return self.k[:self.rows, used].transpose(1, 2), self.v[:self.rows, used].transpose(1, 2)

    def add(self, rows: int) -> None:
        """Room for `rows` more rows, after the running ones."""
        if self.rows + rows > self.k.size(0):
            grown = []
            for kept in (self.k, self.v):
                buffer = kept.new_zeros(max(self.rows + rows, 2 * kept.size(0)), *kept.shape[1:])
                buffer[:self.rows] = kept[:self.rows]
                grown.append(buffer)
            (self.k, self.v), self.spare = grown, None
        self.rows += rows

    def select(self, index: Tensor, used: slice) -> None:
        """Keep rows `index` [N'] of the running ones, in that order."""
        if self.spare is None:
            self.spare = (torch.zeros_like(self.k), torch.zeros_like(self.v))
        for kept, spare in zip((self.k, self.v), self.spare):
            torch.index_select(kept[:self.rows, used], 0, index, out=spare[:len(index), used])
        self.spare, (self.k, self.v), self.rows = (self.k, self.v), self.spare, len(index)

    def move(self, used: slice, capacity: int) -> None:
        """The slots `used` of the running rows, to the front of new buffers of `capacity` slots."""
        moved = []
        for kept in (self.k, self.v):
            buffer = kept.new_zeros(kept.size(0), capacity, *kept.shape[2:])
            buffer[:self.rows, :used.stop - used.start] = kept[:self.rows, used]
            moved.append(buffer)
        (self.k, self.v), self.spare = moved, None


def _cat_padded(old: Tensor, new: Tensor, width: int, dim: int) -> Tensor:
    """old [B, …] and new [b, …] (keys, values or masks) padded along their source positions, `dim` (2 of keys
    [B,H,S,d_k], -1 of masks [B,1,1,S]), to `width` positions (zeros, False) → [B+b, …]."""
    return torch.cat([_padded(old, width, dim), _padded(new, width, dim)])


def _padded(x: Tensor, width: int, dim: int) -> Tensor:
    missing = width - x.size(dim)
    if not missing:
        return x
    shape = list(x.shape)
    shape[dim] = missing
    return torch.cat([x, x.new_zeros(shape)], dim=dim)
