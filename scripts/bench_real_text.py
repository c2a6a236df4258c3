"""Real text through mt (mt/text/): paragraphs, HTML with inline tags, tag placement, speed, and document round
trips, measured on test sets built reproducibly (--seed) from the Tatoeba zh→en test split. A report, not a test.

1. paragraphs: 2–5 consecutive test sentences per paragraph (Chinese joined without spaces, English references
   with one space); BLEU of (a) paragraphs translated whole, split into sentences; (b) the same sentences translated
   one by one and joined with a space; (c) paragraphs translated whole without splitting; (a)/(b) (goal ≥ 0.98), and
   the share of outputs with as many sentences (mt/text/sentences.py's English split) as the paragraph's source
   has (counted by their end marks 。！？…, as split: goal ≥ 99%), as it has Tatoeba lines (a line may hold two
   sentences), and as its reference has.
2. HTML: <p> blocks of 1–3 test sentences with <b>, <i>, <b><i>…</i></b> and <a href> on random 1–3 character
   spans, "&amp;" (for 和) and "&nbsp;" (between sentences) in the text and a <code>x</code> label, through
   read_html → translate_marked → render: every tag kept (same count, exactly as written), well-formed XML, and the
   text outside tags equal to the plain translation of the same text (a <code> element's contents are inside a tag,
   kept as written whether or not the model copied them; the plain translation's copy of them is set aside too);
   also reported: all text, <code> contents included.
3. tag placement: each test sentence holding 汤姆 or an ASCII number, that word (the first; a number's whole digit
   run) in <b>…</b>: how often the output's <b> holds exactly "Tom" / the same digits, among outputs holding them
   at all (goal ≥ 90%), once per --layers setting (mt.text.align.LAYERS: the decoder layers whose cross-attention,
   averaged, aligns words). Tatoeba test holds few numbers, so the sentences with one of --numbers (AI Challenger's
   valid2017 and 3AM's test: other domains, where the output still holds the digits often) join them.
4. speed: sentences/s of plain translate_texts against translate_marked on item 2's set (each sentence with marks
   is read by the model a second time, for its attention).
5. documents (mt/text/documents.py's read_document): an .srt of 50 test sentences (cues 2 s apart, every third
   with two lines) and a .docx (paragraphs of 1–2 sentences with bold, italic and bold italic runs): same cue or
   paragraph count, times / run formatting unchanged, every text translated.

Its figures (not the examples it prints) go, as one record, into benchmarks/results/bench_real_text.jsonl
(scripts/records.py): a row per measure, a share as its count, its whole and its percentage.

    python scripts/bench_real_text.py --checkpoint runs/tatoeba-cpu/checkpoints/best.pt
    python scripts/bench_real_text.py --checkpoint runs/tatoeba-cpu/checkpoints/best.pt --limit 300 --layers -1 all 1:
"""

from __future__ import annotations

import argparse
import html
import io
import random
import re
import shlex
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from datetime import timedelta
from pathlib import Path

from records import record  # scripts/records.py: the results file

ROOT = Path(__file__).resolve().parents[1]
TATOEBA = ROOT.parent / "shared" / "data" / "zh-en" / "tatoeba"
MORE_NUMBERS = [ROOT.parent / "shared" / "data" / "zh-en" / "aichallenger2017" / "valid2017.en-zh.zh",
                ROOT.parent / "shared" / "data" / "zh-en" / "3am" / "test.zh"]
HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
TAG = re.compile(r"<[^>]*>")
CODE = re.compile(r"<code>(.*?)</code>")
NUMBER = re.compile(r"[0-9]+(?:[.,][0-9]+)*")
LINK = '<a href="https://example.com/?a=1&amp;b=2">'
KINDS = {"b": ("<b>", "</b>"), "i": ("<i>", "</i>"), "bi": ("<b><i>", "</i></b>"), "a": (LINK, "</a>")}


