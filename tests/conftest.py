"""Settings for the whole suite.

Hypothesis: no per-example deadline. A deadline is a timing assertion (the suite has none: figures come from
`make bench`), and on the shared 2-core machine a property test's example can take longer than Hypothesis's
200 ms default for reasons that are not the code's (the merkle long-prefix tests failed so under load).
"""

from hypothesis import settings

settings.register_profile("suite", deadline=None)
settings.load_profile("suite")
