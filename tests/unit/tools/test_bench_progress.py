"""What a bench's progress line says of a measurement: its goodput as the summaries write it,
and that it was made again while the hypervisor stole too much."""

from __future__ import annotations

from tools.bench_progress import goodput, with_retries


def test_a_measurements_goodput_is_written_in_mbit_per_second_as_the_summaries_do():
    assert goodput({"goodput_bps": 812_345_678.0}) == "goodput 812.346 Mbit/s"


def test_a_measurement_made_again_for_steal_says_how_often():
    assert with_retries("goodput 1.000 Mbit/s", []) == "goodput 1.000 Mbit/s"
    assert with_retries("goodput 1.000 Mbit/s", [{}, {}]) == (
        "goodput 1.000 Mbit/s (measured again 2x: too much stolen)"
    )