def cpu_name() -> str:
    """The CPU's model name, from lscpu."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown CPU"
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")),
                "unknown CPU")


def parse_layers(spec: str):
    """--layers: "all", a Python slice ("1:", ":2", "-2:"), an index ("-1": the last) or indices ("0,2")."""
    if spec == "all":
        return slice(None)
    if ":" in spec:
        a, b = spec.split(":", 1)
        return slice(int(a) if a else None, int(b) if b else None)
    if "," in spec:
        return [int(x) for x in spec.split(",")]
    i = int(spec)
    return slice(i, i + 1 if i != -1 else None)


class Figures:
    """The run's figures for its record: a row each (item, measure, values), printed from that row."""

    def __init__(self):
        self.rows: list[dict] = []

    def add(self, item: str, measure: str, **values) -> dict:
        row = {"item": item, "measure": measure, **values}
        self.rows.append(row)
        return row

    def share(self, item: str, measure: str, n: int, d: int, **more) -> str:
        """n of d as a row, and as printed: "n/d (x%)"."""
        row = self.add(item, measure, count=n, of=d, **{"%": round(100 * n / d, 1) if d else None}, **more)
        return f"{n}/{d} ({row['%']:.1f}%)" if d else f"{n}/0 (-)"


def short(text: str, width: int = 160) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def esc(text: str) -> str:
    return html.escape(text, quote=False).replace("\xa0", "&nbsp;")


# 1. paragraphs -----------------------------------------------------------------------------------------------

def paragraphs(tr, decode, zh: list[str], en: list[str], rng: random.Random, figures: Figures) -> None:
    from mt.core.scoring import score
    from mt.text.sentences import split_text
    from mt.text.texts import translate_texts

    groups, i = [], 0
    while i < len(zh):
        n = rng.randint(2, 5)
        groups.append((i, min(i + n, len(zh))))
        i += n
    sources = ["".join(zh[a:b]) for a, b in groups]
    references = [" ".join(en[a:b]) for a, b in groups]
    sizes = [b - a for a, b in groups]
    t = time.perf_counter()
    split_on = translate_texts(tr, sources, decode, split=True)
    t_a = time.perf_counter() - t
    t = time.perf_counter()
    one_by_one = tr.translate_lines(zh, decode)
    t_b = time.perf_counter() - t
    joined = [" ".join(one_by_one[a:b]) for a, b in groups]
    t = time.perf_counter()
    split_off = translate_texts(tr, sources, decode, split=False)
    t_c = time.perf_counter() - t
    item = "1. paragraphs"
    bleu = {k: score(h, [references], "en") for k, h in (("a", split_on), ("b", joined), ("c", split_off))}
    print(f"\n## 1. Paragraphs: {len(groups)} paragraphs of 2–5 sentences ({len(zh)} sentences), BLEU "
          f"{bleu['a'].bleu_signature}")
    for key, name, seconds in (("a", "whole, split on", t_a), ("b", "sentence by sentence", t_b),
                               ("c", "whole, split off", t_c)):
        row = figures.add(item, f"({key}) {name}", BLEU=round(bleu[key].bleu, 2), chrF=round(bleu[key].chrf, 2),
                          seconds=round(seconds, 1))
        print(f"{row['measure']:<24} BLEU {row['BLEU']:6.2f}  chrF {row['chrF']:6.2f}  ({row['seconds']:.1f} s)")
    ratio = round(bleu["a"].bleu / bleu["b"].bleu, 4) if bleu["b"].bleu else None
    figures.add(item, "(a)/(b) BLEU", ratio=ratio)
    print(f"(a)/(b) {'nan' if ratio is None else f'{ratio:.4f}'}  "
          f"[goal ≥ 0.98: {'met' if ratio is not None and ratio >= 0.98 else 'NOT met'}]")
    found = [len(split_text(s, "zh", "en").spans) for s in sources]  # the source's sentences, as split
    exactly = figures.share(item, "source split into exactly its sentence count",
                            sum(f == n for f, n in zip(found, sizes)), len(groups),
                            **{"into fewer": sum(f < n for f, n in zip(found, sizes))})
    print(f"source split into exactly its sentence count: {exactly} (a Tatoeba line may hold two sentences); "
          f"into fewer: {figures.rows[-1]['into fewer']}")
    counts = {}
    for key, outputs in (("a", split_on), ("b", joined), ("c", split_off)):
        counts[key] = [len(split_text(o, "en", "zh").spans) for o in outputs]
        measure = f"output sentences = lines in the paragraph, ({key})"
        same = sum(c == n for c, n in zip(counts[key], sizes))
        print(f"{measure}: {figures.share(item, measure, same, len(groups))}")
    # The goal counts the input's sentences by their end marks (。！？…), as split: a line holding two counts two
    same = sum(c == f for c, f in zip(counts["a"], found))
    measure = "output sentences = source sentences as split, (a)"
    print(f"{measure}: {figures.share(item, measure, same, len(groups))}"
          f"  [goal ≥ 99%: {'met' if same >= 0.99 * len(groups) else 'NOT met'}]")
    # A Tatoeba line may hold two sentences: its reference, a person's translation, has them both
    wanted = [len(split_text(r, "en", "zh").spans) for r in references]
    for key in ("a", "b"):
        measure = f"output sentences = reference sentences, ({key})"
        same = sum(c == w for c, w in zip(counts[key], wanted))
        print(f"{measure}: {figures.share(item, measure, same, len(groups))}")
    wrong = [k for k, n in enumerate(sizes) if counts["a"][k] != n]
    source = [k for k in wrong if found[k] != sizes[k]]
    as_b = [k for k in wrong if k not in source and counts["a"][k] == counts["b"][k]]
    rest = [k for k in wrong if k not in source and k not in as_b]
    print(f"  (a)'s {len(wrong)} misses: {len(source)} where the source splits into another count, {len(as_b)} more "
          f"where (b) counts the same (a sentence translated as two, or the English split), {len(rest)} others")
    for k in (rest + as_b + source)[:3]:
        print(f"  e.g. {sizes[k]} sentences ({found[k]} as split): {short(sources[k])}\n       (a) {short(split_on[k])}"
              f"\n       (b) {short(joined[k])}")


