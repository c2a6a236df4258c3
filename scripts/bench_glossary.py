"""Glossaries that hold (`mt translate --glossary`, hard mode: mt/decode/constrained.py; soft mode, either engine:
mt/text/glossary_modes.py): how many of a glossary's terms the outputs hold, what that does to BLEU, and what it
costs in speed, on Chinese→English test sets with references. A report, not a test.

Two glossaries per set, both built from the set itself, so that a model cannot pass by translating as it would
anyway (each written to --out with the outputs, for inspection):

1. reference terms: the model reads each reference teacher forced (Translator.attention; the decoder layers of
   mt.text.align.LAYERS, heads averaged). A content word of the reference (at least 3 letters, not among the 150 most
   frequent words of --common-words, names apart; a run of capitalised words is one term, a possessive 's left out)
   takes, for each of its pieces, the source piece that piece attends to most; the word is a candidate when those
   source pieces are contiguous and spell 1–6 characters, each a letter or digit (Han included), that occur once in
   the source, and the model's vocabulary writes the word. A sentence keeps its 2 candidates of highest attention. A
   source (in Simplified) gets its most frequent target; then an entry is dropped when a sentence it matches
   (TermFinder.find, over the whole set) has a reference that does not hold its target (TermFinder.report: k matches
   need k occurrences), and the matching runs again until every entry holds. A word at the start of a reference is
   written as it is inside sentences (--common-words and the set's references say whether it is a name).
2. forced terms: the same sources, each target replaced by an invented word (seeded syllables, --seed; the original's
   capitalisation, word by word; a word found in neither --common-words nor the set's references), and each
   reference of a sentence holding the term rewritten with the invented word in place of the original (whole words,
   also capitalised): "used" and BLEU measure what the glossary asks, never what the model writes anyway.

Runs, per set and --beam: the whole set without a glossary (`none`), then with each glossary (`hard`), and with a
glossary that matches no sentence (every output expected identical). Speed: the sentences with 1–2 terms, with 3 or
more, and with none, each translated alone with and without the glossary, alternated, --repeats times; medians.

Figures (one record, benchmarks/results/bench_glossary.jsonl, scripts/records.py), a row per (set, glossary, mode,
engine, beam): sentences; term sentences; terms; terms used (an occurrence is used when the output holds its target
as a word, with the matching's edge rules); terms used % of those missed without the glossary; duplicated terms (a
sentence's output holding a term's target more times than the sentence's terms ask for it); glued terms (missed,
while the output holds the target inside a word); term outputs at the length limit (re-encoded); the term outputs'
pieces (re-encoded) and their ratio to none's, which the time follows; BLEU and chrF (sacreBLEU) on the term
sentences and BLEU − none; no-term sentences identical to `none`; sentences/s of each kind and their time × none.

    python scripts/bench_glossary.py --checkpoint runs/tatoeba-cpu/checkpoints/best.pt --limit 500
    python scripts/bench_glossary.py --checkpoint runs/tatoeba-cpu/checkpoints/best.pt \\
        --set tatoeba ../shared/data/zh-en/tatoeba/test.zh ../shared/data/zh-en/tatoeba/test.en --beam 4 1
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import re
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from records import record  # scripts/records.py: the results file

if TYPE_CHECKING:
    from mt.data.terms import Match, TermFinder

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "zh-en"
SETS = [("tatoeba", DATA / "tatoeba" / "test.zh", DATA / "tatoeba" / "test.en"),
        ("wmt21", DATA / "wmt21" / "newstest2021.zh-en.zh", DATA / "wmt21" / "newstest2021.zh-en.en"),
        ("wmt22", DATA / "wmt22" / "generaltest2022.zh-en.zh", DATA / "wmt22" / "generaltest2022.zh-en.refA.en")]
COMMON = 150  # the most frequent English words, which are no terms
MIN_LETTERS, MAX_SOURCE_CHARS, PER_SENTENCE = 3, 6, 2
# an English word: letters, hyphens inside, then a clitic ('s, 't, …)
WORD = re.compile(r"([A-Za-z]+(?:-[A-Za-z]+)*)(['’][A-Za-z]+)?")
SENTENCE_END = re.compile(r"(^|[.!?:\"“”]\s*)$")
CONSONANTS, VOWELS = "bdfgklmnprstvz", "aeiou"
GROUPS = {"1–2-term": lambda n: 1 <= n <= 2, "3+-term": lambda n: n >= 3, "no-term": lambda n: n == 0}


# --- the English side: words, names, common words -----------------------------------------------------------------

@dataclass(frozen=True)
class Word:
    start: int
    end: int
    text: str
    first: bool  # at the start of a sentence, where any word is capitalised


def words(line: str) -> list[Word]:
    """A line's English words; a possessive's 's is left out, a word with another clitic (don't) is no word."""
    found = []
    for m in WORD.finditer(line):
        if m.group(2) and m.group(2)[1:].lower() != "s":
            continue
        found.append(Word(m.start(1), m.end(1), m.group(1), bool(SENTENCE_END.search(line[:m.start()]))))
    return found


class English:
    """What English text says about its words: which are names (capitalised inside sentences more often than not),
    the COMMON most frequent other words of `common` (the rest, `more`, counts for names only), and every word seen
    (lower case)."""

    def __init__(self, common: list[str], more: list[str]):
        inside_upper, inside_lower, counts = Counter(), Counter(), Counter()
        for number, line in enumerate(common + more):
            for w in words(line):
                key = w.text.lower()
                counts[key] += number < len(common)
                if not w.first:
                    (inside_upper if w.text[0].isupper() else inside_lower)[key] += 1
        self.names = {key for key in inside_upper if inside_upper[key] > inside_lower[key]}
        self.common = {key for key, _ in Counter({k: n for k, n in counts.items()
                                                  if k not in self.names}).most_common(COMMON)}
        self.seen = set(counts)

    def written(self, word: Word) -> str:
        """The word as written inside a sentence: a sentence's first word in lower case unless it is a name."""
        if word.first and word.text.lower() not in self.names and not word.text.isupper():
            return word.text.lower()
        return word.text

    def content(self, line: str) -> list[tuple[int, int, str]]:
        """(start, end, target) of a line's content words: runs of names or capitalised words as one, other words
        of at least MIN_LETTERS letters that are not common."""
        found, run = [], []

        def close():
            while run and self.written(run[0]) != run[0].text:
                word = run.pop(0)  # a sentence's first word that is no name ("The", "Ask"): a word of its own
                if word.text.lower() not in self.common and len(word.text) >= MIN_LETTERS:
                    found.append((word.start, word.end, self.written(word)))
            if run and sum(c.isalpha() for w in run for c in w.text) >= MIN_LETTERS:
                found.append((run[0].start, run[-1].end, line[run[0].start:run[-1].end]))
            run.clear()

        for w in words(line):
            if w.text[0].isupper():
                if run and line[run[-1].end:w.start] != " ":
                    close()
                run.append(w)
                if w.end < len(line) and line[w.end] in "'’":  # Tom's: the run ends at a possessive
                    close()
                continue
            close()
            if len(w.text) >= MIN_LETTERS and w.text.lower() not in self.common:
                found.append((w.start, w.end, self.written(w)))
        close()
        return sorted(found)


