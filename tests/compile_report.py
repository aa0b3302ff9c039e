"""`pytest --compile-report N`: the N tests (and the files) whose kernel builds took longest, from BuildTotals.

A kernel is built once, by the first test that needs it, and then comes from the disk cache, so run it with an empty
cache (CACHEDIR=$(mktemp -d)) to see what a cold run pays, and with -n 0 to see each test's own builds (with workers,
a kernel two tests share is paid by whichever runs first). Builds in a child process (a CLI test running `specgrad`
as a subprocess) are not counted here; `--durations` shows them.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from specgrad.device import BuildTotals

_KEY = pytest.StashKey[tuple[dict[str, int], dict[str, float]]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--compile-report", type=int, default=0, metavar="N",
                     help="list the N tests and files whose kernel builds took longest (0: no report)")  # fmt: skip


def _totals() -> tuple[dict[str, int], dict[str, float]]:
    with BuildTotals.lock:
        return dict(BuildTotals.count), dict(BuildTotals.seconds)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> object:
    item.stash[_KEY] = _totals()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> object:
    """Each phase's report carries the builds since the last phase, as user properties (they reach xdist's
    controller)."""
    outcome = yield
    if _KEY not in item.stash:
        return
    (count0, sec0), (count1, sec1) = item.stash[_KEY], _totals()
    item.stash[_KEY] = (count1, sec1)
    for ns in count1:
        if (n := count1[ns] - count0.get(ns, 0)) > 0:
            outcome.get_result().user_properties.append((f"builds:{ns}", (n, sec1[ns] - sec0.get(ns, 0.0))))


class Report:
    def __init__(self, top: int):
        self.top = top
        self.tests: defaultdict[str, defaultdict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0, 0.0]))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, value in report.user_properties:
            if isinstance(key, str) and key.startswith("builds:"):
                total = self.tests[report.nodeid][key.removeprefix("builds:")]
                total[0] += value[0]
                total[1] += value[1]

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        tr = terminalreporter
        per_test = {nodeid: (sum(c for c, _ in ns.values()), sum(s for _, s in ns.values()), ns)
                    for nodeid, ns in self.tests.items()}  # fmt: skip
        files: defaultdict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0])
        namespaces: defaultdict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        for nodeid, (count, seconds, ns) in per_test.items():
            f = files[nodeid.split("::")[0]]
            f[0], f[1], f[2] = f[0] + count, f[1] + seconds, f[2] + 1
            for name, (c, s) in ns.items():
                namespaces[name][0] += c
                namespaces[name][1] += s
        tr.section(f"kernel builds: the {self.top} slowest tests and files")
        tr.write_line("totals: " + ", ".join(f"{name} {int(c)} kernels in {s:.0f} s" for name, (c, s) in
                                             sorted(namespaces.items())))  # fmt: skip
        for nodeid, (count, seconds, ns) in sorted(per_test.items(), key=lambda kv: -kv[1][1])[: self.top]:
            parts = ", ".join(f"{name} {int(c)}" for name, (c, _) in sorted(ns.items()))
            tr.write_line(f"{seconds:8.1f} s {int(count):6d} kernels ({parts})  {nodeid}")
        tr.write_line("per file:")
        for path, (count, seconds, tests) in sorted(files.items(), key=lambda kv: -kv[1][1])[: self.top]:
            tr.write_line(f"{seconds:8.1f} s {int(count):6d} kernels in {int(tests)} tests  {path}")


def pytest_configure(config: pytest.Config) -> None:
    top = config.getoption("--compile-report")
    if top and not hasattr(config, "workerinput"):  # NOTE: the report is made where the results come together
        config.pluginmanager.register(Report(top), "compile-report")