# 2. HTML, 4. speed --------------------------------------------------------------------------------------------

def tag_sentence(sentence: str, rng: random.Random) -> list[tuple[int, int, str]]:
    """1–2 non-overlapping spans of 1–3 Han characters, each with a kind of KINDS."""
    spans: list[tuple[int, int, str]] = []
    for _ in range(rng.randint(1, 2)):
        for _try in range(10):
            a = rng.randrange(len(sentence))
            b = a + rng.randint(1, 3)
            if b <= len(sentence) and all(HAN.match(c) for c in sentence[a:b]) and \
                    all(b <= x or a >= y for x, y, _ in spans):
                spans.append((a, b, rng.choice(list(KINDS))))
                break
    return sorted(spans)


def tagged_block(sentences: list[str], rng: random.Random) -> tuple[str, str]:
    """One <p> block of sentences with inline tags and entities: (its HTML, its text without tags)."""
    html_parts, text_parts = [], []
    code = rng.random() < 0.15
    for k, sentence in enumerate(sentences):
        if "和" in sentence and rng.random() < 0.5:
            sentence = sentence.replace("和", "&", 1)  # written &amp;
        if k:
            gap = "\xa0" if rng.random() < 0.3 else ""  # written &nbsp;
            html_parts.append(esc(gap))
            text_parts.append(gap)
        if code and k == 0:
            html_parts.append("<code>x</code>：")
            text_parts.append("x：")
        position = 0
        for a, b, kind in tag_sentence(sentence, rng):
            start, end = KINDS[kind]
            html_parts += [esc(sentence[position:a]), start, esc(sentence[a:b]), end]
            position = b
        html_parts.append(esc(sentence[position:]))
        text_parts.append(sentence)
    return "<p>" + "".join(html_parts) + "</p>", "".join(text_parts)