# --- reference terms ----------------------------------------------------------------------------------------------

def piece_offsets(processor, normalize, text: str) -> tuple[list[int], list[tuple[int, int]]] | None:
    """The ids and [start, end) of a text's pieces as the model reads it; None where its script conversion changes
    its length."""
    converted = normalize([text])[0]
    if len(converted) != len(text):
        return None
    pieces = processor.encode(converted, return_type="proto").pieces
    offsets, position = [], 0
    for p in pieces:
        offsets.append((position, position + len(p.surface)))
        position += len(p.surface)
    return ([p.id for p in pieces], offsets) if position == len(text) else None


def writable(tokenizer, target: str) -> bool:
    """Whether a glossary may give `target` to this model: pieces it has, not too many (mt/data/terms.py)."""
    from mt.data.glossary import MAX_TERM_CHARS
    from mt.data.terms import MAX_TERM_PIECES
    from mt.data.tokenizer import UNK

    ids = tokenizer.encode_tgt([target])[0][1:-1]
    return 0 < len(ids) <= MAX_TERM_PIECES and UNK not in ids and len(target) <= MAX_TERM_CHARS


def candidates(tr, english: English, source: str, reference: str) -> list[tuple[str, str]]:
    """A sentence's (source term, target) pairs from the model's attention over its reference, the PER_SENTENCE of
    highest attention."""
    from mt.data.tokenizer import EOS
    from mt.text.align import LAYERS

    tok, limit = tr.tokenizer, tr.engine.max_positions - 1
    src, tgt = (piece_offsets(tok.src, tok.normalize_src, source),
                piece_offsets(tok.tgt, tok.normalize_tgt, reference))
    if src is None or tgt is None or not src[0] or len(src[0]) >= limit or len(tgt[0]) >= limit:
        return []
    attention = tr.attention(source, reference, src[0] + [EOS])
    if len(attention.target_ids) != len(tgt[0]) + 1:
        return []
    scores = attention.weights[LAYERS].float().mean(dim=(0, 1))[:len(tgt[0]), :len(src[0])]  # [T, S], EOS left out
    best, aligned = scores.max(dim=1)
    found: dict[str, tuple[float, str, tuple[int, int]]] = {}
    for start, end, target in english.content(reference):
        rows = [t for t, (a, b) in enumerate(tgt[1]) if a < end and b > start]
        pieces = sorted({int(aligned[t]) for t in rows})
        if not rows or pieces[-1] - pieces[0] + 1 != len(pieces):
            continue
        a, b = src[1][pieces[0]][0], src[1][pieces[-1]][1]
        term = source[a:b].strip()
        if (1 <= len(term) <= MAX_SOURCE_CHARS and all(c.isalnum() for c in term) and source.count(term) == 1
                and writable(tok, target)):
            weight = float(best[rows].mean())  # how sure the attention is
            if term not in found or found[term][0] < weight:
                found[term] = (weight, target, (a, b))
    kept: list[tuple[str, str, tuple[int, int]]] = []
    for term, (_, target, span) in sorted(found.items(), key=lambda item: -item[1][0]):
        if len(kept) < PER_SENTENCE and all(span[1] <= s[0] or span[0] >= s[1] for _, _, s in kept):
            kept.append((term, target, span))
    return [(term, target) for term, target, _ in kept]


