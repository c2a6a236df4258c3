"""Every door of tests/doors.py, fuzzed with a fixed number of Hypothesis examples (the same ones each run), and
every failure scripts/fuzz.py has saved, replayed: damaged input gets one line, never a traceback."""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from conftest import require_shared
from doors import DOORS, build_world, decode

CASES = sorted((Path(__file__).parent / "fuzz_cases").glob("*/*.json"))
# Examples per door: together a minute or two of the suite's budget (scripts/fuzz.py runs thousands).
EXAMPLES = {"hf-export": 15, "parallel-text": 20, "http": 60, "config": 100, "set": 100, "run-lock": 100}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    require_shared()
    world = build_world(tmp_path_factory.mktemp("doors"))
    with world.closing:
        yield world


@pytest.mark.parametrize("name", list(DOORS))
def test_damaged_input_gets_one_line_never_a_traceback(world, name):
    door = DOORS[name]

    @settings(max_examples=EXAMPLES.get(name, 30), deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(door.strategy(world))
    def fuzzed(example):
        door.check(world, example)

    fuzzed()


@pytest.mark.parametrize("case", CASES, ids=[f"{case.parent.name}/{case.stem}" for case in CASES])
def test_saved_failures_stay_fixed(world, case):
    DOORS[case.parent.name].check(world, decode(case.read_bytes()))
