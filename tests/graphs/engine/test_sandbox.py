"""What an untrusted graph author's JSONata can reach: the run's data and JSONata's own
functions, never files, the network or the Python objects behind the values."""

from __future__ import annotations

import pytest

from graphs.engine import GraphRunError
from tests.graphs.engine.helpers import chain, run, transform


@pytest.mark.parametrize(
    "call",
    [
        '$readFile("/etc/passwd")',
        '$open("/etc/passwd")',
        '$httpGet("http://127.0.0.1:9/")',
        '$fetch("http://127.0.0.1:9/")',
        '$import("os")',
        "$eval(\"$readFile('/etc/passwd')\")",
    ],
)
def test_there_is_no_function_for_files_the_network_or_modules(call):
    with pytest.raises(GraphRunError) as caught:
        run(chain(transform("reach", call)))

    assert caught.value.kind == "expression"
    assert caught.value.node_id == "reach"


@pytest.mark.parametrize(
    "path",
    [
        "$.__class__",
        '"text".__class__.__mro__',
        "$string.__globals__",
        "$string.__code__.co_consts",
        "$.__dict__",
        "$lookup($, '__class__')",
    ],
)
def test_python_attributes_are_not_data(path):
    result = run(chain(transform("peek", f"$exists({path})")), {"value": 1})

    assert result is False


def test_the_data_holds_only_what_the_run_put_there():
    result = run(chain(transform("keys", "$keys($)")), {"value": 1})

    # The entry node's output is the only key (JSONata gives a one-item array as its item).
    assert result == "entry"