def write_glossary(path: Path, entries: dict[str, str]) -> None:
    path.write_text("".join(f"{source}\t{target}\n" for source, target in entries.items()), encoding="utf-8")


@dataclass
class TermSet:
    """One glossary for one set: its entries (source → target), as the model's TermFinder, each sentence's matches,
    and the references its figures are measured against."""

    name: str
    entries: dict[str, str]
    finder: TermFinder
    matches: list[list[Match]]  # per sentence
    references: list[str]

    def count(self, sentence: int) -> int:
        return len(self.matches[sentence])


def term_set(tr, name: str, entries: dict[str, str], sources: list[str], references: list[str],
             path: Path) -> TermSet:
    """The entries written to `path` and read back as `mt translate --glossary` reads them."""
    from mt.data.glossary import read_glossary
    from mt.data.terms import TermFinder

    write_glossary(path, entries)
    finder = TermFinder(read_glossary(path), tr.tokenizer)
    return TermSet(name, entries, finder, [finder.find(s) for s in sources], references)


def reference_terms(tr, english: English, sources: list[str], references: list[str], path: Path) -> TermSet | None:
    """Set (1); None when no entry holds in every sentence that matches it."""
    from mt.data.tokenizer import script_converter

    simplified = script_converter("simplified")  # the sources in one script: an entry matches either
    targets: dict[str, Counter] = {}
    for source, reference in zip(sources, references):
        for term, target in candidates(tr, english, source, reference):
            targets.setdefault(simplified([term])[0], Counter())[target] += 1
    entries = {source: counts.most_common(1)[0][0] for source, counts in targets.items()}
    while entries:  # dropping an entry may let a shorter one match where it stood: matched again until all hold
        terms = term_set(tr, "reference", entries, sources, references, path)
        missed = {m.entry.source for found, reference in zip(terms.matches, references)
                  for m, use in zip(found, terms.finder.report(found, reference)) if not use.used}
        if not missed:
            return terms
        entries = {s: t for s, t in entries.items() if s not in missed}
    return None


# --- forced terms -------------------------------------------------------------------------------------------------

