"""bench/occupancy.py: the saturated window is the samples where the node was busy; its cores add up."""

from __future__ import annotations

import subprocess
import sys

from bench.occupancy import Occupancy, Sample, summarize


def test_the_window_keeps_the_busy_samples_and_the_rest_is_the_machine_less_the_node() -> None:
    samples = [
        Sample(seconds=0.2, machine=0.20, node=0.01, main_thread=0.0),  # clients spawning: left out
        Sample(seconds=0.2, machine=0.38, node=0.30, main_thread=0.12),
        Sample(seconds=0.2, machine=0.36, node=0.34, main_thread=0.14),
        Sample(seconds=0.0, machine=0.00, node=0.00, main_thread=0.0),  # an empty one never divides
        Sample(seconds=0.2, machine=0.10, node=0.05, main_thread=0.01),  # the drain: left out
    ]
    w = summarize(samples, busy_cores=0.5, cores=2)
    assert round(w.seconds, 6) == 0.4
    assert round(w.machine_cores, 6) == round(0.74 / 0.4, 6)
    assert round(w.node_cores, 6) == round(0.64 / 0.4, 6)
    assert round(w.other_cores, 6) == round(0.10 / 0.4, 6)
    assert round(w.main_thread, 6) == round(0.26 / 0.4, 6)
    assert "busy 1.85 of 2 cores: the node 1.60 (its main thread 0.65 of one core)" in w.describe()
    nothing = summarize(samples, busy_cores=5.0, cores=2)
    assert (nothing.seconds, nothing.machine_cores, nothing.node_cores) == (0.0, 0.0, 0.0)


def test_a_real_busy_process_is_sampled_and_its_cpu_is_inside_the_machines() -> None:
    spin = "import time\nend = time.process_time() + 1.0\nwhile time.process_time() < end: pass\n"
    proc = subprocess.Popen([sys.executable, "-c", spin])
    try:
        with Occupancy(proc.pid, interval=0.1) as occupancy:
            proc.wait(60)
    finally:
        proc.kill()
    assert occupancy.samples and all(s.node >= 0 and s.machine >= 0 for s in occupancy.samples)
    w = occupancy.window(busy_cores=0.1)
    assert w.seconds > 0, occupancy.samples
    # one thread: the main thread is the whole tree; the tree is part of the machine (clock-tick rounding aside)
    assert abs(w.main_thread - w.node_cores) < 0.15
    assert w.node_cores <= w.machine_cores + 0.15


def test_several_processes_are_one_node_and_the_main_thread_is_the_firsts() -> None:
    spin = "import time\nend = time.process_time() + {}\nwhile time.process_time() < end: pass\n"
    busy, idle = (subprocess.Popen([sys.executable, "-c", spin.format(s)]) for s in (1.0, 0.0))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    try:
        with Occupancy(sleeper.pid, busy.pid, idle.pid, interval=0.1) as occupancy:
            busy.wait(60)
    finally:
        for p in (busy, idle, sleeper):
            p.kill()
            p.wait()
    w = occupancy.window(busy_cores=0.1)
    assert w.seconds > 0, occupancy.samples
    assert w.node_cores > 0.5  # the busy one counts, though it is not the first
    assert w.main_thread < 0.15  # the first one's main thread: the sleeper
