"""Relevance search over node specs for natural-language queries. Plain Python.

A BM25F ranking: each spec is indexed by field (names, tags, description, parameters,
examples) with field weights, words are stemmed (Snowball), and a small synonym table widens
the query so that "email" also finds Gmail and Outlook nodes and "remember" finds memory.
Everything that does not depend on the query is computed when the index is built, so a
search costs one pass over the postings of the query's terms.
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import snowballstemmer

_WORD = re.compile(r"[a-z0-9]+")
# A Snowball stemmer keeps the word it is working on in its own attributes, so one shared by
# two threads mixes their words up (wrong stems, IndexError): each thread has its own.
_thread = threading.local()

STOPWORDS = frozenset(
    """
    a an and are as at be by can do does for from get has have how i if in into is it its me my
    of on or our so some that the their them then there these this to up us use using want we
    what when whenever where which while who will with would you your
    """.split()
)

# Field weights: a word in a spec's name says more than a word in a parameter description.
FIELD_WEIGHTS: dict[str, float] = {
    "name": 3.0,
    "tags": 2.0,
    "type": 1.0,
    "description": 1.0,
    "examples": 0.5,
    "params": 0.3,
}
_K1 = 1.2
_B = 0.75
SYNONYM_WEIGHT = 0.5

# Words an agent types, and the words specs use for the same thing.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "email": ("gmail", "outlook", "mail", "smtp", "inbox"),
    "mail": ("email", "gmail", "outlook"),
    "e-mail": ("email",),
    "message": ("slack", "chat", "discord", "telegram"),
    "notify": ("notification", "alert", "message"),
    "notification": ("notify", "alert"),
    "alert": ("notification", "notify"),
    "team": ("slack", "channel", "discord"),
    "channel": ("slack", "discord"),
    "remember": ("memory", "history", "buffer"),
    "earlier": ("history", "previous"),
    "previous": ("history",),
    "recall": ("memory", "history"),
    "when": ("trigger",),
    "whenever": ("trigger",),
    "schedule": ("cron", "recurring", "timer"),
    "scheduled": ("cron", "recurring"),
    "every": ("cron", "schedule", "recurring"),
    "daily": ("cron", "schedule"),
    "weekly": ("cron", "schedule"),
    "hourly": ("cron", "schedule"),
    "form": ("submission", "survey", "typeform"),
    "submitted": ("submission",),
    "approve": ("approval", "confirm", "review", "human"),
    "approval": ("approve", "confirm", "review", "human"),
    "sign-off": ("approval",),
    "ai": ("llm", "gpt", "claude", "gemini", "model", "agent"),
    "llm": ("ai", "gpt", "claude", "gemini", "model"),
    "chatgpt": ("openai", "gpt"),
    "gpt": ("openai", "chatgpt"),
    "claude": ("anthropic",),
    "gemini": ("google",),
    "code": ("script", "python", "javascript"),
    "script": ("code", "python", "javascript"),
    "scrape": ("crawl", "firecrawl", "extract"),
    "crawl": ("scrape", "firecrawl"),
    "website": ("web", "page", "url"),
    "webpage": ("web", "page", "url"),
    "api": ("http", "rest", "request"),
    "rest": ("http", "api"),
    "endpoint": ("http", "api", "url"),
    "database": ("sql", "query", "postgresql", "mysql"),
    "sql": ("database", "query"),
    "table": ("database", "sql"),
    "file": ("csv", "document", "pdf"),
    "spreadsheet": ("csv", "file"),
    "calendar": ("event", "meeting"),
    "meeting": ("calendar", "event"),
    "appointment": ("calendar", "event"),
    "wait": ("delay", "pause"),
    "pause": ("delay", "wait"),
    "sleep": ("delay", "wait"),
    "branch": ("if", "switch", "condition"),
    "condition": ("if", "switch", "filter"),
    "otherwise": ("if", "else"),
    "route": ("switch", "branch"),
    "repeat": ("loop", "iterate"),
    "iterate": ("loop", "each"),
    "each": ("loop", "iterate"),
    "combine": ("merge", "join"),
    "join": ("merge", "combine"),
    "order": ("sort",),
    "rank": ("sort",),
    "semantic": ("vector", "embedding", "similarity"),
    "similar": ("vector", "embedding", "similarity"),
    "issue": ("github", "trello", "ticket"),
    "ticket": ("issue", "card"),
    "task": ("trello", "card"),
    "todo": ("trello", "card", "task"),
    "image": ("photo", "ocr", "picture"),
    "photo": ("image",),
    "picture": ("image",),
    "receipt": ("ocr", "image"),
    "sms": ("notification", "text"),
    "chat": ("message", "conversation"),
    "note": ("notion", "page"),
    "wiki": ("notion", "page", "knowledge"),
    "human": ("approval", "review", "person"),
    "person": ("human", "manual"),
    "someone": ("human", "person"),
    "manager": ("human", "approval"),
    "review": ("approval", "human"),
    "summarize": ("summary", "ai", "llm"),
    "summarise": ("summary", "ai", "llm"),
    "translate": ("ai", "llm"),
    "classify": ("ai", "llm"),
    "callback": ("webhook",),
    "push": ("notification", "webhook"),
    "pr": ("pull", "github"),
    "repo": ("github", "repository"),
    "commit": ("github", "push"),
    "kv": ("key", "value"),
    "cache": ("key", "value", "store"),
    "lookup": ("search", "query"),
    "google": ("gmail", "calendar", "gemini"),
    "microsoft": ("outlook",),
    "manual": ("manually", "button"),
}


def _thread_stemmer() -> Any:
    """This thread's stemmer, made at its first use (it costs about a microsecond)."""
    stemmer = getattr(_thread, "stemmer", None)
    if stemmer is None:
        stemmer = _thread.stemmer = snowballstemmer.stemmer("english")
    return stemmer