def invent(original: str, rng: random.Random, taken: set[str], tokenizer) -> str:
    """A made-up word for each word of `original`, capitalised as it is, of about its length in syllables."""
    while True:
        made = []
        for word in original.split():
            syllables = max(2, min(4, round(len(word) / 2.5)))
            new = "".join(rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(syllables))
            made.append(new.upper() if word.isupper() and len(word) > 1 else
                        new.capitalize() if word[0].isupper() else new)
        term = " ".join(made)
        if not any(w.lower() in taken for w in made) and writable(tokenizer, term):
            taken.update(w.lower() for w in made)
            return term


def capitalised(term: str) -> str:
    return term[0].upper() + term[1:]


def rewrite(reference: str, original: str, new: str) -> str:
    """The reference with `new` in place of each whole-word `original` (and of its capitalised form)."""
    forms = {original: new, capitalised(original): capitalised(new)}
    pattern = "|".join(map(re.escape, sorted(forms, key=len, reverse=True)))
    return re.sub(rf"(?<!\w)({pattern})(?!\w)", lambda m: forms[m.group(1)], reference)


def forced_terms(tr, reference: TermSet, sources: list[str], english: English, seed: int, path: Path) -> TermSet:
    """Set (2): the reference terms' sources with invented targets, against references rewritten to hold them."""
    rng, taken = random.Random(seed), set(english.seen)
    taken.update(w.text.lower() for line in reference.references for w in words(line))
    invented = {source: invent(target, rng, taken, tr.tokenizer) for source, target in reference.entries.items()}
    rewritten = []
    for found, line in zip(reference.matches, reference.references):
        for source in dict.fromkeys(m.entry.source for m in found):
            line = rewrite(line, reference.entries[source], invented[source])
        rewritten.append(line)
    path.with_suffix(".ref.en").write_text("".join(line + "\n" for line in rewritten), encoding="utf-8")
    return term_set(tr, "forced", invented, sources, rewritten, path)


def matching_none(tr, sources: list[str], path: Path) -> TermSet:
    """A glossary of one entry that no sentence holds: each output must be the one without a glossary."""
    term = "zqxjv"
    while any(term in s for s in sources):
        term += "q"
    return term_set(tr, "matching none", {term: invent("word", random.Random(0), set(), tr.tokenizer)}, sources,
                    [""] * len(sources), path)


# --- runs and figures ---------------------------------------------------------------------------------------------

def translate(tr, decode, lines: list[str], terms: TermSet | None, mode: str = "hard"):
    """Each line's best translation, with the glossary in `mode` (mt/text/glossary_modes.py) or without one."""
    from mt.text.glossary_modes import GlossaryUse

    if terms is None:
        return [hyps[0] for hyps in tr.translate(lines, decode)]
    return [hyps[0] for hyps in GlossaryUse(terms.finder, mode == "soft").translate(tr, lines, decode)]


def speeds(tr, decode, sources: list[str], terms: TermSet, mode: str, repeats: int) -> dict[str, dict[str, float]]:
    """Group → mode → sentences/s (median of `repeats`): each group's sentences translated alone, with and without
    the glossary in turn, the order alternating from one repeat to the next."""
    groups = {group: [s for i, s in enumerate(sources) if holds(terms.count(i))] for group, holds in GROUPS.items()}
    seconds: dict[str, dict[str, list[float]]] = {group: {"none": [], mode: []} for group in groups}
    for repeat in range(repeats):
        for group, lines in groups.items():
            for run in ("none", mode) if repeat % 2 == 0 else (mode, "none"):
                if lines:
                    start = time.perf_counter()
                    translate(tr, decode, lines, terms if run == mode else None, mode)
                    seconds[group][run].append(time.perf_counter() - start)
    return {group: {mode: len(groups[group]) / statistics.median(times) for mode, times in modes.items()}
            for group, modes in seconds.items() if groups[group]}


def at_limit(tr, decode, src_ids: list[int], output: str, forms) -> bool:
    """Whether an output (re-encoded) reached its output limit."""
    from mt.decode.engine import output_limit

    longest = sum(max(map(len, term), default=0) for term in forms or [])  # constraints.longest_forms
    limit = output_limit(decode, len(src_ids), tr.engine.max_positions, longest)
    return len(tr.tokenizer.encode_tgt([output])[0]) - 2 >= limit


