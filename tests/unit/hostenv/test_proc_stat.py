"""/proc/stat read per core: each per-core line by core number (the all-CPU line left out),
every column by name, a window as the difference of two readings."""

from __future__ import annotations

from hostenv.proc_stat import CoreJiffies, parse_proc_stat, read_proc_stat

#: user nice system idle iowait irq softirq steal guest guest_nice
STAT = """cpu  300 40 120 630 10 0 20 10 0 0
cpu0 200 40 100 400 5 0 10 10 7 0
cpu1 100 0 20 230 5 0 10 0 0 0
intr 12345
ctxt 678
"""


def test_each_core_is_read_by_number_and_the_all_cpu_line_is_not_a_core():
    cores = parse_proc_stat(STAT)
    assert set(cores) == {0, 1}
    assert cores[0] == CoreJiffies(
        user=200, nice=40, system=100, idle=400, iowait=5, irq=0, softirq=10, steal=10
    )


def test_guest_time_is_already_in_user_and_not_counted_twice():
    assert parse_proc_stat(STAT)[0].total == 200 + 40 + 100 + 400 + 5 + 10 + 10


def test_a_column_an_old_kernel_lacks_reads_zero():
    assert parse_proc_stat("cpu0 1 2 3 4\n")[0] == CoreJiffies(user=1, nice=2, system=3, idle=4)


def test_a_window_is_the_difference_of_two_readings_column_by_column():
    before = CoreJiffies(user=100, idle=800, steal=1)
    after = CoreJiffies(user=170, idle=810, steal=6)
    window = after.since(before)
    assert window == CoreJiffies(user=70, idle=10, steal=5)
    assert window.total == 85


def test_this_machine_has_at_least_one_core_that_has_run():
    cores = read_proc_stat()
    assert cores and all(core.total > 0 for core in cores.values())
