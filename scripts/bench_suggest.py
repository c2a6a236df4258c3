"""Suggestions (`mt serve --suggestions`, mt/serve/suggestions.py): how many genuine corrections the model's judge
accepts and how much junk it refuses, and whether an accepted one answers its sentence at once. A report, not a
test.

For a checkpoint, its normal lengths and scripts fitted on --dev as `mt confidence` fits them (bench_confidence.py),
a stream of suggestions for the sentences of --set (default: Tatoeba's dev set), each sentence suggested five ways:

- genuine: its reference translation;
- loop: a word of the reference written 4 to 8 times;
- copy: the sentence itself;
- other language: a sentence in French, German, Spanish, Italian, Portuguese, Russian or Japanese (a fixed list);
- unrelated: another sentence's reference (a random one, --seed).

Each is judged as the server judges it. Then --reproduce of the accepted genuine ones are sent to a server in this
process (Starlette's test client) through POST /suggest, and their sentences translated through POST /translate:
each must come back as its newest accepted suggestion (a sentence of the set may have several references).

Figures (one record, benchmarks/results/bench_suggest.jsonl, scripts/records.py): per kind, suggestions and the
share accepted (genuine) or refused (the junk), with the most frequent reasons; milliseconds per judgement; accepted
suggestions reproduced at once.

    python scripts/bench_suggest.py --checkpoint runs/tatoeba-cpu/checkpoints/best.pt
"""

from __future__ import annotations

import random
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench_confidence import TATOEBA, fitted, lines, parsed  # scripts/bench_confidence.py: options, fitting
from records import record  # scripts/records.py: the results file

OTHER_LANGUAGES = [
    "Je ne sais pas ce que tu veux dire.", "Nous partons demain matin.", "Il fait très froid aujourd'hui.",
    "Ich habe heute keine Zeit.", "Wo ist der Bahnhof?", "Das Buch liegt auf dem Tisch.",
    "No sé dónde está mi teléfono.", "Mañana vamos a la playa.", "¿Cuánto cuesta este libro?",
    "Non ho capito la domanda.", "La cena è pronta.", "Eu não gosto de café.", "Onde fica o hotel?",
    "Я не знаю, что ты имеешь в виду.", "Мы пойдём в парк завтра.", "私は明日東京に行きます。", "これは私の本です。",
]
KINDS = ("genuine", "loop", "copy", "other language", "unrelated")


def stream(sources: list[str], references: list[str], rng: random.Random) -> list[tuple[str, str, str]]:
    """(kind, sentence, suggestion) for each sentence, the five ways."""
    others = list(range(len(sources)))
    rng.shuffle(others)
    found = []
    for i, (source, reference) in enumerate(zip(sources, references)):
        word = rng.choice(reference.split() or ["a"])
        found += [("genuine", source, reference), ("loop", source, " ".join([word] * rng.randint(4, 8))),
                  ("copy", source, source), ("other language", source, rng.choice(OTHER_LANGUAGES))]
        if references[others[i]] != reference:
            found.append(("unrelated", source, references[others[i]]))
    return found


def reproduced(translator, accepted: list[tuple[str, str]]) -> tuple[int, int]:
    """Of the sentences a server accepts a suggestion for through POST /suggest, how many, and for how many it gives
    back the newest accepted suggestion as their translation through POST /translate."""
    from starlette.testclient import TestClient

    from mt.serve.app import create_app
    from mt.serve.limits import ServeConfig

    data = translator.config.data
    with tempfile.TemporaryDirectory() as folder:
        app = create_app(translator, "mt", ServeConfig(), suggestions=Path(folder) / "suggestions.sqlite")
        with TestClient(app) as client:
            taken = [(source, suggestion) for source, suggestion in accepted
                     if client.post("/suggest", json={"q": source, "s": suggestion, "source": data.src_lang,
                                                      "target": data.tgt_lang}).json()["accepted"]]
            latest = dict(taken)  # a sentence suggested twice is answered by its newest accepted suggestion
            if not latest:
                return 0, 0
            answer = client.post("/translate", json={"q": list(latest), "source": data.src_lang,
                                                     "target": data.tgt_lang}).json()
    return len(latest), sum(got == suggestion for got, suggestion in zip(answer["translatedText"], latest.values()))


def main() -> None:
    args = parsed(__doc__, ("--set", {"nargs": 2, "type": Path, "metavar": ("SRC", "REF"),
                                      "default": (TATOEBA / "dev.zh", TATOEBA / "dev.en"),
                                      "help": "the sentences suggested for (default: Tatoeba's dev set)"}),
                  ("--seed", {"type": int, "default": 1, "help": "the stream's choices"}),
                  ("--reproduce", {"type": int, "default": 64, "help": "accepted suggestions sent to a server"}))
    translator, _ = fitted(args)

    from mt.serve.suggestions import judge

    sources, references = lines(args.set[0], args.limit), lines(args.set[1], args.limit)
    counts, reasons, accepted, start = Counter(), {kind: Counter() for kind in KINDS}, [], time.perf_counter()
    suggestions = stream(sources, references, random.Random(args.seed))
    for kind, source, suggestion in suggestions:
        judgement = judge(translator, source, suggestion)
        counts[kind, judgement.accepted] += 1
        if judgement.accepted and kind == "genuine":
            accepted.append((source, suggestion))
        if not judgement.accepted:
            reasons[kind][judgement.reason.split(" (")[0]] += 1
    milliseconds = 1000 * (time.perf_counter() - start) / len(suggestions)
    rows = []
    for kind in KINDS:
        total = counts[kind, True] + counts[kind, False]
        share = counts[kind, kind == "genuine"] / total
        rows.append({"kind": kind, "suggestions": total, "judged right %": round(100 * share, 1),
                     "reasons refused": "; ".join(f"{reason} {n}" for reason, n in reasons[kind].most_common(3))})
        print(f"{kind}: {total} suggestions, {100 * share:.1f}% {'accepted' if kind == 'genuine' else 'refused'}; "
              f"refused: {rows[-1]['reasons refused'] or 'none'}")
    taken, again = reproduced(translator, accepted[:args.reproduce])
    print(f"{milliseconds:.1f} ms a judgement; {again} of the {taken} sentences a server accepted a suggestion for "
          "answered with it at once")
    rows.append({"kind": "accepted by a server, answered with it at once", "suggestions": taken,
                 "judged right %": round(100 * again / max(taken, 1), 1), "reasons refused": ""})
    record("bench_suggest.py", f"suggestions judged, {args.checkpoint}: {args.set[0]} ({len(sources):,} sentences), "
           f"seed {args.seed}, {milliseconds:.1f} ms a judgement, {args.threads} thread(s)", rows)


if __name__ == "__main__":
    main()