def held(finder: TermFinder, found: list[Match], output: str, asked: int) -> tuple[int, int, int]:
    """Of a sentence's term occurrences `found` (all of one entry): those used, whether the output holds the target
    as a word more times than the sentence's terms ask for it (`asked`: the entry's occurrences and those of other
    entries of that target; 1 or 0), and those missed while the output holds the target inside a word (glued)."""
    targets = {form for t in found[0].entry.targets for form in (t, capitalised(t))}
    anywhere = sum(output.count(t) for t in targets)
    as_words = sum(use.used for use in finder.report(found[:1] * (anywhere + 1), output))
    used = min(as_words, len(found))
    return used, int(as_words > asked), min(len(found) - used, anywhere - as_words)


def percent(n: int, d: int) -> float | None:
    return round(100 * n / d, 1) if d else None


def figures(tr, decode, terms: TermSet, src_ids: list[list[int]], outputs: list[str], none: list[str] | None
            ) -> dict:
    """One mode's figures on the term sentences; `none`: the outputs without a glossary, given for a glossary's run
    (and then its identity on the other sentences)."""
    from mt.core.scoring import score

    finder, matches = terms.finder, terms.matches
    term = [i for i, found in enumerate(matches) if found]
    counts = Counter()  # terms, used, duplicated, glued, used of those missed without, missed without
    for i in term:
        for entry in dict.fromkeys(m.entry for m in matches[i]):
            found = [m for m in matches[i] if m.entry == entry]
            asked = sum(m.entry.targets[0] == entry.targets[0] for m in matches[i])
            used, duplicated, glued = held(finder, found, outputs[i], asked)
            counts.update(terms=len(found), used=used, duplicated=duplicated, glued=glued)
            if none is not None:
                missed = len(found) - held(finder, found, none[i], asked)[0]
                counts.update(missed=missed, recovered=max(0, used - (len(found) - missed)))
    row = {"sentences": len(outputs), "term sentences": len(term), "terms": counts["terms"],
           "terms used": counts["used"], "terms used %": percent(counts["used"], counts["terms"])}
    if none is not None:
        row["terms used % of those missed without"] = percent(counts["recovered"], counts["missed"])
        row["duplicated terms"], row["glued terms"] = counts["duplicated"], counts["glued"]
    row["term outputs at the length limit"] = sum(
        at_limit(tr, decode, src_ids[i], outputs[i], finder.forms(matches[i]) if none is not None else None)
        for i in term)
    row["term output pieces"] = sum(len(ids) - 2 for ids in tr.tokenizer.encode_tgt([outputs[i] for i in term]))
    if term:
        scores = score([outputs[i] for i in term], [[terms.references[i] for i in term]], "en")
        row["BLEU"], row["chrF"] = round(scores.bleu, 2), round(scores.chrf, 2)
    if none is not None:
        rest = [i for i in range(len(outputs)) if not matches[i]]
        row["no-term sentences"] = len(rest)
        row["no-term sentences identical"] = sum(outputs[i] == none[i] for i in rest)
    return row


def write_outputs(out: Path, stem: str, outputs: list[str], terms: TermSet | None) -> None:
    (out / f"{stem}.en").write_text("".join(line + "\n" for line in outputs), encoding="utf-8")
    if terms is not None:
        reports = (terms.finder.report(found, line) for found, line in zip(terms.matches, outputs))
        (out / f"{stem}.terms.jsonl").write_text(
            "".join(json.dumps([dataclasses.asdict(u) for u in r], ensure_ascii=False) + "\n" for r in reports),
            encoding="utf-8")


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a and b else None