# Bounded, and filled only with stems computed by a thread's own stemmer, so it never holds a
# stem two threads garbled; lru_cache itself is safe to share between threads.
@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _thread_stemmer().stemWord(word)


def words(text: str) -> list[str]:
    """Lower-cased words of a text; `snake_case` and `CamelCase`-free names split apart."""
    return _WORD.findall(text.replace("_", " ").lower())


def terms(text: str) -> list[str]:
    """Stemmed index terms of a text, stopwords dropped."""
    return [_stem(word) for word in words(text) if word not in STOPWORDS]


_SYNONYM_TERMS: dict[str, tuple[str, ...]] = {}
for _word, _related in SYNONYMS.items():
    _expanded = {_stem(w) for phrase in _related for w in words(phrase)}
    _SYNONYM_TERMS[_stem(_word.replace("-", ""))] = tuple(sorted(_expanded))


def query_terms(query: str) -> dict[str, float]:
    """The weighted terms of a query: its own words at 1, their synonyms at a lower weight."""
    weighted: dict[str, float] = {}
    for word in words(query.replace("-", "")):
        stem = _stem(word)
        if word not in STOPWORDS:
            weighted[stem] = 1.0
        for related in _SYNONYM_TERMS.get(stem, ()):
            weighted[related] = max(weighted.get(related, 0.0), SYNONYM_WEIGHT)
    return weighted


def _param_text(params: dict[str, Any]) -> str:
    return " ".join(f"{name} {p.get('description', '')}" for name, p in params.items())


def spec_fields(document: dict[str, Any]) -> dict[str, str]:
    """The searchable text of a spec document, by field."""
    return {
        "name": " ".join(
            [document["subtype"], document.get("display_name", ""), *document.get("aliases", [])]
        ),
        "tags": " ".join(document.get("tags", [])),
        "type": document["node_type"],
        "description": document.get("description", ""),
        "examples": " ".join(
            f"{ex.get('name', '')} {ex.get('description', '')}"
            for ex in document.get("examples", [])
        ),
        "params": " ".join(
            _param_text(document.get(key) or {})
            for key in ("configurations", "input_params", "output_params")
        ),
    }


@dataclass(frozen=True)
class Hit:
    key: tuple[str, str]
    score: float
    matched_terms: tuple[str, ...]


class SearchIndex:
    """An immutable BM25F index over spec documents.

    Each term's postings are two numpy arrays (spec positions, precomputed score
    contributions), so a query costs a few vector additions however large the catalog.
    """

    def __init__(self, documents: Iterable[dict[str, Any]]):
        self.keys: list[tuple[str, str]] = []
        field_counts: list[dict[str, Counter[str]]] = []
        for document in documents:
            self.keys.append((document["node_type"], document["subtype"]))
            field_counts.append(
                {name: Counter(terms(text)) for name, text in spec_fields(document).items()}
            )
        self._doc_terms = [frozenset().union(*doc.values()) for doc in field_counts]
        count = len(self.keys)
        average_length = {
            name: max(sum(doc[name].total() for doc in field_counts) / max(count, 1), 1.0)
            for name in FIELD_WEIGHTS
        }
        weighted_tf: dict[str, dict[int, float]] = {}
        for position, doc in enumerate(field_counts):
            for name, field_weight in FIELD_WEIGHTS.items():
                counts = doc[name]
                scale = field_weight / (1 - _B + _B * counts.total() / average_length[name])
                for term, frequency in counts.items():
                    by_doc = weighted_tf.setdefault(term, {})
                    by_doc[position] = by_doc.get(position, 0.0) + frequency * scale
        self._postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for term, by_doc in weighted_tf.items():
            idf = math.log(1 + (count - len(by_doc) + 0.5) / (len(by_doc) + 0.5))
            positions = np.fromiter(by_doc.keys(), dtype=np.int32, count=len(by_doc))
            tf = np.fromiter(by_doc.values(), dtype=np.float64, count=len(by_doc))
            self._postings[term] = (positions, idf * tf * (_K1 + 1) / (tf + _K1))
        types = sorted({node_type for node_type, _ in self.keys})
        self._type_of = np.array([types.index(t) for t, _ in self.keys], dtype=np.int16)
        self._type_codes = {t: code for code, t in enumerate(types)}

    def __len__(self) -> int:
        return len(self.keys)

    def search(self, query: str, *, limit: int = 10, node_type: str | None = None) -> list[Hit]:
        """Specs ranked by relevance to `query`, best first; ties broken by name."""
        scores = np.zeros(len(self.keys))
        weights = query_terms(query)
        for term, weight in weights.items():
            posting = self._postings.get(term)
            if posting is not None:
                scores[posting[0]] += weight * posting[1]
        if node_type is not None:
            scores[self._type_of != self._type_codes.get(node_type, -1)] = 0.0
        candidates = np.flatnonzero(scores > 0)
        if len(candidates) > limit * 4:
            # Keep a margin past `limit` so the tie-break by name below stays exact.
            cut = np.partition(scores[candidates], -limit)[-limit]
            candidates = candidates[scores[candidates] >= cut]
        ranked = sorted(candidates.tolist(), key=lambda p: (-scores[p], self.keys[p]))[:limit]
        # Report the query's own words (not their stems) that each spec contains.
        own_words = {_stem(word): word for word in words(query) if word not in STOPWORDS}
        return [
            Hit(
                self.keys[p],
                round(float(scores[p]), 3),
                tuple(word for stem, word in own_words.items() if stem in self._doc_terms[p]),
            )
            for p in ranked
        ]
