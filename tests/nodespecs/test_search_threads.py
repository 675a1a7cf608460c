"""Search from many threads at once gives exactly what it gives from one (issue 13).

A Snowball stemmer keeps its working word in its attributes; one shared by threads garbled
stems (IndexError, `connectionalization1x74ing` stemmed as another word) and the memo kept
them. The threads here stem thousands of words no other test has seen, with the interpreter
switching threads as often as it can, so a shared stemmer would be caught.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import snowballstemmer

from nodespecs.knowledge import search
from nodespecs.knowledge.service import search_nodes

THREADS = 8
QUERY_COUNT = 240
# Within search_nodes' caps on a query's length and terms.
WORDS_PER_QUERY = 25
# Real catalog words, so that the queries find specs and their rankings can differ.
CATALOG_WORDS = "send email slack message notify team schedule database query form webhook".split()


def queries() -> list[str]:
    """Queries of many distinct made-up words (each stemmed afresh) and a few real ones."""
    rng = random.Random(13)
    made_up = [
        f"connectionalization{i}x{i % 97}{rng.choice(['ing', 'ed', 'ations', 'fulness', 'ly'])}"
        for i in range(QUERY_COUNT * WORDS_PER_QUERY)
    ]
    return [
        " ".join(
            made_up[n * WORDS_PER_QUERY : (n + 1) * WORDS_PER_QUERY] + rng.sample(CATALOG_WORDS, 4)
        )
        for n in range(QUERY_COUNT)
    ]


@pytest.fixture
def busy_switching() -> Iterator[None]:
    """Switch threads as often as the interpreter allows, and start with an empty memo, so
    that the threads really stem at the same time."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    search._stem.cache_clear()
    yield
    sys.setswitchinterval(interval)
    search._stem.cache_clear()


def test_eight_threads_of_searches_give_the_single_threaded_results(registry, busy_switching):
    texts = queries()
    expected = {text: search_nodes(text, max_results=20, registry=registry) for text in texts}
    expected_terms = {text: search.terms(text) for text in texts}
    assert sum(bool(results) for results in expected.values()) == len(texts)
    search._stem.cache_clear()

    def run(seed: int) -> list[str]:
        """Every query in this thread's own order; the ones whose answer differs."""
        order = random.Random(seed).sample(texts, len(texts))
        wrong = []
        for text in order:
            if search.terms(text) != expected_terms[text]:
                wrong.append(f"terms of {text[:40]}")
            if search_nodes(text, max_results=20, registry=registry) != expected[text]:
                wrong.append(f"results of {text[:40]}")
        return wrong

    with ThreadPoolExecutor(THREADS) as pool:
        outcomes = list(pool.map(run, range(THREADS)))

    assert [wrong for wrong in outcomes if wrong] == []
    # Nothing garbled stayed in the memo: every cached stem is what a fresh stemmer says.
    fresh = snowballstemmer.stemmer("english")
    for text in texts:
        assert search.terms(text) == [
            fresh.stemWord(word) for word in search.words(text) if word not in search.STOPWORDS
        ]


def test_each_thread_stems_with_its_own_stemmer():
    with ThreadPoolExecutor(1) as pool:
        other = pool.submit(search._thread_stemmer).result()
    assert other is not search._thread_stemmer()
    assert search._thread_stemmer() is search._thread_stemmer()