def measure(tr, decode, name: str, beam: int, run: tuple[str, str], terms: TermSet, sources: list[str], src_ids,
            none: list[str], out: Path, repeats: int) -> list[dict]:
    """A glossary's rows: `none` and `mode` (the glossary matching none: `mode` alone), printed; `run`: (engine,
    mode)."""
    engine, mode = run
    key = {"set": name, "glossary": terms.name, "engine": engine, "beam": beam}
    outputs = [t.text for t in translate(tr, decode, sources, terms, mode)]
    write_outputs(out, f"{name}.{terms.name.replace(' ', '-')}.{engine}.{mode}.beam{beam}", outputs, terms)
    with_terms = figures(tr, decode, terms, src_ids, outputs, none)
    if terms.name == "matching none":
        print(f"matching none, beam {beam}: {with_terms['no-term sentences identical']:,}/"
              f"{with_terms['no-term sentences']:,} outputs identical to those without a glossary")
        return [{**key, "mode": mode, **with_terms}]
    without = figures(tr, decode, terms, src_ids, none, None)
    if "BLEU" in with_terms:  # beside chrF
        bleu = {"BLEU − none": round(with_terms["BLEU"] - without["BLEU"], 2)}
        with_terms = {k: v for column, value in with_terms.items()
                      for k, v in ((column, value), *(bleu.items() if column == "chrF" else ()))}
    with_terms["term output pieces × none"] = ratio(with_terms["term output pieces"], without["term output pieces"])
    rate = speeds(tr, decode, sources, terms, mode, repeats)
    for group in GROUPS:
        found = rate.get(group, {})
        without[f"{group} sentences/s"] = round(found["none"], 1) if found else None
        with_terms[f"{group} sentences/s"] = round(found[mode], 1) if found else None
        with_terms[f"{group} time × none"] = ratio(found.get("none"), found.get(mode))
    show(without, with_terms, mode, beam)
    return [{**key, "mode": "none", **without}, {**key, "mode": mode, **with_terms}]


def show(without: dict, with_terms: dict, mode: str, beam: int) -> None:
    """A glossary's figures, as four lines."""
    print(f"  none, beam {beam}: {used_line(without)}; {bleu_line(without)}; term outputs at the length limit "
          f"{without['term outputs at the length limit']}")
    print(f"  {mode}, beam {beam}: {used_line(with_terms)}, "
          f"{share(with_terms['terms used % of those missed without'])} of those missed without; duplicated "
          f"{with_terms['duplicated terms']}, glued {with_terms['glued terms']}; term outputs at the length limit "
          f"{with_terms['term outputs at the length limit']}")
    print(f"  {mode}, beam {beam}: {bleu_line(with_terms)}; no-term sentences identical "
          f"{with_terms['no-term sentences identical']:,}/{with_terms['no-term sentences']:,}")
    print(f"  speed, beam {beam}: " + "; ".join(
        f"{group} {without[f'{group} sentences/s']} → {with_terms[f'{group} sentences/s']} sentences/s "
        f"({with_terms[f'{group} time × none']}× the time)" for group in GROUPS
        if without[f"{group} sentences/s"] is not None))


def share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def used_line(row: dict) -> str:
    return f"terms used {row['terms used']:,}/{row['terms']:,} ({share(row['terms used %'])})"


def bleu_line(row: dict) -> str:
    if "BLEU" not in row:
        return "no term sentence to score"
    difference = f" ({row['BLEU − none']:+.2f})" if "BLEU − none" in row else ""
    return f"BLEU {row['BLEU']:.2f}{difference}, chrF {row['chrF']:.2f} on the term sentences"


def describe(terms: TermSet, path: Path) -> str:
    counts = [terms.count(i) for i in range(len(terms.matches))]
    examples = ", ".join(f"{s} → {t}" for s, t in list(terms.entries.items())[:3])
    return (f"{terms.name} terms: {len(terms.entries):,} entries ({path}), e.g. {examples}; "
            f"{sum(c > 0 for c in counts):,} sentences with terms ({sum(1 <= c <= 2 for c in counts):,} with 1–2, "
            f"{sum(c >= 3 for c in counts):,} with 3+), {counts.count(0):,} without")