def words_around_code(output: str, plain: str) -> bool:
    """True when the output's text outside its <code> elements is the plain translation, or the plain translation
    less its copy of each code element's words (a code element goes back as written, in place of that copy)."""
    outside = html.unescape(TAG.sub("", CODE.sub("", output)))
    for code in CODE.findall(output):
        if outside == plain:
            break
        plain = re.sub(rf"(?<!\w){re.escape(html.unescape(code))}(?!\w)", "", plain, count=1)
    return outside == plain


def well_formed(out: str) -> bool:
    try:
        ET.fromstring("<root>" + out.replace("&nbsp;", "&#160;") + "</root>")
        return True
    except ET.ParseError:
        return False


def html_and_speed(tr, decode, zh: list[str], rng: random.Random, figures: Figures) -> str:
    """Prints item 2; returns item 4's lines."""
    from mt.text.markup import read_html
    from mt.text.texts import split_for, translate_marked, translate_texts

    blocks, i = [], 0
    while i < len(zh):
        n = rng.randint(1, 3)
        blocks.append(tagged_block(zh[i:i + n], rng))
        i += n
    sources = [h for h, _ in blocks]
    plain_sources = [t for _, t in blocks]
    docs = [read_html(h) for h in sources]
    texts = [t for d in docs for t in d.texts]
    t = time.perf_counter()
    plain = translate_texts(tr, plain_sources, decode)
    t_plain = time.perf_counter() - t
    t = time.perf_counter()
    translated = translate_marked(tr, texts, decode)
    t_marked = time.perf_counter() - t
    outputs, k = [], 0
    for d in docs:
        outputs.append(d.render(translated[k:k + len(d.texts)]))
        k += len(d.texts)
    tags_kept = sum(Counter(TAG.findall(s)) == Counter(TAG.findall(o)) for s, o in zip(sources, outputs))
    formed = sum(well_formed(o) for o in outputs)
    empty = sum(bool(re.search(r"<(b|i|a)\b[^>]*>(<[^/][^>]*>)*(</[^>]*>)*</\1>", o)) for o in outputs)
    stripped = [html.unescape(TAG.sub("", o)) for o in outputs]
    mismatches = [j for j, (s, p) in enumerate(zip(stripped, plain)) if s != p]
    counts = Counter(t for s in sources for t in TAG.findall(s) if not t.startswith("</"))
    print(f"\n## 2. HTML: {len(blocks)} <p> blocks ({len(zh)} sentences); start tags: "
          + ", ".join(f"{t} {n}" for t, n in counts.most_common()) +
          f"; &amp; in {sum('&amp;' in TAG.sub('', s) for s in sources)} blocks, &nbsp; in "
          f"{sum('&nbsp;' in s for s in sources)}")
    item = "2. HTML"
    code = [j for j, h in enumerate(sources) if "<code>" in h]
    aside = [j for j in mismatches if not words_around_code(outputs[j], plain[j])]
    for measure, n, note in (
            ("every tag kept (same count, as written)", tags_kept, ""), ("well-formed (ElementTree)", formed, ""),
            ("text outside tags = plain translation", len(blocks) - len(aside),
             " (<code> contents, kept as written, aside, and the plain translation's copy of them where the model "
             "made one)"),
            ("all text, <code> contents included", len(blocks) - len(mismatches),
             f"; mismatches {len(mismatches)}, {len(set(mismatches) & set(code))} of them in the {len(code)} blocks "
             "with <code>x</code> (its contents are kept whether or not the model copied them)"),
            ("with an empty inline element (<b></b>…)", empty, "")):
        print(f"{measure + ':':<41}{figures.share(item, measure, n, len(blocks))}{note}")
    for j in sorted(mismatches, key=lambda j: j in code)[:3]:
        print(f"  in:    {short(sources[j])}\n  out:   {short(outputs[j])}\n  plain: {short(plain[j])}")
    bad = [j for j, (s, o) in enumerate(zip(sources, outputs)) if Counter(TAG.findall(s)) != Counter(TAG.findall(o))
           or not well_formed(o)]
    for j in bad[:3]:
        print(f"  tags lost or not well-formed:\n  in:  {short(sources[j])}\n  out: {short(outputs[j])}")

    sentences = split_for(tr, texts).sentences
    with_marks = sum(bool(s.spans) for s in sentences)
    plain_row, marked = (figures.add("4. speed", name, **{"sentences/s": round(len(sentences) / seconds, 1),
                                                           "seconds": round(seconds, 1)})
                         for name, seconds in (("translate_texts (plain)", t_plain),
                                               ("translate_marked (tags)", t_marked)))
    marked.update({"× plain time": round(t_marked / t_plain, 2),
                   "ms more per sentence with marks": round(1000 * (t_marked - t_plain) / max(with_marks, 1), 1)})
    return "\n".join([
        f"\n## 4. Speed ({len(sentences)} sentences of item 2, {with_marks} with marks)",
        f"translate_texts (plain):  {plain_row['sentences/s']:7.1f} sent/s  ({plain_row['seconds']:.1f} s)",
        f"translate_marked (tags):  {marked['sentences/s']:7.1f} sent/s  ({marked['seconds']:.1f} s; "
        f"×{marked['× plain time']:.2f} the plain time, {marked['ms more per sentence with marks']:.1f} ms "
        "more per sentence with marks)"])


