"""Settings for the whole suite.

Hypothesis: no per-example deadline. A deadline is a timing assertion (the suite has none: figures come from
`make bench`), and on the shared 2-core machine a property test's example can take longer than Hypothesis's
200 ms default for reasons that are not the code's (the merkle long-prefix tests failed so under load).

`root_handlers`: a test that calls `configure_logging` gets the root logger's handlers, level and record
flags back afterwards (pytest's own log capture lives there).
"""

import logging
from collections.abc import Iterator

import pytest
from hypothesis import settings

settings.register_profile("suite", deadline=None)
settings.load_profile("suite")


@pytest.fixture
def root_handlers() -> Iterator[None]:
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    flags = (logging.logThreads, logging.logProcesses, logging.logMultiprocessing)
    yield
    logging.logThreads, logging.logProcesses, logging.logMultiprocessing = flags
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in saved:
        root.addHandler(h)
    root.setLevel(level)