def bench_set(tr, tt, name: str, sources: list[str], references: list[str], common: list[str], args) -> list[dict]:
    """One test set's rows, printed as they come: glossaries made with `tr` (mt's engine), translated with `tt`
    (--engine)."""
    english = English(common, references)
    src_ids = tr.encode(sources)
    print(f"\n## {name}: {len(sources):,} sentences")
    reference = reference_terms(tr, english, sources, references, args.out / f"{name}.reference.tsv")
    if reference is None:
        print("reference terms: no entry holds in every reference of the sentences that match it")
        sets = []
    else:
        forced = forced_terms(tr, reference, sources, english, args.seed, args.out / f"{name}.forced.tsv")
        sets = [reference, forced]
        for terms in sets:
            print(describe(terms, args.out / f"{name}.{terms.name}.tsv"))
    nothing = matching_none(tr, sources, args.out / f"{name}.matching-none.tsv")
    rows = []
    for beam in args.beam:
        decode = tr.decode.replace(beam_size=beam)
        none = [t.text for t in translate(tt, decode, sources, None)]  # also the warm-up of the timings
        write_outputs(args.out, f"{name}.{args.engine}.none.beam{beam}", none, None)
        run = (args.engine, args.mode)
        for terms in sets:
            print(f"{terms.name} terms:")
            rows += measure(tt, decode, name, beam, run, terms, sources, src_ids, none, args.out, args.repeats)
        rows += measure(tt, decode, name, beam, run, nothing, sources, src_ids, none, args.out, args.repeats)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "runs" / "tatoeba-cpu" / "checkpoints" / "best.pt")
    parser.add_argument("--set", nargs=3, action="append", metavar=("NAME", "SRC", "REF"), dest="sets",
                        help="a test set: its name, Chinese sources and English references (repeatable; default: "
                             "Tatoeba test, WMT21 newstest2021 and WMT22 generaltest2022 reference A from "
                             "../shared/data/zh-en)")
    parser.add_argument("--limit", type=int, default=None, help="the first N sentences of each set (default: all)")
    parser.add_argument("--beam", type=int, nargs="+", default=[4], help="beam sizes, a run each (default: 4)")
    parser.add_argument("--mode", choices=["hard", "soft"], default="hard", help="the glossary's mode (default: hard)")
    parser.add_argument("--engine", choices=["mt", "ctranslate2"], default="mt",
                        help="what translates: mt's own search, or the CTranslate2 export --export (soft mode only)")
    parser.add_argument("--export", type=Path, default=None, help="a CTranslate2 export of --checkpoint")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each kind, alternated (default: 3)")
    parser.add_argument("--seed", type=int, default=1, help="of the invented words (default: 1)")
    parser.add_argument("--common-words", type=Path, default=DATA / "tatoeba" / "train.en",
                        help="English text whose 150 most frequent words (names apart) are no terms (default: "
                             "Tatoeba's train.en)")
    parser.add_argument("--out", type=Path, default=None,
                        help="where the glossaries, rewritten references and outputs go (default: a new temporary "
                             "folder)")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("BENCH_THREADS", 1)),
                        help="torch threads (default: $BENCH_THREADS, else 1)")
    args = parser.parse_args()
    sets = [(name, Path(src), Path(ref)) for name, src, ref in args.sets] if args.sets else SETS
    args.out = args.out or Path(tempfile.mkdtemp(prefix="bench-glossary-"))
    args.out.mkdir(parents=True, exist_ok=True)

    import torch

    from mt.decode.translator import load_translator

    torch.set_num_threads(args.threads)
    if args.engine == "ctranslate2" and (args.mode == "hard" or args.export is None):
        parser.error("--engine ctranslate2 goes with --mode soft and --export DIR")
    tr = load_translator([args.checkpoint], "cpu")
    tt = load_translator(args.export, "cpu", "ctranslate2") if args.engine == "ctranslate2" else tr
    if tr.config.data.tgt_lang != "en":
        parser.error(f"{args.checkpoint} translates into {tr.config.data.tgt_lang}; the terms are English words")
    common = args.common_words.read_text(encoding="utf-8").splitlines()
    print(f"# glossaries, {args.mode} mode, engine {args.engine}: {args.checkpoint} (alpha {tr.decode.alpha}, no_repeat_ngram "
          f"{tr.decode.no_repeat_ngram_size}), torch {args.threads} thread(s), {args.repeats} timed repeats; "
          f"glossaries and outputs in {args.out}")
    rows, sizes = [], []
    for name, src, ref in sets:
        sources = src.read_text(encoding="utf-8").splitlines()[:args.limit]
        references = ref.read_text(encoding="utf-8").splitlines()[:args.limit]
        rows += bench_set(tr, tt, name, sources, references, common, args)
        sizes.append(f"{name} {len(sources):,}")
    record("bench_glossary.py", f"glossaries, {args.mode} mode, engine {args.engine}, {args.checkpoint}: {', '.join(sizes)} sentences, "
           f"seed {args.seed}, {args.threads} thread(s)", rows)


if __name__ == "__main__":
    main()