# 3. tag placement ---------------------------------------------------------------------------------------------

def placement(tr, decode, zh: list[str], more_numbers: list[str], layer_specs: list[str], figures: Figures) -> None:
    import mt.text.align as align
    from mt.text.markup import read_html
    from mt.text.texts import translate_marked

    cases = {"Tom": [], "numbers": []}  # (source HTML, the word in the output)
    for s in zh:
        if "汤姆" in s:
            a = s.index("汤姆")
            cases["Tom"].append(("<p>" + esc(s[:a]) + "<b>汤姆</b>" + esc(s[a + 2:]) + "</p>", "Tom"))
    for s in zh + more_numbers:
        m = NUMBER.search(s)
        if m:
            cases["numbers"].append(("<p>" + esc(s[:m.start()]) + "<b>" + m.group() + "</b>" + esc(s[m.end():])
                                     + "</p>", m.group()))
    print(f"\n## 3. Tag placement: <b> on 汤姆 ({len(cases['Tom'])} sentences) or on an ASCII number "
          f"({len(cases['numbers'])}, {len(more_numbers)} of them from --numbers); goal ≥ 90% exact")
    default = align.LAYERS
    results = {}
    for spec in layer_specs:
        align.LAYERS = default if spec == "default" else parse_layers(spec)
        line = []
        for name, found in cases.items():
            docs = [read_html(h) for h, _ in found]
            translated = translate_marked(tr, [d.texts[0] for d in docs], decode)
            outputs = [d.render([t]) for d, t in zip(docs, translated)]
            present, exact, failures = 0, 0, []
            for (source, word), out in zip(found, outputs):
                if not re.search(rf"(?<![0-9A-Za-z]){re.escape(word)}(?![0-9A-Za-z])", TAG.sub("", out)):
                    continue
                present += 1
                if f"<b>{word}</b>" in out:
                    exact += 1
                else:
                    failures.append((source, out))
            results[spec, name] = (exact, present, failures)
            shown = figures.share("3. tag placement", f"LAYERS={spec}: <b> exactly on {name}", exact, present,
                                  **{"without the word": len(found) - present})
            line.append(f"{name} {shown}, {len(found) - present} without the word")
        print(f"LAYERS={spec:<8} ({align.LAYERS!r}): " + "; ".join(line))
    align.LAYERS = default
    first = layer_specs[0]
    for name in cases:
        for source, out in results[first, name][2][:3]:
            print(f"  {name} miss ({first}): {short(source)}\n  {' ' * len(name)}      → {short(out)}")
    if len(layer_specs) > 1:
        best = max(layer_specs, key=lambda s: sum(results[s, n][0] for n in cases))
        print(f"best LAYERS (most exact overall): {best}")


