"""A sentence's terms as its search meets them (hard lexical constraints, mt/decode/constrained.py): the target forms
of its terms in a trie (`Terms`), and where one hypothesis stands (`TermState`): the terms its output holds, and how
far it is into a form.

Terms are unordered: an output may hold them in any order. A term may have several target forms (alternatives);
holding any one of them meets it. A term that occurs twice in a source is two terms: the output holds it twice. A
token that breaks an open form drops that partial form and may start a form itself, from the trie's root (fairseq's
unordered constraints: "A A B" holds "A B").
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property

from mt.data.terms import Forms, spaced_letter

NO_CONSTRAINTS = "--glossary needs --engine mt: CTranslate2 has no constrained search"


@dataclass(frozen=True)
class WordPieces:
    """The target pieces that the word-end rule reads: those that end in a letter or digit of a script written with
    spaces, and those that go on with the word before them: such a letter or digit first (a piece that starts a
    word has SentencePiece's "▁" first)."""

    ends: frozenset[int] = frozenset()
    glue: tuple[int, ...] = ()

    @classmethod
    def of(cls, pieces: list[str]) -> WordPieces:
        """From the target vocabulary's pieces, in id order."""
        return cls(frozenset(i for i, piece in enumerate(pieces) if spaced_letter(piece[-1])),
                   tuple(i for i, piece in enumerate(pieces) if spaced_letter(piece[0])))


def longest_forms(terms: Terms | None) -> int:
    """The tokens an output needs at most to hold every term: the sum of each term's longest form."""
    return terms.longest if terms is not None else 0


def _occurrences(tokens: list[int], form: tuple[int, ...]) -> int:
    """How often `form` stands in `tokens`."""
    n = len(form)
    return sum(tuple(tokens[i:i + n]) == form for i in range(len(tokens) - n + 1)) if n else 0


@dataclass(eq=False)
class Node:
    """A node of the trie: the tokens of a form so far."""

    children: dict[int, Node] = field(default_factory=dict)  # next token → node
    ends: tuple[int, ...] = ()  # the terms a form of which ends here
    terms: int = 0              # bitmask of the terms a form of which passes through here


@dataclass(frozen=True, eq=False)
class Terms:
    """One sentence's M terms as a trie of their forms, shared by all its hypotheses, with its target vocabulary's
    WordPieces."""

    root: Node
    asked: dict[tuple[tuple[int, ...], ...], int]  # each term's forms → how many of the M terms have them
    all: int      # the bitmask of all M terms: (1 << M) - 1
    longest: int  # longest_forms
    ids: frozenset[int]  # the ids of all forms
    words: WordPieces

    @classmethod
    def of(cls, terms: list[Forms], words: WordPieces = WordPieces()) -> Terms:
        """From each term occurrence's target forms (ids)."""
        root = Node()
        for term, forms in enumerate(terms):
            for form in forms:
                node = root
                for token in form:
                    node.terms |= 1 << term
                    node = node.children.setdefault(token, Node())
                node.terms |= 1 << term
                node.ends += (term,)
        asked = Counter(tuple(map(tuple, forms)) for forms in terms)
        longest = sum(max(map(len, forms), default=0) for forms in terms)
        ids = frozenset(token for forms in terms for form in forms for token in form)
        return cls(root, dict(asked), (1 << len(terms)) - 1, longest, ids, words)

    def surplus(self, tokens: list[int]) -> bool:
        """Whether an output holds a term's forms more often than the sentence has the term ("the village … the
        village" for one 村庄)."""
        return any(sum(_occurrences(tokens, form) for form in forms) > times for forms, times in self.asked.items())

    def start(self) -> TermState:
        """An empty output's state: it holds no term (but one with an empty form)."""
        met = sum({1 << term for term in self.root.ends})
        return TermState(self, met, 0, self.root, 0, False)


@dataclass(frozen=True, eq=False)
class TermState:
    """Where one hypothesis stands with its sentence's terms. Hypotheses in the same place share one state, and
    each state makes its successors once (`advance`), as the search asks for the same ones at every step."""

    terms: Terms
    met: int         # bitmask of the terms its output holds
    met_tokens: int  # the tokens of the forms that met them
    node: Node       # the open form's node: the root when no form is open
    depth: int       # the open form's tokens so far
    word_end: bool   # the last token completed a form that ends a word: the next may not be one of words.glue
    successors: dict[int, TermState] = field(default_factory=dict, init=False, repr=False)  # token → state after

    @property
    def done(self) -> bool:
        """Every term met: the output may end."""
        return self.met == self.terms.all

    @property
    def bank(self) -> int:
        """The term tokens written (an open form's too, so that a half-written form is not pruned): the bank that
        dynamic beam allocation puts the hypothesis in."""
        return self.met_tokens + self.depth

    @cached_property
    def wanted(self) -> tuple[list[int], list[int]]:
        """(tokens that go on with the open form, tokens that start a form of an unmet term)."""
        unmet = self.terms.all & ~self.met
        go_on = [token for token, child in self.node.children.items() if child.terms & unmet] if self.depth else []
        starts = [token for token, child in self.terms.root.children.items() if child.terms & unmet]
        return go_on, starts

    def advance(self, token: int) -> TermState:
        """The state after writing `token`."""
        after = self.successors.get(token)
        if after is None:
            after = self.successors[token] = self._after(token)
        return after

    def _after(self, token: int) -> TermState:
        child = self.node.children.get(token)
        if child is not None and child.terms & ~self.met:
            return self._enter(child, token)
        if self.depth == 0:
            return self._at(self.node, 0) if self.word_end else self
        # the open form is broken: its tokens leave the bank, and the token may start a form from the root
        return self._at(self.terms.root, 0).advance(token)

    def _enter(self, child: Node, token: int) -> TermState:
        depth = self.depth + 1
        ending = [term for term in child.ends if not self.met >> term & 1]
        if ending:  # a form complete: it meets one term (a term twice in the source needs the form twice)
            return TermState(self.terms, self.met | 1 << ending[0], self.met_tokens + depth, self.terms.root, 0,
                             token in self.terms.words.ends)
        return self._at(child, depth)

    def _at(self, node: Node, depth: int) -> TermState:
        """The same terms met, `depth` tokens into a form at `node`, the word-end rule off."""
        return TermState(self.terms, self.met, self.met_tokens, node, depth, False)