# 5. documents -------------------------------------------------------------------------------------------------

def documents(tr, decode, zh: list[str], rng: random.Random, figures: Figures) -> None:
    import docx
    import srt

    from mt.text.documents import read_document
    from mt.text.texts import translate_marked

    def through(name: str, data: bytes) -> bytes:
        doc = read_document(name, data)
        return doc.render(translate_marked(tr, doc.texts, decode))

    def translated(before: str, after: str) -> bool:
        return after.strip() != before.strip() and not HAN.search(after) and bool(after.strip())

    pool = zh[:50]
    cues, i = [], 0
    while i < len(pool):
        lines = pool[i:i + 2] if len(cues) % 3 == 2 else pool[i:i + 1]
        n = len(cues)
        cues.append(srt.Subtitle(n + 1, timedelta(seconds=2 * n), timedelta(seconds=2 * n + 1.8), "\n".join(lines)))
        i += len(lines)
    out = list(srt.parse(through("bench.srt", srt.compose(cues).encode()).decode("utf-8")))
    item = "5. documents"
    figures.add(item, ".srt cues out", count=len(out), of=len(cues))
    same = len(out) == len(cues)
    timing = figures.share(item, ".srt times unchanged", sum((a.index, a.start, a.end) == (b.index, b.start, b.end)
                                                             for a, b in zip(cues, out)), len(cues))
    lines_kept = figures.share(item, ".srt line count kept", sum(a.content.count("\n") == b.content.count("\n")
                                                                 for a, b in zip(cues, out)), len(cues))
    done = figures.share(item, ".srt cues translated", sum(translated(a.content, b.content)
                                                           for a, b in zip(cues, out)), len(cues))
    print(f"\n## 5. Documents ({len(pool)} test sentences each)")
    two = sum("\n" in c.content for c in cues)
    print(f".srt  {len(cues)} cues ({two} with 2 lines): cue count "
          f"{'same' if same else f'DIFFERENT ({len(out)})'}; times unchanged {timing}; "
          f"line count kept {lines_kept}; translated {done}")
    for a, b in [(a, b) for a, b in zip(cues, out) if not translated(a.content, b.content)][:3]:
        print(f"  not translated: {a.content!r} → {b.content!r}")

    document = docx.Document()
    styles = [(False, False), (True, False), (False, True), (True, True)]
    paragraphs, i = [], 0
    while i < len(pool):
        n = rng.randint(1, 2)
        paragraphs.append("".join(pool[i:i + n]))
        i += n
    runs_in = []
    for text in paragraphs:
        p = document.add_paragraph()
        cuts = sorted(rng.sample(range(1, len(text)), min(2, len(text) - 1)))
        parts = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
        kinds = [styles[0]] + rng.sample(styles[1:], len(parts) - 1)
        for part, (bold, italic) in zip(parts, kinds):
            run = p.add_run(part)
            run.bold, run.italic = bold or None, italic or None
        runs_in.append(Counter((bool(r.bold), bool(r.italic)) for r in p.runs))
    buffer = io.BytesIO()
    document.save(buffer)
    result = docx.Document(io.BytesIO(through("bench.docx", buffer.getvalue())))
    out_paragraphs = [p for p in result.paragraphs]
    figures.add(item, ".docx paragraphs out", count=len(out_paragraphs), of=len(paragraphs))
    same = len(out_paragraphs) == len(paragraphs)
    kept = figures.share(item, ".docx run formatting unchanged",
                         sum(Counter((bool(r.bold), bool(r.italic)) for r in p.runs) == want
                             for p, want in zip(out_paragraphs, runs_in)), len(paragraphs))
    done = figures.share(item, ".docx paragraphs translated",
                         sum(translated(a, p.text) for a, p in zip(paragraphs, out_paragraphs)), len(paragraphs))
    styled = sum(n for c in runs_in for k, n in c.items() if any(k))
    empty_styled = figures.share(item, ".docx styled runs left without words",
                                 sum(1 for p in out_paragraphs for r in p.runs
                                     if (r.bold or r.italic) and not r.text.strip()), styled)
    print(f".docx {len(paragraphs)} paragraphs, {styled} bold/italic runs: paragraph count "
          f"{'same' if same else f'DIFFERENT ({len(out_paragraphs)})'}; run formatting unchanged "
          f"{kept}; translated {done}; styled runs left without words {empty_styled}")
    for a, p in [(a, p) for a, p in zip(paragraphs, out_paragraphs) if not translated(a, p.text)][:3]:
        print(f"  not translated: {a!r} → {p.text!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "runs" / "tatoeba-cpu" / "checkpoints" / "best.pt")
    parser.add_argument("--data", type=Path, default=TATOEBA, help="folder with test.zh and test.en")
    parser.add_argument("--limit", type=int, default=None, help="the first N test pairs (default: all)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--beam", type=int, default=None, help="default: the checkpoint's")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--layers", nargs="+", default=["default"],
                        help="mt.text.align.LAYERS for item 3, one run each: 'all', a slice ('1:', '-2:'), an index "
                             "('-1': the last) or '0,2'; the first also for items 2, 4 and 5 (default: as in "
                             "mt/text/align.py)")
    parser.add_argument("--numbers", nargs="*", type=Path, default=MORE_NUMBERS,
                        help="item 3: more Chinese sentences, those with an ASCII number (default: AI Challenger's "
                             "valid2017.en-zh.zh and 3AM's test.zh from ../shared/data/zh-en)")
    parser.add_argument("--skip", nargs="*", type=int, default=[],
                        help="items to leave out: 1, 2 (and with it 4), 3, 5")
    args = parser.parse_args()
    started = time.perf_counter()

    import torch

    import mt.text.align as align
    from mt.decode.translator import load_translator

    torch.set_num_threads(args.threads)
    zh = (args.data / "test.zh").read_text(encoding="utf-8").splitlines()[:args.limit]
    en = (args.data / "test.en").read_text(encoding="utf-8").splitlines()[:args.limit]
    tr = load_translator([args.checkpoint], "cpu")
    decode = tr.decode.replace(beam_size=args.beam) if args.beam else tr.decode
    print("$ python " + shlex.join(sys.argv))
    print(f"# mt real text: {cpu_name()}, torch {args.threads} thread(s); {args.checkpoint} (beam "
          f"{decode.beam_size}, alpha {decode.alpha}, no_repeat_ngram {decode.no_repeat_ngram_size}); "
          f"Tatoeba test: {len(zh)} pairs; seed {args.seed}; LAYERS default {align.LAYERS!r}")
    tr.translate_lines(zh[:20], decode)  # warm-up
    if args.layers[0] != "default":
        align.LAYERS = parse_layers(args.layers[0])
    figures = Figures()
    if 1 not in args.skip:
        paragraphs(tr, decode, zh, en, random.Random(args.seed), figures)
    speed = html_and_speed(tr, decode, zh, random.Random(args.seed + 1), figures) if 2 not in args.skip else ""
    if 3 not in args.skip:
        more = [line for path in args.numbers for line in path.read_text(encoding="utf-8").splitlines()]
        placement(tr, decode, zh, [line for line in more if NUMBER.search(line)], args.layers, figures)
    print(speed)
    if 5 not in args.skip:
        documents(tr, decode, zh, random.Random(args.seed + 2), figures)
    total = figures.add("the run", "total", seconds=round(time.perf_counter() - started))
    print(f"\ntotal {total['seconds']} s")
    record("bench_real_text.py", f"real text, {args.checkpoint}, Tatoeba test: {len(zh)} pairs, seed {args.seed}",
           sorted(figures.rows, key=lambda row: row["item"]))  # in item order: item 4's rows come with item 2's


if __name__ == "__main__":
    main()
